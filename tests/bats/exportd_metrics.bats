#!/usr/bin/env bats
# exportd serves Kepler's metric names with their label sets and exact values
# from replayed estimates; the output passes `promtool check metrics`.

load helper
load exportd_helper

setup() { command -v promtool >/dev/null || skip "promtool is not installed"; }
teardown() { wb_kill_all; }

@test "estimates become Kepler's node, process, container, pod and VM metrics" {
	ex_start
	ex_feed --slots 3 --start 1000000000000000000
	ex_wait_estimates 3
	run ex_metrics
	assert_success
	# 3 slots of 1 s at 10 W (6 W active) on the package, 2 W (1 W active) on dram
	local pkg='node_name="node-a",zone="package",path="/sys/class/powercap/intel-rapl:0"'
	assert_line "kepler_node_cpu_joules_total{$pkg} 30.000000"
	assert_line "kepler_node_cpu_active_joules_total{$pkg} 18.000000"
	assert_line "kepler_node_cpu_idle_joules_total{$pkg} 12.000000"
	assert_line "kepler_node_cpu_watts{$pkg} 10.000000"
	assert_line "kepler_node_cpu_active_watts{$pkg} 6.000000"
	assert_line "kepler_node_cpu_idle_watts{$pkg} 4.000000"
	assert_line 'kepler_node_cpu_joules_total{node_name="node-a",zone="dram",path="/sys/class/powercap/intel-rapl:0:0"} 6.000000'
	assert_line 'kepler_node_cpu_usage_ratio{node_name="node-a"} 0.375'
	assert_line --partial 'kepler_node_cpu_info{processor="0",vendor_id="'
	# the process half of the package's 18 J active is "stress"; nginx a quarter, in a container
	assert_line 'kepler_process_cpu_joules_total{node_name="node-a",pid="101",comm="stress",exe="",type="regular",container_id="",vm_id="",state="running",zone="package"} 9.000000'
	assert_line 'kepler_process_cpu_watts{node_name="node-a",pid="101",comm="stress",exe="",type="regular",container_id="",vm_id="",state="running",zone="package"} 3.000000'
	assert_line 'kepler_process_cpu_seconds_total{node_name="node-a",pid="101",comm="stress",exe="",type="regular",container_id="",vm_id=""} 1.500000000'
	assert_line 'kepler_process_cpu_joules_total{node_name="node-a",pid="102",comm="nginx",exe="",type="container",container_id="c0ffee",vm_id="",state="running",zone="package"} 4.500000'
	assert_line 'kepler_process_cpu_joules_total{node_name="node-a",pid="103",comm="qemu",exe="",type="vm",container_id="",vm_id="vm-1",state="running",zone="dram"} 0.375000'
	assert_line 'kepler_container_cpu_joules_total{node_name="node-a",container_id="c0ffee",container_name="web",runtime="containerd",pod_id="pod-1",state="running",zone="package"} 4.500000'
	assert_line 'kepler_container_cpu_watts{node_name="node-a",container_id="c0ffee",container_name="web",runtime="containerd",pod_id="pod-1",state="running",zone="package"} 1.500000'
	assert_line 'kepler_container_cpu_seconds_total{node_name="node-a",container_id="c0ffee",container_name="web",runtime="containerd",pod_id="pod-1",state="running"} 0.750000000'
	assert_line 'kepler_pod_cpu_joules_total{node_name="node-a",pod_id="pod-1",pod_name="pod-1",pod_namespace="",state="running",zone="package"} 4.500000'
	assert_line 'kepler_vm_cpu_joules_total{node_name="node-a",vm_id="vm-1",vm_name="guest",hypervisor="kvm",state="running",zone="package"} 2.250000'
	assert_line --regexp '^kepler_build_info\{arch="[a-z0-9]+",branch="",revision="",version="[0-9.]+",goversion="[^"]+"\} 1$'
	assert_line '# TYPE kepler_process_cpu_joules_total counter'
	assert_line '# TYPE kepler_process_cpu_watts gauge'
	ex_metrics >"$BATS_TEST_TMPDIR/metrics.txt"
	run promtool check metrics <"$BATS_TEST_TMPDIR/metrics.txt"
	assert_success
	assert_output ''
}

