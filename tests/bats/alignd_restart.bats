#!/usr/bin/env bats
# A powerd restart (new epoch): bridged without loss when the counter
# continues, a gap flagged and reported when it does not.

load alignd_helper

teardown() { wb_kill_all; }

@test "powerd restart whose counter continues (wraps added before): bridged, no energy lost" {
	alignd_start --max_skew 0
	alignd_sim restart_bridged
	assert_success
	assert_output --partial "ok: h package-0: 20 slots each equal to the analytic energy"
	assert_output --partial "ok: h dram-0: 20 slots each equal to the analytic energy"
	assert_output --partial "ok: both zones bridged"
	assert_line "ok"
	run cat "$BATS_TEST_TMPDIR/alignd.log"
	assert_output --partial "zone package-0: powerd restarted and the counter continues"
}

@test "powerd back with a counter from zero: gap flagged and logged, nothing guessed" {
	alignd_start --max_skew 0
	alignd_sim restart_gap
	assert_success
	assert_output --partial "ok: slot ending at 5 s lies in the gap"
	assert_output --partial "ok: the run holds what was measured"
	assert_line "ok"
	run cat "$BATS_TEST_TMPDIR/alignd.log"
	assert_output --partial "discontinuity"
}

@test "alignd itself restarted mid-run: the state file carries the run on, no energy lost" {
	# Saved at the stop only (no checkpoints), so the file is used once.
	alignd_start --max_skew 0 --state_every 0
	alignd_sim stage_restart_1 --state "$BATS_TEST_TMPDIR/half.json"
	assert_success
	kill -TERM "$PID_alignd"
	wb_wait_for 5 bash -c "! kill -0 $PID_alignd 2>/dev/null"
	[ -s "$BATS_TEST_TMPDIR/alignd.state" ]
	mv "$BATS_TEST_TMPDIR/alignd.log" "$BATS_TEST_TMPDIR/alignd-1.log"
	alignd_start --max_skew 0 --state_every 0
	alignd_sim stage_restart_2 --state "$BATS_TEST_TMPDIR/half.json"
	assert_success
	assert_output --partial "ok: the first slot after the restart starts where the last one ended"
	assert_output --partial "ok: h package-0: 10 slots each equal to the analytic energy"
	assert_line "ok"
	run cat "$BATS_TEST_TMPDIR/alignd.log"
	assert_output --partial "resumed 1 power hosts and 1 usage hosts"
	[ ! -e "$BATS_TEST_TMPDIR/alignd.state" ] # used once: a second restart must not count it again
}

@test "a damaged state file is reported and ignored; alignd starts clean" {
	printf '{"version": 1, "saved_ns": ' >"$BATS_TEST_TMPDIR/alignd.state"
	alignd_start --max_skew 0
	alignd_sim power1s_usage3s
	assert_success
	assert_line "ok"
	run cat "$BATS_TEST_TMPDIR/alignd.log"
	assert_output --partial "alignd.state:1"
	assert_output --partial "ignored"
}
