#!/usr/bin/env bats
# A hypervisor and its guest made of network namespaces. The host runs its
# pipeline on a fake RAPL tree, with a fake qemu process (vm1) in a libvirt
# machine.slice scope carrying load, and `wattbus vmpub vm1` on tcp:// with
# CURVE; the guest runs its own five stages, powerd with the bus source. The
# guest's meter is the host's measurement of vm1, exactly, across a restart
# of the host's estimd, of the guest's powerd and of vmpub (busy and idle),
# which follow the VM's totals by the one rule (lib/follow.h);
# another VM's key gets nothing.

load helper
load netns_helper

setup() {
	netns_need
	CGROOT=
	for d in /sys/fs/cgroup/systemd /sys/fs/cgroup; do
		[ -w "$d/cgroup.procs" ] && mkdir -p "$d/wbtest$$" 2>/dev/null && rmdir "$d/wbtest$$" && CGROOT=$d && break
	done
	[ -n "$CGROOT" ] || skip "no writable cgroup hierarchy for a machine.slice scope"
	netns_pair h 10.252
	NSH=$NS1 NSG=$NS2 H=$IP1 G=$IP2

	curve_keys allow-vm1 vm1 hv vm1 vm2

	# The fake qemu's scope, as libvirt names it under systemd.
	SCOPE="$CGROOT/machine.slice/machine-qemu\\x2d$N\\x2dvm1.scope"
	[ -d "$CGROOT/machine.slice" ] || SLICE_MADE=$CGROOT/machine.slice
	mkdir -p "$SCOPE"
	cp "$(command -v sh)" "$BATS_TEST_TMPDIR/qemu-system-x86_64"

	# A fake RAPL package zone on the host, advanced by 1 J every 100 ms.
	fake_rapl_10w
	RH=$BATS_TEST_TMPDIR/runH
	RG=$BATS_TEST_TMPDIR/runG
	VMPUB=tcp://$H:5610
}

