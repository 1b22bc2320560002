#!/usr/bin/env bats
# A subscriber's ipc endpoint whose socket file does not exist: tap, record and
# top say so at once and fail (exit 1) when it never appears within their
# timeout; one that appears later works as before. `wattbus top` with no
# endpoint looks where the stages put their sockets, make run's build/run/
# included, and says where it looked when it finds nothing.

load helper

EST='{"kind":"estimate","host":"h1","t0":1800000000000000000,"t1":1800000002000000000,"mode":"measured","ncpu":4,"cpu_usage_ratio":0.5,"zones":[{"name":"package-0","zone":"package","energy_uj":20000000,"active_uj":12000000,"idle_uj":8000000}],"procs":[]}'

teardown() {
	wb_kill_all
}

@test "tap --timeout on a missing socket, or one a stopped process left: names it and exits 1" {
	sock=$BATS_TEST_TMPDIR/nothing/here.sock
	run timeout 20 "$WATTBUS" tap --timeout 1s "ipc://$sock"
	[ "$status" -eq 1 ] || fail "exit $status: $output"
	assert_output --partial "$sock: no such socket after 1.0 s"
	stale=$BATS_TEST_TMPDIR/stale.sock
	python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$stale"
	run timeout 20 "$WATTBUS" tap --timeout 1s "ipc://$stale"
	[ "$status" -eq 1 ] || fail "exit $status: $output"
	assert_output --partial "$stale: a socket left by a stopped process, nothing listens there after 1.0 s"
}

@test "record --duration on a missing socket: names it and exits 1" {
	sock=$BATS_TEST_TMPDIR/nothing.sock
	run timeout 20 "$WATTBUS" record --duration 1s "ipc://$sock" "$BATS_TEST_TMPDIR/r.rec"
	[ "$status" -eq 1 ] || fail "exit $status: $output"
	assert_output --partial "$sock"
	assert_output --partial "no such socket"
}

@test "top --timeout on a missing socket: names it and exits 1" {
	sock=$BATS_TEST_TMPDIR/nothing.sock
	run timeout 20 "$WATTBUS" top --plain --timeout 1s "ipc://$sock"
	[ "$status" -eq 1 ] || fail "exit $status: $output"
	assert_output --partial "$sock"
	assert_output --partial "no such socket"
}

@test "a socket that appears after tap started is read as before; to a terminal tap says at once that it is not there yet" {
	ep=$(wb_ep later)
	# script(1) gives tap a terminal: the note is for a person, not for a log a script parses.
	script -qec "$WATTBUS tap --count 1 --timeout 60s $ep" /dev/null >"$BATS_TEST_TMPDIR/tap.out" 2>&1 &
	tap=$!
	echo $tap >>"$BATS_TEST_TMPDIR/pids"
	wb_wait_for 20 grep -q "later.sock: no such socket yet" "$BATS_TEST_TMPDIR/tap.out"
	echo '{"kind":"power","host":"h1","t":1000000000,"interval_ns":1000000000,"zones":[]}' |
		"$WATTBUS" pub --wait 20s "$ep" >/dev/null
	rc=0
	wait "$tap" || rc=$?
	[ "$rc" -eq 0 ]
	grep -q '"topic":"power/h1"' "$BATS_TEST_TMPDIR/tap.out"
}

@test "without a terminal, a tap that waits for its socket prints only the messages" {
	ep=$(wb_ep later)
	wb_spawn tap "$WATTBUS" tap --count 1 --timeout 60s "$ep"
	echo '{"kind":"power","host":"h1","t":1000000000,"interval_ns":1000000000,"zones":[]}' |
		"$WATTBUS" pub --wait 20s "$ep" >/dev/null
	wait "$PID_tap"
	run cat "$BATS_TEST_TMPDIR/tap.log"
	assert_output --regexp '^\{"topic":"power/h1",.*\}$'
}

@test "top with no endpoint and nothing running (a socket a stopped stage left counts as nothing) says at once where it looked; exits 1 at --timeout" {
	dir=$BATS_TEST_TMPDIR/empty
	mkdir -p "$dir"
	WATTBUS_RUNTIME_DIR=$dir "$WATTBUS" top --plain >"$BATS_TEST_TMPDIR/top.out" 2>&1 &
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	wb_wait_for 20 grep -q "looked for $dir/estimd.sock" "$BATS_TEST_TMPDIR/top.out"
	WATTBUS_RUNTIME_DIR=$dir run timeout 20 "$WATTBUS" top --plain --timeout 1s
	[ "$status" -eq 1 ] || fail "exit $status: $output"
	assert_output --partial "no estimd socket after 1.0 s: looked for $dir/estimd.sock"
	python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$dir/estimd.sock"
	WATTBUS_RUNTIME_DIR=$dir run timeout 20 "$WATTBUS" top --plain --timeout 1s
	[ "$status" -eq 1 ] || fail "exit $status: $output"
	assert_output --partial "no estimd socket after 1.0 s: looked for $dir/estimd.sock"
	# Without WATTBUS_RUNTIME_DIR it looks beside the program (make run's build/run/), then in the default runtime dir.
	run env -u WATTBUS_RUNTIME_DIR XDG_RUNTIME_DIR="$dir" timeout 20 "$WATTBUS" top --plain --timeout 1s
	[ "$status" -eq 1 ] || fail "exit $status: $output"
	assert_output --partial "looked for $WB_BUILD/run/estimd.sock and "
}

@test "top with no endpoint reads WATTBUS_RUNTIME_DIR/estimd.sock" {
	dir=$BATS_TEST_TMPDIR/rt
	echo "$EST" | "$WATTBUS" pub --wait 30s "ipc://$dir/estimd.sock" >/dev/null &
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	wb_wait_for 10 test -S "$dir/estimd.sock"
	WATTBUS_RUNTIME_DIR=$dir run timeout 40 "$WATTBUS" top --plain --once --timeout 30s
	[ "$status" -eq 0 ] || fail "exit $status: $output"
	assert_line --regexp '^host h1 '
}

@test "top with no endpoint finds make run's sockets beside the wattbus it was started as (build/run/)" {
	build=$BATS_TEST_TMPDIR/build
	mkdir -p "$build/run"
	ln -s "$WATTBUS" "$build/wattbus"
	echo "$EST" | "$WATTBUS" pub --wait 30s "ipc://$build/run/estimd.sock" >/dev/null &
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	wb_wait_for 10 test -S "$build/run/estimd.sock"
	run env -u WATTBUS_RUNTIME_DIR XDG_RUNTIME_DIR="$BATS_TEST_TMPDIR/xdg" timeout 40 "$build/wattbus" top --plain --once --timeout 30s
	[ "$status" -eq 0 ] || fail "exit $status: $output"
	assert_line --regexp '^host h1 '
}
