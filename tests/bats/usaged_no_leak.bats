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

@test "bpf: 3000 runs of true leave no map entries behind and are published as exited" {
	usaged_need_bpf
	usaged_start u --mode bpf --interval 300ms
	usaged_tap u 60 usage/ stat/
	sleep 2.5
	before=$(stat_of bpf_map_entries)
	exited_before=$(stat_of procs_exited)
	[ "$before" != none ]
	for ((i = 0; i < 3000; i++)); do /bin/true; done
	sleep 2.5 # a few intervals and a stat message
	after=$(stat_of bpf_map_entries)
	exited_after=$(stat_of procs_exited)
	published=$($TAPQ "$(usaged_tapfile u)" exited true)
	echo "map entries before $before, after $after; retired $((exited_after - exited_before)); true published exited: $published"
	# other processes on the host come and go meanwhile; 3000 leaked entries would not hide
	[ "$after" -lt $((before + 300)) ]
	[ $((exited_after - exited_before)) -ge 3000 ]
	[ "$published" -ge 2850 ]
	[ "$published" -le 3000 ]
	run $TAPQ "$(usaged_tapfile u)" check
	assert_success
}
