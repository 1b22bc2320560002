#!/usr/bin/env bats
# procfs mode (per-process /proc/<pid>/stat, as Kepler >= 0.10 reads it) and bpf mode
# agree within 2 % on the same workload, and each marks its src.
load helper
load usaged_helper

teardown() {
	[ -n "${STOPPED:-}" ] && kill -CONT $STOPPED 2>/dev/null
	pkill -P "${PID_stress:-0}" 2>/dev/null || true
	wb_kill_all
}

@test "bpf and procfs modes agree within 2 % over 10 s" {
	usaged_need_bpf
	command -v stress-ng >/dev/null || skip "stress-ng not installed"
	usaged_start b --mode bpf --interval 500ms
	usaged_start p --mode procfs --interval 500ms
	usaged_tap b 3600 usage/
	usaged_tap p 3600 usage/
	busy_loop busy
	wb_spawn stress stress-ng --cpu 1 --cpu-load 50 --cpu-method loop -q
	sleep 10
	worker=$(pgrep -P "$PID_stress")
	[ -n "$worker" ]
	STOPPED="$PID_busy $worker $PID_stress"
	kill -STOP $STOPPED
	sleep 1.5
	for pid in "$PID_busy" "$worker"; do
		b=$($TAPQ "$(usaged_tapfile b)" cpu "$pid")
		p=$($TAPQ "$(usaged_tapfile p)" cpu "$pid")
		echo "pid $pid: bpf $b ns, procfs $p ns"
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
	sleep 2
	before=$(proc_cpu_ns "$PID_early")
	usaged_start p --mode procfs --interval 500ms
	usaged_tap p 3600 usage/
	sleep 3
	kill -STOP "$PID_early"
	STOPPED=$PID_early
	after=$(proc_cpu_ns "$PID_early")
	sleep 1.5
	got=$($TAPQ "$(usaged_tapfile p)" cpu "$PID_early")
	echo "ran before: $before ns, in all: $after ns, published: $got ns"
	[ "$before" -gt 500000000 ]
	# published <= what it ran after usaged started (+ one 10 ms tick), and most of it
	[ "$got" -le $((after - before + 10000000)) ]
	[ "$got" -gt $(((after - before) / 2)) ]
}
