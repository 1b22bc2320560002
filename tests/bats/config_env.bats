#!/usr/bin/env bats
# WATTBUS_<SECTION>_<KEY> variables: over the file, under the flags, bad values
# refused (exit 2) naming the variable; shown by -n and in the startup log.

load helper
load exportd_helper

setup() { D=$WB_BUILD/wattbus-exportd; }
teardown() { wb_kill_all; }

@test "a variable overrides the file and a flag overrides the variable" {
	printf '[exportd]\nlisten = 127.0.0.1:0\nmetrics_allow = kepler_*\n' >"$BATS_TEST_TMPDIR/w.conf"
	port=$(wb_free_port)
	export WATTBUS_EXPORTD_LISTEN=127.0.0.1:$port WATTBUS_EXPORTD_METRICS_ALLOW='wattbus_exportd_*'
	export WATTBUS_GLOBAL_RUNTIME_DIR=$BATS_TEST_TMPDIR/env-run WATTBUS_EXPORTD_OPTS='--ignored yes'
	run "$D" -n -c "$BATS_TEST_TMPDIR/w.conf"
	assert_success
	assert_line "WATTBUS_EXPORTD_LISTEN: [exportd] listen = 127.0.0.1:$port"
	assert_line "WATTBUS_EXPORTD_METRICS_ALLOW: [exportd] metrics_allow = wattbus_exportd_*"
	refute_output --partial OPTS
	mkdir -p "$WATTBUS_GLOBAL_RUNTIME_DIR"
	wb_spawn exportd "$D" -c "$BATS_TEST_TMPDIR/w.conf" --sub "ipc://$WATTBUS_GLOBAL_RUNTIME_DIR/exportd.sock"
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 10 'port [0-9]'
	grep -q "port $port" "$BATS_TEST_TMPDIR/exportd.log"
	grep -q "environment WATTBUS_EXPORTD_LISTEN: \[exportd\] listen = 127.0.0.1:$port" "$BATS_TEST_TMPDIR/exportd.log"
	[ -S "$WATTBUS_GLOBAL_RUNTIME_DIR/exportd.sock" ]
	run curl -sS --max-time 10 "http://127.0.0.1:$port/metrics"
	assert_success
	assert_output --partial 'wattbus_exportd_'
	refute_output --partial 'kepler_'
	wb_kill_all

	# --listen beats the variable.
	run "$D" -n -c "$BATS_TEST_TMPDIR/w.conf" --listen 127.0.0.1:0
	assert_success
	assert_line "WATTBUS_EXPORTD_LISTEN: [exportd] listen = 127.0.0.1:$port, overridden by --listen"
	wb_spawn exportd2 "$D" -c "$BATS_TEST_TMPDIR/w.conf" --listen 127.0.0.1:0
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd2.log" 1 10 'port [0-9]'
	run grep -c "port $port\b" "$BATS_TEST_TMPDIR/exportd2.log"
	assert_output 0
}

@test "bad values and unknown keys are refused naming the variable" {
	WATTBUS_GLOBAL_STAT_INTERVAL=soon run "$WB_BUILD/wattbus-alignd" -n
	assert_failure 2
	assert_output --partial "WATTBUS_GLOBAL_STAT_INTERVAL: [global] stat_interval: 'soon' is not a duration"
	WATTBUS_USAGED_MODE=ebpf run "$WB_BUILD/wattbus-usaged" -n
	assert_failure 2
	assert_output --partial "WATTBUS_USAGED_MODE: [usaged] mode: 'ebpf' is not one of auto|bpf|procfs"
	WATTBUS_POWERD_INTERVALL=1s run "$WB_BUILD/wattbus-powerd" -n
	assert_failure 2
	assert_output --partial "WATTBUS_POWERD_INTERVALL: [powerd] has no key 'intervall'"
	# The stage's own checks name the variables that were set.
	WATTBUS_EXPORTD_LISTEN=nowhere run "$D" -n
	assert_failure 2
	assert_output --partial 'environment: WATTBUS_EXPORTD_LISTEN'
	# Another stage's variables are that stage's business.
	WATTBUS_POWERD_INTERVALL=1s WATTBUS_ALIGND_SNAP=x run "$D" -n --runtime_dir "$BATS_TEST_TMPDIR"
	assert_success
}
