#!/usr/bin/env bats
# Two hosts made of network namespaces: powerd and usaged on host A publish over
# tcp:// with CURVE; alignd, estimd and exportd on host B. An authorised
# subscriber gets the data; a plain or unauthorised one gets nothing; a
# publisher without the right key cannot inject.

load helper
load netns_helper

setup() {
	netns_need
	netns_pair v 10.251
	NSA=$NS1 NSB=$NS2 A=$IP1 B=$IP2

	curve_keys allowed collector hosta collector rogue
	# A fake RAPL package zone on host A, advanced by 1 J every 100 ms.
	fake_rapl_10w
}

teardown() {
	wb_kill_all
	[ -n "${NS1:-}" ] && ip netns del "$NS1" 2>/dev/null # NSA, made by netns_pair
	[ -n "${NS2:-}" ] && ip netns del "$NS2" 2>/dev/null # NSB, made by netns_pair
	true
}

start_host_a() {
	local curve=(--curve_cert "$K/hosta" --curve_allow "$K/allowed")
	wb_spawn powerd ip netns exec "$NSA" "$WB_BUILD/wattbus-powerd" --host nodea --runtime_dir "$BATS_TEST_TMPDIR/runA" \
		--sysfs_root "$SYS" --source rapl --interval 200ms --pub "tcp://$A:5550" "${curve[@]}"
	wb_spawn usaged ip netns exec "$NSA" "$WB_BUILD/wattbus-usaged" --host nodea --runtime_dir "$BATS_TEST_TMPDIR/runA" \
		--mode procfs --interval 500ms --pub "tcp://$A:5551" "${curve[@]}"
}

start_host_b() {
	local rt=$BATS_TEST_TMPDIR/runB
	wb_spawn alignd ip netns exec "$NSB" "$WB_BUILD/wattbus-alignd" --runtime_dir "$rt" \
		--sub "tcp://$A:5550,tcp://$A:5551,tcp://$A:5552,tcp://$A:5553" \
		--curve_cert "$K/collector" --curve_peer "$K/hosta"
	wb_spawn estimd ip netns exec "$NSB" "$WB_BUILD/wattbus-estimd" --runtime_dir "$rt" \
		--model "$(ls "$WB_ROOT"/data/models/*.json | head -n 1)"
	wb_spawn exportd ip netns exec "$NSB" "$WB_BUILD/wattbus-exportd" --runtime_dir "$rt" --listen "$B:9102" \
		--sub "ipc://$rt/estimd.sock"
}

metrics_b() {
	ip netns exec "$NSB" curl -sf "http://$B:9102/metrics"
}

@test "an authorised subscriber on another host gets the data over CURVE; the pipeline runs across hosts" {
	start_host_a
	start_host_b
	wb_wait_for 90 bash -c "ip netns exec $NSB curl -sf http://$B:9102/metrics | grep -q 'kepler_node_cpu_joules_total{node_name=\"nodea\",zone=\"package\"'"
	# Measured energy: the fake meter advances 10 W; after a few slots the counter is well above 0.
	wb_wait_for 60 bash -c "ip netns exec $NSB curl -sf http://$B:9102/metrics | awk '/^kepler_node_cpu_joules_total\\{node_name=\"nodea\",zone=\"package\"/ { exit !(\$2 > 5) }'"
	run ip netns exec "$NSB" "$WATTBUS" tap --count 1 --timeout 10s --curve-cert "$K/collector" --curve-peer "$K/hosta" "tcp://$A:5550" power/
	assert_success
	assert_output --partial '"topic":"power/nodea"'
}

