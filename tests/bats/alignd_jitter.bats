#!/usr/bin/env bats
# Power and usage off the grid by up to +-300 ms, at unrelated intervals.

load alignd_helper

teardown() { wb_kill_all; }

@test "jittered power and usage: analytic slot energies, exact sum" {
	alignd_start --max_skew 0
	alignd_sim jitter
	assert_success
	assert_output --partial "ok: h package-0: 20 slots each equal to the analytic energy"
	assert_line "ok"
}
