#!/usr/bin/env bats
# The fake source (a development meter): zones simulated from a scripted
# /proc/stat, marked as such on the wire and in the mode, exactly the energy
# docs/powerd.md's coefficients give; and never chosen unless named.

load powerd_helper

teardown() { wb_kill_all; }

# fake_stat USER SYSTEM IDLE IOWAIT STEAL: the fake /proc/stat, in ticks.
fake_stat() {
	wb_put "$PDR/proc/stat" "cpu  $1 0 $2 $3 $4 0 0 $5 0 0" "cpu0 $1 0 $2 $3 $4 0 0 $5 0 0" "intr 1"
}

@test "source fake: simulated zones whose energy follows the scripted load exactly" {
	mkdir -p "$PDR/sys"
	fake_stat 1000 500 90000 100 0
	pd_start --source fake --proc_root "$PDR/proc"
	pd_wait_power 3
	[ "$(pd_stat_mode)" = fake ] || wb_wait_for 5 bash -c '[ "$(pd_stat_mode)" = fake ]'
	grep -q "fake: SIMULATED power, not measured" "$BATS_TEST_TMPDIR/powerd.log"
	run bash -c 'pd_tap_lines | jq -r "select(.topic == \"power/testhost\") | .msg.zones[] | \"\(.name) \(.zone) \(.source) \(.path)\"" | sort -u'
	assert_output "core-0 core fake simulated:$PDR/proc/stat
dram-0 dram fake simulated:$PDR/proc/stat
package-0 package fake simulated:$PDR/proc/stat"
	# 120 ticks busy (user, system), 30 iowait (idle); then 50 steal (busy)
	fake_stat 1100 520 90000 130 0
	n=$(grep -c '"topic":"power/testhost"' "$TAPLOG")
	pd_wait_power $((n + 3))
	fake_stat 1100 520 90000 130 50
	n=$(grep -c '"topic":"power/testhost"' "$TAPLOG")
	pd_wait_power $((n + 3))
	# Every step between two messages: idle mW x wall ns + busy mW x busy ticks x ns per tick, in
	# pJ; both parts are whole uJ at a 100 ms grid and 10 ms ticks, so each step is exact, and the
	# busy ticks over all steps are the 170 scripted, the same in every zone.
	pd_tap_lines | jq -c 'select(.topic == "power/testhost") | .msg | [.t, (.zones | map({(.name): .energy_uj}) | add)]' >"$BATS_TEST_TMPDIR/rows"
	run python3 - "$BATS_TEST_TMPDIR/rows" "$(getconf CLK_TCK)" <<-'PY'
		import json, sys
		rows = [json.loads(l) for l in open(sys.argv[1])]
		tick_ns = 10**9 // int(sys.argv[2])
		coef = {"package-0": (10000, 5000), "core-0": (2000, 4000), "dram-0": (3000, 1000)}
		ticks = {z: 0 for z in coef}
		for (t0, e0), (t1, e1) in zip(rows, rows[1:]):
		    for z, (idle_mw, busy_mw) in coef.items():
		        busy_pj = (e1[z] - e0[z]) * 10**6 - idle_mw * (t1 - t0)
		        k, rem = divmod(busy_pj, busy_mw * tick_ns)
		        if rem or k < 0:
		            sys.exit("%s: step %d -> %d ns, %d uJ: not idle + whole busy ticks" % (z, t0, t1, e1[z] - e0[z]))
		        ticks[z] += k
		print(ticks)
		sys.exit(0 if set(ticks.values()) == {170} else 1)
	PY
	assert_success
}

@test "auto never picks the fake source, even with a readable /proc/stat" {
	mkdir -p "$PDR/sys/class/powercap"
	fake_stat 1 1 1 1 0
	pd_start --proc_root "$PDR/proc"
	wb_wait_for 10 bash -c '[ "$(grep -c "\"topic\":\"stat/testhost\"" "$TAPLOG")" -ge 2 ]'
	[ "$(pd_stat_mode)" = none ]
	[ "$(grep -c '"topic":"power/' "$TAPLOG")" -eq 0 ]
	[ "$(grep -c -e SIMULATED -e "fake:" "$BATS_TEST_TMPDIR/powerd.log")" -eq 0 ]
	run "$PD" -n --source fake --proc_root "$PDR/proc"
	assert_success
}
