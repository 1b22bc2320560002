#!/usr/bin/env bats
# wattbus probe: meters of known update period and step (a fake powercap tree
# advanced by a writer, exec meters, powerd's stream on the bus); the probe
# must recover period, step, range and component. Tolerances are wide for the
# period (a loaded machine delays the writer; the median of the change intervals
# is what is checked) and exact for what does not depend on timing.

load powerd_helper

FAKE=$BATS_TEST_DIRNAME/probe_fake_meter.py
RANGE_PKG=262143328850
RANGE_DRAM=99999999 # wraps within the first few steps (the writer starts 5 steps below)

teardown() { wb_kill_all; }

# Start the writer: package-0 every 50 ms by 3000 uJ, dram every 200 ms by 1500 uJ.
start_writer() {
	wb_spawn writer python3 "$FAKE" rapl "$PDR/sys" \
		"intel-rapl:0,package-0,0.05,3000,$RANGE_PKG" "intel-rapl:0:0,dram,0.2,1500,$RANGE_DRAM"
	wb_wait_for 30 test -f "$PDR/sys/class/powercap/intel-rapl:0:0/energy_uj"
}

# probe_json ARGS...: probe's --json output alone (its warnings go to probe.err).
probe_json() {
	"$WATTBUS" probe "$@" --json 2>"$BATS_TEST_TMPDIR/probe.err"
}

# zone_field JSON NAME FIELD: a field of one zone in probe's --json output.
zone_field() {
	jq -r --arg n "$2" --arg f "$3" '.zones[] | select(.name == $n) | .[$f]' <<<"$1"
}

# within VALUE WANT REL: |VALUE - WANT| <= REL * WANT
within() {
	python3 -c 'import sys; v, w, r = map(float, sys.argv[1:]); ok = abs(v - w) <= r * w
print("%s vs %s (+-%g%%): %s" % (v, w, r * 100, "ok" if ok else "OFF")); sys.exit(0 if ok else 1)' "$1" "$2" "$3"
}

@test "powercap tree: period, step, wrap range, component and alignd settings of each zone" {
	start_writer
	run probe_json --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --duration 3s
	assert_success
	j=$output
	[ "$(jq -r '.mode' <<<"$j")" = powerd ]
	[ "$(jq -r '[.zones[].name] | sort | join(",")' <<<"$j")" = dram-0,package-0 ]
	within "$(zone_field "$j" package-0 period_s)" 0.05 0.2
	within "$(zone_field "$j" dram-0 period_s)" 0.2 0.2
	# one step of the writer is the smallest change, across the dram counter's wrap too
	[ "$(zone_field "$j" package-0 step_uj)" = 3000 ]
	[ "$(zone_field "$j" dram-0 step_uj)" = 1500 ]
	[ "$(zone_field "$j" package-0 period_bounded)" = false ]
	[ "$(zone_field "$j" package-0 kind)" = package ]
	[ "$(zone_field "$j" dram-0 kind)" = dram ]
	[ "$(zone_field "$j" dram-0 covers)" = "memory (DRAM)" ]
	[ "$(zone_field "$j" dram-0 range_uj)" = "$RANGE_DRAM" ]
	[ "$(zone_field "$j" package-0 read_errors)" = 0 ]
	# 3000 uJ per 50 ms is 0.06 W; the range lasts range / 0.06 W
	within "$(zone_field "$j" package-0 mean_w)" 0.06 0.2
	within "$(zone_field "$j" dram-0 mean_w)" 0.0075 0.2
	within "$(zone_field "$j" dram-0 wrap_s)" "$((RANGE_DRAM / 7500))" 0.2
	[ "$(jq -r '.zones[] | select(.name == "package-0") | .read_latency_s.median > 0' <<<"$j")" = true ]
	# two updates per sample at least, never below 1 s; max_lag adds the period and the latency
	[ "$(jq -r '.suggest.interval_s' <<<"$j")" = 1 ]
	[ "$(jq -r '.suggest.max_lag_s >= 1.2 and .suggest.max_lag_s <= 1.5' <<<"$j")" = true ]
	# the table says the same
	run "$WATTBUS" probe --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --duration 1s --source rapl
	assert_success
	assert_line --regexp '^package-0 +package +rapl +[0-9.]+ ms +3 mJ '
	assert_line --regexp '^dram-0 +dram +rapl +[0-9.]+ ms +1.5 mJ '
	assert_output --partial "settings for all zones together: [powerd] interval = 1s"
}

