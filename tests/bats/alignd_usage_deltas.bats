#!/usr/bin/env bats
# Usage messages carry cumulative values and may be lost: deltas per
# (pid, start_ns) against the last value seen, new processes, exits, pid reuse,
# and the cgroups of the slot's processes.

load alignd_helper

teardown() { wb_kill_all; }

@test "usage deltas across lost messages, new and exited processes, cgroups" {
	alignd_start --max_skew 0
	alignd_sim usage_deltas
	assert_success
	assert_output --partial "ok: [1, 4]: deltas against the last value seen span the loss"
	assert_output --partial "ok: [4, 5]: C started in the slot: counted in full"
	assert_output --partial "ok: [5, 6]: reused pid 2 is a new process"
	assert_line "ok"
}
