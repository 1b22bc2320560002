#!/usr/bin/env bats
# A full procs map is counted and logged, not silent, and usaged goes on
# publishing; entries freed by exits make room again, and every process that
# was listed is published as exited once it is gone.
load helper
load usaged_helper

teardown() {
	[ -n "${WAKERS:-}" ] && kill $WAKERS 2>/dev/null
	wb_kill_all
}

map_full_seen() {
	local full
	full=$($TAPQ "$(usaged_tapfile u)" stat bpf_map_full)
	[ "$full" != none ] && [ "$full" -gt 0 ]
}

# Every waker listed (as the one started before the kill, not a later process reusing its pid) is listed as exited.
wakers_all_exited() {
	read -r listed exited < <($TAPQ "$(usaged_tapfile u)" pids --started-before "$KILL_NS" $WAKERS)
	[ "$listed" -gt 0 ] && [ "$exited" -eq "$listed" ]
}

@test "bpf: more processes than max_procs: bpf_map_full counted, a warning logged, still publishing" {
	usaged_need_bpf
	t0=$SECONDS
	usaged_start u --mode bpf --interval 300ms --max_procs 64
	# the capture runs until teardown; the test waits for what it needs, however loaded the host
	usaged_tap u 3600 usage/ stat/
	WAKERS=""
	for ((i = 0; i < 100; i++)); do
		sh -c 'while :; do sleep 0.05; done' &
		WAKERS="$WAKERS $!"
	done
	wb_wait_for 120 map_full_seen
	tap=$(usaged_tapfile u)
	full=$($TAPQ "$tap" stat bpf_map_full)
	entries=$($TAPQ "$tap" stat bpf_map_entries)
	echo "map full $full times, $entries entries"
	[ "$full" -gt 0 ]
	[ "$entries" -le 64 ]
	KILL_NS=$(usaged_boottime_ns)
	kill $WAKERS
	# every waker listed was published as exited (with its entry retired, which bpf_map_entries shows)
	wb_wait_for 120 wakers_all_exited || true
	read -r listed exited < <($TAPQ "$tap" pids --started-before "$KILL_NS" $WAKERS)
	WAKERS=""
	echo "wakers listed $listed, exited $exited"
	[ "$listed" -gt 0 ]
	[ "$listed" -lt 100 ]
	[ "$exited" -eq "$listed" ]
	run grep -c "bpf procs map full ([0-9]* entries)" "$BATS_TEST_TMPDIR/u.log"
	echo "$output warnings in $((SECONDS - t0)) s"
	[ "$output" -ge 1 ]
	[ "$output" -le $((1 + (SECONDS - t0) / 60)) ] # once a minute at most
	kill -0 "$PID_u"
	run $TAPQ "$tap" check
	assert_success
}
