#!/usr/bin/env bats
# Garbage on the bus is rejected and counted; alignd keeps going and loses nothing.

load alignd_helper

teardown() { wb_kill_all; }

@test "malformed frames between good ones: rejected, counted, slots intact" {
	alignd_start --max_skew 0
	alignd_sim bad_frames
	assert_success
	assert_output --partial "ok: 12 bad frames rejected"
	assert_line "ok"
	kill -0 "$PID_alignd"
}
