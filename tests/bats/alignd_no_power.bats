#!/usr/bin/env bats
# A usage host without any power meter: slots pass on with no zones, at once.

load alignd_helper

teardown() { wb_kill_all; }

@test "usage without power: slots without zones, usage deltas intact" {
	alignd_start --max_skew 0
	alignd_sim no_power
	assert_success
	assert_output --partial "ok: no zones, no power_host, coverage 0"
	assert_output --partial "ok: stat mode usage-only"
	assert_line "ok"
}
