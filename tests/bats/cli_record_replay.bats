#!/usr/bin/env bats
# record then replay gives the same messages in the same order with their spacing.
# (How closely replay keeps the spacing is measured in bench/: on a loaded machine any
# message may be late, never early, so the tests check lower bounds.)

load helper

teardown() { wb_kill_all; }

# Receive times of a recording as ms offsets from its first message, plus topic and seq.
recording_view() {
	python3 - "$1" <<-'PY'
		import msgpack, sys
		with open(sys.argv[1], "rb") as f:
		    items = list(msgpack.Unpacker(f, raw=False))
		head, recs = items[0], items[1:]
		assert head["format"] == "wattbus-record" and head["version"] == 1, head
		t0 = recs[0][0]
		for t, topic, body in recs:
		    m = msgpack.unpackb(body, raw=False)
		    print(f"{(t - t0) / 1e6:.3f} {topic} {m['seq']} {m['t']}")
	PY
}

# recorded_at_least FILE N: the recording FILE holds N messages (record flushes each).
recorded_at_least() {
	python3 - "$1" "$2" <<-'PY'
		import msgpack, sys
		try:
		    with open(sys.argv[1], "rb") as f:
		        n = sum(1 for _ in msgpack.Unpacker(f, raw=False)) - 1  # less the header
		except (OSError, ValueError, msgpack.exceptions.UnpackException):
		    sys.exit(1)
		sys.exit(0 if n >= int(sys.argv[2]) else 1)
	PY
}

@test "record then replay: same messages, same order, never closer than recorded" {
	src=$(wb_ep src)
	out=$(wb_ep out)
	rec=$BATS_TEST_TMPDIR/bus.rec
	# pub binds $src and waits for record's subscription before its first line.
	wb_spawn record "$WATTBUS" record --count 6 --duration 120s "$src" "$rec"
	# Irregular spacing: 0, 300, 350, 750, 760, 1260 ms.
	for i in 0 1 2 3 4 5; do
		echo "{\"kind\":\"power\",\"host\":\"h$((i % 2))\",\"t\":$((i + 1))000000000,\"interval_ns\":1000000000,\"zones\":[]}"
	done >"$BATS_TEST_TMPDIR/lines"
	# The timed writes start once record has the first line (record may still be connecting
	# when pub starts): then each line is received no sooner than its offset after the first.
	(
		sed -n 1p "$BATS_TEST_TMPDIR/lines"
		wb_wait_for 60 recorded_at_least "$rec" 1 || exit 1
		i=1
		for gap in 0.3 0.05 0.4 0.01 0.5; do
			sleep $gap
			sed -n "$((++i))p" "$BATS_TEST_TMPDIR/lines"
		done
	) | "$WATTBUS" pub --wait 60s "$src"
	wb_wait_for 30 bash -c "! kill -0 $PID_record 2>/dev/null"
	recorded=$(recording_view "$rec")
	[ "$(wc -l <<<"$recorded")" -eq 6 ]

	rec2=$BATS_TEST_TMPDIR/replayed.rec
	wb_spawn record2 "$WATTBUS" record --count 6 --duration 120s "$out" "$rec2"
	start=$(date +%s%N)
	run "$WATTBUS" replay --wait 30s "$rec" "$out"
	assert_success
	elapsed_ms=$((($(date +%s%N) - start) / 1000000))
	assert_output --partial "6 messages sent"
	wb_wait_for 30 bash -c "! kill -0 $PID_record2 2>/dev/null"
	replayed=$(recording_view "$rec2")
	# Same topics, seqs and times in the same order.
	diff <(cut -d' ' -f2- <<<"$recorded") <(cut -d' ' -f2- <<<"$replayed")
	# Recorded as written: each message no sooner after the first than the lines were written
	# (0, 300, 350, 750, 760, 1260 ms; a loaded machine makes them later, never earlier).
	awk 'BEGIN { split("0 300 350 750 760 1260", w) }
		$1 + 0 < w[NR] { print "message " NR " recorded at " $1 " ms, written at " w[NR] " ms or later"; bad = 1 }
		END { exit bad }' <<<"$recorded"
	# The spacing kept: replay took at least the recording's span (0 to the last message, in
	# the recorder's own receive times).
	span_ms=$(tail -n 1 <<<"$recorded" | cut -d' ' -f1)
	echo "recording spans $span_ms ms, replay took $elapsed_ms ms"
	awk -v s="$span_ms" -v e="$elapsed_ms" 'BEGIN { exit !(s >= 1260 && e >= s - 1) }'
}

