#!/usr/bin/env bats
# alignd fed by `wattbus pub` (JSON lines) and by `wattbus replay` of a
# recording, read back with `wattbus tap`: the same exact answers.

load alignd_helper

teardown() { wb_kill_all; }

# power every second (a new power each second), usage every 3 s, as JSON lines
lines() {
	python3 - <<-'EOF2'
		import json
		S = 10**9
		b = 1_700_000_000 * S
		e = 10**9
		for k in range(31):
		    t = b + k * S
		    zones = [{"name": "package-0", "zone": "package", "energy_uj": e}]
		    msg = {"kind": "power", "host": "cli", "t": t, "interval_ns": S, "zones": zones}
		    print(json.dumps({"topic": "power/cli", "msg": msg}))
		    e += (50 + (k * 37) % 90) * 10**6
		    if k % 3 == 0:
		        cpu = {"user_ns": k * S // 2, "nice_ns": 0, "system_ns": 0, "idle_ns": k * S // 2,
		               "iowait_ns": 0, "irq_ns": 0, "softirq_ns": 0, "steal_ns": 0}
		        msg = {"kind": "usage", "host": "cli", "t": t, "interval_ns": S, "ncpu": 1, "cpu": cpu,
		               "procs": []}
		        print(json.dumps({"topic": "usage/cli", "msg": msg}))
	EOF2
}

check_tap() {
	python3 - "$1" <<-'EOF2'
		import json, sys
		S = 10**9
		b = 1_700_000_000 * S
		slots = [json.loads(l)["msg"] for l in open(sys.argv[1])]
		assert len(slots) == 10, len(slots)
		for m, s in enumerate(slots, 1):
		    want = sum((50 + (k * 37) % 90) * 10**6 for k in range(3 * (m - 1), 3 * m))
		    assert s["t0"] == b + 3 * (m - 1) * S and s["t1"] == b + 3 * m * S, s
		    assert s["zones"][0]["energy_uj"] == want, (s["zones"], want)
		assert sum(s["zones"][0]["energy_uj"] for s in slots) == sum((50 + (k * 37) % 90) * 10**6 for k in range(30))
		print("ok")
	EOF2
}

@test "wattbus pub in, wattbus tap out: analytic slot energies" {
	alignd_start --max_skew 0
	wb_tap tap "$OUT" aligned/
	lines >"$BATS_TEST_TMPDIR/in.jsonl"
	run "$WATTBUS" pub --wait 30s "$IN" <"$BATS_TEST_TMPDIR/in.jsonl"
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 10 20
	run check_tap "$BATS_TEST_TMPDIR/tap.log"
	assert_success
	assert_output "ok"
}

@test "a recorded stream replayed with wattbus replay gives the same slots" {
	# Record what pub sends, then replay it into a fresh alignd.
	rec_ep=$(wb_ep rec)
	# pub binds $rec_ep and waits for record's subscription before its first line.
	wb_spawn record "$WATTBUS" record --count 42 "$rec_ep" "$BATS_TEST_TMPDIR/stream.rec"
	lines >"$BATS_TEST_TMPDIR/in.jsonl"
	run "$WATTBUS" pub --wait 30s "$rec_ep" <"$BATS_TEST_TMPDIR/in.jsonl"
	assert_success
	wb_wait_for 30 bash -c "! kill -0 $PID_record 2>/dev/null" # record stops after 42 messages
	alignd_start --max_skew 0
	wb_tap tap "$OUT" aligned/
	run "$WATTBUS" replay --fast --wait 30s "$BATS_TEST_TMPDIR/stream.rec" "$IN"
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 10 20
	run check_tap "$BATS_TEST_TMPDIR/tap.log"
	assert_success
	assert_output "ok"
}
