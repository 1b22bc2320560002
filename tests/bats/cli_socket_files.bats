#!/usr/bin/env bats
# An ipc socket file lives as long as its publisher: a daemon or `wattbus pub`
# removes the file it bound when it stops cleanly, and leaves alone a file that
# a newer process bound at the same path.

load helper

teardown() {
	wb_kill_all
}

@test "wattbus pub removes its socket file when it is done" {
	sock=$BATS_TEST_TMPDIR/p.sock
	echo '{"kind":"power","host":"h1","t":1000000000,"interval_ns":1000000000,"zones":[]}' |
		"$WATTBUS" pub --wait 100ms "ipc://$sock"
	[ ! -e "$sock" ]
}

@test "a daemon removes its socket file on SIGTERM" {
	rt=$BATS_TEST_TMPDIR/rt
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$rt"
	wb_wait_for 10 test -S "$rt/alignd.sock"
	kill -TERM "$PID_alignd"
	rc=0
	wait "$PID_alignd" || rc=$?
	[ "$rc" -eq 0 ]
	[ ! -e "$rt/alignd.sock" ]
}

@test "a socket file bound anew by another process is not removed" {
	rt=$BATS_TEST_TMPDIR/rt
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$rt"
	wb_wait_for 10 test -S "$rt/alignd.sock"
	# Stand-in for a newer instance that took the path over (ZeroMQ unlinks and binds again).
	mv "$rt/alignd.sock" "$rt/old.sock"
	python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$rt/alignd.sock"
	kill -TERM "$PID_alignd"
	wait "$PID_alignd" || true
	[ -S "$rt/alignd.sock" ]
}
