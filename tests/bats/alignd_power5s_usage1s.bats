#!/usr/bin/env bats
# Power every 5 s, usage every second: slots wait for the power sample after
# their end and are interpolated between samples five slots apart.

load alignd_helper

teardown() { wb_kill_all; }

@test "power 5 s, usage 1 s: slots wait for power and interpolate exactly" {
	alignd_start --max_skew 0
	alignd_sim power5s_usage1s
	assert_success
	assert_output --partial "ok: h package-0: 30 slots each equal to the analytic energy"
	assert_output --partial "ok: power sparser than usage: all interpolated"
	assert_line "ok"
}
