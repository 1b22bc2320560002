#!/usr/bin/env bats
# Two hosts made of network namespaces. Host A is metered (a fake powercap tree
# whose power follows the machine's CPU use) and trains a model; wattbus-modeld
# on A collects it over tcp:// with CURVE. Host B has no meter: its estimd asks
# A's modeld (--model_server) and estimates with A's model. Both namespaces run
# on the same kernel, so both usageds see the same CPU use, and B's node watts
# must follow A's meter within the model's held-out error.

load helper
load netns_helper

setup() {
	netns_need
	netns_pair m 10.252
	NSA=$NS1 NSB=$NS2 A=$IP1 B=$IP2

	curve_keys allowed modeld trainer modeld

	# Host A's meter: 20 W idle plus 30 W per busy CPU (from /proc/stat), integrated
	# every 100 ms into a RAPL package counter.
	fake_rapl 0
	wb_spawn meter python3 -c '
import os, sys, time
f = sys.argv[1]
def busy():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)
e, (b0, t0), m0 = 0.0, busy(), time.monotonic()
while True:
    time.sleep(0.1)
    (b1, t1), m1 = busy(), time.monotonic()
    ncpu = os.cpu_count()
    frac = (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
    e += (20.0 + 30.0 * frac * ncpu) * (m1 - m0) * 1e6
    open(f + ".t", "w").write("%d\n" % e)
    os.rename(f + ".t", f)
    b0, t0, m0 = b1, t1, m1
' "$SYS/class/powercap/intel-rapl:0/energy_uj"

	# A workload that changes: 0, 1 and 2 busy loops in turn, 3 s each.
	wb_spawn load bash -c 'while :; do sleep 3; timeout 3 sh -c "while :; do :; done"; timeout 3 sh -c "while :; do :; done" & timeout 3 sh -c "while :; do :; done"; wait; done'
}

teardown() {
	wb_kill_all
	[ -n "${NS1:-}" ] && ip netns del "$NS1" 2>/dev/null # NSA, made by netns_pair
	[ -n "${NS2:-}" ] && ip netns del "$NS2" 2>/dev/null # NSB, made by netns_pair
	true
}

# The node's package joules in an exportd's /metrics (host A or B): its one package
# series (A's meter path, B's model zone with no path).
node_joules() {
	ip netns exec "$1" curl -sf "http://$2/metrics" |
		awk '/^kepler_node_cpu_joules_total\{/ && /zone="package"/ {s += $NF; n++} END {if (n) printf "%.6f\n", s}'
}

