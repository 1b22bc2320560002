#!/usr/bin/env bats
# Two hosts on two endpoints at once; one is metered under another host name.

load alignd_helper

teardown() { wb_kill_all; }

@test "two hosts, two endpoints, host_map: each host exact" {
	IN2=$(wb_ep in2)
	alignd_start --max_skew 0 --host_map node1=bmc-node1
	alignd_sim two_hosts
	assert_success
	assert_output --partial "ok: node0 package-0: 10 slots each equal to the analytic energy"
	assert_output --partial "ok: node1 package-0: 5 slots each equal to the analytic energy"
	assert_output --partial "ok: power_host names the meter's host"
	assert_line "ok"
}
