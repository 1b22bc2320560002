#!/usr/bin/env bats
# energy_uj is root-only since CVE-2020-8694. powerd run as a user that cannot
# read it says so, says how to grant access, keeps running and publishes only
# stat (mode none); with some zones readable it publishes those. Root ignores
# file modes, so as root the test runs powerd as nobody (setpriv); otherwise
# chmod 000 does the same.

load powerd_helper

RANGE=262143328850

setup() {
	# a tree and a runtime dir that nobody can traverse (the bats temp dir is 0700)
	PERM=$(mktemp -d /tmp/wb-powerd-perm.XXXXXX)
	chmod 755 "$PERM"
	PDR=$PERM/fake
	PDEP=ipc://$PERM/run/powerd.sock
	pd_rapl_zone intel-rapl:0 package-0 1000 $RANGE
	pd_rapl_zone intel-rapl:0:0 dram 2000 $RANGE
	mkdir -p "$PERM/run"
	chmod -R a+rX "$PERM"
	if [ "$(id -u)" -eq 0 ]; then
		command -v setpriv >/dev/null || skip "setpriv (util-linux) is needed to drop root"
		chown 65534:65534 "$PERM/run"
		AS=(setpriv --reuid=65534 --regid=65534 --clear-groups)
		DENY=0400 # root-owned, root-only: what the kernel does since 5.10
	else
		AS=()
		DENY=0000
	fi
}
teardown() {
	wb_kill_all
	rm -rf "$PERM"
}

start_as_user() {
	wb_spawn tap "$WATTBUS" tap --check "$PDEP"
	wb_spawn powerd "${AS[@]}" "$PD" --sysfs_root "$PDR/sys" --msr_root "$PDR/dev/cpu" --pub "$PDEP" \
		--runtime_dir "$PERM/run" --interval 100ms --stat_interval 200ms --host testhost "$@"
}

@test "no readable energy_uj: the CVE and the remedy are explained, powerd keeps running in mode none" {
	chmod $DENY "$PDR"/sys/class/powercap/*/energy_uj
	start_as_user
	wb_wait_for 10 grep -q "no usable power meter" "$BATS_TEST_TMPDIR/powerd.log"
	run cat "$BATS_TEST_TMPDIR/powerd.log"
	assert_output --partial "rapl: $PDR/sys/class/powercap/intel-rapl:0/energy_uj: Permission denied: energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694"
	assert_output --partial 'udev rule SUBSYSTEM=="powercap"'
	assert_output --partial "run powerd as root"
	# each source tried says why it failed
	assert_output --partial "msr: $PDR/dev/cpu/0/msr: No such file or directory (load the msr driver: modprobe msr)"
	assert_output --partial "hwmon: $PDR/sys/class/hwmon: No such file or directory"
	# only stat, in mode none; still running
	wb_wait_for 10 bash -c '[ "$(grep -c "\"topic\":\"stat/testhost\"" "$TAPLOG")" -ge 3 ]'
	[ "$(pd_stat_mode)" = none ]
	! grep -q '"topic":"power/' "$TAPLOG"
	kill -0 "$PID_powerd"
}

@test "one zone readable, one not: the readable one is published, the other explained" {
	chmod $DENY "$PDR/sys/class/powercap/intel-rapl:0:0/energy_uj"
	start_as_user
	pd_wait_energy package-0 1000
	run cat "$BATS_TEST_TMPDIR/powerd.log"
	assert_output --partial "intel-rapl:0:0/energy_uj: Permission denied (zone dram left out)"
	assert_output --partial "1 zone left out: energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694"
	[ "$(pd_stat_mode)" = rapl ] || wb_wait_for 5 bash -c '[ "$(pd_stat_mode)" = rapl ]'
	pd_values_ok package-0 1000
	[ -z "$(pd_power_values dram-0)" ]
}

@test "a zone that becomes unreadable is skipped with the explanation, and counted" {
	start_as_user
	pd_wait_energy dram-0 2000
	chmod $DENY "$PDR/sys/class/powercap/intel-rapl:0:0/energy_uj"
	pd_wait_stat read_errors 2
	run cat "$BATS_TEST_TMPDIR/powerd.log"
	assert_output --partial "dram-0: $PDR/sys/class/powercap/intel-rapl:0:0/energy_uj: Permission denied; sample skipped: energy_uj is readable by root only"
	pd_rapl_set intel-rapl:0 1500
	pd_wait_energy package-0 1500
	chmod 0444 "$PDR/sys/class/powercap/intel-rapl:0:0/energy_uj"
	pd_rapl_set intel-rapl:0:0 2600
	pd_wait_energy dram-0 2600
	pd_values_ok dram-0 2000 2600
}
