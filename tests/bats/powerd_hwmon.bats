#!/usr/bin/env bats
# powerd's hwmon source: energy*_input counters published as is, power*_input
# integrated by trapezoids over the sample times, zone kinds from labels.

load powerd_helper

HW=$PDR/sys/class/hwmon

setup() {
	wb_put "$HW/hwmon0/name" coretemp
	wb_put "$HW/hwmon0/temp1_input" 45000
	wb_put "$HW/hwmon1/name" amd_energy
	wb_put "$HW/hwmon1/energy1_label" Esocket0
	wb_put "$HW/hwmon1/energy1_input" 1000000
	wb_put "$HW/hwmon2/name" ina3221
	wb_put "$HW/hwmon2/power1_label" "GPU rail"
	wb_put "$HW/hwmon2/power1_input" 20000000 # 20 W
}
teardown() { wb_kill_all; }

@test "hwmon: energy counters exact, power integrated by trapezoids" {
	pd_start
	pd_wait_power 1
	run bash -c "pd_tap_lines | jq -c 'select(.topic == \"power/testhost\") | [.msg.zones[] | [.name, .zone, .source, (.path | sub(\".*/hwmon/\"; \"\")), .max_energy_range_uj]]' | head -1"
	assert_output '[["package-0","package","hwmon","hwmon1/energy1_input",null],["gpu-0","gpu","hwmon","hwmon2/power1_input",null]]'
	# the energy counter: published as is, increments summed exactly
	total=1000000
	for inc in 250000 1 999999 0 31337; do
		total=$((total + inc))
		wb_put "$HW/hwmon1/energy1_input" $total
		pd_wait_energy package-0 $total
	done
	# constant 20 W: between any two samples, energy = 20 W x the time between their t
	pd_wait_power 12
	pd_power_rows gpu-0 | awk '{print $1, $4, $3}' >"$BATS_TEST_TMPDIR/gpu.tsv"
	first=($(head -1 "$BATS_TEST_TMPDIR/gpu.tsv"))
	# an integrated zone starts at 0 when powerd starts (its epoch): no more than 20 W since then
	[ "${first[1]}" -le $(((first[0] - first[2]) / 1000 * 20)) ]
	pd_watts_ok "$BATS_TEST_TMPDIR/gpu.tsv" 20 >&3
	# then 40 W: the step in between is a trapezoid, after it 40 W x time. A sample whose
	# grid time is after the change was read after it.
	wb_put "$HW/hwmon2/power1_input" 40000000
	changed=$(date +%s%N) # after the write: a sample stamped later was read after it
	pd_wait_power $(($(pd_power_rows - | wc -l) + 12))
	pd_power_rows gpu-0 | awk -v c="$changed" '$1 > c {print $1, $4}' >"$BATS_TEST_TMPDIR/gpu40.tsv"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/gpu40.tsv")" -ge 10 ]
	pd_watts_ok "$BATS_TEST_TMPDIR/gpu40.tsv" 40 >&3
}

@test "hwmon: power far beyond max_power_w is skipped and counted, never integrated" {
	pd_start --max_power_w 100
	pd_wait_power 2
	wb_put "$HW/hwmon2/power1_input" 5000000000 # 5 kW on a 100 W limit
	pd_wait_stat implausible 2
	before=$(pd_power_values gpu-0 | tail -1)
	pd_wait_stat implausible 6 # four more samples of the bad value
	# the counter stayed put while the value was bad, other zones went on
	[ "$(pd_power_values gpu-0 | tail -1)" = "$before" ]
	wb_put "$HW/hwmon1/energy1_input" 1000500
	pd_wait_energy package-0 1000500
	grep -q "gpu-0: .*hwmon2/power1_input: 5000000000 uW is beyond max_power_w 100 W; sample skipped" "$BATS_TEST_TMPDIR/powerd.log"
}
