#!/usr/bin/env bats
# exportd's counters are its own: when estimd (or any upstream stage) restarts,
# with a new epoch and a replay of slots already seen, every counter keeps
# growing from its total and no slot is counted twice.

load helper
load exportd_helper

teardown() { wb_kill_all; }

T0=1000000000000000000 # slot times, ns
SEC=1000000000

pkg='kepler_node_cpu_joules_total{node_name="node-a",zone="package",path="/sys/class/powercap/intel-rapl:0"}'
stress='kepler_process_cpu_joules_total{node_name="node-a",pid="101",comm="stress",exe="",type="regular",container_id="",vm_id="",state="running",zone="package"}'
seconds='kepler_container_cpu_seconds_total{node_name="node-a",container_id="c0ffee"'

@test "counters go on from their totals across an upstream restart with a replay" {
	ex_start
	# first estimd run: slots 0..4 (epoch of the first wattbus pub)
	ex_feed --slots 5 --start $T0
	ex_wait_estimates 5
	[ "$(ex_value "$pkg")" = 50.000000 ]
	[ "$(ex_value "$stress")" = 15.000000 ]
	# estimd restarts: a new epoch that replays slots 3 and 4, then goes on to slot 9
	ex_feed --slots 7 --start $((T0 + 3 * SEC))
	ex_wait_estimates 10
	run ex_metrics
	assert_line "$pkg 100.000000"
	assert_line "$stress 30.000000"
	assert_line --partial "$seconds"
	[ "$(ex_value "$seconds")" = 2.500000000 ]
	assert_line 'wattbus_exportd_estimates_rejected_total{reason="stale"} 2'
	run grep -c 'restarted (epoch' "$BATS_TEST_TMPDIR/exportd.log"
	assert_output 1
	# a third run whose first slot half-overlaps the last one: only the new half counts
	python3 "$EX_FEED" --slots 1 --len 2 --start $((T0 + 9 * SEC)) | "$WATTBUS" pub --wait 60s "$(wb_ep estimd)"
	ex_wait_estimates 11
	run ex_metrics
	assert_line "$pkg 110.000000"
	assert_line 'wattbus_exportd_slots_clipped_total 1'
}