teardown() {
	wb_kill_all
	[ -n "${SCOPE:-}" ] && [ -d "$SCOPE" ] && { while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$SCOPE/cgroup.procs"; wb_wait_for 10 rmdir "$SCOPE" 2>/dev/null; }
	[ -n "${SLICE_MADE:-}" ] && rmdir "$SLICE_MADE" 2>/dev/null
	[ -n "${NS1:-}" ] && ip netns del "$NS1" 2>/dev/null # NSH, made by netns_pair
	[ -n "${NS2:-}" ] && ip netns del "$NS2" 2>/dev/null # NSG, made by netns_pair
	true
}

# qemu NAME ARGS...: a process that looks like qemu (name and command line) in vm1's scope.
qemu() {
	local name=$1
	shift
	wb_spawn "$name" bash -c 'echo $$ >"$0/cgroup.procs" && exec "$1" "${@:2}"' "$SCOPE" \
		"$BATS_TEST_TMPDIR/qemu-system-x86_64" "$@"
}

host_estimd() {
	wb_spawn "estimd_h$1" "$WB_BUILD/wattbus-estimd" --host hv --runtime_dir "$RH" \
		--mode measured --model "" --train false --stat_interval 200ms
}

vmpub() {
	wb_spawn "vmpub$1" ip netns exec "$NSH" "$WATTBUS" vmpub --runtime_dir "$RH" --sub "ipc://$RH/estimd.sock" --host hv \
		--curve-cert "$K/hv" --curve-allow "$K/allow-vm1" vm1 "$VMPUB"
}

guest_powerd() {
	wb_spawn "powerd_g$1" ip netns exec "$NSG" "$WB_BUILD/wattbus-powerd" --host g1 --runtime_dir "$RG" \
		--source bus --bus_sub "$VMPUB" --bus_vm vm1 --bus_curve_cert "$K/vm1" --bus_curve_peer "$K/hv" \
		--interval 200ms --stat_interval 200ms
}

check() { python3 "$BATS_TEST_DIRNAME/vm_check.py" "$@"; }

# The VM's total in the host's estimates, once it is past $1 uJ.
host_total_above() { [ "$(check host_total "$BATS_TEST_TMPDIR/est_h.log" vm1 package-0 || echo 0)" -gt "$1" ]; }
# The guest exportd's node package joules are $1 (as it prints them, fixed point).
guest_joules_are() { ip netns exec "$NSG" curl -sf "http://$G:9102/metrics" | grep -F 'kepler_node_cpu_joules_total{node_name="g1",zone="package",' | grep -qF " $1"; }
guest_power_above() { [ "$(check guest_power "$BATS_TEST_TMPDIR/pow_g.log" package-0 || echo 0)" -gt "$1" ]; }

@test "the guest's meter is the host's measurement of its VM, exactly, across restarts; another VM's key gets nothing" {
	# The host: its stages in this namespace (`ip netns exec` mounts a sysfs without the
	# cgroups usaged reads), and vmpub for vm1 in the host's network namespace.
	qemu qemu_idle -c 'exec sleep 1000' -name guest=vm1,debug-threads=on -uuid 5b5f2c1e-0d7c-4f7a-9e3e-8d1f2e3a4b5c
	wb_spawn powerd_h "$WB_BUILD/wattbus-powerd" --host hv --runtime_dir "$RH" \
		--sysfs_root "$SYS" --source rapl --interval 200ms
	wb_spawn usaged_h "$WB_BUILD/wattbus-usaged" --host hv --runtime_dir "$RH" \
		--mode procfs --interval 500ms
	wb_spawn alignd_h "$WB_BUILD/wattbus-alignd" --runtime_dir "$RH"
	host_estimd 1
	wb_tap est_h "ipc://$RH/estimd.sock" estimate/hv
	vmpub 1

	# The guest: powerd reading the bus, and its own usaged, alignd, estimd and exportd.
	guest_powerd 1
	wb_tap pow_g "ipc://$RG/powerd.sock" power/g1
	wb_spawn usaged_g ip netns exec "$NSG" "$WB_BUILD/wattbus-usaged" --host g1 --runtime_dir "$RG" \
		--mode procfs --interval 500ms
	wb_spawn alignd_g ip netns exec "$NSG" "$WB_BUILD/wattbus-alignd" --runtime_dir "$RG"
	wb_spawn estimd_g ip netns exec "$NSG" "$WB_BUILD/wattbus-estimd" --host g1 --runtime_dir "$RG" \
		--mode measured --model "" --train false --stat_interval 200ms
	wb_tap est_g "ipc://$RG/estimd.sock" estimate/g1
	wb_spawn exportd_g ip netns exec "$NSG" "$WB_BUILD/wattbus-exportd" --runtime_dir "$RG" --listen "$G:9102"
	# vmpub tells the guest only totals it knows (never a guess): the VM runs a moment, as a
	# booting VM does, and the guest's meter starts from the host's total for it.
	qemu qemu_boot -c 'while :; do :; done' -name guest=vm1,debug-threads=on
	wb_wait_lines "$BATS_TEST_TMPDIR/est_g.log" 1 60
	wb_wait_lines "$BATS_TEST_TMPDIR/pow_g.log" 1 60
	kill -TERM "$PID_qemu_boot"

	# vm1's guest key gets vm1's stream; vm2's key gets nothing from it.
	run ip netns exec "$NSG" "$WATTBUS" tap --count 1 --timeout 20s --curve-cert "$K/vm1" --curve-peer "$K/hv" "$VMPUB"
	assert_success
	assert_output --partial '"topic":"estimate/vm1"'
	refute_output --partial '"procs":[{'
	run ip netns exec "$NSG" "$WATTBUS" tap --timeout 3s --curve-cert "$K/vm2" --curve-peer "$K/hv" "$VMPUB"
	assert_success
	assert_output ""

	# Load in the VM; the host's estimd restarted, then the guest's powerd, then vmpub, while it runs.
	qemu qemu_busy -c 'while :; do :; done' -name guest=vm1,debug-threads=on
	wb_wait_for 60 host_total_above 0
	before=$(check host_total "$BATS_TEST_TMPDIR/est_h.log" vm1 package-0)
	kill -TERM "$PID_estimd_h1"
	wb_wait_for 30 bash -c "! kill -0 $PID_estimd_h1 2>/dev/null"
	host_estimd 2
	wb_wait_for 60 host_total_above "$before"
	run check host_epochs "$BATS_TEST_TMPDIR/est_h.log" vm1 package-0
	assert_output 1 # the VM's count went on: one total_epoch
	g_before=$(check guest_power "$BATS_TEST_TMPDIR/pow_g.log" package-0)
	kill -TERM "$PID_powerd_g1"
	wb_wait_for 30 bash -c "! kill -0 $PID_powerd_g1 2>/dev/null"
	guest_powerd 2
	wb_wait_for 60 guest_power_above "$g_before"
	g_before=$(check guest_power "$BATS_TEST_TMPDIR/pow_g.log" package-0)
	kill -TERM "$PID_vmpub1"
	wb_wait_for 30 bash -c "! kill -0 $PID_vmpub1 2>/dev/null"
	vmpub 2
	wb_wait_for 60 guest_power_above "$g_before"
	kill -TERM "$PID_qemu_busy"

	# vmpub restarted while vm1 is idle: it says nothing for vm1 until it sees it again (a
	# guessed total would be one that went back, and the real one after it would count
	# twice), so the guest's count goes on from where it was.
	wb_wait_for 60 check host_stable "$BATS_TEST_TMPDIR/est_h.log" vm1 package-0 5
	idle=$(check host_total "$BATS_TEST_TMPDIR/est_h.log" vm1 package-0)
	kill -TERM "$PID_vmpub2"
	wb_wait_for 30 bash -c "! kill -0 $PID_vmpub2 2>/dev/null"
	vmpub 3
	wb_wait_lines "$BATS_TEST_TMPDIR/est_h.log" "$(($(wc -l <"$BATS_TEST_TMPDIR/est_h.log") + 3))" 60
	qemu qemu_busy2 -c 'while :; do :; done' -name guest=vm1,debug-threads=on
	wb_wait_for 60 host_total_above "$idle"
	wb_wait_for 60 guest_power_above "$idle"
	kill -TERM "$PID_qemu_busy2"

	# Once vm1 draws no more, the guest's meter stands at the host's total for vm1, exactly.
	wb_wait_for 60 check host_stable "$BATS_TEST_TMPDIR/est_h.log" vm1 package-0 5
	host=$(check host_total "$BATS_TEST_TMPDIR/est_h.log" vm1 package-0)
	[ "$host" -gt "$idle" ]
	wb_wait_for 60 bash -c "[ \"\$(python3 $BATS_TEST_DIRNAME/vm_check.py guest_power $BATS_TEST_TMPDIR/pow_g.log package-0)\" = $host ]"
	# The guest's node energy is what its meter measured since the guest's count began.
	first=$(check guest_power "$BATS_TEST_TMPDIR/pow_g.log" package-0 first)
	wb_wait_for 60 bash -c "[ \"\$(python3 $BATS_TEST_DIRNAME/vm_check.py guest_total $BATS_TEST_TMPDIR/est_g.log package-0)\" = $((host - first)) ]"
	# The guest's exportd shows it as the node's joules (fixed point: microjoules exactly).
	want=$(printf '%d.%06d' $(((host - first) / 1000000)) $(((host - first) % 1000000)))
	wb_wait_for 60 guest_joules_are "$want"
	# Its processes and unattributed energy add up to its active energy in every slot.
	run check guest_sums "$BATS_TEST_TMPDIR/est_g.log"
	assert_success
	# No restart started a new count of the host.
	run check host_epochs "$BATS_TEST_TMPDIR/est_h.log" vm1 package-0
	assert_output 1
}
