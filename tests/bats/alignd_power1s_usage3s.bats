#!/usr/bin/env bats
# Power every second, usage every 3 s: each slot holds exactly the integral of
# the power over it, and the run sums to E(last) - E(first).

load alignd_helper

teardown() { wb_kill_all; }

@test "power 1 s, usage 3 s: analytic slot energies, exact sum" {
	alignd_start --max_skew 0
	alignd_sim power1s_usage3s
	assert_success
	assert_output --partial "ok: h package-0: 10 slots each equal to the analytic energy"
	assert_output --partial "exact sum"
	assert_line "ok"
}
