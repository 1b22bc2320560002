#!/usr/bin/env bats
# Samples fall on the wall-clock grid (t mod interval == 0), seq counts up, skipped
# grid points are counted, and the sampling lateness is measured and published in
# stat; 10 ms works.

load powerd_helper

setup() {
	pd_rapl_zone intel-rapl:0 package-0 1000 262143328850
}
teardown() { wb_kill_all; }

@test "100 ms: every t on the grid, consecutive, seq +1; lateness in stat" {
	pd_start
	pd_wait_power 20
	run pd_power_rows -
	assert_success
	prev_t=0 prev_seq=-1 missed=0 n=0
	while read -r t seq epoch e iv; do
		[ "$iv" -eq 100000000 ]
		[ $((t % 100000000)) -eq 0 ] || { echo "t $t is off the grid" >&2; return 1; }
		if [ "$prev_t" -ne 0 ]; then
			[ "$t" -gt "$prev_t" ]
			[ "$seq" -eq $((prev_seq + 1)) ]
			missed=$((missed + (t - prev_t) / 100000000 - 1))
		fi
		prev_t=$t prev_seq=$seq n=$((n + 1))
	done <<<"$output"
	# grid points skipped between the samples (a loaded machine runs powerd late) are counted
	# in stat: a stat newer than these samples counts at least as many
	s=$(pd_stat_counter samples)
	pd_wait_stat samples $((${s:-0} + 1))
	echo "$missed grid points skipped between $n samples; samples_missed $(pd_stat_counter samples_missed)" >&3
	[ "$(pd_stat_counter samples_missed)" -ge "$missed" ]
	max=$(pd_stat_counter lateness_max_ns)
	mean=$(pd_stat_counter lateness_mean_ns)
	echo "lateness mean ${mean} ns, max ${max} ns" >&3
	[ "$max" -gt 0 ] && [ "$mean" -gt 0 ] && [ "$mean" -le "$max" ]
	# the sample time is when it ran, within the measured lateness: messages arrive after t
	kill -TERM "$PID_powerd"
	wb_wait_for 5 grep -q "samples, .* missed; lateness mean .* us, max .* us" "$BATS_TEST_TMPDIR/powerd.log"
}

@test "10 ms: the shortest interval keeps the grid" {
	pd_start --interval 10ms
	pd_wait_power 100 20
	run bash -c "pd_power_rows - | while read -r t seq epoch e iv; do echo \$((t % 10000000)) \$iv; done | sort -u"
	assert_output "0 10000000"
}

@test "SIGHUP applies a new interval without restarting the counters" {
	printf '[powerd]\ninterval = 100ms\n' >"$BATS_TEST_TMPDIR/p.conf"
	pd_start -c "$BATS_TEST_TMPDIR/p.conf"
	pd_wait_power 3
	sed -i 's/100ms/200ms/' "$BATS_TEST_TMPDIR/p.conf"
	# the command line's --interval wins over the file: restart without it
	wb_kill_all
	: >"$TAPLOG"
	wb_spawn tap "$WATTBUS" tap --check "$PDEP"
	wb_spawn powerd "$PD" -c "$BATS_TEST_TMPDIR/p.conf" --sysfs_root "$PDR/sys" --pub "$PDEP" \
		--runtime_dir "$BATS_TEST_TMPDIR/run" --stat_interval 200ms --host testhost
	pd_wait_power 3
	sed -i 's/200ms/300ms/' "$BATS_TEST_TMPDIR/p.conf"
	kill -HUP "$PID_powerd"
	wb_wait_for 5 bash -c 'pd_power_rows - | grep -q " 300000000$"'
	pd_wait_power $(($(grep -c '"topic":"power/' "$TAPLOG") + 2))
	# same epoch: nothing restarted; the new interval on its own grid
	[ "$(pd_power_rows - | cut -d" " -f3 | sort -u | wc -l)" -eq 1 ]
	run bash -c "pd_power_rows - | while read -r t seq epoch e iv; do echo \$((t % iv)) \$iv; done | sort -u"
	assert_output "0 200000000
0 300000000"
	grep -q "reloaded" "$BATS_TEST_TMPDIR/powerd.log"
}

@test "stat counters: the set's, and a source's own only while it is in use (bus_* with the bus source)" {
	pd_start
	pd_wait_stat samples 2
	[ -n "$(pd_stat_counter lateness_mean_ns)" ] && [ -n "$(pd_stat_counter clock_steps)" ]
	[ -z "$(pd_stat_counter bus_frames)" ] || fail "bus_frames published by a rapl powerd"
	wb_kill_all
	: >"$TAPLOG"
	# a VM guest's powerd whose host is not there: its counters at 0 from the first stat
	wb_spawn tap "$WATTBUS" tap --check "$PDEP"
	wb_spawn powerd "$PD" --source bus --bus_sub tcp://127.0.0.1:9 --bus_vm vm1 --bus_wait 0 \
		--pub "$PDEP" --runtime_dir "$BATS_TEST_TMPDIR/run" --interval 100ms \
		--stat_interval 200ms --host testhost
	wb_wait_for 10 bash -c '[ -n "$(pd_stat_counter bus_frames)" ]'
	for c in bus_frames bus_lost bus_rejected bus_resets bus_offset_ns bus_host_ahead_ns bus_clock_steps; do
		[ "$(pd_stat_counter $c)" = 0 ] || fail "$c: $(pd_stat_counter $c)"
	done
}
