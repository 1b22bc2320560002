#!/usr/bin/env bats
# An exited process is published with its final values: the CPU it spends
# after sched_process_exit (here tearing down a large address space) is in
# them, however long that takes on a loaded host. Each child is known by its
# pid and start time (PID@TICKS): on a busy host the pids wrap in seconds, and a
# later process given a child's pid is not that child.
load helper
load usaged_helper

teardown() {
	wb_kill_all
}

# Every child published as exited.
kids_exited() {
	local pids
	pids=$(cut -d' ' -f1 "$BATS_TEST_TMPDIR/kids")
	read -r listed exited < <($TAPQ "$(usaged_tapfile u)" pids $pids)
	[ "$exited" -eq "$(wc -l <"$BATS_TEST_TMPDIR/kids")" ]
}

# listings PID: every message listing PID (any process of that pid, to show a reuse),
# one line each: seq start_ns cpu_ns exited.
listings() {
	python3 - "$(usaged_tapfile u)" "${1%@*}" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    m = json.loads(line)["msg"]
    for p in m.get("procs", []) if m.get("kind") == "usage" else []:
        if p["pid"] == int(sys.argv[2]):
            print(m.get("seq"), p.get("start_ns"), p.get("cpu_ns"), p.get("exited", False))
PY
}

@test "bpf: an exit is published with the CPU time spent after sched_process_exit" {
	usaged_need_bpf
	usaged_start u --mode bpf --interval 100ms
	usaged_tap u 3600 usage/ stat/
	wb_wait_lines "$(usaged_tapfile u)" 1 60 '"kind":"usage"'
	python3 "$BATS_TEST_DIRNAME/usaged_bigexit.py" 3 3072 >"$BATS_TEST_TMPDIR/kids"
	wb_wait_for 120 kids_exited || true
	# Shown on failure: how each child's values went out (an exit published early, or a last
	# message missed), what usaged warned of, and its counters of forced exits and of charges
	# without per-thread storage.
	while read -r pid ran; do
		echo "pid $pid ran $ran ns; published (seq start_ns cpu_ns exited):"
		listings "$pid" | tail -n 5
	done <"$BATS_TEST_TMPDIR/kids"
	grep -hi "warn" "$BATS_TEST_TMPDIR/u.log" | tail -n 5 || true
	for stat in bpf_exits bpf_exits_forced bpf_no_task_storage bpf_unpaired_switches procs_exited; do
		echo "$stat $($TAPQ "$(usaged_tapfile u)" stat "$stat")"
	done
	while read -r pid ran; do
		published=$($TAPQ "$(usaged_tapfile u)" cpu "$pid")
		echo "pid $pid: ran $ran ns, published $published"
		# rusage is the scheduler's count to the us; the parent may read it a moment before the
		# child's final switch-out
		[ "$published" != none ]
		[ "$published" -ge $((ran - 2000000)) ]
		[ "$published" -le $((ran + 2000000)) ]
	done <"$BATS_TEST_TMPDIR/kids"
	kids_exited
}
