#!/usr/bin/env bats
# Garbage in a zone file (text, empty, too large, a counter going back without
# a plausible wrap, a value beyond max_energy_range_uj) is logged with the
# path, counted, and that zone's sample skipped; totals never go back or jump.

load powerd_helper

RANGE=262143328850

setup() {
	pd_rapl_zone intel-rapl:0 package-0 1000000 $RANGE
	pd_rapl_zone intel-rapl:0:0 dram 50000 $RANGE
}
teardown() { wb_kill_all; }

@test "non-numeric, empty and oversized values: skipped, counted, the rest published" {
	pd_start
	pd_wait_energy dram-0 50000
	E=$PDR/sys/class/powercap/intel-rapl:0:0/energy_uj
	L=$BATS_TEST_TMPDIR/powerd.log
	wb_put "$E" "12ab"
	wb_wait_for 5 grep -q "dram-0: $E: \"12ab\" is not an unsigned integer; sample skipped" "$L"
	wb_put "$E" ""
	wb_wait_for 5 grep -q "dram-0: $E: empty, expected an unsigned integer; sample skipped" "$L"
	wb_put "$E" 99999999999999999999999
	wb_wait_for 5 grep -q "dram-0: $E: \"99999999999999999999999\" is out of range; sample skipped" "$L"
	pd_wait_stat parse_errors 3
	# package-0 was published all along
	pd_rapl_set intel-rapl:0 1000100
	pd_wait_energy package-0 1000100
	wb_put "$E" 50700
	pd_wait_energy dram-0 50700
	pd_values_ok dram-0 50000 50700
}

@test "a counter going back without a plausible wrap is skipped; a confirmed restart goes on from there" {
	pd_start
	pd_wait_energy package-0 1000000
	# back to 10 uJ in 0.1 s: a wrap would mean ~2.6 MW. A glitch, even one that sticks
	# for a few samples, costs nothing and adds nothing:
	pd_rapl_set intel-rapl:0 10
	pd_wait_stat backwards 3
	pd_rapl_set intel-rapl:0 1000500
	pd_wait_energy package-0 1000500
	# a real restart of the hardware counter: it counts on from its new origin, and what it
	# counted since the first sighting is kept; the gap before is unknown and adds nothing
	pd_rapl_set intel-rapl:0 20
	wb_wait_for 5 grep -q "counter went back from 1000500 to 20," "$BATS_TEST_TMPDIR/powerd.log"
	pd_rapl_set intel-rapl:0 320
	pd_wait_energy package-0 $((1000500 + 300))
	pd_wait_stat rebased 1
	pd_values_ok package-0 1000000 1000500 $((1000500 + 300))
	grep -q "package-0: .*intel-rapl:0: counter went back from 1000500 to 20, not a plausible wrap" "$BATS_TEST_TMPDIR/powerd.log"
	# beyond the range: skipped and counted
	pd_rapl_set intel-rapl:0 $((RANGE + 5))
	pd_wait_stat implausible 1
	# the zone's warnings are rate-limited (10 per 10 s): this one may come a window later
	wb_wait_for 30 grep -q "is beyond the counter's range 262143328850; sample skipped" "$BATS_TEST_TMPDIR/powerd.log"
	pd_values_ok package-0 1000000 1000500 $((1000500 + 300))
}
