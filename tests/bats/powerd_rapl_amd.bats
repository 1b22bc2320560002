#!/usr/bin/env bats
# powerd on a fake AMD powercap tree (package-N zones, a core subzone, 15.3 uJ
# units so a 65.5 kJ range): zones and exact totals across a wrap.

load powerd_helper

RANGE=65532610987

setup() {
	pd_rapl_zone intel-rapl:0 package-0 $((RANGE - 500000)) $RANGE
	pd_rapl_zone intel-rapl:0:0 core 123 $RANGE
	pd_rapl_zone intel-rapl:1 package-1 4242 $RANGE
}
teardown() { wb_kill_all; }

@test "AMD: package and core zones, totals exact across the package wrap" {
	pd_start
	pd_wait_power 1
	run bash -c "pd_tap_lines | jq -c 'select(.topic == \"power/testhost\") | [.msg.zones[] | [.name, .zone, (.index // 0), .max_energy_range_uj]]' | head -1"
	assert_output '[["package-0","package",0,65532610987],["core-0","core",0,65532610987],["package-1","package",1,65532610987]]'
	pd_wait_energy package-0 $((RANGE - 500000))
	run pd_rapl_steps package-0 intel-rapl:0 $RANGE $((RANGE - 500000)) 300000 300000 300000 7
	assert_success
	assert_equal "$(echo "$output" | tail -1)" $((RANGE - 500000 + 900007))
	pd_values_ok package-0 $((RANGE - 500000)) $output
	run pd_rapl_steps core-0 intel-rapl:0:0 $RANGE 123 1000 2000
	assert_success
	pd_values_ok core-0 123 $output
	pd_values_ok package-1 4242
}
