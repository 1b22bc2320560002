#!/usr/bin/env bats
# A meterless host out of the box: slots without power get node energy from
# the shipped Kepler model-db model, scaled to the host's CPU count.

load estimd_helper

teardown() { wb_kill_all; }

@test "the shipped model gives a 2-CPU VM the hand-computed energy" {
	estimd_start "estimate/" \
		--model "$WB_ROOT/data/models/ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1.json" \
		--stat_interval 200ms
	# One process busy on one of two CPUs for the whole second.
	run "$WATTBUS" pub --wait 30s "$in" <<-'EOF'
		{"kind":"aligned","host":"vm1","t0":1000000000000,"t1":1001000000000,"ncpu":2,"quality":{"coverage":0},"cpu":{"user_ns":1000000000,"nice_ns":0,"system_ns":0,"idle_ns":1000000000,"iowait_ns":0,"irq_ns":0,"softirq_ns":0,"steal_ns":0},"zones":[],"procs":[{"pid":42,"comm":"burn","cpu_ns":1000000000}]}
	EOF
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 1 10
	# package: idle 72.5986 W * 2/72 CPUs = 2.016628 W; active 183.3146 W * 1000/71901.33 = 2.549530 W.
	# dram: idle 21.2868 W * 2/72 = 0.591300 W; active 7.7870 W * 1000/71901.33 = 0.108301 W.
	run jq -c '[.msg.mode, .msg.cpu_usage_ratio, (.msg.zones[] | [.zone, .idle_uj, .active_uj, .energy_uj]), .msg.procs[0].energy_uj]' \
		"$BATS_TEST_TMPDIR/tap.log"
	assert_output '["model",0.5,["package",2016628,2549530,4566158],["dram",591300,108301,699601],[2549530,108301]]'
	grep -q "core ratio 0.0278 applied to idle power" "$BATS_TEST_TMPDIR/estimd.log"
}
