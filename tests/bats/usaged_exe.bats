#!/usr/bin/env bats
# The exe of a process (the path /proc/<pid>/exe links to) in the usage message, in both
# modes: a busy shell's is the shell's binary; after the process execs another program its
# exe follows (same pid and start time, a new comm).
load helper
load usaged_helper

teardown() { wb_kill_all; }

# exe_is PID COMM PATH: usaged's capture lists PID as COMM running PATH.
exe_is() {
	local got
	got=$($TAPQ "$(usaged_tapfile u)" exe "$1")
	echo "pid $1: published '$got', want '$2 $3'"
	[ "$got" = "$2 $3" ]
}

# A kernel thread (PF_KTHREAD in /proc/PID/stat's flags) is in the capture, without an exe.
kthread_listed() {
	local pid flags
	for pid in $($TAPQ "$(usaged_tapfile u)" noexe); do
		flags=$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f7) || continue
		[ -n "$flags" ] && [ $((flags & 0x200000)) -ne 0 ] && echo "kernel thread $pid" && return 0
	done
	return 1
}

# usaged's stat message counts the executables it knows (the busy shell's among them).
stat_exes_counted() {
	local n
	n=$($TAPQ "$(usaged_tapfile u)" stat exes)
	[ "$n" != none ] && [ "$n" -ge 1 ]
}

exe_of_busy_shell() {
	usaged_start u --mode "$1" --interval 300ms
	usaged_tap u 3600 usage/ stat/
	busy_loop busy
	sh=$(readlink -f "$(command -v sh)")
	# The binary of the running process, as the kernel names it (the test's own reading; setsid
	# execs the shell a moment after the spawn).
	wb_wait_for 30 bash -c "[ \"\$(readlink /proc/$PID_busy/exe)\" = '$sh' ]"
	wb_wait_for 30 exe_is "$PID_busy" sh "$sh"
	# A kernel thread has no exe: listed without one, and no warning about it (a process usaged
	# may not read, such as a sandbox's pid 1, is warned of and counted in exe_read_errors).
	wb_wait_for 30 kthread_listed
	wb_wait_for 30 stat_exes_counted
	run grep -E 'exe: ' "$BATS_TEST_TMPDIR/u.log"
	refute_output --partial 'No such file'
	run $TAPQ "$(usaged_tapfile u)" check
	assert_success
}

exe_after_exec() {
	usaged_start u --mode "$1" --interval 300ms
	usaged_tap u 3600 usage/
	[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
	py=$(readlink -f /usr/bin/python3)
	sh=$(readlink -f "$(command -v sh)")
	# A shell that spins until told, then becomes python3 (same pid, same start time).
	wb_spawn morph sh -c "while [ ! -e '$BATS_TEST_TMPDIR/go' ]; do :; done; exec /usr/bin/python3 -c 'while True: pass'"
	wb_wait_for 30 exe_is "$PID_morph" sh "$sh"
	touch "$BATS_TEST_TMPDIR/go"
	wb_wait_for 30 exe_is "$PID_morph" python3 "$py"
	[ "$py" != "$sh" ]
}

@test "procfs: a busy shell's exe is the shell's binary" {
	exe_of_busy_shell procfs
}

@test "bpf: a busy shell's exe is the shell's binary" {
	usaged_need_bpf
	exe_of_busy_shell bpf
}

@test "procfs: a process that execs gets its new exe" {
	exe_after_exec procfs
}

@test "bpf: a process that execs gets its new exe" {
	usaged_need_bpf
	exe_after_exec bpf
}
