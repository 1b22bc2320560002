#!/usr/bin/env bats
# procfs mode (per-process /proc/<pid>/stat, as Kepler >= 0.10 reads it) and bpf mode
# agree within 2 % on the same workload, and each marks its src.
load helper
load usaged_helper

teardown() { workloads_teardown; }

@test "bpf and procfs modes agree within 2 % over 2-4 s of CPU" {
	usaged_need_bpf
	command -v stress-ng >/dev/null || skip "stress-ng not installed"
	usaged_start b --mode bpf --interval 500ms
	usaged_start p --mode procfs --interval 500ms
	usaged_tap b 3600 usage/
	usaged_tap p 3600 usage/
	# Frozen, their CPU time is final: both modes catch up with /proc's at their next messages.
	frozen_workloads
	caught_up() {
		local pid
		for pid in "$PID_busy" "$worker"; do
			within 2 "$($TAPQ "$(usaged_tapfile p)" cpu "$pid")" "$(proc_cpu_ns "$pid")" >/dev/null 2>&1 &&
				within 2 "$($TAPQ "$(usaged_tapfile b)" cpu "$pid")" "$(proc_cpu_ns "$pid")" >/dev/null 2>&1 ||
				return 1
		done
	}
	wb_wait_for 30 caught_up || true # the checks below tell what they published
	usaged_settle b
	usaged_settle p
	for pid in "$PID_busy" "$worker"; do
		b=$($TAPQ "$(usaged_tapfile b)" cpu "$pid")
		p=$($TAPQ "$(usaged_tapfile p)" cpu "$pid")
		echo "pid $pid: bpf $b ns, procfs $p ns, /proc $(proc_cpu_ns "$pid") ns"
		[ "$p" -gt 1000000000 ]
		within 2 "$b" "$p"
	done
	run $TAPQ "$(usaged_tapfile b)" src
	assert_output "usaged/bpf"
	run $TAPQ "$(usaged_tapfile p)" src
	assert_output "usaged/procfs"
	run $TAPQ "$(usaged_tapfile p)" check
	assert_success
}

@test "procfs mode counts from its first scan, not from the process start" {
	# A process that ran before usaged started: only what it ran since is usaged's.
	busy_loop early
	wb_wait_for 60 proc_cpu_over 500000000 "$PID_early"
	# usaged's first scan, its baseline, falls between these two readings: the first before
	# it starts, the second once a usage message (any, the first scan's or a later one's) is
	# in the tap.
	before_lo=$(proc_cpu_ns "$PID_early")
	usaged_start p --mode procfs --interval 500ms
	usaged_tap p 3600 usage/
	wb_wait_lines "$(usaged_tapfile p)" 1 30 '"kind":"usage"'
	before_hi=$(proc_cpu_ns "$PID_early")
	# Let it run a second more of CPU, all of it after the baseline.
	wb_wait_for 120 proc_cpu_over $((before_hi + 1000000000)) "$PID_early"
	kill -STOP "$PID_early"
	STOPPED=$PID_early
	wb_wait_for 30 proc_stopped "$PID_early"
	after=$(proc_cpu_ns "$PID_early")
	# It has stopped: usaged catches up with what it ran since the baseline, then that is final.
	published_since_hi() {
		[ "$($TAPQ "$(usaged_tapfile p)" cpu "$PID_early")" -ge $((after - before_hi)) ] 2>/dev/null
	}
	wb_wait_for 30 published_since_hi || true # the checks below tell what it published
	usaged_settle p
	got=$($TAPQ "$(usaged_tapfile p)" cpu "$PID_early")
	echo "ran before usaged: $before_lo to $before_hi ns, in all: $after ns, published: $got ns"
	[ "$before_lo" -gt 500000000 ]
	# published <= what it ran after usaged started (+ one 10 ms tick): not its CPU time from
	# its start, which is at least 0.5 s more
	[ "$got" -le $((after - before_lo + 10000000)) ]
	# and >= what it ran after usaged's first message (- one tick): all of that is usaged's
	[ "$got" -ge $((after - before_hi - 10000000)) ]
}
