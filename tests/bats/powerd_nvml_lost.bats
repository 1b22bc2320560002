#!/usr/bin/env bats
# A GPU whose power (not an energy counter) is integrated, lost for a few seconds at a 250 ms
# interval: the gap is bridged as every power source bridges one, up to max(10 intervals, 10 s)
# (docs/powerd.md), so its energy over the run is its constant power times the time. The nvml
# source used to rebase after 10 intervals (2.5 s here) and drop what the GPU drew meanwhile.

load powerd_helper

setup() {
	export WB_FAKE_NVML=$BATS_TEST_TMPDIR/nvml.txt
	LIB=$WB_BUILD/tests/libfake-nvml.so
	ROWS=$BATS_TEST_TMPDIR/rows
}

teardown() { wb_kill_all; }

@test "nvml: a power-only GPU lost for 3.5 s at 250 ms is bridged, no joule dropped" {
	wb_put "$WB_FAKE_NVML" "gpu uuid=GPU-lost-0 name=FakeA10 energy_mj=- power_mw=100000"
	pd_start --source nvml --nvml_library "$LIB" --interval 250ms
	pd_wait_power 4 30
	# Lost: every reading answers NVML_ERROR_GPU_IS_LOST, one read error per sample. 14 of them
	# are 3.5 s, past 10 intervals (2.5 s) and within 10 s.
	local before
	before=$(pd_stat_counter read_errors)
	wb_put "$WB_FAKE_NVML" "gpu uuid=GPU-lost-0 name=FakeA10 energy_mj=- power_mw=100000 lost=1"
	pd_wait_stat read_errors $((${before:-0} + 14)) 30
	wb_put "$WB_FAKE_NVML" "gpu uuid=GPU-lost-0 name=FakeA10 energy_mj=- power_mw=100000"
	local n
	n=$(grep -c '"topic":"power/testhost"' "$TAPLOG")
	pd_wait_power $((n + 4)) 30
	run pd_stat_counter rebased
	assert_output 0
	pd_power_rows gpu-0 | awk '{ print $1, $4 }' >"$ROWS"
	# the gap is there: two published samples 3.5 s or more apart
	awk 'NR > 1 && $1 - t >= 3500000000 { found = 1 } { t = $1 } END { exit !found }' "$ROWS"
	run pd_watts_ok "$ROWS" 100
	echo "$output"
	assert_success
}
