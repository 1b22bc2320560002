#!/usr/bin/env bats
# usaged's per-process CPU time (bpf mode) agrees with /proc/<pid>/stat within 2 %
# over several seconds of CPU, for a process at 50 % CPU (stress-ng --cpu-load 50) and a busy loop.
load helper
load usaged_helper

teardown() { workloads_teardown; }

@test "bpf: CPU time of a 50 % and a 100 % process within 2 % of /proc/<pid>/stat over 2-4 s of CPU" {
	usaged_need_bpf
	command -v stress-ng >/dev/null || skip "stress-ng not installed"
	usaged_start u --mode bpf --interval 500ms
	usaged_tap u 3600 usage/
	tap=$(usaged_tapfile u)
	# Started after usaged attached: all of their CPU time is usaged's to count. Frozen, both
	# sides read the same final value: usaged's catches up with /proc's at its next messages.
	frozen_workloads
	busy_proc=$(proc_cpu_ns "$PID_busy")
	worker_proc=$(proc_cpu_ns "$worker")
	# Each must have run for real, or the comparison says nothing.
	[ "$busy_proc" -gt 2000000000 ]
	[ "$worker_proc" -gt 1000000000 ]
	caught_up() {
		within 2 "$($TAPQ "$tap" cpu "$PID_busy")" "$busy_proc" >/dev/null 2>&1 &&
			within 2 "$($TAPQ "$tap" cpu "$worker")" "$worker_proc" >/dev/null 2>&1
	}
	wb_wait_for 30 caught_up || true # the checks below tell what it published
	usaged_settle u
	busy_u=$($TAPQ "$tap" cpu "$PID_busy")
	worker_u=$($TAPQ "$tap" cpu "$worker")
	echo "busy loop: /proc $busy_proc ns, usaged $busy_u ns"
	echo "stress-ng worker: /proc $worker_proc ns, usaged $worker_u ns"
	within 2 "$busy_u" "$busy_proc"
	within 2 "$worker_u" "$worker_proc"
	# /proc/<pid>/stat is in 10 ms ticks; schedstat has the same count in ns: usaged charges exactly that.
	if [ -r "/proc/$PID_busy/schedstat" ]; then
		within 0.1 "$busy_u" "$(cut -d' ' -f1 "/proc/$PID_busy/schedstat")"
		within 0.1 "$worker_u" "$(cut -d' ' -f1 "/proc/$worker/schedstat")"
	fi
	# and the stream is consistent: seq +1, no value ever went down
	run $TAPQ "$tap" check
	assert_success
}