@test "two sockets aggregate into one zone; hostile names still pass promtool" {
	ex_start --node_name 'rack "7"'
	ex_feed --slots 2 --sockets 2 --comm $'a"b\\c\n\u00e9' --start 1000000000000000000
	ex_wait_estimates 2
	# msgpack strings are bytes: a comm that is not UTF-8 is refused by the codec, never exported
	python3 - "$(wb_ep stats)" <<-'EOF'
		import sys, zmq, msgpack
		ctx = zmq.Context()
		s = ctx.socket(zmq.XPUB)
		s.bind(sys.argv[1])
		s.recv()  # exportd's subscription
		z = dict(name="package-0", zone="package", path="/sys/class/powercap/intel-rapl:0",
		         energy_uj=10, active_uj=10, idle_uj=0)
		m = {"v": 1, "kind": "estimate", "host": "node-b", "src": "py", "epoch": 1, "seq": 0,
		     "t0": 10**18, "t1": 10**18 + 10**9, "mode": "measured", "ncpu": 1, "cpu_usage_ratio": 0.5,
		     "zones": [z], "procs": [{"pid": 7, "comm": b"\xff\xfe", "cpu_ns": 1, "energy_uj": [10]}]}
		s.send_multipart([b"estimate/node-b", msgpack.packb(m, use_bin_type=False)])
		s.close(linger=30000)
		ctx.term()  # returns once the message is out
	EOF
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 10 "estimate/node-b.*not valid UTF-8"
	run ex_metrics
	assert_line 'kepler_node_cpu_joules_total{node_name="rack \"7\"",zone="package",path="aggregated-package"} 20.000000'
	refute_line --partial 'intel-rapl:1'
	assert_line --partial 'comm="a\"b\\c\né"'
	refute_line --partial 'node-b'
	ex_metrics >"$BATS_TEST_TMPDIR/metrics.txt"
	run promtool check metrics <"$BATS_TEST_TMPDIR/metrics.txt"
	assert_success
	assert_output ''
}

@test "malformed estimates are counted and logged, never exported" {
	ex_start
	ex_feed --slots 2 --start 1000000000000000000
	ex_wait_estimates 2
	for bad in array_length zone_sum over_attributed slot; do
		ex_feed --slots 1 --start 1000000010000000000 --bad $bad
	done
	# one frame the codec refuses (a string where a number belongs): the daemon counts that one
	echo '{"v":1,"kind":"estimate","host":"node-a","src":"raw","epoch":1,"seq":0,"t0":"soon","t1":2,"mode":"m","ncpu":1,"cpu_usage_ratio":0,"zones":[],"procs":[]}' |
		"$WATTBUS" pub --raw --wait 60s "$(wb_ep estimd)"
	wb_wait_for 10 bash -c '[ "$(curl -sS "$0/metrics" | grep -c "^wattbus_exportd_estimates_rejected_total{reason=\"\(array_length\|zone_sum\|over_attributed\|slot\)\"} 1$")" = 4 ]' "$EX_URL"
	wb_wait_for 10 bash -c 'curl -sS "$0/metrics" | grep -q "^wattbus_stage_messages_rejected_total{host=\"[^\"]*\",stage=\"exportd\",src=\"exportd\",reason=\"type\"} 1$"' "$EX_URL"
	run ex_metrics
	assert_line 'kepler_node_cpu_joules_total{node_name="node-a",zone="package",path="/sys/class/powercap/intel-rapl:0"} 20.000000'
	assert_line 'wattbus_exportd_estimates_total{host="node-a"} 2'
	run grep -c 'not applied (' "$BATS_TEST_TMPDIR/exportd.log"
	assert_output 4
	run grep 'not applied (zone_sum)' "$BATS_TEST_TMPDIR/exportd.log"
	assert_output --partial 'estimate/node-a from wattbus-pub seq 0'
	kill -0 "$PID_exportd"
}

