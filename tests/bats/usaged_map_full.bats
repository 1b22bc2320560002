#!/usr/bin/env bats
# A full procs map is counted and logged, not silent, and usaged goes on
# publishing; entries freed by exits make room again.
load helper
load usaged_helper

teardown() {
	[ -n "${WAKERS:-}" ] && kill $WAKERS 2>/dev/null
	wb_kill_all
}

@test "bpf: more processes than max_procs: bpf_map_full counted, a warning logged, still publishing" {
	usaged_need_bpf
	usaged_start u --mode bpf --interval 300ms --max_procs 64
	usaged_tap u 20 usage/ stat/
	WAKERS=""
	for ((i = 0; i < 100; i++)); do
		sh -c 'while :; do sleep 0.05; done' &
		WAKERS="$WAKERS $!"
	done
	sleep 2.5
	tap=$(usaged_tapfile u)
	full=$($TAPQ "$tap" stat bpf_map_full)
	entries=$($TAPQ "$tap" stat bpf_map_entries)
	echo "map full $full times, $entries entries"
	[ "$full" -gt 0 ]
	[ "$entries" -le 64 ]
	run grep -c "bpf procs map full (64 entries)" "$BATS_TEST_TMPDIR/u.log"
	[ "$output" -ge 1 ]
	[ "$output" -eq 1 ] # once a minute at most
	kill $WAKERS
	sleep 2
	# every waker that got an entry was published as exited (and its entry retired)
	read -r listed exited < <($TAPQ "$tap" pids $WAKERS)
	WAKERS=""
	echo "wakers listed $listed, exited $exited"
	[ "$listed" -gt 0 ]
	[ "$listed" -lt 100 ]
	[ "$exited" -eq "$listed" ]
	kill -0 "$PID_u"
	run $TAPQ "$tap" check
	assert_success
}
