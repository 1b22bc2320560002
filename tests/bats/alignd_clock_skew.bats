#!/usr/bin/env bats
# Messages whose time is far from their arrival are logged and counted.

load alignd_helper

teardown() { wb_kill_all; }

@test "clock skew beyond max_skew is logged and counted, slots still exact" {
	alignd_start --max_skew 2s
	alignd_sim skew
	assert_success
	assert_output --partial "ok: stat counter clock_skew = 8"
	assert_line "ok"
	run cat "$BATS_TEST_TMPDIR/alignd.log"
	assert_output --partial "check the clocks"
}
