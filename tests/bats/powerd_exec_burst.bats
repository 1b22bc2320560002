#!/usr/bin/env bats
# powerd's exec stream from a meter that buffers its output (a Python script
# writing to a pipe): its lines arrive in one burst. With @NS timestamps they
# integrate over the meter's times; without, the loss is warned about and counted.

load powerd_helper

teardown() { wb_kill_all; }

# A buffered meter: 31 readings of 100 W, 100 ms apart, flushed at once; the first and last
# times it stamped go to $BATS_TEST_TMPDIR/span.
meter() {
	cat >"$BATS_TEST_TMPDIR/meter.py" <<PY
import sys, time
stamps = []
for i in range(31):
    time.sleep(0.1)
    stamps.append(time.time_ns())
    print("platform 100 w" + (" @%d" % stamps[-1] if "$1" == "stamped" else ""))
sys.stdout.flush()
with open("$BATS_TEST_TMPDIR/span", "w") as f:
    f.write("%d %d\n" % (stamps[0], stamps[-1]))
time.sleep(60)
PY
	# buffered as it is by default (this environment may set PYTHONUNBUFFERED)
	echo "env -u PYTHONUNBUFFERED /usr/bin/python3 $BATS_TEST_TMPDIR/meter.py"
}

@test "stream mode: a buffered burst with @NS timestamps integrates over the meter's times" {
	pd_start --source exec --exec "$(meter stamped)" --exec_mode stream --exec_timeout 200ms
	wb_wait_for 10 test -s "$BATS_TEST_TMPDIR/span"
	read -r first last <"$BATS_TEST_TMPDIR/span"
	want=$(((last - first) / 10)) # 100 W over the stamped span, in uJ
	[ "$want" -ge 290000000 ]
	wb_wait_for 5 bash -c '[ -n "$(pd_power_values platform | tail -1)" ]'
	got=$(pd_power_values platform | tail -1)
	echo "got $got uJ, the meter said $want uJ"
	[ $((got - want)) -le 1 ] && [ $((want - got)) -le 1 ]
	[ "$(pd_stat_counter exec_burst_lines)" = 0 ]
}

@test "stream mode: a buffered burst without timestamps is warned about and counted" {
	pd_start --source exec --exec "$(meter)" --exec_mode stream --exec_timeout 200ms
	wb_wait_for 10 test -s "$BATS_TEST_TMPDIR/span"
	pd_wait_stat exec_burst_lines 20 || { tail -5 "$BATS_TEST_TMPDIR/powerd.log"; pd_tap_lines | grep stat | tail -1; false; }
	grep -q "several lines for zone platform in one read and no @NS timestamps" "$BATS_TEST_TMPDIR/powerd.log"
	grep -q "python3 -u, stdbuf -oL" "$BATS_TEST_TMPDIR/powerd.log"
}
