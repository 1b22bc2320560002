#!/usr/bin/env bats
# exportd's configuration: checked keys (exit 2), a port in use (exit 1), the
# series cap, a clean stop on SIGTERM.

load helper
load exportd_helper

setup() { D=$WB_BUILD/wattbus-exportd; }
teardown() { wb_kill_all; }

@test "-n checks levels and listen; --help lists the keys" {
	run "$D" -n
	assert_success
	run "$D" -n --levels node,namespace
	assert_failure 2
	assert_output --partial 'unknown level "namespace"'
	run "$D" -n --listen '::1:9102'
	assert_failure 2
	assert_output --partial 'listen: "::1:9102" is not PORT'
	run "$D" -n --listen 127.0.0.1:70000
	assert_failure 2
	run "$D" -n --gzip_level 10
	assert_failure 2
	printf '[exportd]\nlisten = [::1]:9102\nlevels = node\nmetrics_deny = wattbus_*\n' >"$BATS_TEST_TMPDIR/ok.conf"
	run "$D" -n -c "$BATS_TEST_TMPDIR/ok.conf"
	assert_success
	run "$D" --help
	assert_success
	for k in listen levels metrics_allow metrics_deny node_name max_series max_terminated terminated_ttl \
		stale_after stage_timeout max_connections max_connections_per_ip http_timeout max_header_bytes \
		gzip_level tls_cert tls_key auth_user auth_password_file; do
		assert_output --partial "--$k"
	done
}

@test "a port already in use is a runtime failure (exit 1) that names the address" {
	port=$(wb_free_port)
	wb_hold_port "$port"
	run timeout 10 "$D" --runtime_dir "$BATS_TEST_TMPDIR/run" --listen "127.0.0.1:$port"
	assert_failure 1
	assert_output --partial "error: http: cannot listen on 127.0.0.1:$port (listen \"127.0.0.1:$port\"): Address already in use"
	# libmicrohttpd's own message named "port 0", the port it was not asked for
	refute_output --partial "port 0"
	refute_output --partial "running"
	# a bare port: any address, shown as such
	run timeout 10 "$D" --runtime_dir "$BATS_TEST_TMPDIR/run" --listen "$port"
	assert_failure 1
	assert_output --regexp "cannot listen on (\[::\]|0\.0\.0\.0):$port \(listen \"$port\"\): Address already in use"
}

@test "the series cap drops what does not fit and counts it" {
	# 3 + 50 processes with 2 zones: 5 series each; room for 60 workload series
	ex_start --max_series 60 --levels node,process
	ex_feed --slots 2 --procs 50 --start 1000000000000000000
	ex_wait_estimates 2
	run ex_metrics
	assert_line 'wattbus_exportd_series{level="process"} 60'
	assert_line 'wattbus_exportd_series_dropped_total{level="process"} 410'
	[ "$(ex_metrics | grep -c '^kepler_process_cpu_seconds_total{')" = 12 ]
	# the node level is not capped: its energy is all there
	assert_line 'kepler_node_cpu_joules_total{node_name="node-a",zone="package",path="/sys/class/powercap/intel-rapl:0"} 20.000000'
}

@test "SIGTERM stops exportd cleanly (exit 0) and frees the port" {
	ex_start
	kill -TERM "$PID_exportd"
	wait "$PID_exportd" || fail "exit status $?"
	run grep -c 'stopping on' "$BATS_TEST_TMPDIR/exportd.log"
	assert_output 1
	run curl -sS --max-time 2 "$EX_URL/healthz"
	assert_failure
	# the same port can be served again at once
	"$D" -n --listen "127.0.0.1:$EX_PORT" >/dev/null
	wb_spawn again "$D" --runtime_dir "$BATS_TEST_TMPDIR/run2" --listen "127.0.0.1:$EX_PORT"
	wb_wait_for 10 curl -sf -o /dev/null "$EX_URL/healthz"
}