@test "a meterless host gets the metered host's model from modeld over CURVE and follows its meter" {
	local rtA=$BATS_TEST_TMPDIR/runA rtB=$BATS_TEST_TMPDIR/runB
	# Every wait polls once a second: a check runs short-lived processes (grep, curl, awk)
	# that A's meter counts and procfs mode cannot see. Polled every 50 ms, they cost
	# 0.4 of a CPU, which the model trained in one phase and B estimated in another.
	local WB_POLL=1
	# Host A: the metered pipeline, estimd training every 10 slots of 500 ms.
	wb_spawn powerdA ip netns exec "$NSA" "$WB_BUILD/wattbus-powerd" --host nodea --runtime_dir "$rtA" \
		--sysfs_root "$SYS" --source rapl --interval 100ms
	wb_spawn usagedA ip netns exec "$NSA" "$WB_BUILD/wattbus-usaged" --host nodea --runtime_dir "$rtA" \
		--mode procfs --interval 500ms
	wb_spawn aligndA ip netns exec "$NSA" "$WB_BUILD/wattbus-alignd" --runtime_dir "$rtA"
	wb_spawn estimdA ip netns exec "$NSA" "$WB_BUILD/wattbus-estimd" --host nodea --runtime_dir "$rtA" \
		--pub "tcp://$A:5553" --curve_cert "$K/trainer" --curve_allow "$K/allowed" \
		--train_min 16 --train_every 10 --train_window 400
	wb_spawn exportdA ip netns exec "$NSA" "$WB_BUILD/wattbus-exportd" --runtime_dir "$rtA" \
		--listen "$A:9102" --sub "tcp://$A:5553" --curve_cert "$K/modeld" --curve_peer "$K/trainer"
	# modeld on A takes the trainer's models over CURVE.
	wb_spawn modeld ip netns exec "$NSA" "$WB_BUILD/wattbus-modeld" --runtime_dir "$rtA" \
		--listen "$A:8100" --store "$BATS_TEST_TMPDIR/store" --trusted_trainers nodea \
		--sub "tcp://$A:5553" --curve_cert "$K/modeld" --curve_peer "$K/trainer"
	wb_wait_for 100 grep -q "trained model" "$BATS_TEST_TMPDIR/estimdA.log"
	wb_wait_for 60 bash -c "ip netns exec $NSA curl -sf http://$A:8100/models | grep -q nodea"
	ip netns exec "$NSA" curl -sf "http://$A:8100/models" | jq -c '.' | head -c 2000
	echo

	# Host B: no meter; estimd asks A's modeld.
	wb_spawn usagedB ip netns exec "$NSB" "$WB_BUILD/wattbus-usaged" --host nodeb --runtime_dir "$rtB" \
		--mode procfs --interval 500ms
	wb_spawn aligndB ip netns exec "$NSB" "$WB_BUILD/wattbus-alignd" --runtime_dir "$rtB" \
		--sub "ipc://$rtB/usaged.sock"
	wb_spawn estimdB ip netns exec "$NSB" "$WB_BUILD/wattbus-estimd" --host nodeb --runtime_dir "$rtB" \
		--model_server "http://$A:8100" --model_refresh 5s
	wb_spawn exportdB ip netns exec "$NSB" "$WB_BUILD/wattbus-exportd" --runtime_dir "$rtB" \
		--listen "$B:9102"
	wb_wait_for 120 grep -q "model server" "$BATS_TEST_TMPDIR/estimdB.log"
	grep "model server" "$BATS_TEST_TMPDIR/estimdB.log" | head -n 5
	wb_wait_for 120 bash -c "[ -n \"\$(ip netns exec $NSB curl -sf http://$B:9102/metrics | grep '^kepler_node_cpu_joules_total{.*zone=\"package\"')\" ]"

	# Over the same window, B's estimate against A's meter (both through their exportd).
	local a0 b0 a1 b1
	a0=$(node_joules "$NSA" "$A:9102")
	b0=$(node_joules "$NSB" "$B:9102")
	local t0=$SECONDS
	# The window: until A's meter has counted 2400 J more (2 min at its idle 20 W at most).
	export -f node_joules
	wb_wait_for 300 bash -c "a=\$(node_joules $NSA $A:9102); [ -n \"\$a\" ] && awk -v a=\"\$a\" -v a0=$a0 'BEGIN {exit !(a - a0 >= 2400)}'"
	a1=$(node_joules "$NSA" "$A:9102")
	b1=$(node_joules "$NSB" "$B:9102")
	local mae
	mae=$(ip netns exec "$NSA" curl -sf "http://$A:8100/models" | jq '[.. | objects | select(.mae? != null) | .mae] | max')
	python3 - "$a0" "$a1" "$b0" "$b1" "$((SECONDS - t0))" "$mae" <<'EOF'
import sys
a0, a1, b0, b1, secs, mae = map(float, sys.argv[1:])
pa, pb = (a1 - a0) / secs, (b1 - b0) / secs
print(f"A metered {pa:.2f} W, B estimated {pb:.2f} W over {secs:.0f} s; model held-out MAE {mae:.2f} W")
assert pa > 15, "A's meter did not run"
assert abs(pb - pa) <= 2 * mae + 0.05 * pa, (pa, pb, mae)
EOF
}
