#!/usr/bin/env bats
# powerd's stat messages go out at its sample ticks, right after the power
# message, when it samples at least as often as stat_interval: the loop wakes
# once per sample, not once more per stat message. Sampling less often than
# stat_interval, they come from a timer of their own, between the samples.

load powerd_helper

RANGE=262143328850

setup() {
	pd_rapl_zone intel-rapl:0 package-0 1000 $RANGE
}
teardown() { wb_kill_all; }

# Voluntary context switches of powerd's main thread: one per time its loop sleeps.
nvcsw() {
	awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$PID_powerd/task/$PID_powerd/status"
}

@test "stat messages every sample ride on the sample's wake-up" {
	pd_start --stat_interval 100ms
	pd_wait_stat samples 3
	local s0 v0 s1 v1
	s0=$(pd_stat_counter samples)
	v0=$(nvcsw)
	pd_wait_stat samples $((s0 + 40)) 30
	v1=$(nvcsw)
	s1=$(pd_stat_counter samples)
	# a stat timer of their own would wake it about twice per sample
	echo "samples $((s1 - s0)), voluntary switches $((v1 - v0))"
	[ $((v1 - v0)) -lt $(((s1 - s0) * 3 / 2 + 5)) ]
	# each one right after a power message: never two in a row
	pd_tap_lines | jq -r '.topic' | tail -n +3 | uniq -c | awk '$2 ~ /^stat\// && $1 > 1 { bad = 1 } END { exit bad }'
}

@test "sampling less often than stat_interval, stat messages come between the samples" {
	pd_start --interval 300ms --stat_interval 100ms
	pd_wait_stat samples 6 30
	# some two power messages in a row have two or more stat messages between them
	pd_tap_lines | jq -r '.topic' | awk '/^power\// { if (n >= 2) ok = 1; n = 0 } /^stat\// { n++ } END { exit !ok }'
}

@test "a SIGHUP to an interval longer than stat_interval gives the stat messages their own timer" {
	printf '[powerd]\ninterval = 100ms\n' >"$BATS_TEST_TMPDIR/p.conf"
	wb_spawn tap "$WATTBUS" tap --check "$PDEP"
	wb_spawn powerd "$PD" -c "$BATS_TEST_TMPDIR/p.conf" --sysfs_root "$PDR/sys" --pub "$PDEP" \
		--runtime_dir "$BATS_TEST_TMPDIR/run" --stat_interval 100ms --host testhost
	pd_wait_stat samples 3
	sed -i 's/100ms/300ms/' "$BATS_TEST_TMPDIR/p.conf"
	kill -HUP "$PID_powerd"
	wb_wait_for 10 grep -q "reloaded" "$BATS_TEST_TMPDIR/powerd.log"
	local n
	n=$(pd_tap_lines | wc -l)
	pd_wait_stat samples $(($(pd_stat_counter samples) + 6)) 30
	pd_tap_lines | tail -n +$((n + 1)) | jq -r '.topic' | awk '/^power\// { if (n >= 2) ok = 1; n = 0 } /^stat\// { n++ } END { exit !ok }'
}
