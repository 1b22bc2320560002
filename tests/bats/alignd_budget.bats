#!/usr/bin/env bats
# Hostile but schema-valid input: usage messages of 131,072 processes under 30
# forged host names. alignd's tables for all hosts together stay within its
# memory budget (budget_mib): RSS read from /proc, the hosts beyond it refused
# and counted (stat rejected_by budget), and a host tracked before keeps its slots.

load alignd_helper

teardown() { wb_kill_all; }

@test "a flood of large usage messages from forged hosts stays within budget_mib" {
	alignd_start --max_skew 0 --budget_mib 64
	alignd_sim budget_flood --pid "$PID_alignd" --budget-mib 64
	echo "$output"
	assert_success
	assert_line --partial "ok: the forged hosts beyond the budget are refused and counted"
	assert_line "ok"
	kill -0 "$PID_alignd"
}
