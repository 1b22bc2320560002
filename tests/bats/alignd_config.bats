#!/usr/bin/env bats
# alignd's configuration: defaults work, bad values exit 2 naming the input.

load alignd_helper

teardown() { wb_kill_all; }

@test "defaults and a config file check out with -n" {
	run "$WB_BUILD/wattbus-alignd" -n
	assert_success
	cat >"$BATS_TEST_TMPDIR/w.conf" <<-'EOF2'
		[alignd]
		host_map = node1=bmc1, node2=bmc1
		max_lag = 3s
		host_timeout = 5m
	EOF2
	run "$WB_BUILD/wattbus-alignd" -n -c "$BATS_TEST_TMPDIR/w.conf"
	assert_success
}

@test "a bad host_map item, duration or key exits 2 and says which" {
	run "$WB_BUILD/wattbus-alignd" -n --host_map node1
	assert_failure 2
	assert_output --partial "'node1' is not usagehost=powerhost"
	run "$WB_BUILD/wattbus-alignd" -n --host_map a=b,a=c
	assert_failure 2
	assert_output --partial "mapped twice"
	run "$WB_BUILD/wattbus-alignd" -n --max_lag soon
	assert_failure 2
	assert_output --partial "max_lag"
	printf '[alignd]\nmax_lagg = 1s\n' >"$BATS_TEST_TMPDIR/bad.conf"
	run "$WB_BUILD/wattbus-alignd" -n -c "$BATS_TEST_TMPDIR/bad.conf"
	assert_failure 2
	assert_output --partial "bad.conf:2"
}

@test "SIGHUP applies a new host_map" {
	printf '[alignd]\n' >"$BATS_TEST_TMPDIR/w.conf"
	alignd_start -c "$BATS_TEST_TMPDIR/w.conf"
	wb_wait_lines "$BATS_TEST_TMPDIR/alignd.log" 1 5 "running"
	printf '[alignd]\nhost_map = node1=bmc1\n' >"$BATS_TEST_TMPDIR/w.conf"
	kill -HUP "$PID_alignd"
	wb_wait_lines "$BATS_TEST_TMPDIR/alignd.log" 1 5 "reloaded"
	kill -0 "$PID_alignd"
}
