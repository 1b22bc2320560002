# Shared setup for the bats suites: paths, bats-support/bats-assert, and
# daemons started in the test's temp dir that teardown always kills.
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

WB_BUILD=${WB_BUILD:-$BATS_TEST_DIRNAME/../../build}
WB_ROOT=${WB_ROOT:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
WATTBUS=$WB_BUILD/wattbus

# Start a command in the background, remembering its pid for teardown.
# Usage: wb_spawn NAME cmd args...   (stdout+stderr go to $BATS_TEST_TMPDIR/NAME.log)
# Each command gets its own process group (setsid), so that teardown also stops
# what it started (the two sides of `bash -c 'a | b'`, a daemon's children).
wb_spawn() {
	local name=$1
	shift
	# setsid runs programs, not shell functions: python3 is one here (below).
	[ "$1" = python3 ] && set -- /usr/bin/python3 "${@:2}"
	if declare -F "$1" >/dev/null; then
		"$@" >"$BATS_TEST_TMPDIR/$name.log" 2>&1 &
	else
		setsid "$@" >"$BATS_TEST_TMPDIR/$name.log" 2>&1 &
	fi
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	eval "PID_${name//[^a-zA-Z0-9_]/_}=$!"
}

# Kill everything wb_spawn started, with their process groups (call from teardown).
wb_kill_all() {
	[ -f "$BATS_TEST_TMPDIR/pids" ] || return 0
	while read -r p; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/pids"
	sleep 0.2
	while read -r p; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/pids"
	rm -f "$BATS_TEST_TMPDIR/pids"
}

# Wait until a command succeeds, for at most $1 seconds.
wb_wait_for() {
	local secs=$1
	shift
	local end=$((SECONDS + secs))
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.05
	done
}

# Wait until FILE has at least N lines (or N lines matching PATTERN), for at most SECS.
# (wb_wait_for 10 test "$(wc -l <f)" -ge N would count only once, before waiting.)
wb_wait_lines() {
	local file=$1 n=$2 secs=${3:-10} pattern=${4:-}
	wb_wait_for "$secs" bash -c '[ -f "$0" ] && [ "$(grep -c -- "${2:-}" "$0")" -ge "$1" ]' "$file" "$n" "$pattern"
}

# An ipc endpoint in the test's temp dir.
wb_ep() {
	echo "ipc://$BATS_TEST_TMPDIR/$1.sock"
}

# Debian's python3 has python3-zmq and python3-msgpack; a python3 earlier on
# PATH (pyenv, a virtualenv) may not.
python3() { /usr/bin/python3 "$@"; }
export -f python3
