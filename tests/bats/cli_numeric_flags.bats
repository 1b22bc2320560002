#!/usr/bin/env bats
# Every numeric flag of the wattbus tool refuses a value that is not wholly a
# number in its range with a usage error (exit 2) naming the flag and the value,
# before it connects to anything.

load helper

# refused CMD FLAG VALUE [ARGS...]: exit 2, and the message names the flag and the value.
refused() {
	local cmd=$1 flag=$2 value=$3
	shift 3
	run timeout 20 "$WATTBUS" "$cmd" "$flag" "$value" "$@" </dev/null
	[ "$status" -eq 2 ] || fail "wattbus $cmd $flag '$value': exit $status, want 2: $output"
	assert_output --partial "wattbus $cmd: $flag: "
	assert_output --partial "$value"
}

@test "counts: not a number, zero, negative or with trailing letters" {
	ep=$(wb_ep none)
	for v in x 0 2x -1 1.5 ''; do
		refused tap --count "$v" --timeout 1s "$ep"
		refused record --count "$v" --duration 1s "$ep" "$BATS_TEST_TMPDIR/r.rec"
		refused top --count "$v" --timeout 1s "$ep"
	done
}

@test "top --rows and --width, replay --speed" {
	ep=$(wb_ep none)
	for v in x 0 2x -3; do
		refused top --rows "$v" --once --timeout 1s "$ep"
		refused top --width "$v" --once --timeout 1s "$ep"
		refused replay --speed "$v" "$BATS_TEST_TMPDIR/none.rec" "$ep"
	done
	refused replay --speed inf "$BATS_TEST_TMPDIR/none.rec" "$ep"
}

@test "durations: every duration flag" {
	ep=$(wb_ep none)
	for v in bogus 2x -1s; do
		refused tap --timeout "$v" "$ep"
		refused record --duration "$v" "$ep" "$BATS_TEST_TMPDIR/r.rec"
		refused top --timeout "$v" "$ep"
		refused pub --wait "$v" "$ep"
		refused pub --interval "$v" "$ep"
		refused replay --wait "$v" "$BATS_TEST_TMPDIR/none.rec" "$ep"
		refused probe --duration "$v" --sub "$ep"
		refused probe --spacing "$v"
		for f in --duration --slot --max-lag --window; do
			refused compare "$f" "$v" --sub "$ep" a b
		done
	done
}

@test "a good count is taken: tap --count 2 stops after two messages" {
	ep=$(wb_ep bus)
	"$WATTBUS" tap --count 2 --timeout 30s "$ep" >"$BATS_TEST_TMPDIR/tap.out" 2>&1 &
	tap=$!
	echo $tap >>"$BATS_TEST_TMPDIR/pids"
	for i in 1 2 3; do printf '{"kind":"power","host":"h1","t":%d000000000,"interval_ns":1000000000,"zones":[]}\n' "$i"; done |
		"$WATTBUS" pub --wait 10s --interval 100ms "$ep" >/dev/null
	wait "$tap"
	[ "$(grep -c '"topic"' "$BATS_TEST_TMPDIR/tap.out")" -eq 2 ]
}

teardown() {
	wb_kill_all
}
