#!/usr/bin/env bats
# usaged's keys: bounds and choices are enforced with exit 2 and a message naming the key.
load helper
load usaged_helper

teardown() {
	wb_kill_all
}

@test "defaults check out with no config file" {
	run "$USAGED" -n --runtime_dir "$BATS_TEST_TMPDIR"
	assert_success
}

@test "interval below 100ms is refused" {
	run "$USAGED" -n --interval 50ms
	assert_failure 2
	assert_output --partial "interval"
	run "$USAGED" -n --interval 100ms --runtime_dir "$BATS_TEST_TMPDIR"
	assert_success
}

@test "mode must be auto, bpf or procfs" {
	run "$USAGED" -n --mode ebpf
	assert_failure 2
	assert_output --partial "mode"
}

@test "max_procs, full_every, retire_after bounds" {
	run "$USAGED" -n --max_procs 10
	assert_failure 2
	run "$USAGED" -n --full_every 0
	assert_failure 2
	run "$USAGED" -n --retire_after 0
	assert_failure 2
	run "$USAGED" -n --full_every 1 --retire_after 5000
	assert_failure 2
	assert_output --partial "retire_after"
}

@test "a [usaged] section in a file, flags override it" {
	printf '[usaged]\ninterval = 250ms\nmode = procfs\nfull_every = 4\n' >"$BATS_TEST_TMPDIR/w.conf"
	run "$USAGED" -n -c "$BATS_TEST_TMPDIR/w.conf" --runtime_dir "$BATS_TEST_TMPDIR"
	assert_success
	usaged_start u -c "$BATS_TEST_TMPDIR/w.conf" --full_every 2
	grep -q "running (mode procfs)" "$BATS_TEST_TMPDIR/u.log"
	"$WATTBUS" tap --count 5 --timeout 60s "$(wb_ep u)" usage/ >"$BATS_TEST_TMPDIR/tap"
	run grep -c '"interval_ns":250000000' "$BATS_TEST_TMPDIR/tap"
	assert_output 5
	# full snapshots every 2nd message (the flag), not every 4th (the file)
	run $TAPQ "$BATS_TEST_TMPDIR/tap" check
	assert_success
	read -r n fulls <<<"$output"
	[ "$n" -eq 5 ]
	# the tap may join a few messages late on a loaded host: every even seq it saw is full, no odd one
	echo "full at seq $fulls"
	set -- $fulls
	[ $# -ge 2 ]
	prev=""
	for f in "$@"; do
		[ $((f % 2)) -eq 0 ]
		[ -z "$prev" ] || [ "$f" -eq $((prev + 2)) ]
		prev=$f
	done
}

@test "an unknown key is refused with file:line" {
	printf '[usaged]\nintervall = 1s\n' >"$BATS_TEST_TMPDIR/w.conf"
	run "$USAGED" -n -c "$BATS_TEST_TMPDIR/w.conf"
	assert_failure 2
	assert_output --partial "w.conf:2"
}

@test "SIGHUP applies interval, full_every and retire_after at once" {
	printf '[usaged]\ninterval = 200ms\nmode = procfs\nfull_every = 1000\n' >"$BATS_TEST_TMPDIR/w.conf"
	usaged_start u -c "$BATS_TEST_TMPDIR/w.conf"
	usaged_tap u 3600 usage/
	wb_wait_lines "$(usaged_tapfile u)" 2 60 '"kind":"usage"'
	printf '[usaged]\ninterval = 1s\nmode = procfs\nfull_every = 2\nmax_procs = 777\n' >"$BATS_TEST_TMPDIR/w.conf"
	kill -HUP "$PID_u"
	wb_wait_for 5 grep -q "reloaded" "$BATS_TEST_TMPDIR/u.log"
	# only the changed key read at start is named
	grep -q "reload: max_procs keep their old values until a restart" "$BATS_TEST_TMPDIR/u.log"
	tap=$(usaged_tapfile u)
	# four messages at the new interval
	wb_wait_for 60 bash -c '[ "$(grep -c "\"interval_ns\":1000000000" "$0")" -ge 4 ]' "$tap"
	# They come a second apart at least (a timer left at 200 ms would send them closer),
	# and every 2nd is full.
	run python3 -c '
import json, sys
ms = [json.loads(l) for l in open(sys.argv[1]) if "\"kind\":\"usage\"" in l]
ms = [m["msg"] for m in ms]
new = [m for m in ms if m["interval_ns"] == 1000000000]
gaps = [b["t"] - a["t"] for a, b in zip(new, new[1:])]
print("gaps_ms", [g // 1000000 for g in gaps], "full", [m.get("full", False) for m in new])
assert all(g >= 900000000 for g in gaps), gaps
fulls = [m.get("full", False) for m in new]
assert sum(fulls) >= len(fulls) // 2, fulls
' "$tap"
	echo "$output"
	assert_success
	kill -0 "$PID_u"
}