@test "/healthz, unknown paths, methods, HEAD and gzip" {
	ex_start
	ex_feed --slots 1 --procs 200 --start 1000000000000000000
	ex_wait_estimates 1
	run curl -sS -w ' %{http_code}' "$EX_URL/healthz"
	assert_output 'ok
 200'
	for p in / /metrics/ /metricsx /healthz/x /favicon.ico '/metrics/../x'; do
		run curl -sS -o /dev/null -w '%{http_code}' --path-as-is "$EX_URL$p"
		assert_output 404
	done
	run curl -sS -o /dev/null -w '%{http_code}' -X POST --data x "$EX_URL/metrics"
	assert_output 405
	run curl -sS -I "$EX_URL/metrics"
	assert_line --partial 'HTTP/1.1 200'
	assert_line --partial 'Content-Type: text/plain; version=0.0.4; charset=utf-8'
	# gzip only when asked for, and the same text inside
	curl -sS -D "$BATS_TEST_TMPDIR/h.gz" -H 'Accept-Encoding: gzip' -o "$BATS_TEST_TMPDIR/m.gz" "$EX_URL/metrics"
	grep -qi '^Content-Encoding: gzip' "$BATS_TEST_TMPDIR/h.gz"
	curl -sS -D "$BATS_TEST_TMPDIR/h.txt" -o "$BATS_TEST_TMPDIR/m.txt" "$EX_URL/metrics"
	run grep -ci '^Content-Encoding' "$BATS_TEST_TMPDIR/h.txt"
	assert_output 0
	[ "$(stat -c %s "$BATS_TEST_TMPDIR/m.gz")" -lt "$(($(stat -c %s "$BATS_TEST_TMPDIR/m.txt") / 4))" ]
	diff <(gzip -dc "$BATS_TEST_TMPDIR/m.gz" | grep ^kepler_) <(grep ^kepler_ "$BATS_TEST_TMPDIR/m.txt")
	run curl -sS -o /dev/null -D - -H 'Accept-Encoding: gzip;q=0, identity' "$EX_URL/metrics"
	refute_line --partial 'Content-Encoding'
	ex_metrics | grep -q '^wattbus_exportd_http_requests_total{code="4xx"} [1-9]'
}

@test "levels and metric allow/deny lists from the config file" {
	cat >"$BATS_TEST_TMPDIR/wattbus.conf" <<-EOF
		[exportd]
		levels = node, pod
		metrics_deny = *_idle_*, wattbus_stage_*
		metrics_allow = kepler_*, wattbus_exportd_estimates_total
	EOF
	ex_start -c "$BATS_TEST_TMPDIR/wattbus.conf"
	ex_feed --slots 1 --start 1000000000000000000
	ex_wait_estimates 1
	run ex_metrics
	assert_line --partial 'kepler_node_cpu_joules_total{'
	assert_line --partial 'kepler_pod_cpu_joules_total{'
	refute_line --partial 'kepler_node_cpu_idle'
	refute_line --partial 'kepler_process_'
	refute_line --partial 'kepler_container_'
	refute_line --partial 'kepler_vm_'
	refute_line --partial 'wattbus_stage_'
	refute_line --partial 'wattbus_exportd_series'
	assert_line 'wattbus_exportd_estimates_total{host="node-a"} 1'
	# SIGHUP: processes back on, the deny list gone
	printf '[exportd]\nlevels = node,process\n' >"$BATS_TEST_TMPDIR/wattbus.conf"
	kill -HUP "$PID_exportd"
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 10 'reloaded'
	ex_feed --slots 1 --start 1000000001000000000
	ex_wait_estimates 2
	run ex_metrics
	assert_line --partial 'kepler_process_cpu_joules_total{node_name="node-a",pid="101"'
	assert_line --partial 'kepler_node_cpu_idle_joules_total{'
	refute_line --partial 'kepler_pod_'
	# exportd's own stat messages (every second here) are no longer denied
	wb_wait_for 10 bash -c 'curl -sS "$0/metrics" | grep -q "^wattbus_stage_up{"' "$EX_URL"
}

