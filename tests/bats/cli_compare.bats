#!/usr/bin/env bats
# wattbus compare: synthetic streams of known gain, offset, lag, noise and
# losses (compare_streams.py writes them as a recording); the report must
# recover them, from the file and live from the bus.

load helper

GEN=$BATS_TEST_DIRNAME/compare_streams.py

teardown() { wb_kill_all; }

# compare_json ARGS...: compare's --json output alone.
compare_json() {
	"$WATTBUS" compare "$@" --json 2>"$BATS_TEST_TMPDIR/compare.err"
}

# near VALUE WANT ABS: |VALUE - WANT| <= ABS
near() {
	python3 -c 'import sys; v, w, a = map(float, sys.argv[1:]); ok = abs(v - w) <= a
print("%s vs %s (+-%g): %s" % (v, w, a, "ok" if ok else "OFF")); sys.exit(0 if ok else 1)' "$1" "$2" "$3"
}

@test "a meter reading 8 % high, 12 W over, 1.5 s late, noisy, losing every tenth message" {
	rec=$BATS_TEST_TMPDIR/s.rec
	python3 "$GEN" "$rec" --gain 1.08 --offset 12 --lag 1.5 --noise 2 --drop 10
	run compare_json --from "$rec" ref/platform dut/meter-0
	assert_success
	j=$output
	near "$(jq -r .lag_s <<<"$j")" 1.5 0.1
	# the fit reported is the one at the lag reported: its R^2 is the correlation there squared
	near "$(jq -r .fit.r2 <<<"$j")" "$(jq -r '.lag_r * .lag_r' <<<"$j")" 1e-9
	near "$(jq -r .fit.gain <<<"$j")" 1.08 0.025
	near "$(jq -r .fit.offset_w <<<"$j")" 12 3
	[ "$(jq -r '.fit.r2 > 0.98 and .fit_lag0.r2 < 0.6' <<<"$j")" = true ]
	# B - A averages 0.08 * mean(A) + 12 W; the staircase averages about 100 W
	near "$(jq -r .bias_w <<<"$j")" 20 4
	# 24 of 240 messages left out; the last one is after the last seen, so 23 gaps in seq
	[ "$(jq -r .b.lost <<<"$j")" = 23 ]
	[ "$(jq -r .a.lost <<<"$j")" = 0 ]
	[ "$(jq -r '.b.slots_missing + .a.slots_missing' <<<"$j")" = 0 ]
	[ "$(jq -r '.a.kind + " " + .b.host' <<<"$j")" = "platform dut" ]
	near "$(jq -r .b.spacing_s <<<"$j")" 0.5 0.001
	near "$(jq -r .slot_s <<<"$j")" 2 0.001
	# the other way round: A follows B, and the gain is the inverse
	run compare_json --from "$rec" dut/meter-0 ref/platform
	assert_success
	near "$(jq -r .lag_s <<<"$output")" -1.5 0.1
	near "$(jq -r .fit.gain <<<"$output")" 0.926 0.025
}

@test "two meters that agree: gain 1, offset 0, no lag, small error; text table and SVG plot" {
	rec=$BATS_TEST_TMPDIR/same.rec
	python3 "$GEN" "$rec"
	run compare_json --from "$rec" --slot 1s ref/platform dut/meter-0
	assert_success
	j=$output
	near "$(jq -r .lag_s <<<"$j")" 0 0.05
	near "$(jq -r .fit.gain <<<"$j")" 1 0.02
	near "$(jq -r .fit.offset_w <<<"$j")" 0 2
	near "$(jq -r .mape_pct <<<"$j")" 0 1.5
	near "$(jq -r .slot_s <<<"$j")" 1 0.001
	[ "$(jq -r '.per_slot | length' <<<"$j")" = "$(jq -r .slots <<<"$j")" ]
	run "$WATTBUS" compare --from "$rec" ref/platform dut/meter-0 --plot "$BATS_TEST_TMPDIR/p.svg"
	assert_success
	assert_line --regexp '^ +T_S +A_W +B_W +B-A_W +B-A_% *$'
	assert_line --regexp '^lag: B follows A by [+-]0\.0[0-5]0 s'
	assert_line --regexp '^fit: B = (1\.0|0\.9)[0-9]+ \* A '
	if command -v gnuplot >/dev/null; then
		grep -q '<svg' "$BATS_TEST_TMPDIR/p.svg"
		grep -q 'ref/platform' "$BATS_TEST_TMPDIR/p.svg"
	else
		skip "gnuplot is not installed (scripts/deps.sh test installs gnuplot-nox)"
	fi
}

