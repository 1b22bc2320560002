#!/usr/bin/env bats
# powerd on an ACPI power meter: power1_average (attributes under device/, as
# older kernels place them) with its averaging interval, as the platform zone.

load powerd_helper

HW=$PDR/sys/class/hwmon

teardown() { wb_kill_all; }

@test "ACPI power meter: platform zone, averaging interval logged, energy = average x time" {
	wb_put "$HW/hwmon0/name" power_meter
	wb_put "$HW/hwmon0/device/power1_average" 250000000 # 250 W
	wb_put "$HW/hwmon0/device/power1_average_interval" 1000
	wb_put "$HW/hwmon0/device/power1_model_number" ACPI000D
	pd_start
	pd_wait_power 12
	grep -q "hwmon0/device/power1_average (power_meter) is the average over 1000 ms; samples closer than that repeat" "$BATS_TEST_TMPDIR/powerd.log"
	pd_power_rows platform | awk '{print $1, $4}' >"$BATS_TEST_TMPDIR/p.tsv"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/p.tsv")" -ge 12 ]
	pd_watts_ok "$BATS_TEST_TMPDIR/p.tsv" 250
	# the path names the file read
	run bash -c "pd_tap_lines | jq -r 'select(.topic == \"power/testhost\") | .msg.zones[0].path' | sort -u"
	assert_output "$HW/hwmon0/device/power1_average"
}