@test "a zone that never changes: 'no change seen', no interval or max_lag suggested for it" {
	# package-1 stands still (a socket's counter that never moves, a meter that is stuck)
	pd_rapl_zone intel-rapl:1 package-1 123456 "$RANGE_PKG"
	start_writer
	run probe_json --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --source rapl --duration 2s
	assert_success
	j=$output
	[ "$(zone_field "$j" package-1 changes)" = 0 ]
	[ "$(zone_field "$j" package-1 suggest)" = null ]
	[ "$(zone_field "$j" package-0 suggest | jq -r .interval_s)" = 1 ]
	# the settings for all zones come from those that moved
	[ "$(jq -r '.suggest.interval_s' <<<"$j")" = 1 ]
	run "$WATTBUS" probe --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --source rapl --duration 2s
	assert_success
	assert_line --regexp '^package-1 +package +rapl +no change '
	# its paragraph ends with no settings; package-0's with them
	txt=$output
	run awk '/^package-1:/ { getline; print; exit }' <<<"$txt"
	assert_output "    no change seen in 2 s: no interval or max_lag to suggest; probe longer (--duration) or under load"
	run awk '/^package-0:/ { getline; print; exit }' <<<"$txt"
	assert_output --regexp '^    alignd: interval = 1s, max_lag = [0-9.]+s$'
	# the one zone alone: nothing to suggest at all
	wb_kill_all
	rm -r "$PDR/sys/class/powercap/intel-rapl:0" "$PDR/sys/class/powercap/intel-rapl:0:0"
	run probe_json --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --source rapl --duration 1s
	assert_success
	[ "$(jq -r '.suggest' <<<"$output")" = null ]
	run "$WATTBUS" probe --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --source rapl --duration 1s
	assert_success
	assert_output --partial "no change seen in 1 s"
	assert_output --partial "settings for all zones together: none to suggest, no zone changed twice"
	refute_output --partial "interval ="
}

@test "an ACPI power meter (hwmon power1_average): period and step of its readings, in uW" {
	HW=$PDR/sys/class/hwmon/hwmon0
	wb_put "$HW/name" power_meter
	wb_put "$HW/device/power1_average_interval" 300
	wb_put "$HW/device/power1_average" 240000000
	wb_spawn writer python3 "$FAKE" hwmon "$HW/device/power1_average" 0.3 240000000 250500000
	run probe_json --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --source hwmon --duration 3s
	assert_success
	j=$output
	[ "$(jq -r '.zones | length' <<<"$j")" = 1 ]
	[ "$(jq -r '.zones[0].kind + " " + .zones[0].unit + " " + .zones[0].source' <<<"$j")" = "platform uW hwmon" ]
	within "$(jq -r '.zones[0].period_s' <<<"$j")" 0.3 0.2
	[ "$(jq -r '.zones[0].step_uw' <<<"$j")" = 10500000 ]
	# the meter alternates 240 and 250.5 W: within 1.5 %, neither value alone passes
	within "$(jq -r '.zones[0].mean_w' <<<"$j")" 245.25 0.015
	[ "$(jq -r '.zones[0].range_uj' <<<"$j")" = null ]
	[ "$(jq -r '.zones[0].wrap_s' <<<"$j")" = null ]
}

@test "exec meters: a stream and a command run again and again" {
	start_writer
	# /usr/bin/python3: the command runs under sh, where python3 may be a slow-starting shim
	run probe_json --exec "/usr/bin/python3 -u $FAKE exec 0.1 2500 999999" --exec-stream --duration 5s
	assert_success
	j=$output
	[ "$(jq -r '.mode' <<<"$j")" = exec ]
	within "$(zone_field "$j" meter-0 period_s)" 0.1 0.25
	[ "$(zone_field "$j" meter-0 step_uj)" = 2500 ]
	[ "$(zone_field "$j" meter-0 kind)" = platform ]
	[ "$(zone_field "$j" meter-0 range_uj)" = 999999 ]
	within "$(zone_field "$j" meter-0 mean_w)" 0.025 0.25
	# sample mode: each run reads the dram file, which changes every 200 ms
	run probe_json --exec "echo mem \$(cat $PDR/sys/class/powercap/intel-rapl:0:0/energy_uj) uj kind=dram range=$RANGE_DRAM" \
		--spacing 5ms --duration 3s
	assert_success
	j=$output
	within "$(zone_field "$j" mem period_s)" 0.2 0.25
	[ "$(zone_field "$j" mem step_uj)" = 1500 ]
	# a run's cost is the command's: it is measured
	[ "$(jq -r '.zones[0].cpu_per_read_s > 0 and .zones[0].read_latency_s.median > 0' <<<"$j")" = true ]
}

