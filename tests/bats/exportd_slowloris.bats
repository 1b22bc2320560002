#!/usr/bin/env bats
# Slowloris: 16 connections from each of 5 addresses, each sending one header line
# at a time and never finishing its request. http_timeout (idle) never fires for
# them; http_request_timeout cuts them, and reserved_connections keeps room for
# a scrape from another address while they hold all they can.

load helper
load exportd_helper

teardown() {
	touch "$BATS_TEST_TMPDIR/stop"
	wb_kill_all
}

T0=1000000000000000000

@test "slowloris from five addresses cannot keep scrapes out" {
	# defaults: max_connections 64, max_connections_per_ip 16, reserved_connections 8, http_timeout 10s
	ex_start --http_request_timeout 3s
	ex_feed --slots 1 --start $T0
	ex_wait_estimates 1
	wb_spawn loris python3 "$BATS_TEST_DIRNAME/exportd_slowloris.py" "$EX_PORT" --per 16 --interval 1 \
		--max-seconds 120 --stop "$BATS_TEST_TMPDIR/stop"
	wb_wait_lines "$BATS_TEST_TMPDIR/loris.log" 1 60 '^ready'
	# every scrape gets through; at least one while the attackers hold all but the reserve
	full=0
	for i in $(seq 1 40); do
		run curl -sS --max-time 20 -w '\n%{http_code}' "$EX_URL/metrics"
		assert_line 200
		assert_line 'kepler_node_cpu_joules_total{node_name="node-a",zone="package",path="/sys/class/powercap/intel-rapl:0"} 10.000000'
		n=$(printf '%s\n' "$output" | awk '$1 == "wattbus_exportd_http_connections" {print $2}')
		if [ "${n:-0}" -ge 57 ]; then
			full=1
			break
		fi
		sleep 0.2
	done
	[ "$full" = 1 ] || fail "the attackers never held 56 connections"
	# the trickling connections are cut by the request bound, and the extra ones refused
	wb_wait_for 30 bash -c '[ "$(curl -sS --max-time 20 "$0/metrics" | awk "\$1 == \"wattbus_exportd_http_request_timeouts_total\" {print \$2}")" -ge 16 ]' "$EX_URL"
	run ex_metrics
	assert_line --regexp '^wattbus_exportd_http_connections_refused_total [1-9][0-9]*$'
	grep -q 'no complete request and answer within 3.0 s' "$BATS_TEST_TMPDIR/exportd.log"
	touch "$BATS_TEST_TMPDIR/stop"
	wb_wait_lines "$BATS_TEST_TMPDIR/loris.log" 1 30 '^connects'
	# they came back after being cut: more connects than the 80 slots
	run awk '/^connects/ {print $2}' "$BATS_TEST_TMPDIR/loris.log"
	[ "$output" -gt 80 ]
	run curl -sS -o /dev/null -w '%{http_code}' "$EX_URL/healthz"
	assert_output 200
}
