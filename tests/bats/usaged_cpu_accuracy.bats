#!/usr/bin/env bats
# usaged's per-process CPU time (bpf mode) agrees with /proc/<pid>/stat within 2 %
# over several seconds of CPU, for a process at 50 % CPU (stress-ng --cpu-load 50) and a busy loop.
load helper
load usaged_helper

teardown() {
	[ -n "${STOPPED:-}" ] && kill -CONT $STOPPED 2>/dev/null
	pkill -P "${PID_stress:-0}" 2>/dev/null || true
	wb_kill_all
}

@test "bpf: CPU time of a 50 % and a 100 % process within 2 % of /proc/<pid>/stat over 2-4 s of CPU" {
	usaged_need_bpf
	command -v stress-ng >/dev/null || skip "stress-ng not installed"
	usaged_start u --mode bpf --interval 500ms
	usaged_tap u 3600 usage/
	tap=$(usaged_tapfile u)
	# Started after usaged attached: all of their CPU time is usaged's to count.
	busy_loop busy
	wb_spawn stress stress-ng --cpu 1 --cpu-load 50 --cpu-method loop -q
	# Let them run until each has used enough CPU for 2 % to mean something (10 s of an idle
	# machine gave 10 s and 5 s; a loaded one takes longer to give them this much).
	wb_wait_for 30 pgrep -P "$PID_stress"
	worker=$(pgrep -P "$PID_stress")
	[ -n "$worker" ]
	wb_wait_for 300 proc_cpu_over 4000000000 "$PID_busy"
	wb_wait_for 300 proc_cpu_over 2000000000 "$worker"
	# Freeze them, so that both sides read the same final value: once they have stopped, the
	# /proc value is final, and usaged's catches up with it at its next messages.
	STOPPED="$PID_busy $worker $PID_stress"
	kill -STOP $STOPPED
	wb_wait_for 30 proc_stopped $STOPPED
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
