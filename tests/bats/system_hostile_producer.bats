#!/usr/bin/env bats
# A hostile publisher under a victim's host name, through alignd, estimd and exportd (issue 31):
# a second producer (another src) is refused as duplicate_producer whatever it sends, the first
# keeps the host's slots; energy no zone or host can draw is refused as implausible_power by
# every stage that receives it, so a hostile alignd cannot pass it to estimd nor a hostile estimd
# to exportd. Each test checks exportd's /metrics: the victim's node and process joules are the
# honest ones exactly (tests/bats/hostile_feed.py: 10 slots of 100 J, the process 25 J of each).

load helper
load exportd_helper

setup() {
	RT=$BATS_TEST_TMPDIR/run
	mkdir -p "$RT"
	COMMON=(--runtime_dir "$RT" --stat_interval 200ms --state_file "")
}

teardown() { wb_kill_all; }

# pipeline [alignd flags...]: alignd reads $(wb_ep in), estimd reads alignd (and $(wb_ep aligned),
# where a test plays a hostile alignd), exportd reads estimd (and $(wb_ep estimd), a hostile
# estimd) and every stage's stat.
pipeline() {
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" "${COMMON[@]}" --sub "$(wb_ep in)" --pub "$(wb_ep al)" \
		--max_lag 60s --max_skew 0 "$@"
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" "${COMMON[@]}" --model "" --sub "$(wb_ep al)" \
		--sub "$(wb_ep aligned)" --pub "$(wb_ep es)"
	ex_start --state_file "" --stat_interval 200ms --sub "$(wb_ep es)" --sub "$(wb_ep al)"
}

feed() {
	python3 "$BATS_TEST_DIRNAME/hostile_feed.py" "$1" >"$BATS_TEST_TMPDIR/feed.jsonl"
	run "$WATTBUS" pub --wait 60s "$(wb_ep in)" <"$BATS_TEST_TMPDIR/feed.jsonl"
	assert_success
	ex_wait_estimates 10 victim
}

node_j() { ex_value "kepler_node_cpu_joules_total{node_name=\"$1\",zone=\"$2\""; }
# all of a host's node joules, every zone
node_sum() {
	ex_metrics | grep -F "kepler_node_cpu_joules_total{node_name=\"$1\"" | awk '{s += $NF} END {printf "%.6f\n", s}'
}
proc_j() {
	ex_metrics | grep -F 'kepler_process_cpu_joules_total{node_name="victim",pid="4242",comm="victimjob"' |
		grep -F 'zone="package"' | awk '{print $NF}'
}
# victim_intact: the victim's package joules (1000 J) and its process's (250 J) are what its own
# producers measured, whatever a hostile one sent.
victim_intact() {
	[ "$(node_j victim package)" = 1000.000000 ] || fail "victim's package joules: $(node_j victim package)"
	[ "$(proc_j)" = 250.000000 ] || fail "victim's process joules: $(proc_j)"
}
# rejected STAGE REASON: the stage's rejections for the reason, as exportd exports them (0: none).
rejected() {
	ex_metrics | grep -F 'wattbus_stage_messages_rejected_total{' | grep -F "stage=\"$1\"" |
		grep -F "reason=\"$2\"" | awk '{s += $NF} END {print s + 0}'
}
rejected_at_least() { [ "$(rejected "$1" "$2")" -ge "$3" ]; }
# wait_rejected STAGE REASON N: exportd has the stage's stat with at least N such rejections.
wait_rejected() {
	wb_wait_for 15 rejected_at_least "$@" || fail "$1: $(rejected "$1" "$2") $2, expected $3"
}

@test "a second power publisher with a new zone (8.7e12 J): refused, counted, no invented joule" {
	pipeline
	feed new_zone
	[ "$(node_sum victim)" = 1000.000000 ] || fail "victim's node joules: $(node_sum victim), 1000 true"
	victim_intact
	wait_rejected alignd duplicate_producer 11
	run ex_metrics
	refute_output --partial 'zone="evil"'
	grep -q "src 'evil' (epoch 99) is a second producer beside src 'powerd'" "$BATS_TEST_TMPDIR/alignd.log"
}

@test "a second power publisher with the same zone at 0: refused, the first keeps its slots" {
	pipeline
	feed same_zone
	victim_intact
	wait_rejected alignd duplicate_producer 11
	[ "$(grep -c 'discontinuity' "$BATS_TEST_TMPDIR/alignd.log")" = 0 ]
}

@test "a second usage publisher without processes: refused, the victim's process keeps its energy" {
	pipeline
	feed usage
	victim_intact
	wait_rejected alignd duplicate_producer 11
	grep -q "usage/victim.*src 'evil-usaged' (epoch 98) is a second producer beside src 'usaged/bpf'" \
		"$BATS_TEST_TMPDIR/alignd.log"
}

