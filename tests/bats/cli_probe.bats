#!/usr/bin/env bats
# wattbus probe: meters of known update period and step (a fake powercap tree
# advanced by a writer, exec meters, powerd's stream on the bus); the probe
# must recover period, step, range and component. A loaded machine delays the
# writer, so its real period is not the nominal one: the writer logs each update
# (PROBE_FAKE_LOG) and probe's period and power are held, tightly, to what the
# log shows for the time probe ran; what does not depend on timing is exact.

load powerd_helper

FAKE=$BATS_TEST_DIRNAME/probe_fake_meter.py
RANGE_PKG=262143328850
RANGE_DRAM=99999999 # wraps within the first few steps (the writer starts 5 steps below)

teardown() { wb_kill_all; }

# Start the writer: package-0 every 50 ms by 3000 uJ, dram every 200 ms by 1500 uJ.
start_writer() {
	export PROBE_FAKE_LOG=$BATS_TEST_TMPDIR/writes
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

# within VALUE WANT REL [ABS]: |VALUE - WANT| <= REL * WANT + ABS
within() {
	python3 -c 'import sys; v, w, r, a = map(float, sys.argv[1:]); ok = abs(v - w) <= r * w + a
print("%s vs %s (+-%g%% +-%g): %s" % (v, w, r * 100, a, "ok" if ok else "OFF")); sys.exit(0 if ok else 1)' "$1" "$2" "$3" "${4:-0}"
}

# real NAME period|mean_w|level_w: what the writer's log shows for one meter between T0
# and T1 (set around a probe run): the median interval between its updates (probe's
# period is a median too), its mean power over them (uJ per us is W), or the mean of a
# power reading in uW weighted by how long it showed each value.
real() {
	python3 -c 'import sys, statistics
name, what, t0, t1 = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
u = [(float(t), int(e)) for n, t, e in (l.split() for l in open(sys.argv[1])) if n == name and t0 <= float(t) <= t1]
gaps = [b[0] - a[0] for a, b in zip(u, u[1:])]
if what == "level_w":
    a = [(float(t), int(e)) for n, t, e in (l.split() for l in open(sys.argv[1])) if n == name and float(t) < t0][-1:]
    u = [(t0, a[0][1])] + u if a else u
    ends = [t for t, _ in u[1:]] + [t1]
    print(sum(v * (e - t) for (t, v), e in zip(u, ends)) / (t1 - u[0][0]) / 1e6)
else:
    print(statistics.median(gaps) if what == "period" else (u[-1][1] - u[0][1]) / (u[-1][0] - u[0][0]) / 1e6)' \
		"$PROBE_FAKE_LOG" "$1" "$2" "$T0" "$T1"
}

# A change shows at the first reading after it: each interval probe sees is the real one
# give or take the time between its readings, half of that in the median (NAME: a zone
# of probe's output $j).
period_slack() {
	python3 -c 'import sys; print(float(sys.argv[1]) / 2)' "$(zone_field "$j" "$1" spacing_s)"
}

@test "powercap tree: period, step, wrap range, component and alignd settings of each zone" {
	start_writer
	T0=$EPOCHREALTIME
	run probe_json --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --duration 3s
	T1=$EPOCHREALTIME
	assert_success
	j=$output
	[ "$(jq -r '.mode' <<<"$j")" = powerd ]
	[ "$(jq -r '[.zones[].name] | sort | join(",")' <<<"$j")" = dram-0,package-0 ]
	# the writer's nominal periods are 50 and 200 ms
	within "$(zone_field "$j" package-0 period_s)" "$(real package-0 period)" 0.1 "$(period_slack package-0)"
	within "$(zone_field "$j" dram-0 period_s)" "$(real dram period)" 0.1 "$(period_slack dram-0)"
	# one step of the writer is the smallest change, across the dram counter's wrap too
	[ "$(zone_field "$j" package-0 step_uj)" = 3000 ]
	[ "$(zone_field "$j" dram-0 step_uj)" = 1500 ]
	[ "$(zone_field "$j" package-0 period_bounded)" = false ]
	[ "$(zone_field "$j" package-0 kind)" = package ]
	[ "$(zone_field "$j" dram-0 kind)" = dram ]
	[ "$(zone_field "$j" dram-0 covers)" = "memory (DRAM)" ]
	[ "$(zone_field "$j" dram-0 range_uj)" = "$RANGE_DRAM" ]
	[ "$(zone_field "$j" package-0 read_errors)" = 0 ]
	# nominally 3000 uJ per 50 ms, 0.06 W, and 0.0075 W; the range lasts range / power
	within "$(zone_field "$j" package-0 mean_w)" "$(real package-0 mean_w)" 0.05
	within "$(zone_field "$j" dram-0 mean_w)" "$(real dram mean_w)" 0.05
	within "$(zone_field "$j" dram-0 wrap_s)" "$(python3 -c "print($RANGE_DRAM / 1e6 / $(real dram mean_w))")" 0.05
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
	export PROBE_FAKE_LOG=$BATS_TEST_TMPDIR/writes
	wb_spawn writer python3 "$FAKE" hwmon "$HW/device/power1_average" 0.3 240000000 250500000
	T0=$EPOCHREALTIME
	run probe_json --sysfs-root "$PDR/sys" --dev-root "$PDR/dev" --proc-root "$PDR/proc" --source hwmon --duration 3s
	T1=$EPOCHREALTIME
	assert_success
	j=$output
	[ "$(jq -r '.zones | length' <<<"$j")" = 1 ]
	[ "$(jq -r '.zones[0].kind + " " + .zones[0].unit + " " + .zones[0].source' <<<"$j")" = "platform uW hwmon" ]
	# nominally 300 ms
	within "$(jq -r '.zones[0].period_s' <<<"$j")" "$(real hwmon period)" 0.1 "$(period_slack "$(jq -r '.zones[0].name' <<<"$j")")"
	[ "$(jq -r '.zones[0].step_uw' <<<"$j")" = 10500000 ]
	# the meter alternates 240 and 250.5 W, each nominally as long: within 0.5 % of what it
	# showed, neither value alone passes
	within "$(jq -r '.zones[0].mean_w' <<<"$j")" "$(real hwmon level_w)" 0.005
	[ "$(jq -r '.zones[0].range_uj' <<<"$j")" = null ]
	[ "$(jq -r '.zones[0].wrap_s' <<<"$j")" = null ]
}

@test "exec meters: a stream and a command run again and again" {
	start_writer
	# /usr/bin/python3: the command runs under sh, where python3 may be a slow-starting shim
	T0=$EPOCHREALTIME
	run probe_json --exec "/usr/bin/python3 -u $FAKE exec 0.1 2500 999999" --exec-stream --duration 5s
	T1=$EPOCHREALTIME
	assert_success
	j=$output
	[ "$(jq -r '.mode' <<<"$j")" = exec ]
	# nominally 100 ms and 0.025 W
	within "$(zone_field "$j" meter-0 period_s)" "$(real meter-0 period)" 0.1 "$(period_slack meter-0)"
	[ "$(zone_field "$j" meter-0 step_uj)" = 2500 ]
	[ "$(zone_field "$j" meter-0 kind)" = platform ]
	[ "$(zone_field "$j" meter-0 range_uj)" = 999999 ]
	within "$(zone_field "$j" meter-0 mean_w)" "$(real meter-0 mean_w)" 0.05
	# sample mode: each run reads the dram file, which changes every 200 ms (with the shell's
	# read, no cat: the fewer forks a run takes, the closer its readings on a loaded host)
	T0=$EPOCHREALTIME
	run probe_json --exec "read v <$PDR/sys/class/powercap/intel-rapl:0:0/energy_uj; echo mem \$v uj kind=dram range=$RANGE_DRAM" \
		--spacing 5ms --duration 3s
	T1=$EPOCHREALTIME
	assert_success
	j=$output
	within "$(zone_field "$j" mem period_s)" "$(real dram period)" 0.1 "$(period_slack mem)"
	[ "$(zone_field "$j" mem step_uj)" = 1500 ]
	# a run's cost is the command's: it is measured
	[ "$(jq -r '.zones[0].cpu_per_read_s > 0 and .zones[0].read_latency_s.median > 0' <<<"$j")" = true ]
}

@test "power streams on the bus: a counter slower than powerd's interval shows its own period" {
	start_writer
	pd_start --source rapl
	pd_wait_power 2
	T0=$EPOCHREALTIME
	run probe_json --sub "$PDEP" --host testhost --duration 4s
	T1=$EPOCHREALTIME
	assert_success
	j=$output
	[ "$(jq -r '.mode' <<<"$j")" = bus ]
	# dram changes every 200 ms: every second sample of powerd's 100 ms grid
	within "$(zone_field "$j" dram-0 period_s)" "$(real dram period)" 0.1 "$(period_slack dram-0)"
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
