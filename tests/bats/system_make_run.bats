#!/usr/bin/env bats
# make run (scripts/run.sh): all five stages start, /metrics serves model-mode
# energy within 30 s on a machine with no meter, and a requested stop (Ctrl-C
# in a terminal under make, SIGINT from any parent, at any time, start-up
# included) stops every stage at once and exits 0, with the socket files gone.

load helper

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root for usaged's eBPF (procfs mode is tested elsewhere)"
	port=$((20000 + RANDOM % 20000))
	build=$BATS_TEST_TMPDIR/build
	mkdir -p "$build"
	for b in "$WB_BUILD"/wattbus "$WB_BUILD"/wattbus-*; do ln -s "$b" "$build/"; done
	OUT=$BATS_TEST_TMPDIR/run.out
}

teardown() {
	[ -n "${RUN_PID:-}" ] && kill -TERM -- "-$RUN_PID" 2>/dev/null
	command -v tmux >/dev/null && tmux -S "$BATS_TEST_TMPDIR/tmux" kill-server 2>/dev/null
	wb_kill_all
}

# start_run dfl|ign [VAR=value...]: run.sh in a process group of its own, as a
# job of a shell would be, with SIGINT at its default (dfl) or ignored (ign, as
# in a background job of a script); sets RUN_PID and STARTER.
start_run() {
	local sigint=$1
	shift
	cat >"$BATS_TEST_TMPDIR/start.py" <<-'PY'
		import os, signal, subprocess, sys
		sig = signal.SIG_DFL if sys.argv[1] == "dfl" else signal.SIG_IGN
		p = subprocess.Popen(sys.argv[2:], preexec_fn=lambda: (signal.signal(signal.SIGINT, sig), os.setpgrp()),
		                     stdin=subprocess.DEVNULL, stdout=open(os.environ["OUT"], "w"), stderr=subprocess.STDOUT)
		print(p.pid, flush=True)
		sys.exit(p.wait())
	PY
	env OUT="$OUT" WB_BUILD="$build" WATTBUS_LISTEN="127.0.0.1:$port" "$@" \
		setsid /usr/bin/python3 "$BATS_TEST_TMPDIR/start.py" "$sigint" "$WB_ROOT/scripts/run.sh" >"$BATS_TEST_TMPDIR/pid" </dev/null &
	STARTER=$!
	wb_wait_for 10 test -s "$BATS_TEST_TMPDIR/pid"
	RUN_PID=$(cat "$BATS_TEST_TMPDIR/pid")
}

# A clean stop: exit 0, every stage said it stopped, none "exited on its own", no stage or socket left.
assert_clean_stop() {
	local rc=$1
	run cat "$OUT"
	[ "$rc" -eq 0 ] || fail "exit $rc: $output"
	for s in powerd usaged alignd estimd exportd; do
		assert_output --partial "[$s] wattbus-$s: info: stopping on"
	done
	assert_output --partial "wattbus: stopped"
	refute_output --partial "exited on its own"
	! pgrep -f "$build/wattbus-" >/dev/null
	run ls "$build/run"
	refute_output --partial ".sock"
}

