#!/usr/bin/env bats
# A process moved into a cgroup made by the test, named like a docker scope or a
# kubernetes pod's container scope, is reported in that cgroup with the parsed
# container id, runtime and pod uid: in bpf and in procfs mode, on v2 and on v1.
load helper
load cgroup_helper
load usaged_helper

CID=$(hex 32)
CID2=$(hex 32)
UID_=$(hex 4)_$(hex 2)_$(hex 2)_$(hex 2)_$(hex 6)

setup() {
	[ "$(id -u)" -eq 0 ] || skip "making cgroups needs root"
	MADE=()
}

teardown() {
	wb_kill_all
	# processes gone, the cgroups can go (deepest first)
	wb_cgroups_remove
}

# tap_listed TAP PID: whether the tap lists PID; tap_cgroup_has TAP PID TEXT...: whether PID's
# last cgroup, as usaged_tap.py prints it, holds each TEXT.
tap_listed() {
	[ "$($TAPQ "$1" cgroup "$2")" != none ]
}
tap_cgroup_has() {
	local out t
	out=$($TAPQ "$1" cgroup "$2") || return 1
	shift 2
	for t; do
		[[ $out == *"$t"* ]] || return 1
	done
}

# check_identity MODE: busy loops moved into a docker scope and a pod's containerd scope on v2
check_identity() {
	local cg2 docker pod
	cg2=$(cg2_mount)
	[ -n "$cg2" ] || skip "no cgroup2 mounted"
	docker=/system.slice/docker-$CID.scope
	pod=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$UID_.slice/cri-containerd-$CID2.scope
	mkcg "$cg2$docker"
	mkcg "$cg2$pod"
	usaged_start u --mode "$1" --interval 300ms
	usaged_tap u 3600 usage/
	tap=$(usaged_tapfile u)
	busy_loop a
	busy_loop b
	# seen first where they started
	wb_wait_for 30 tap_listed "$tap" "$PID_a"
	wb_wait_for 30 tap_listed "$tap" "$PID_b"
	echo "$PID_a" >"$cg2$docker/cgroup.procs"
	echo "$PID_b" >"$cg2$pod/cgroup.procs"
	# then in their new cgroups (the checks below tell what it published if not)
	wb_wait_for 30 tap_cgroup_has "$tap" "$PID_a" "\"path\": \"$docker\"" "\"container_id\": \"$CID\"" || true
	wb_wait_for 30 tap_cgroup_has "$tap" "$PID_b" "\"path\": \"$pod\"" "\"container_id\": \"$CID2\"" || true
	run $TAPQ "$tap" cgroup "$PID_a"
	echo "a: $output"
	assert_output --partial "\"path\": \"$docker\""
	assert_output --partial "\"runtime\": \"docker\""
	assert_output --partial "\"container_id\": \"$CID\""
	assert_output --partial "\"id\": $(stat -c %i "$cg2$docker"),"
	run $TAPQ "$tap" cgroup "$PID_b"
	echo "b: $output"
	assert_output --partial "\"path\": \"$pod\""
	assert_output --partial "\"runtime\": \"containerd\""
	assert_output --partial "\"container_id\": \"$CID2\""
	assert_output --partial "\"pod_uid\": \"${UID_//_/-}\""
	assert_output --partial "\"id\": $(stat -c %i "$cg2$pod"),"
}

@test "bpf: moved into a docker scope and a pod container scope (cgroup v2)" {
	usaged_need_bpf
	check_identity bpf
}

@test "procfs: moved into a docker scope and a pod container scope (cgroup v2)" {
	check_identity procfs
}

@test "bpf: in the v2 root but in a v1 docker cgroup (hybrid host)" {
	usaged_need_bpf
	local v1
	v1=$(awk '$9 == "cgroup" && $NF ~ /name=systemd/ { print $5; exit }' /proc/self/mountinfo)
	[ -n "$v1" ] || v1=$(awk '$9 == "cgroup" && $NF ~ /(^|,)cpu(,|$)/ { print $5; exit }' /proc/self/mountinfo)
	[ -n "$v1" ] || skip "no cgroup v1 hierarchy (name=systemd or cpu) mounted: not a hybrid host"
	busy_loop a
	grep -q '^0::/$' "/proc/$PID_a/cgroup" || skip "this shell is not in the v2 root: $(grep '^0::' /proc/$PID_a/cgroup)"
	mkcg "$v1/docker/$CID"
	# A move within v1 does not change the kernel's (v2) id: usaged looks again at full snapshots.
	usaged_start u --mode bpf --interval 300ms --full_every 4
	usaged_tap u 3600 usage/
	tap=$(usaged_tapfile u)
	wb_wait_for 30 tap_listed "$tap" "$PID_a" # seen first where it started
	echo "$PID_a" >"$v1/docker/$CID/cgroup.procs"
	# then in the v1 cgroup, at a full snapshot (the checks below tell what it published if not)
	wb_wait_for 30 tap_cgroup_has "$tap" "$PID_a" "\"path\": \"/docker/$CID\"" "\"container_id\": \"$CID\"" || true
	run $TAPQ "$tap" cgroup "$PID_a"
	echo "$output"
	assert_output --partial "\"path\": \"/docker/$CID\""
	assert_output --partial "\"runtime\": \"docker\""
	assert_output --partial "\"container_id\": \"$CID\""
	# a v1 id carries bit 62 so it never equals a v2 id
	assert_output --partial "\"id\": $(((1 << 62) | $(stat -c %i "$v1/docker/$CID"))),"
}
