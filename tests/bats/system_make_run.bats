#!/usr/bin/env bats
# make run (scripts/run.sh) on a machine with no meter: all five stages start,
# /metrics serves model-mode energy within 30 s, and SIGINT stops them cleanly.

load helper

teardown() {
	[ -n "${RUN_PID:-}" ] && kill -TERM -- "-$RUN_PID" 2>/dev/null
	wb_kill_all
}

@test "make run serves /metrics within 30 s with no meter and stops cleanly on SIGINT" {
	[ "$(id -u)" -eq 0 ] || skip "needs root for usaged's eBPF (procfs mode is tested elsewhere)"
	port=$((20000 + RANDOM % 20000))
	build=$BATS_TEST_TMPDIR/build
	mkdir -p "$build"
	for b in "$WB_BUILD"/wattbus "$WB_BUILD"/wattbus-*; do ln -s "$b" "$build/"; done
	# Start it in its own process group with SIGINT at its default, as a terminal would.
	cat >"$BATS_TEST_TMPDIR/start.py" <<-'PY'
		import os, signal, subprocess, sys
		p = subprocess.Popen(sys.argv[1:], preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL), os.setpgrp()),
		                     stdout=open(os.environ["OUT"], "w"), stderr=subprocess.STDOUT)
		print(p.pid, flush=True)
		sys.exit(p.wait())
	PY
	OUT=$BATS_TEST_TMPDIR/run.out WB_BUILD=$build WATTBUS_LISTEN=127.0.0.1:$port \
		python3 "$BATS_TEST_TMPDIR/start.py" "$WB_ROOT/scripts/run.sh" >"$BATS_TEST_TMPDIR/pid" &
	starter=$!
	wb_wait_for 5 test -s "$BATS_TEST_TMPDIR/pid"
	RUN_PID=$(cat "$BATS_TEST_TMPDIR/pid")
	start=$SECONDS
	wb_wait_for 30 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^kepler_node_cpu_joules_total{.*zone=\"package\"'"
	echo "metrics after $((SECONDS - start)) s"
	wb_wait_for 20 grep -q "Ctrl-C stops everything" "$BATS_TEST_TMPDIR/run.out"
	run cat "$BATS_TEST_TMPDIR/run.out"
	assert_output --partial "meter:   none found"
	assert_output --partial "energy:  model"
	assert_output --partial "metrics: http://localhost:$port/metrics"
	for s in powerd usaged alignd estimd exportd; do pgrep -f "$build/wattbus-$s" >/dev/null; done

	kill -INT -- "-$RUN_PID"
	rc=0
	wait "$starter" || rc=$?
	[ "$rc" -eq 0 ]
	run cat "$BATS_TEST_TMPDIR/run.out"
	for s in powerd usaged alignd estimd exportd; do
		assert_output --partial "[$s] wattbus-$s: info: stopping on"
	done
	assert_output --partial "wattbus: stopped"
	refute_output --partial "exited on its own"
	! pgrep -f "$build/wattbus-" >/dev/null
}

@test "make run reports a stage that dies" {
	[ "$(id -u)" -eq 0 ] || skip "needs root for usaged's eBPF"
	port=$((20000 + RANDOM % 20000))
	build=$BATS_TEST_TMPDIR/build
	mkdir -p "$build"
	for b in "$WB_BUILD"/wattbus "$WB_BUILD"/wattbus-*; do ln -s "$b" "$build/"; done
	WB_BUILD=$build WATTBUS_LISTEN=127.0.0.1:$port WATTBUS_RUN_FOR=12 \
		wb_spawn run "$WB_ROOT/scripts/run.sh"
	wb_wait_for 20 grep -q "Ctrl-C stops everything" "$BATS_TEST_TMPDIR/run.log"
	pkill -KILL -f "$build/wattbus-alignd"
	wb_wait_for 10 grep -q "wattbus-alignd exited on its own with status 137" "$BATS_TEST_TMPDIR/run.log"
	rc=0
	wait "$PID_run" || rc=$?
	[ "$rc" -eq 1 ]
}
