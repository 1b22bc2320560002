#!/usr/bin/env bats
# A restarted powerd continues the count: the first sample is the hardware
# reading itself (not zero), under a new epoch, so alignd can bridge the gap
# without losing energy.

load powerd_helper

RANGE=262143328850

teardown() { wb_kill_all; }

@test "after a restart the total is the hardware reading again, under a new epoch" {
	pd_rapl_zone intel-rapl:0 package-0 5000000 $RANGE
	pd_start
	pd_wait_energy package-0 5000000
	pd_rapl_set intel-rapl:0 5100000
	pd_wait_energy package-0 5100000
	epoch1=$(pd_power_rows package-0 | tail -1 | cut -d' ' -f3)
	kill -TERM "$PID_powerd"
	wb_wait_for 5 bash -c '! kill -0 '"$PID_powerd"' 2>/dev/null'
	# energy used while powerd was down
	pd_rapl_set intel-rapl:0 5900000
	wb_spawn powerd "$PD" --sysfs_root "$PDR/sys" --msr_root "$PDR/dev/cpu" --pub "$PDEP" \
		--runtime_dir "$BATS_TEST_TMPDIR/run" --interval 100ms --stat_interval 200ms --host testhost
	pd_wait_energy package-0 5900000
	run bash -c "pd_power_rows package-0 | awk '\$3 != $epoch1' | head -1"
	read -r t seq epoch2 e iv <<<"$output"
	[ "$epoch2" -gt "$epoch1" ]
	[ "$e" -eq 5900000 ] # continues where the hardware counter is: the 800000 uJ gap is visible
	pd_values_ok package-0 5000000 5100000 5900000
}