@test "make run serves /metrics with no meter and stops cleanly on SIGINT" {
	start_run dfl
	start=$SECONDS
	wb_wait_for 90 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^kepler_node_cpu_joules_total{.*zone=\"package\"'"
	echo "metrics after $((SECONDS - start)) s"
	wb_wait_for 30 grep -q "Ctrl-C stops everything" "$OUT"
	run cat "$OUT"
	assert_output --partial "meter:   none found"
	assert_output --partial "energy:  model (model "
	assert_output --partial "metrics: http://localhost:$port/metrics"
	assert_output --partial "watch:   $build/wattbus top"
	for s in powerd usaged alignd estimd exportd; do pgrep -f "$build/wattbus-$s" >/dev/null; done
	# The banner's top finds the sockets by itself.
	run timeout 60 "$build/wattbus" top --plain --once --timeout 30s
	assert_success
	assert_line --regexp '^host '

	kill -INT -- "-$RUN_PID"
	rc=0
	wait "$STARTER" || rc=$?
	assert_clean_stop "$rc"
}

@test "SIGINT during start-up stops at once: no start-up checks after it, no banner, exit 0" {
	start_run dfl
	# The stages are up (each logs its version once it takes signals through its signalfd: a
	# stage still loading before that dies of SIGINT without a word); run.sh now waits for
	# their first stat and estimate messages.
	for s in powerd usaged alignd estimd exportd; do
		wb_wait_for 30 grep -q "\[$s\] wattbus-$s: info: version" "$OUT"
	done
	kill -INT -- "-$RUN_PID"
	rc=0
	wait "$STARTER" || rc=$?
	assert_clean_stop "$rc"
	run cat "$OUT"
	refute_output --partial "wattbus is running"
}

@test "SIGINT from a parent that ignores it for its jobs (a script's background job) is a clean stop" {
	start_run ign
	wb_wait_for 30 grep -q "Ctrl-C stops everything" "$OUT"
	kill -INT -- "-$RUN_PID"
	rc=0
	wait "$STARTER" || rc=$?
	assert_clean_stop "$rc"
}

@test "Ctrl-C in a terminal: make run exits 0, make reports no Interrupt" {
	command -v tmux >/dev/null || skip "needs tmux"
	# The run target as the Makefile has it, on the test's build dir.
	printf 'run:\n\tWB_BUILD=%s WATTBUS_LISTEN=127.0.0.1:%s %s/scripts/run.sh >%s 2>&1\n' \
		"$build" "$port" "$WB_ROOT" "$OUT" >"$BATS_TEST_TMPDIR/Makefile"
	tmux -S "$BATS_TEST_TMPDIR/tmux" new-session -d -s wb -x 120 -y 20 \
		"make -f $BATS_TEST_TMPDIR/Makefile run; echo make-exited-\$?; sleep 600"
	wb_wait_for 60 grep -q "Ctrl-C stops everything" "$OUT"
	tmux -S "$BATS_TEST_TMPDIR/tmux" send-keys -t wb C-c
	wb_wait_for 60 bash -c "tmux -S '$BATS_TEST_TMPDIR/tmux' capture-pane -p -t wb | grep -q make-exited-"
	run tmux -S "$BATS_TEST_TMPDIR/tmux" capture-pane -p -t wb
	echo "$output"
	refute_output --partial "Interrupt"
	assert_output --partial "make-exited-0"
	assert_clean_stop 0
}

@test "WATTBUS_SYSFS_ROOT: powerd reads a fake meter there; the banner says measured and names no model" {
	sys=$BATS_TEST_TMPDIR/sys
	touch "$BATS_TEST_TMPDIR/meter-on"
	wb_spawn meter python3 "$WB_ROOT/tests/bats/system_fake_meter.py" "$sys" "$BATS_TEST_TMPDIR/meter-on" 20 5
	wb_wait_for 10 test -e "$sys/class/powercap/intel-rapl:0/energy_uj"
	start_run dfl WATTBUS_SYSFS_ROOT="$sys"
	wb_wait_for 60 grep -q "Ctrl-C stops everything" "$OUT"
	run cat "$OUT"
	assert_output --partial "meter:   rapl (sysfs at $sys)"
	assert_line "  energy:  measured"
	refute_output --partial "(model "
	kill -INT -- "-$RUN_PID"
	rc=0
	wait "$STARTER" || rc=$?
	assert_clean_stop "$rc"
}

@test "WATTBUS_SOURCE=fake: simulated watts from the CPU load, marked as simulated everywhere" {
	start_run dfl WATTBUS_SOURCE=fake
	wb_wait_for 60 grep -q "Ctrl-C stops everything" "$OUT"
	run cat "$OUT"
	assert_output --partial "meter:   fake: SIMULATED from the CPU load, not measured"
	assert_output --partial "fake: SIMULATED power, not measured"
	assert_line "  energy:  measured"
	wb_wait_for 30 bash -c 'curl -sf "http://127.0.0.1:$0/metrics" >"$1" && grep -q "^kepler_node_cpu_watts{.*zone=\"package\"" "$1"' "$port" "$BATS_TEST_TMPDIR/metrics"
	grep -q 'wattbus_stage_info{.*stage="powerd".*mode="fake"} 1' "$BATS_TEST_TMPDIR/metrics"
	# package: 10 W idle + 5 W per busy CPU, whatever the load: within [10, 10 + 5 x CPUs]
	w=$(sed -n 's/^kepler_node_cpu_watts{.*zone="package",path="simulated:\/proc\/stat"} //p' "$BATS_TEST_TMPDIR/metrics")
	python3 -c 'import sys; w, n = float(sys.argv[1]), int(sys.argv[2]); sys.exit(0 if 10 - 0.01 <= w <= 10 + 5 * n + 0.01 else 1)' "$w" "$(nproc)"
	kill -INT -- "-$RUN_PID"
	rc=0
	wait "$STARTER" || rc=$?
	assert_clean_stop "$rc"
}

@test "make run reports a stage that dies, and exits 1" {
	start_run dfl WATTBUS_RUN_FOR=20
	wb_wait_for 60 grep -q "Ctrl-C stops everything" "$OUT"
	pkill -KILL -f "$build/wattbus-alignd"
	wb_wait_for 20 grep -q "wattbus-alignd exited on its own with status 137" "$OUT"
	rc=0
	wait "$STARTER" || rc=$?
	[ "$rc" -eq 1 ]
}

@test "make run stops when exportd cannot have its port: names the stage and the address, no banner, exit 1" {
	wb_hold_port "$port"
	start_run dfl
	rc=0
	wait "$STARTER" || rc=$?
	run cat "$OUT"
	[ "$rc" -eq 1 ] || fail "exit $rc: $output"
	assert_output --partial "[exportd] wattbus-exportd: error: http: cannot listen on 127.0.0.1:$port"
	assert_output --partial "wattbus: wattbus-exportd failed at start-up with status 1"
	refute_output --partial "wattbus is running"
	refute_output --partial "metrics: http://"
	refute_output --partial "exited on its own"
	# (a stage stopped before its signal handling is up dies of SIGTERM without a word)
	assert_output --partial "wattbus: stopped"
	! pgrep -f "$build/wattbus-" >/dev/null
}
