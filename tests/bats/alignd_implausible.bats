#!/usr/bin/env bats
# Frames valid for the schema but implausible: refused on receipt and counted, never trusted.

load alignd_helper

teardown() { wb_kill_all; }

@test "a usage frame at t = 2^63-1 is refused (implausible_time); later hosts still get slots" {
	alignd_start --max_skew 0
	alignd_sim poisoned_time
	assert_success
	assert_output --partial "ok: stat rejected_by implausible_time = 1"
	assert_line "ok"
	wb_wait_lines "$BATS_TEST_TMPDIR/alignd.log" 1 10 "usage/evil.*implausible_time.*ahead of this host's clock"
}

@test "two powerds under one host name: the second is refused (duplicate_producer), no energy invented" {
	alignd_start --max_skew 0
	alignd_sim duplicate_powerd
	assert_success
	assert_output --partial "ok: after the first, every slot is the second meter's 50 J"
	assert_output --partial "ok: stat rejected_by duplicate_producer = 11"
	assert_line "ok"
	wb_wait_lines "$BATS_TEST_TMPDIR/alignd.log" 1 10 "power/h/powerd: two live producers"
}