@test "every scrape during restarts reads a total at least as large as the one before" {
	ex_start
	# three upstream runs back to back, each replaying the previous run's last 2 slots
	(
		for run in 0 1 2; do
			python3 "$EX_FEED" --slots 6 --start $((T0 + run * 4 * SEC)) | "$WATTBUS" pub --wait 60s -i 100ms "$(wb_ep estimd)"
		done
	) &
	feeder=$!
	echo "$feeder" >>"$BATS_TEST_TMPDIR/pids"
	prev=0
	scrapes=0
	# scrape while the feeder runs, and at least 5 times whatever the scheduler does
	while kill -0 "$feeder" 2>/dev/null || [ $scrapes -lt 5 ]; do
		v=$(ex_value "$pkg")
		v=${v:-0}
		# compare as integers of microjoules
		cur=$(echo "$v" | tr -d .)
		cur=$((10#$cur))
		[ "$cur" -ge "$prev" ] || fail "total went from $prev to $cur uJ"
		prev=$cur
		scrapes=$((scrapes + 1))
		sleep 0.05
	done
	ex_wait_estimates 14
	# slots 0..13 once each: 14 x 10 J
	[ "$(ex_value "$pkg")" = 140.000000 ]
	[ "$(ex_value 'wattbus_exportd_estimates_rejected_total{reason="stale"}')" = 4 ]
}

@test "stage counters stay monotonic when a stage restarts" {
	ex_start
	stat() { # epoch frames_out lost
		echo "{\"kind\":\"stat\",\"host\":\"node-a\",\"src\":\"powerd\",\"epoch\":$1,\"t\":$(date +%s%N),\"stage\":\"powerd\",\"version\":\"0.1.0\",\"frames_in\":0,\"frames_out\":$2,\"lost\":$3,\"rejected\":0,\"cpu_ns\":$(($2 * 1000000))}"
	}
	{ stat 1 100 4; } | "$WATTBUS" pub --wait 60s "$(wb_ep stats)"
	wb_wait_for 10 bash -c 'curl -sS "$0/metrics" | grep -q "^wattbus_stage_frames_out_total{host=\"node-a\",stage=\"powerd\",src=\"powerd\"} 100$"' "$EX_URL"
	{
		stat 2 5 1
		stat 2 9 1
	} | "$WATTBUS" pub --wait 60s "$(wb_ep stats)"
	wb_wait_for 10 bash -c 'curl -sS "$0/metrics" | grep -q "^wattbus_stage_frames_out_total{host=\"node-a\",stage=\"powerd\",src=\"powerd\"} 109$"' "$EX_URL"
	run ex_metrics
	assert_line 'wattbus_stage_messages_lost_total{host="node-a",stage="powerd",src="powerd"} 5'
	assert_line 'wattbus_stage_cpu_seconds_total{host="node-a",stage="powerd",src="powerd"} 0.109000000'
	assert_line 'wattbus_stage_starts_total{host="node-a",stage="powerd",src="powerd"} 2'
}

dram='kepler_node_cpu_joules_total{node_name="node-a",zone="dram",path="/sys/class/powercap/intel-rapl:0:0"}'
pkg_idle='kepler_node_cpu_idle_joules_total{node_name="node-a",zone="package",path="/sys/class/powercap/intel-rapl:0"}'

# Stop exportd (signal $1) and wait until it is gone.
ex_stop() {
	kill "-$1" "$PID_exportd"
	wb_wait_for 15 bash -c '! kill -0 "$0" 2>/dev/null' "$PID_exportd"
}

@test "node counters continue across exportd restarts, clean or killed" {
	ex_start
	# estimd's totals count from T0; exportd sees slots 0..4
	ex_feed --slots 5 --start $T0 --totals-from $T0
	ex_wait_estimates 5
	[ "$(ex_value "$pkg")" = 50.000000 ]
	ex_stop TERM
	[ -s "$BATS_TEST_TMPDIR/run/exportd.state" ]
	ex_start
	grep -q 'node counters of 1 hosts resumed' "$BATS_TEST_TMPDIR/exportd.log"
	# before any new estimate, the counters are where they were
	run ex_metrics
	assert_line "$pkg 50.000000"
	# slots 5 and 6 were published while exportd was down; the totals carry them
	ex_feed --slots 3 --start $((T0 + 7 * SEC)) --totals-from $T0
	ex_wait_estimates 3
	run ex_metrics
	assert_line "$pkg 100.000000"
	assert_line "$dram 20.000000"
	assert_line "$pkg_idle 40.000000"
	# workload counters are exportd's own and start again (documented)
	assert_line "$stress 9.000000"
	# killed: whatever the last checkpoint holds, the totals make up the rest exactly
	wb_wait_for 15 bash -c 'grep -q "\"last_t1\": *$0" "$1"' $((T0 + 10 * SEC)) "$BATS_TEST_TMPDIR/run/exportd.state"
	ex_feed --slots 2 --start $((T0 + 10 * SEC)) --totals-from $T0
	ex_wait_estimates 5
	ex_stop KILL
	ex_start
	ex_feed --slots 2 --start $((T0 + 13 * SEC)) --totals-from $T0
	ex_wait_estimates 2
	run ex_metrics
	assert_line "$pkg 150.000000"
	assert_line "$dram 30.000000"
	assert_line 'wattbus_exportd_estimates_rejected_total{reason="stale"} 0'
}

@test "a damaged state file is reported and ignored" {
	mkdir -p "$BATS_TEST_TMPDIR/run"
	echo '{"version": 9}' >"$BATS_TEST_TMPDIR/run/exportd.state"
	ex_start
	grep -q "exportd.state: not an exportd state (version 1 with hosts)" "$BATS_TEST_TMPDIR/exportd.log"
	wb_wait_for 15 bash -c 'curl -sS "$0/metrics" | grep -q "^wattbus_stage_events_total{host=\"[^\"]*\",stage=\"exportd\",src=\"[^\"]*\",name=\"state_load_failed\"} 1$"' "$EX_URL"
	ex_feed --slots 1 --start $T0 --totals-from $T0
	ex_wait_estimates 1
	[ "$(ex_value "$pkg")" = 10.000000 ]
}