# stat_rec FILE T_NS...: a recording of stat messages, seq 0, 1, ... at the times T_NS.
stat_rec() {
	python3 - "$@" <<-'PY'
		import msgpack, sys
		with open(sys.argv[1], "wb") as f:
		    f.write(msgpack.packb({"format": "wattbus-record", "version": 1, "endpoint": "x", "start_ns": 0}))
		    for i, t in enumerate(int(a) for a in sys.argv[2:]):
		        m = {"v": 1, "kind": "stat", "host": "h", "src": "s", "epoch": 1, "seq": i, "t": i,
		             "stage": "powerd", "version": "x", "frames_in": 0, "frames_out": 0, "lost": 0, "rejected": 0}
		        f.write(msgpack.packb([t, "stat/h", msgpack.packb(m)], use_bin_type=True))
	PY
}

@test "replay --fast sends everything at once and --speed scales the spacing" {
	src=$(wb_ep src)
	rec=$BATS_TEST_TMPDIR/bus.rec
	stat_rec "$rec" 0 1000000000 2000000000
	wb_spawn tap "$WATTBUS" tap --count 3 --timeout 60s "$src"
	start=$(date +%s%N)
	run "$WATTBUS" replay --speed 4 --wait 30s "$rec" "$src"
	assert_success
	elapsed_ms=$((($(date +%s%N) - start) / 1000000))
	# 2 s of recording at 4x takes about 500 ms (plus the wait for the subscriber).
	[ "$elapsed_ms" -ge 480 ]
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 3 10
	run jq -r .msg.seq "$BATS_TEST_TMPDIR/tap.log"
	assert_output $'0\n1\n2'

	# --fast does not wait for the spacing: a recording of three messages an hour apart
	# is sent well within the minute timeout gives it.
	stat_rec "$BATS_TEST_TMPDIR/hours.rec" 0 3600000000000 7200000000000
	wb_spawn tap2 "$WATTBUS" tap --count 3 --timeout 60s "$src"
	run timeout 60 "$WATTBUS" replay --fast --wait 30s "$BATS_TEST_TMPDIR/hours.rec" "$src"
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap2.log" 3 10
	run jq -r .msg.seq "$BATS_TEST_TMPDIR/tap2.log"
	assert_output $'0\n1\n2'
}

@test "replay refuses a file that is not a recording" {
	echo "hello" >"$BATS_TEST_TMPDIR/not.rec"
	run "$WATTBUS" replay --wait 100ms "$BATS_TEST_TMPDIR/not.rec" "$(wb_ep x)"
	assert_failure 1
	assert_output --partial "not.rec"
}

@test "replay --max-gap: a gap of years (or hours) waits at most max_gap, 10 s by default" {
	src=$(wb_ep src)
	# 1 s, 2^63 ns after it and an hour after that: replay as recorded would sleep for 292 years
	stat_rec "$BATS_TEST_TMPDIR/years.rec" 1000000000 9223372037854775808 9223375637854775808
	wb_spawn tap "$WATTBUS" tap --count 3 --timeout 120s "$src"
	start=$(date +%s%N)
	run timeout 100 "$WATTBUS" replay --max-gap 200ms --wait 30s "$BATS_TEST_TMPDIR/years.rec" "$src"
	assert_success
	assert_line "wattbus replay: 3 messages sent"
	assert_line "wattbus replay: 2 gaps longer than --max-gap 0.2 s shortened to it"
	# the two gaps still take their 200 ms each: shortened, not dropped
	[ $((($(date +%s%N) - start) / 1000000)) -ge 400 ]
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 3 10
	run jq -r .msg.seq "$BATS_TEST_TMPDIR/tap.log"
	assert_output $'0\n1\n2'
	# the default is 10 s: both gaps together in well under the 100 s this allows
	wb_spawn tap2 "$WATTBUS" tap --count 3 --timeout 120s "$src"
	run timeout 100 "$WATTBUS" replay --wait 30s "$BATS_TEST_TMPDIR/years.rec" "$src"
	assert_success
	assert_line "wattbus replay: 2 gaps longer than --max-gap 10 s shortened to it"
	wb_wait_lines "$BATS_TEST_TMPDIR/tap2.log" 3 10
	run "$WATTBUS" replay --max-gap soon "$BATS_TEST_TMPDIR/years.rec" "$src"
	assert_failure 2
	assert_output --partial "--max-gap"
}
