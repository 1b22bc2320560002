#!/usr/bin/env bats
# Thousands of short-lived processes: each is published once as exited, and
# their entries leave the BPF map (no leak), so the map stays near its size
# before.
load helper
load usaged_helper

teardown() {
	wb_kill_all
}

stat_of() {
	$TAPQ "$(usaged_tapfile u)" stat "$1"
}

# All runs published as exited, retired, and the map back near its size (stat messages lag behind).
settled() {
	published=$($TAPQ "$(usaged_tapfile u)" exited "$NAME")
	after=$(stat_of bpf_map_entries)
	exited_after=$(stat_of procs_exited)
	[ "$published" -ge 3000 ] && [ $((exited_after - exited_before)) -ge 3000 ] && [ "$after" -lt $((before + 300)) ]
}

@test "bpf: 3000 short runs leave no map entries behind and are all published as exited" {
	usaged_need_bpf
	# a name of its own: other processes named true may come and go on the host
	NAME=noleak$$
	cp /bin/true "$BATS_TEST_TMPDIR/$NAME"
	usaged_start u --mode bpf --interval 300ms
	usaged_tap u 3600 usage/ stat/
	wb_wait_for 60 bash -c '[ "$('"$TAPQ"' "$0" stat bpf_map_entries)" != none ]' "$(usaged_tapfile u)"
	before=$(stat_of bpf_map_entries)
	exited_before=$(stat_of procs_exited)
	for ((i = 0; i < 3000; i++)); do "$BATS_TEST_TMPDIR/$NAME"; done
	wb_wait_for 120 settled || true
	echo "map entries before $before, after $after; retired $((exited_after - exited_before)); published exited: $published"
	# other processes on the host come and go meanwhile; 3000 leaked entries would not hide
	[ "$after" -lt $((before + 300)) ]
	[ $((exited_after - exited_before)) -ge 3000 ]
	# each exactly once, however late its last switch-out came
	[ "$published" -eq 3000 ]
	run $TAPQ "$(usaged_tapfile u)" check
	assert_success
}
