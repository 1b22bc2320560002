#!/usr/bin/env bats
# A zone whose files vanish (a driver unloaded, a device gone) is skipped with
# its path in the log and counted; the other zones go on; when it comes back
# its total continues from where it was, with the increment since then.

load powerd_helper

RANGE=262143328850

setup() {
	pd_rapl_zone intel-rapl:0 package-0 1000 $RANGE
	pd_rapl_zone intel-rapl:1 package-1 5000 $RANGE
}
teardown() { wb_kill_all; }

@test "a vanished zone is skipped and counted, the others published, its total continues on return" {
	pd_start
	pd_wait_energy package-1 5000
	rm "$PDR/sys/class/powercap/intel-rapl:1/energy_uj"
	pd_wait_stat read_errors 3
	n=$(pd_power_values package-0 | wc -l)
	pd_rapl_set intel-rapl:0 2000
	pd_wait_energy package-0 2000
	grep -q "package-1: $PDR/sys/class/powercap/intel-rapl:1/energy_uj: No such file or directory; sample skipped" "$BATS_TEST_TMPDIR/powerd.log"
	# package-0 kept being published while package-1 was gone
	# (not jq -e: jq 1.6 gives status 4 when the last line selects nothing)
	pd_tap_lines | jq -c 'select(.topic == "power/testhost") | select([.msg.zones[].name] == ["package-0"])' | grep -q .
	# the whole zone directory goes too, then comes back with a higher count
	rm -r "$PDR/sys/class/powercap/intel-rapl:1"
	pd_wait_stat read_errors $(($(pd_stat_counter read_errors) + 2)) # sampled while it is gone
	pd_rapl_zone intel-rapl:1 package-1 5777 $RANGE
	pd_wait_energy package-1 5777
	pd_values_ok package-1 5000 5777
	[ "$(pd_stat_counter zone_samples_skipped)" -ge 3 ]
	kill -0 "$PID_powerd"
}
