#!/usr/bin/env bats
# powerd stamps its samples on the grid, usaged when it read: slot ends fall
# just after the last power sample. Within snap they go out on their usage message
# instead of waiting for the next power sample, and the run still sums exactly.

load alignd_helper

teardown() { wb_kill_all; }

@test "slot ends just past the grid sample go out at once (snap), sum exact" {
	alignd_start --max_skew 0
	alignd_sim grid_stamps
	assert_success
	assert_output --partial "ok: every slot out before the next power sample was sent"
	assert_output --partial "ok: none marked extrapolated"
	assert_output --partial "ok: exact sum over the run"
	assert_line "ok"
}

@test "with snap off the same slots wait for the next power sample" {
	# It never comes while they wait: they go out after max_lag, extrapolated.
	alignd_start --max_skew 0 --snap 0 --max_lag 300ms
	alignd_sim grid_stamps
	assert_failure
	assert_output --partial "FAIL"
	refute_output --partial "ok: none marked extrapolated"
}
