#!/usr/bin/env bats
# Lost power messages: interpolated across when power is back in time;
# extrapolated (and marked) past max_lag, then corrected by the next slot.

load alignd_helper

teardown() { wb_kill_all; }

@test "lost power messages within max_lag: interpolated across, counted as lost" {
	alignd_start --max_skew 0
	alignd_sim lost_power_interpolated
	assert_success
	assert_output --partial "ok: h package-0: 12 slots each equal to the analytic energy"
	assert_output --partial "ok: the 3 lost power messages are counted"
	assert_line "ok"
}

@test "power missing past max_lag: extrapolated and marked, the next slot corrects, sum exact" {
	alignd_start --max_skew 0 --max_lag 300ms
	alignd_sim lost_power_extrapolated
	assert_success
	assert_output --partial "ok: the slot where power is back corrects the extrapolation: 500 J"
	assert_output --partial "ok: exact sum over the run"
	assert_line "ok"
}