@test "stat messages become wattbus_stage_* pipeline health" {
	# Long enough that a loaded machine scrapes before it passes; the down check waits it out.
	ex_start --stage_timeout 15s
	now=$(date +%s%N)
	{
		echo "{\"kind\":\"stat\",\"host\":\"node-a\",\"src\":\"powerd\",\"t\":$now,\"stage\":\"powerd\",\"version\":\"0.1.0\",\"mode\":\"rapl\",\"frames_in\":0,\"frames_out\":40,\"lost\":0,\"rejected\":3,\"rejected_by\":[{\"name\":\"bound\",\"value\":2}],\"cpu_ns\":1500000000,\"rss_bytes\":2097152,\"counters\":[{\"name\":\"wraps\",\"value\":1}]}"
		echo "{\"kind\":\"stat\",\"host\":\"node-a\",\"src\":\"alignd\",\"t\":$now,\"stage\":\"alignd\",\"version\":\"0.1.0\",\"frames_in\":80,\"frames_out\":39,\"lost\":2,\"rejected\":0}"
	} | "$WATTBUS" pub --wait 60s "$(wb_ep stats)"
	wb_wait_for 10 bash -c 'curl -sS "$0/metrics" | grep -q "^wattbus_stage_up{host=\"node-a\",stage=\"alignd\",src=\"alignd\"} 1$"' "$EX_URL"
	run ex_metrics
	assert_line 'wattbus_stage_up{host="node-a",stage="powerd",src="powerd"} 1'
	assert_line 'wattbus_stage_info{host="node-a",stage="powerd",src="powerd",version="0.1.0",mode="rapl"} 1'
	assert_line 'wattbus_stage_frames_out_total{host="node-a",stage="powerd",src="powerd"} 40'
	assert_line 'wattbus_stage_frames_in_total{host="node-a",stage="alignd",src="alignd"} 80'
	assert_line 'wattbus_stage_messages_lost_total{host="node-a",stage="alignd",src="alignd"} 2'
	assert_line 'wattbus_stage_messages_rejected_total{host="node-a",stage="powerd",src="powerd",reason="bound"} 2'
	assert_line 'wattbus_stage_messages_rejected_total{host="node-a",stage="powerd",src="powerd",reason="other"} 1'
	assert_line 'wattbus_stage_cpu_seconds_total{host="node-a",stage="powerd",src="powerd"} 1.500000000'
	assert_line 'wattbus_stage_resident_memory_bytes{host="node-a",stage="powerd",src="powerd"} 2097152'
	assert_line 'wattbus_stage_events_total{host="node-a",stage="powerd",src="powerd",name="wraps"} 1'
	# younger than stage_timeout, since the stage is up
	assert_line --regexp '^wattbus_stage_last_message_age_seconds\{host="node-a",stage="powerd",src="powerd"\} ([0-9]|1[0-4])\.[0-9]{9}$'
	# exportd's own stat messages come round too
	wb_wait_for 10 bash -c 'curl -sS "$0/metrics" | grep -q "^wattbus_stage_up{host=\"[^\"]*\",stage=\"exportd\",src=\"exportd\"} 1$"' "$EX_URL"
	# no further stat from powerd: down after stage_timeout
	wb_wait_for 60 bash -c 'curl -sS "$0/metrics" | grep -q "^wattbus_stage_up{host=\"node-a\",stage=\"powerd\",src=\"powerd\"} 0$"' "$EX_URL"
	ex_metrics >"$BATS_TEST_TMPDIR/metrics.txt"
	run promtool check metrics <"$BATS_TEST_TMPDIR/metrics.txt"
	assert_success
}