@test "plain and unauthorised subscribers receive nothing" {
	start_host_a
	wb_wait_for 10 bash -c "ip netns exec $NSA ss -ltn | grep -q ':5550'"
	run ip netns exec "$NSB" "$WATTBUS" tap --timeout 3s "tcp://$A:5550"
	assert_success
	assert_output ""
	run ip netns exec "$NSB" "$WATTBUS" tap --timeout 3s --curve-cert "$K/rogue" --curve-peer "$K/hosta" "tcp://$A:5550"
	assert_success
	assert_output ""
	# The same tap with the collector's key does get messages, so the two above were refused, not idle.
	run ip netns exec "$NSB" "$WATTBUS" tap --count 1 --timeout 10s --curve-cert "$K/collector" --curve-peer "$K/hosta" "tcp://$A:5550"
	assert_success
	assert_output --partial '"topic":'
}

@test "a publisher without the right key cannot inject" {
	start_host_a
	start_host_b
	# A plain publisher and one with its own CURVE key sit where alignd also connects.
	cat >"$BATS_TEST_TMPDIR/evil.sh" <<-'EOF'
		t=$(date +%s)
		for i in $(seq 1 30); do
			echo "{\"kind\":\"usage\",\"host\":\"evil\",\"t\":$(( (t + i) * 1000000000 )),\"interval_ns\":1000000000,\"ncpu\":1,
			\"cpu\":{\"user_ns\":$((i * 900000000)),\"nice_ns\":0,\"system_ns\":0,\"idle_ns\":$((i * 100000000)),\"iowait_ns\":0,\"irq_ns\":0,\"softirq_ns\":0,\"steal_ns\":0},
			\"procs\":[{\"pid\":666,\"comm\":\"evil\",\"cpu_ns\":$((i * 900000000))}]}" | tr -d '\n\t'
			echo
		done
	EOF
	bash "$BATS_TEST_TMPDIR/evil.sh" >"$BATS_TEST_TMPDIR/evil.jsonl"
	wb_spawn aligned "$WATTBUS" tap "ipc://$BATS_TEST_TMPDIR/runB/alignd.sock" aligned/
	wb_spawn evil_plain ip netns exec "$NSA" "$WATTBUS" pub --wait 100ms --interval 100ms "tcp://$A:5552" <"$BATS_TEST_TMPDIR/evil.jsonl"
	wb_spawn evil_curve ip netns exec "$NSA" "$WATTBUS" pub --wait 100ms --interval 100ms --curve-cert "$K/rogue" \
		"tcp://$A:5553" <"$BATS_TEST_TMPDIR/evil.jsonl"
	# Both have sent everything; then two more genuine slots, so that alignd is past all of it.
	wb_wait_for 60 bash -c "! kill -0 $PID_evil_plain 2>/dev/null && ! kill -0 $PID_evil_curve 2>/dev/null"
	n=$(grep -c '"topic":"aligned/nodea"' "$BATS_TEST_TMPDIR/aligned.log" || true)
	wb_wait_lines "$BATS_TEST_TMPDIR/aligned.log" $((n + 2)) 60 '"topic":"aligned/nodea"'
	# Genuine slots went through; nothing of host "evil" did.
	grep -q '"topic":"aligned/nodea"' "$BATS_TEST_TMPDIR/aligned.log"
	! grep -q evil "$BATS_TEST_TMPDIR/aligned.log"
	run metrics_b
	refute_output --partial 'evil'
}

@test "a stage that publishes with CURVE still subscribes over ipc without curve_peer; tcp without it is refused" {
	local rt=$BATS_TEST_TMPDIR/runC
	wb_spawn trainer ip netns exec "$NSA" "$WB_BUILD/wattbus-estimd" --runtime_dir "$rt" \
		--pub "tcp://$A:5560" --curve_cert "$K/hosta" --curve_allow "$K/allowed"
	wb_wait_for 30 grep -q "running" "$BATS_TEST_TMPDIR/trainer.log"
	kill -0 "$PID_trainer"
	run ! grep -q "curve_peer" "$BATS_TEST_TMPDIR/trainer.log"
	run ip netns exec "$NSA" timeout 30 "$WB_BUILD/wattbus-estimd" --runtime_dir "$rt.2" \
		--sub "tcp://$A:5550" --curve_cert "$K/collector"
	[ "$status" -ne 0 ]
	assert_output --partial "curve_peer (the publisher's public certificate) is not"
}
