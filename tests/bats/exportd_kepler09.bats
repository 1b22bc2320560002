#!/usr/bin/env bats
# metrics = kepler-0.9: Kepler 0.9's families, labels and types from the same accumulators as
# the 0.10 ones. In one scrape serving both profiles every 0.9 family adds up to its 0.10
# counterpart; the output passes `promtool check metrics`.

load helper
load exportd_helper

setup() { command -v promtool >/dev/null || skip "promtool is not installed"; }
teardown() { wb_kill_all; }

# fam_sum FILE NAME [REGEX]: the sum of NAME's samples whose line matches REGEX (awk), 6 decimals.
fam_sum() {
	awk -v m="$2" -v f="${3:-}" 'index($0, m "{") == 1 && $0 ~ f { s += $NF } END { printf "%.6f\n", s }' "$1"
}

# promtool_clean FILE: `promtool check metrics` finds nothing but the lint of Kepler 0.9's own
# names, kepler_*_bpf_cpu_time_ms_total ("abbreviated units", exit 3), which its dashboards and
# kepler-model-server query as they are. A parse error exits 1.
promtool_clean() {
	local out rc=0
	out=$(promtool check metrics <"$1" 2>&1) || rc=$?
	echo "promtool: exit $rc: $out"
	[ "$rc" = 0 ] || [ "$rc" = 3 ] || return 1
	[ -z "$(grep -v '^kepler_\(process\|container\|vm\)_bpf_cpu_time_ms_total metric names should not contain abbreviated units$' <<<"$out")" ]
}

# same FILE 0.9-NAME 0.9-REGEX 0.10-NAME 0.10-REGEX [FACTOR]: the sums agree (the 0.10 one times
# FACTOR), and are not 0.
same() {
	local a b
	a=$(fam_sum "$1" "$2" "$3")
	b=$(fam_sum "$1" "$4" "$5" | awk -v k="${6:-1}" '{ printf "%.6f\n", $1 * k }')
	echo "$2{$3} $a, $4{$5} $b"
	[ "$a" = "$b" ] && [ "$a" != 0.000000 ]
}

@test "kepler-0.9: every 0.9 family sums to its 0.10 counterpart in the same scrape" {
	ex_start --metrics kepler,kepler-0.9
	ex_feed --slots 3 --sockets 2 --start 1000000000000000000
	ex_wait_estimates 3
	M=$BATS_TEST_TMPDIR/metrics.txt
	ex_metrics >"$M"
	# node: dynamic + idle is the zone's energy; dynamic its active part, idle its idle part
	same "$M" kepler_node_package_joules_total '' kepler_node_cpu_joules_total 'zone="package"'
	same "$M" kepler_node_package_joules_total 'mode="dynamic"' kepler_node_cpu_active_joules_total 'zone="package"'
	same "$M" kepler_node_package_joules_total 'mode="idle"' kepler_node_cpu_idle_joules_total 'zone="package"'
	same "$M" kepler_node_dram_joules_total '' kepler_node_cpu_joules_total 'zone="dram"'
	same "$M" kepler_node_dram_joules_total 'mode="idle"' kepler_node_cpu_idle_joules_total 'zone="dram"'
	# workloads: their (active) energy per component and in all
	for lv in process container vm; do
		same "$M" "kepler_${lv}_package_joules_total" 'mode="dynamic"' "kepler_${lv}_cpu_joules_total" 'zone="package"'
		same "$M" "kepler_${lv}_dram_joules_total" '' "kepler_${lv}_cpu_joules_total" 'zone="dram"'
	done
	same "$M" kepler_process_joules_total '' kepler_process_cpu_joules_total ''
	same "$M" kepler_container_joules_total '' kepler_container_cpu_joules_total ''
	same "$M" kepler_process_bpf_cpu_time_ms_total '' kepler_process_cpu_seconds_total '' 1000
	same "$M" kepler_container_bpf_cpu_time_ms_total '' kepler_container_cpu_seconds_total '' 1000
	# the figures themselves: 3 s of 10 W (6 W active) over two sockets summed, nginx a quarter
	run grep -F 'kepler_node_package_joules_total{node_name="node-a",package="aggregated-package",instance="node-a",mode="dynamic",source="rapl-sysfs"}' "$M"
	assert_output --partial '} 18.000000'
	run grep -F 'kepler_container_package_joules_total{node_name="node-a",container_id="c0ffee",pod_name="pod-1",container_namespace="system",container_name="web",mode="dynamic",source="rapl-sysfs"}' "$M"
	assert_output --partial '} 4.500000'
	run grep -F 'kepler_vm_bpf_cpu_time_ms_total{node_name="node-a",vm_id="vm-1",source="bpf"}' "$M"
	assert_output --partial '} 375.000000'
	run grep -F 'kepler_process_joules_total{node_name="node-a",pid="101",container_id="",vm_id="",command="stress",mode="dynamic"}' "$M"
	assert_output --partial '} 10.500000'
	grep -q '^kepler_node_info{node_name="node-a",cpu_architecture="[^"]*",components_power_source="rapl-sysfs",platform_power_source="",source="os"} 1$' "$M"
	grep -q '^kepler_node_node_info{vendor="[^"]*",processor="[^"]*",cores="[1-9][0-9]*",chips="[1-9][0-9]*",threads_per_core="[1-9][0-9]*"} 0$' "$M"
	grep -q '^# TYPE kepler_container_joules_total counter$' "$M"
	grep -q '^# TYPE kepler_process_bpf_cpu_time_ms_total counter$' "$M"
	promtool_clean "$M"
}

@test "kepler-0.9 alone: no 0.10 family, node_type, promtool clean; a bad profile is a config error" {
	ex_start --metrics kepler-0.9 --node_type 3
	ex_feed --slots 2 --start 1000000000000000000
	ex_wait_estimates 2
	M=$BATS_TEST_TMPDIR/metrics.txt
	ex_metrics >"$M"
	run grep -c '^kepler_[a-z_]*cpu_\(joules_total\|watts\|seconds_total\|info\|usage_ratio\)' "$M"
	assert_output 0
	run grep -c '^kepler_build_info' "$M"
	assert_output 0
	grep -q '^kepler_node_node_info{.*} 3$' "$M"
	grep -q '^kepler_node_package_joules_total{node_name="node-a",package="0",instance="node-a",mode="idle",source="rapl-sysfs"} 8.000000$' "$M"
	grep -q '^wattbus_exportd_estimates_total{host="node-a"} 2$' "$M"
	promtool_clean "$M"
	run "$WB_BUILD/wattbus-exportd" -n --metrics kepler,kepler-0.8
	assert_failure 2
	assert_output --partial 'metrics: unknown profile "kepler-0.8"'
}
