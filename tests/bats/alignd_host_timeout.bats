#!/usr/bin/env bats
# Bounded memory: a usage host silent past host_timeout is dropped, and when it
# comes back its next slot spans the silence with the energy measured in it.

load alignd_helper

teardown() { wb_kill_all; }

@test "a silent usage host is dropped and comes back cleanly" {
	alignd_start --max_skew 0 --host_timeout 3s
	alignd_sim host_timeout
	assert_success
	assert_output --partial "ok: the slot after the silence spans it"
	assert_output --partial "ok: stat counter hosts_dropped = 1"
	assert_line "ok"
	run cat "$BATS_TEST_TMPDIR/alignd.log"
	assert_output --partial "usage/h: silent for 3 s"
}