@test "power streams on the bus: a counter slower than powerd's interval shows its own period" {
	start_writer
	pd_start --source rapl
	pd_wait_power 2
	run probe_json --sub "$PDEP" --host testhost --duration 4s
	assert_success
	j=$output
	[ "$(jq -r '.mode' <<<"$j")" = bus ]
	# dram changes every 200 ms: every second sample of powerd's 100 ms grid
	within "$(zone_field "$j" dram-0 period_s)" 0.2 0.26
	[ "$(zone_field "$j" dram-0 period_bounded)" = false ]
	# package changes every 50 ms: at every sample, so only a bound is known
	[ "$(zone_field "$j" package-0 period_bounded)" = true ]
	within "$(zone_field "$j" package-0 spacing_s)" 0.1 0.01
	[ "$(zone_field "$j" dram-0 host)" = testhost ]
	[ "$(zone_field "$j" dram-0 source)" = rapl ]
	[ "$(jq -r '.zones[] | select(.name == "dram-0") | .arrival_lag_s.median >= 0' <<<"$j")" = true ]
}

@test "a published stream with invalid frames among it: the frames are counted, the stream still measured" {
	# sample times 1 s apart; the counter steps 5 J every second sample: period 2 s, 2.5 W
	for i in $(seq 1 30); do
		t=$(((1800000000 + i) * 1000000000))
		echo "{\"topic\":\"power/h1\",\"msg\":{\"v\":1,\"src\":\"t\",\"epoch\":1,\"seq\":$((2 * i)),\"host\":\"h1\",\"kind\":\"power\",\"t\":$t,\"interval_ns\":1000000000,\"zones\":[{\"name\":\"wall\",\"zone\":\"platform\",\"energy_uj\":$((i / 2 * 5000000))}]}}"
		echo "{\"topic\":\"power/h1\",\"msg\":{\"v\":1,\"src\":\"t\",\"epoch\":1,\"seq\":$((2 * i + 1)),\"host\":\"h1\",\"kind\":\"power\",\"t\":\"bad\"}}"
	done >"$BATS_TEST_TMPDIR/lines"
	ep=$(wb_ep pub)
	wb_spawn pub bash -c '"$0" pub --raw --wait 60s --interval 10ms "$1" <"$2"' "$WATTBUS" "$ep" "$BATS_TEST_TMPDIR/lines"
	wb_wait_for 30 test -S "$BATS_TEST_TMPDIR/pub.sock"
	run probe_json --sub "$ep" --host h1 --duration 5s
	assert_success
	j=$output
	[ "$(jq -r .rejected <<<"$j")" -ge 1 ]
	[ "$(zone_field "$j" wall period_s)" = 2 ]
	[ "$(zone_field "$j" wall step_uj)" = 5000000 ]
	[ "$(zone_field "$j" wall mean_w)" = 2.5 ]
	[ "$(zone_field "$j" wall kind)" = platform ]
	grep -q "rejected frame on topic 'power/h1'" "$BATS_TEST_TMPDIR/probe.err"
}

@test "bad input: a clear message and exit 2; no meter: exit 1 with what was tried" {
	run "$WATTBUS" probe --duration 10ms
	assert_failure 2
	assert_output --partial "--duration: '0.01 s' is too short"
	run "$WATTBUS" probe --source bogus
	assert_failure 2
	assert_output --partial "--source: 'bogus' is not one of auto, rapl"
	run "$WATTBUS" probe --source rapl --exec true
	assert_failure 2
	run "$WATTBUS" probe --duration soon
	assert_failure 2
	assert_output --partial "--duration: 'soon' is not a duration"
	mkdir -p "$PDR/sys"
	run "$WATTBUS" probe --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --duration 200ms
	assert_failure 1
	assert_output --partial "no meter here that powerd could read: rapl:"
	run "$WATTBUS" probe --exec "echo nothing useful" --duration 200ms
	assert_failure 1
	assert_output --partial "--exec: 'echo nothing useful' printed no valid reading"
}
