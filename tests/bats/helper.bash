# Shared setup for the bats suites: paths, bats-support/bats-assert, and
# daemons started in the test's temp dir that teardown always kills.
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
bats_require_minimum_version 1.5.0 # run ! and run -N

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
		# A process group of its own, as setsid gives a program (job control puts a background
		# job in one), so that wb_kill_all stops the function's children too: a pipeline such
		# as `feed | wattbus pub` was left running after the test, adding load to later ones.
		local m=0
		[[ $- == *m* ]] && m=1
		set -m
		"$@" >"$BATS_TEST_TMPDIR/$name.log" 2>&1 &
		[ $m -eq 1 ] || set +m
	else
		setsid "$@" >"$BATS_TEST_TMPDIR/$name.log" 2>&1 &
	fi
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	eval "PID_${name//[^a-zA-Z0-9_]/_}=$!"
}

# A free TCP port on 127.0.0.1 (free when asked).
wb_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Something else holds 127.0.0.1:PORT (listening, as "holder" until teardown); returns once it does.
wb_hold_port() {
	wb_spawn holder python3 -c 'import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("listening", flush=True)
time.sleep(3600)' "$1"
	wb_wait_for 30 grep -q listening "$BATS_TEST_TMPDIR/holder.log"
}

# stat_counter TAP_FILE NAME: counter NAME of the last stat message in a wb_tap file (0 if absent).
stat_counter() {
	grep '"topic":"stat/' "$1" | tail -1 | jq -r --arg n "$2" '[.msg.counters[] | select(.name == $n) | .value][0] // 0'
}
counter_at_least() { [ "$(stat_counter "$1" "$2")" -ge "$3" ]; }

# wb_stop_cancelled NAME WHAT: SIGTERM to NAME (a wb_spawn name), which has a job (lib/job.h)
# in flight; it exits 0 before the deadline (wb_stop), its log saying it cancelled the job
# (whose name holds WHAT) and that none was left running.
wb_stop_cancelled() {
	local pidvar="PID_$1"
	kill -0 "${!pidvar}"
	wb_stop "$1"
	run grep "stopping: cancelled the job" "$BATS_TEST_TMPDIR/$1.log"
	assert_output --partial "$2"
	run grep "still runs" "$BATS_TEST_TMPDIR/$1.log"
	assert_failure
}

# Kill everything wb_spawn started, with their process groups (call from teardown).
wb_kill_all() {
	[ -f "$BATS_TEST_TMPDIR/pids" ] || return 0
	while read -r p; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/pids"
	# Give them up to 5 s to stop on SIGTERM (a stage saves its state then), no longer than they take.
	local end=$((SECONDS + 5))
	while [ $SECONDS -lt $end ] && wb_any_alive "$BATS_TEST_TMPDIR/pids"; do sleep 0.05; done
	while read -r p; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/pids"
	rm -f "$BATS_TEST_TMPDIR/pids"
}

# Whether a process group listed in FILE still has a live member (a zombie is not one: an
# orphan's is reaped by init when it gets to it).
wb_any_alive() {
	ps -eo pgid=,stat= | awk 'NR == FNR { want[$1] = 1; next } ($1 in want) && $2 !~ /^Z/ { found = 1 } END { exit !found }' "$1" -
}

# The shortest deadline a wait gets, in seconds. A deadline only bounds how long a failing
# test hangs: a test never passes by waiting less, and a loaded machine (make check runs
# suites in parallel, perhaps beside other work) can take many times what an idle one does.
WB_WAIT_MIN=${WB_WAIT_MIN:-30}

# Wait until a command succeeds, for at most $1 seconds (at least WB_WAIT_MIN), trying it
# every 50 ms (every $WB_POLL seconds where that is set: a test that measures the machine's
# CPU while it waits polls less often, so that its own polling stays out of the figures).
# Tests wait for the condition they need this way, never for a fixed time.
wb_wait_for() {
	local secs=$1
	shift
	[ "$secs" -ge "$WB_WAIT_MIN" ] || secs=$WB_WAIT_MIN
	local end=$((SECONDS + secs))
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep "${WB_POLL:-0.05}"
	done
}

# wb_put FILE LINE...: FILE now holds the LINEs, written aside and renamed into place, so that
# a daemon reading it (as it reads sysfs or /proc) never sees a half-written value.
wb_put() {
	local f=$1
	shift
	mkdir -p "$(dirname "$f")"
	printf '%s\n' "$@" >"$f.tmp.$$" && mv -f "$f.tmp.$$" "$f"
}

# Wait until FILE has at least N lines (or N lines matching PATTERN), for at most SECS.
# (wb_wait_for 10 test "$(wc -l <f)" -ge N would count only once, before waiting.)
wb_wait_lines() {
	local file=$1 n=$2 secs=${3:-10} pattern=${4:-}
	wb_wait_for "$secs" bash -c '[ -f "$0" ] && [ "$(grep -c -- "${2:-}" "$0")" -ge "$1" ]' "$file" "$n" "$pattern"
}

# wb_tap NAME ENDPOINT PREFIX...: `wattbus tap` of a stage's ENDPOINT into NAME.log (the
# messages under the PREFIXes, one JSON line each), returning once its subscription is live,
# so that nothing the stage publishes next is missed. The tap also takes stat/ (NAME.all
# has every line) and waits for the first one there: start the stage with a short --stat_interval.
wb_tap() {
	local name=$1 ep=$2
	shift 2
	wb_spawn "$name" bash -c '"$0" tap "$1" "${@:3}" stat/ | tee "$2" | grep --line-buffered -v "^{\"topic\":\"stat/"' \
		"$WATTBUS" "$ep" "$BATS_TEST_TMPDIR/$name.all" "$@"
	wb_wait_lines "$BATS_TEST_TMPDIR/$name.all" 1 30 '"topic":"stat/' || {
		echo "wb_tap: no stat message from $ep" >&2
		return 1
	}
}

# wb_stop NAME: SIGTERM to NAME (a wb_spawn name), which must exit within 30 s with status 0.
wb_stop() {
	local pidvar="PID_$1" rc=0
	local pid=${!pidvar}
	kill -TERM "$pid"
	wb_wait_for 30 bash -c '! kill -0 "$0" 2>/dev/null' "$pid"
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ] || fail "$1 exited $rc"
}

# An ipc endpoint in the test's temp dir.
wb_ep() {
	echo "ipc://$BATS_TEST_TMPDIR/$1.sock"
}

# Debian's python3 has python3-zmq and python3-msgpack; a python3 earlier on
# PATH (pyenv, a virtualenv) may not.
python3() { /usr/bin/python3 "$@"; }
export -f python3
