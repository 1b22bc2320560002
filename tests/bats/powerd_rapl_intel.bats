#!/usr/bin/env bats
# powerd on a fake two-socket Intel powercap tree (subzones, psys, an MMIO
# duplicate): every zone published with its name, kind and path, and the
# cumulative energy equal to the increments written, across wraps.

load powerd_helper

RANGE=262143328850
SMALL=999999 # a dram counter that wraps often: values 0..999999

setup() {
	wb_put "$PDR/sys/class/powercap/intel-rapl/enabled" 1
	pd_rapl_zone intel-rapl:0 package-0 1000 $RANGE
	pd_rapl_zone intel-rapl:0:0 core 2000 $RANGE
	pd_rapl_zone intel-rapl:0:1 uncore 3000 $RANGE
	pd_rapl_zone intel-rapl:0:2 dram 900000 $SMALL
	pd_rapl_zone intel-rapl:1 package-1 $((RANGE - 10)) $RANGE # wraps soon
	pd_rapl_zone intel-rapl:1:0 core 6000 $RANGE
	pd_rapl_zone intel-rapl:1:1 dram 7000 $SMALL
	pd_rapl_zone intel-rapl:2 psys 8000 $RANGE
	pd_rapl_zone intel-rapl-mmio:0 package-0 1000 $RANGE
}
teardown() { wb_kill_all; }

@test "two-socket Intel: eight zones with names, kinds, paths and ranges" {
	pd_start
	pd_wait_power 1
	run bash -c "pd_tap_lines | jq -c 'select(.topic == \"power/testhost\") | [.msg.zones[] | [.name, .zone, (.index // 0), .source, .max_energy_range_uj, (.path | sub(\".*/powercap/\"; \"\"))]]' | head -1"
	assert_success
	assert_output '[["package-0","package",0,"rapl",262143328850,"intel-rapl:0"],["core-0","core",0,"rapl",262143328850,"intel-rapl:0:0"],["uncore-0","uncore",0,"rapl",262143328850,"intel-rapl:0:1"],["dram-0","dram",0,"rapl",999999,"intel-rapl:0:2"],["package-1","package",1,"rapl",262143328850,"intel-rapl:1"],["core-1","core",1,"rapl",262143328850,"intel-rapl:1:0"],["dram-1","dram",1,"rapl",999999,"intel-rapl:1:1"],["psys","psys",0,"rapl",262143328850,"intel-rapl:2"]]'
	# The MMIO package reads the same register: said once in the log, not published twice.
	grep -q "intel-rapl-mmio:0 (package-0) measures the same as" "$BATS_TEST_TMPDIR/powerd.log"
	# The minimum safe interval per zone is logged at startup.
	grep -q "zone dram-0 (dram, .*counter range 999999 uJ; at max_power_w 5000 W it wraps no sooner than 0.0 s" "$BATS_TEST_TMPDIR/powerd.log"
	grep -q "zone package-0 .*wraps no sooner than 52.4 s (minimum safe interval); interval 0.100 s is safe" "$BATS_TEST_TMPDIR/powerd.log"
	wb_wait_for 5 bash -c '[ "$(pd_tap_lines | jq -r "select(.topic == \"stat/testhost\") | .msg.mode" | tail -1)" = rapl ]'
}

@test "the first sample is the hardware reading; totals equal the increments written, across wraps" {
	pd_start
	pd_wait_energy package-0 1000
	pd_wait_energy dram-0 900000
	# dram-0 wraps at 999999 three times; every published value must be one of the totals.
	run pd_rapl_steps dram-0 intel-rapl:0:2 $SMALL 900000 50000 60000 250000 999999 1 300000 400000 0 17
	assert_success
	totals=$output
	# 900000 + all increments: wraps corrected, nothing lost or added
	assert_equal "$(echo "$totals" | tail -1)" $((900000 + 50000 + 60000 + 250000 + 999999 + 1 + 300000 + 400000 + 0 + 17))
	pd_values_ok dram-0 900000 $totals
	# package-1 starts near the top of its range and goes across it
	pd_wait_energy package-1 $((RANGE - 10))
	run pd_rapl_steps package-1 intel-rapl:1 $RANGE $((RANGE - 10)) 20 1000000
	assert_success
	assert_equal "$(echo "$output" | tail -1)" $((RANGE - 10 + 20 + 1000000))
	# the untouched zones stayed at their hardware readings
	pd_values_ok psys 8000
	pd_values_ok core-1 6000
	pd_wait_stat wraps 3 5
	[ "$(pd_stat_counter wraps)" -eq 3 ] # dram-0 twice, package-1 once
	[ "$(pd_stat_counter backwards)" -eq 0 ]
	[ "$(pd_stat_counter zone_samples_skipped)" -eq 0 ]
}
