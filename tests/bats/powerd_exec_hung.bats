#!/usr/bin/env bats
# powerd's exec source with a meter command that never ends: each run is a job off the loop
# (lib/job.h), so powerd samples and publishes while the command hangs, and a stop cancels the
# run, killing the command, where it waited up to exec_timeout (20 s at most) before. Each test
# waits for conditions with deadlines and checks what a run held on the loop would get wrong.

load powerd_helper

teardown() { wb_kill_all; }

# hung_cmd FIRST: a command that writes its pid to $BATS_TEST_TMPDIR/pid.N (N: its run, from 0)
# and sleeps for ever, except run 0, which prints FIRST when FIRST is given.
hung_cmd() {
	local d=$BATS_TEST_TMPDIR
	echo "n=\$(cat $d/runs 2>/dev/null || echo 0); echo \$((n + 1)) >$d/runs; if [ -n '$1' ] && [ \$n = 0 ]; then echo '$1'; else echo \$\$ >$d/pid.\$n; exec sleep 600; fi"
}

# stop_powerd CMD_PID: SIGTERM; powerd exits 0, having cancelled the run (wb_stop_cancelled), and
# the command it ran (CMD_PID, hung until then) is gone.
stop_powerd() {
	kill -0 "$1"
	wb_stop_cancelled powerd "exec run of"
	wb_wait_for 10 bash -c '! kill -0 "$0" 2>/dev/null' "$1"
}

@test "a start-up run that never ends: powerd samples meanwhile, and stops at once" {
	pd_start --source exec --exec "$(hung_cmd)" --exec_timeout 20s
	wb_wait_for 30 test -s "$BATS_TEST_TMPDIR/pid.0"
	# the loop runs while the command hangs: samples are taken and stat messages sent
	pd_wait_stat samples 3 30
	kill -0 "$(cat "$BATS_TEST_TMPDIR/pid.0")"
	[ "$(cat "$BATS_TEST_TMPDIR/runs")" = 1 ] # no second run beside the one going
	stop_powerd "$(cat "$BATS_TEST_TMPDIR/pid.0")"
}

@test "a sample's run that never ends: the other samples go on, and powerd stops at once" {
	# an interval as long as exec_timeout's maximum, so that the sample's run has 20 s too
	pd_start --source exec --exec "$(hung_cmd 'pdu-0 500 uj')" --exec_timeout 20s --interval 20s \
		--stat_interval 100ms
	wb_wait_for 30 grep -q "exec: zone pdu-0" "$BATS_TEST_TMPDIR/powerd.log"
	wb_wait_for 40 test -s "$BATS_TEST_TMPDIR/pid.1"
	# stat messages go on while the sample waits for its run
	local stats
	stats=$(pd_tap_lines | grep -c '"topic":"stat/testhost"')
	wb_wait_for 30 bash -c '[ "$(pd_tap_lines | grep -c "\"topic\":\"stat/testhost\"")" -ge $(($0 + 3)) ]' "$stats"
	kill -0 "$(cat "$BATS_TEST_TMPDIR/pid.1")"
	stop_powerd "$(cat "$BATS_TEST_TMPDIR/pid.1")"
}