@test "an INT64-overflow counter from the victim's own powerd: refused (implausible_power)" {
	pipeline
	feed overflow
	victim_intact
	wait_rejected alignd implausible_power 1
	[ "$(rejected alignd duplicate_producer)" = 0 ]
	grep -q "power/victim zone package-0: .* more than max_zone_w 5000 W" "$BATS_TEST_TMPDIR/alignd.log"
}

@test "the victim's own producer: at most max_host_w over all its zones, each under max_zone_w" {
	pipeline
	feed greedy
	# package-0 at 100 W and ten zones at 4,900 W: 49,100 J a second reach /metrics
	[ "$(node_sum victim)" = 491000.000000 ] || fail "victim's node joules: $(node_sum victim)"
	wait_rejected alignd implausible_power 1
	[ "$(rejected alignd implausible_power)" = 1 ]
	grep -q "power/victim: 11 zones draw 5.009e+04 W together, more than max_host_w 50000 W" \
		"$BATS_TEST_TMPDIR/alignd.log"
}

@test "extra_power_src admits a deliberate second meter with zones of its own, not the first's" {
	pipeline --extra_power_src bmc
	feed extra_meter
	[ "$(node_j victim platform)" = 3000.000000 ]
	victim_intact
	wait_rejected alignd duplicate_producer 11
	grep -q "zone package-0 of power/victim is src 'powerd''s: src 'bmc' is a second producer" \
		"$BATS_TEST_TMPDIR/alignd.log"
}

@test "a hostile alignd publishing impossible energy to estimd: refused by estimd" {
	pipeline
	# host h2, six 1 s slots of 100 J; the third claims 2^63-1 uJ, the fifth 6 kJ (6 kW)
	python3 "$BATS_TEST_DIRNAME/estimd_slots.py" --host h2 --count 6 --start "$(($(date +%s) - 60))" |
		python3 -c '
import json, sys
for i, l in enumerate(sys.stdin):
    m = json.loads(l)
    for z in m["msg"]["zones"]:
        z["energy_uj"] = {2: 2**63 - 1, 4: 6 * 10**9}.get(i, 100 * 10**6) if z["name"] == "package-0" else 0
    print(json.dumps(m))' >"$BATS_TEST_TMPDIR/aligned.jsonl"
	run "$WATTBUS" pub --src alignd --wait 60s "$(wb_ep aligned)" <"$BATS_TEST_TMPDIR/aligned.jsonl"
	assert_success
	ex_wait_estimates 4 h2
	wait_rejected estimd implausible_power 2
	[ "$(node_j h2 package)" = 400.000000 ]
	grep -q "aligned/h2 zone package-0: 9223372036854775807 uJ in 1.000 s" "$BATS_TEST_TMPDIR/estimd.log"
	grep -q "aligned/h2 zone package-0: 6000000000 uJ in 1.000 s is 6000 W, more than max_zone_w 5000 W" \
		"$BATS_TEST_TMPDIR/estimd.log"
}

@test "a hostile estimd publishing impossible energy to exportd: refused by exportd" {
	pipeline
	# host h3: five slots of 10 W package (exportd_feed.py) with estimd's totals; the second
	# slot claims 2^63-1 uJ, the fourth a total that jumps by 1 GJ (a recovery of lost slots)
	start=$((($(date +%s) - 60) * 1000000000))
	python3 "$EX_FEED" --host h3 --slots 5 --start "$start" --totals-from "$start" | python3 -c '
import json, sys
for i, l in enumerate(sys.stdin):
    m = json.loads(l)
    z = m["zones"][0]
    if i == 1:
        z["idle_uj"] = 2**63 - 1 - z["active_uj"]
        z["energy_uj"] = 2**63 - 1
    if i == 3:
        z["total_uj"] += 10**15
        z["idle_total_uj"] += 10**15
    print(json.dumps(m))' >"$BATS_TEST_TMPDIR/est.jsonl"
	run "$WATTBUS" pub --src estimd --wait 60s "$(wb_ep estimd)" <"$BATS_TEST_TMPDIR/est.jsonl"
	assert_success
	ex_wait_estimates 3 h3
	wait_rejected exportd implausible_power 2
	# five slots of 10 J: the honest totals of the three taken carry the two refused slots'
	# honest 10 J each, none of what they claimed
	[ "$(node_j h3 package)" = 50.000000 ]
	grep -q "estimate/h3 zone package-0: 9223372036854775807 uJ" "$BATS_TEST_TMPDIR/exportd.log"
}
