#!/usr/bin/env bats
# With no meter at all powerd says what it tried, keeps running and publishes
# only stat messages in mode none, so that downstream stages use a model.

load powerd_helper

teardown() { wb_kill_all; }

@test "no meter: every source explained, mode none, only stat" {
	mkdir -p "$PDR/sys/class/powercap/intel-rapl" "$PDR/sys/class/hwmon/hwmon0"
	wb_put "$PDR/sys/class/hwmon/hwmon0/name" acpitz
	pd_start
	wb_wait_for 10 bash -c '[ "$(grep -c "\"topic\":\"stat/testhost\"" "$TAPLOG")" -ge 3 ]'
	run cat "$BATS_TEST_TMPDIR/powerd.log"
	assert_output --partial "no usable power meter; publishing only stat messages (mode none)"
	assert_output --partial "rapl: no zone with energy_uj under $PDR/sys/class/powercap"
	assert_output --partial "msr: $PDR/dev/cpu/0/msr: No such file or directory (load the msr driver: modprobe msr)"
	assert_output --partial "hwmon: no power*_input, power*_average or energy*_input under $PDR/sys/class/hwmon (1 devices)"
	[ "$(pd_stat_mode)" = none ]
	! grep -q '"topic":"power/' "$TAPLOG"
	kill -0 "$PID_powerd"
	# a clean stop
	kill -TERM "$PID_powerd"
	wb_wait_for 5 bash -c '! kill -0 '"$PID_powerd"' 2>/dev/null'
	wait "$PID_powerd" || rc=$?
	[ "${rc:-0}" -eq 0 ]
}

@test "a forced source that is not usable is named; exec without a command is a config error" {
	pd_rapl_zone intel-rapl:0 package-0 1 262143328850
	pd_start --source hwmon
	wb_wait_for 10 grep -q "no usable power meter" "$BATS_TEST_TMPDIR/powerd.log"
	grep -q "source hwmon is not usable: $PDR/sys/class/hwmon: No such file or directory" "$BATS_TEST_TMPDIR/powerd.log"
	run "$PD" -n --source exec
	assert_failure 2
	assert_output --partial "source exec needs a command"
	run "$PD" -n --source rapl --source gpu
	assert_failure 2
	assert_output --partial "unknown source 'gpu'"
	run "$PD" -n --interval 5ms
	assert_failure 2
}

@test "SIGHUP with no meter tries the sources again (after a fix), and then publishes" {
	mkdir -p "$PDR/sys"
	pd_start
	wb_wait_for 10 grep -q "no usable power meter" "$BATS_TEST_TMPDIR/powerd.log"
	pd_rapl_zone intel-rapl:0 package-0 777 262143328850
	kill -HUP "$PID_powerd"
	pd_wait_energy package-0 777
	wb_wait_for 5 bash -c '[ "$(pd_stat_mode)" = rapl ]'
	# the epoch stays: only the sources were opened again
	[ "$(pd_tap_lines | grep -o '"epoch":[0-9]*' | sort -u | wc -l)" -eq 1 ]
}
