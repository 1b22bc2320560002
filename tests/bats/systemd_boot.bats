#!/usr/bin/env bats
# The unit set under a real systemd: boot systemd as PID 1 in fresh pid, mount,
# network, uts, ipc and cgroup namespaces on an overlay of / (writes stay in a
# tmpfs), `make install` into it, enable wattbus.target, and let
# systemd_boot_check.sh check privileges, sockets, the pipeline, reload,
# watchdog and stop. Needs root and a host that is not itself run by systemd
# (there, test on the host instead).

load helper

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (namespaces, overlayfs, systemd as PID 1)"
	[ -x /lib/systemd/systemd ] || skip "systemd is not installed"
	[ "$(cat /proc/1/comm)" != systemd ] || skip "PID 1 is systemd: start wattbus.target on this host instead"
	command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
	CG=wattbus-boot-test-$$
	if [ -d /sys/fs/cgroup/unified ] && [ -d /sys/fs/cgroup/systemd ]; then
		CGDIRS=(/sys/fs/cgroup/systemd/$CG /sys/fs/cgroup/unified/$CG) # hybrid
	elif [ -f /sys/fs/cgroup/cgroup.procs ]; then
		CGDIRS=(/sys/fs/cgroup/$CG) # unified
	else
		skip "no usable cgroup hierarchy for systemd"
	fi
	# The prefix the daemons were built for (their default config path tells).
	local conf
	conf=$("$WB_BUILD/wattbus-powerd" --help | sed -n 's/.*(default \(.*\)\/wattbus\/wattbus.conf.*/\1/p')
	case $conf in
	/etc) WB_PREFIX=/usr ;;
	*/etc) WB_PREFIX=${conf%/etc} ;;
	*) fail "cannot tell the build's PREFIX from: $("$WB_BUILD/wattbus-powerd" --help | head -n 4)" ;;
	esac
	export WB_PREFIX WB_BUILD WB_ROOT
}

teardown() {
	# The namespaces die with their PID 1; remove the (now empty) cgroups, deepest first.
	for d in "${CGDIRS[@]}"; do
		[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	true
}

@test "wattbus.target under systemd 252 as PID 1: privileges, sockets, pipeline, reload, watchdog, stop" {
	W=$BATS_TEST_TMPDIR
	mkdir -p "$W/report"
	cat >"$W/boot.sh" <<-EOF
		#!/bin/bash
		for d in ${CGDIRS[*]}; do mkdir -p "\$d" && echo \$\$ >"\$d/cgroup.procs" || exit 1; done
		exec timeout -s KILL 150 unshare --kill-child=SIGKILL --pid --fork --mount --uts --ipc --net --cgroup \
			"$BATS_TEST_DIRNAME/systemd_boot_inner.sh" "$W"
	EOF
	chmod +x "$W/boot.sh"
	run "$W/boot.sh"
	report=$(cat "$W/report/check.log" 2>/dev/null)
	echo "$report" | sed 's/^/# /' >&3
	[ -f "$W/install.log" ] && [ -s "$W/install.log" ] && sed 's/^/# install: /' "$W/install.log" >&3
	[ -n "$report" ] || fail "the test system wrote no report (boot: $output)"
	echo "$report" | grep -qx done || fail "the check did not finish"
	! echo "$report" | grep -q '^not ok' || fail "some checks failed"
	[ "$(echo "$report" | grep -c '^ok ')" -ge 30 ] || fail "fewer checks ran than expected"
}