@test "two zones of one message (read at the same instants): lag 0, and the fit reported is the one at lag 0" {
	# dram-0 is 0.25 x platform + 4 W plus a staircase of its own and noise: correlated, not
	# proportional, so that neighbouring lags differ only by noise. compare used to search the lag
	# on one slot grid and fit on another: it printed a lag off 0 with the fit of that lag worse
	# than lag 0's, and an R^2 that was not the square of the correlation it printed.
	for seed in 1 2 3; do
		rec=$BATS_TEST_TMPDIR/zones$seed.rec
		python3 "$GEN" "$rec" --second-zone --noise 2 --seed "$seed"
		run compare_json --from "$rec" ref/platform ref/dram-0
		assert_success
		j=$output
		# lag 0 within one step (a tenth of the 0.25 s spacing)
		near "$(jq -r .lag_s <<<"$j")" 0 0.025
		near "$(jq -r .fit.r2 <<<"$j")" "$(jq -r '.lag_r * .lag_r' <<<"$j")" 1e-9
		[ "$(jq -r '.fit.r2 >= .fit_lag0.r2' <<<"$j")" = true ]
		near "$(jq -r .fit.gain <<<"$j")" 0.25 0.02
	done
	run "$WATTBUS" compare --summary --from "$rec" ref/platform ref/dram-0
	assert_success
	assert_line --regexp '^lag: B follows A by [+-]0\.0(00|25) s \(correlation 0\.9[0-9]+ at that lag'
	# the two R^2 of the fit line: the lag's is at least lag 0's
	echo "$output" | awk '/^fit:/ { gsub(/[(),:]/, " "); for (i = 1; i <= NF; i++) if ($i == "R^2") r[++n] = $(i + 1) }
		END { print "R^2 " r[1] ", at lag 0 " r[2]; exit !(n == 2 && r[1] >= r[2]) }'
}

@test "a meter that drifts: per-window gain shows when" {
	rec=$BATS_TEST_TMPDIR/drift.rec
	python3 "$GEN" "$rec" --gain 1.0 --gain2 1.2 --lag 1 --seconds 240
	run compare_json --from "$rec" --window 40s --summary ref/platform dut/meter-0
	assert_success
	j=$output
	[ "$(jq -r '.windows | length' <<<"$j")" -ge 4 ]
	near "$(jq -r '.windows[0].fit.gain' <<<"$j")" 1.0 0.025
	near "$(jq -r '.windows[-1].fit.gain' <<<"$j")" 1.2 0.03
	near "$(jq -r '.windows[0].lag_s' <<<"$j")" 1 0.1
	near "$(jq -r '.windows[-1].lag_s' <<<"$j")" 1 0.1
	[ "$(jq -r '.per_slot' <<<"$j")" = null ]
	# one line fits the whole run worse than either end, and the error grows with the drift
	[ "$(jq -r '.fit.r2 < .windows[0].fit.r2 and .fit.r2 < .windows[-1].fit.r2' <<<"$j")" = true ]
	[ "$(jq -r '.windows[-1].mae_w > 10 * .windows[0].mae_w + 5' <<<"$j")" = true ]
	run "$WATTBUS" compare --from "$rec" --window 40s --summary ref/platform dut/meter-0
	assert_success
	assert_line --regexp '^ +WINDOW_S +SLOTS +LAG_S +GAIN '
	run "$WATTBUS" compare --from "$rec" --window 1s --summary ref/platform dut/meter-0
	assert_success
	assert_output --partial "--window: 1 s holds fewer than 3 slots; no windows reported"
}

@test "live from the bus: a replayed recording gives the same lag and gain" {
	rec=$BATS_TEST_TMPDIR/s.rec
	python3 "$GEN" "$rec" --gain 0.9 --offset 5 --lag 0.75 --seconds 60
	ep=$(wb_ep replay)
	wb_spawn replay "$WATTBUS" replay --fast --wait 30s "$rec" "$ep"
	wb_wait_for 30 test -S "$BATS_TEST_TMPDIR/replay.sock"
	run compare_json --sub "$ep" --duration 4s ref/platform dut/meter-0
	assert_success
	near "$(jq -r .lag_s <<<"$output")" 0.75 0.1
	near "$(jq -r .fit.gain <<<"$output")" 0.9 0.025
	[ "$(jq -r .b.lost <<<"$output")" = 0 ]
}

@test "bad input: clear messages" {
	run "$WATTBUS" compare ref/platform
	assert_failure 2
	assert_output --partial "give two power streams, A and B"
	run "$WATTBUS" compare ref/platform dut/meter-0
	assert_failure 2
	assert_output --partial "give --from FILE (a recording) or --sub ENDPOINT (the bus), not neither"
	run "$WATTBUS" compare --from x.rec /platform dut/meter-0
	assert_failure 2
	assert_output --partial "'/platform' is not a power stream"
	run "$WATTBUS" compare --from x.rec a/b a/b
	assert_failure 2
	assert_output --partial "A and B are the same stream"
	echo 'not msgpack' >"$BATS_TEST_TMPDIR/bad.rec"
	run "$WATTBUS" compare --from "$BATS_TEST_TMPDIR/bad.rec" a b
	assert_failure 1
	assert_output --partial "bad.rec: not a wattbus recording"
	python3 "$GEN" "$BATS_TEST_TMPDIR/s.rec" --seconds 20
	run "$WATTBUS" compare --from "$BATS_TEST_TMPDIR/s.rec" ref/platform dut/nosuch
	assert_failure 1
	assert_output --partial "dut/nosuch: no power samples of zone nosuch from host dut in the recording"
}
