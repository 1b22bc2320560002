#!/usr/bin/env bats
# estimd with Kepler's estimator sidecar (--estimator unix:PATH): node watts
# follow the sidecar's answer exactly when it answers, and the local model's
# when it is slow, answers garbage or an error, or is gone; each such slot is
# counted, none is lost. The slot's wait (3 s) leaves a loaded machine room to
# answer in time; the slow answer comes 3 s after it, and is read and dropped.
# The first request is estimd's warm-up at start.

load estimd_helper

teardown() { wb_kill_all; }

@test "node watts follow the sidecar when it answers in time, the local model otherwise" {
	cat >"$BATS_TEST_TMPDIR/local.json" <<-'EOF'
		{"model_name": "local-SGDRegressorTrainer",
		 "package": {"All_Weights": {"Bias_Weight": 20.0, "Categorical_Variables": {},
		   "Numerical_Variables": {"bpf_cpu_time_ms": {"scale": 1000.0, "weight": 1.0}}}}}
	EOF
	sock="$BATS_TEST_TMPDIR/estimator.sock"
	wb_spawn sidecar python3 "$BATS_TEST_DIRNAME/kepler_estimator.py" --socket "$sock" \
		--log "$BATS_TEST_TMPDIR/requests.jsonl" --slow 6 \
		--script answer,answer,slow,garbage,error,answer,dead
	wb_wait_for 30 test -S "$sock"
	in=$(wb_ep aligned)
	out=$(wb_ep estimd)
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --host vm1 \
		--sub "$in" --pub "$out" --model "$BATS_TEST_TMPDIR/local.json" --stat_interval 200ms \
		--estimator "unix:$sock" --estimator_timeout 3s
	wb_tap tap "$out" estimate/
	wb_wait_for 60 grep -q "the warm-up request answered" "$BATS_TEST_TMPDIR/estimd.log"

	python3 "$BATS_TEST_DIRNAME/estimd_slots.py" --host vm1 --no-power --count 7 --seed 11 >"$BATS_TEST_TMPDIR/b.jsonl"
	# One slot at a time: each exchange ends before the next slot asks.
	run "$WATTBUS" pub --wait 30s "$in" < <(sed -n 1,2p "$BATS_TEST_TMPDIR/b.jsonl")
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 2 60
	# The slow answer came after its slot stopped waiting: read, dropped, and the sidecar lives.
	wb_wait_for 60 counter_at_least "$BATS_TEST_TMPDIR/tap.all" estimator_late 1
	grep -q '{"sent": "slow"}' "$BATS_TEST_TMPDIR/requests.jsonl"
	kill -0 "$PID_sidecar"
	for i in 3 4 5 6; do
		run "$WATTBUS" pub --wait 30s "$in" < <(sed -n "${i}p" "$BATS_TEST_TMPDIR/b.jsonl")
		assert_success
		wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" "$i" 60
	done
	# The sidecar is gone now; the last slot finds nothing listening on its socket.
	wb_wait_for 30 bash -c '! kill -0 "$0" 2>/dev/null' "$PID_sidecar"
	run "$WATTBUS" pub --wait 30s "$in" < <(tail -n 1 "$BATS_TEST_TMPDIR/b.jsonl")
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 7 60
	run python3 - "$BATS_TEST_TMPDIR/b.jsonl" "$BATS_TEST_TMPDIR/tap.log" <<-'EOF'
		import json, sys
		slots = [json.loads(l)["msg"] for l in open(sys.argv[1])]
		ests = [json.loads(l)["msg"] for l in open(sys.argv[2])]
		assert len(ests) == 7, len(ests)
		# answer, slow, garbage, error, answer, dead, (refused)
		sidecar = [True, False, False, False, True, False, False]
		for s, e, sc in zip(slots, ests, sidecar):
		    cpu_ms = sum(p["cpu_ns"] for p in s["procs"]) / 1e6
		    z = {x["zone"]: x for x in e["zones"]}
		    assert e["mode"] == "model", e
		    if sc:
		        assert e["model"] == "estimator", e["model"]
		        assert sorted(z) == ["dram", "package"], z
		        want = {"package": (100, 0.01 * cpu_ms), "dram": (7, 0.001 * cpu_ms)}
		    else:
		        assert e["model"] == "local-SGDRegressorTrainer", e["model"]
		        assert sorted(z) == ["package"], z
		        want = {"package": (20, cpu_ms / 1000)}
		    for name, (idle, active) in want.items():
		        assert abs(z[name]["idle_uj"] - idle * 1e6) <= 1, (name, z[name], idle)
		        assert abs(z[name]["active_uj"] - active * 1e6) <= 1, (name, z[name], active)
		        assert z[name]["energy_uj"] == z[name]["idle_uj"] + z[name]["active_uj"]
		print("ok")
	EOF
	assert_success
	assert_output "ok"

	wb_wait_for 30 counter_at_least "$BATS_TEST_TMPDIR/tap.all" estimator_requests 7
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_answered)" = 2 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_timeout)" = 1 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_late)" = 1 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_busy)" = 0 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_bad_answer)" = 2 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_unreachable)" = 2 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" slots_rejected)" = 0 ]
	run grep "estimator sidecar" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "no answer within 3000 ms; slot of vm1 from the local model local-SGDRegressorTrainer"
	assert_output --partial "after its slot stopped waiting: read and dropped"
	assert_output --partial "answer refused: not JSON"
	assert_output --partial "answer refused: msg: no model for the requested features"
	# dead: the connection closed unread: an end, a reset or a broken pipe, as the timing falls.
	assert_output --regexp "(closed without an answer|recv: Connection reset by peer|send: Broken pipe)"
	# refused at once, or after the first failure's backoff
	assert_output --regexp "(connect: Connection refused|not asked for [0-9.]+ s more after the last failure)"

	# The requests, as the sidecar read them: one JSON object ending in '}', two rows
	# (the slot's features, then zeros for the idle power).
	run python3 - "$BATS_TEST_TMPDIR/requests.jsonl" "$BATS_TEST_TMPDIR/b.jsonl" <<-'EOF'
		import json, sys
		reqs = [json.loads(l) for l in open(sys.argv[1])]
		reqs = [r for r in reqs if "step" in r]
		slots = [json.loads(l)["msg"] for l in open(sys.argv[2])]
		assert [r["step"] for r in reqs] == ["answer", "answer", "slow", "garbage", "error", "answer", "dead"], reqs
		warm = json.loads(reqs[0]["raw"])  # estimd's warm-up: all features 0
		assert len(warm["values"]) == 2 and all(v == 0 for row in warm["values"] for v in row), warm
		for r, s in zip(reqs[1:6], slots):
		    assert r["raw"].endswith("}") and "\n" not in r["raw"], r["raw"]
		    b = json.loads(r["raw"])
		    assert b["metrics"][:2] == ["bpf_cpu_time_ms", "bpf_page_cache_hit"], b
		    assert b["output_type"] == "AbsPower" and b["system_features"] == ["cpu_architecture"], b
		    assert len(b["values"]) == 2 and all(v == 0 for v in b["values"][1]), b["values"]
		    cpu_ms = sum(p["cpu_ns"] for p in s["procs"]) / 1e6
		    assert abs(b["values"][0][0] - cpu_ms) < 1e-6 and b["values"][0][1] == 0, (b["values"], cpu_ms)
		print("ok")
	EOF
	assert_success
	assert_output "ok"
}

@test "with no local model, the sidecar's slots have zones and the others none; estimd keeps running" {
	sock="$BATS_TEST_TMPDIR/estimator.sock"
	wb_spawn sidecar python3 "$BATS_TEST_DIRNAME/kepler_estimator.py" --socket "$sock" \
		--log "$BATS_TEST_TMPDIR/requests.jsonl" --script answer,answer,garbage
	wb_wait_for 30 test -S "$sock"
	in=$(wb_ep aligned)
	out=$(wb_ep estimd)
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --host vm1 \
		--sub "$in" --pub "$out" --model "" --stat_interval 200ms --estimator "unix:$sock" \
		--estimator_timeout 5s
	wb_tap tap "$out" estimate/
	wb_wait_for 60 grep -q "the warm-up request answered" "$BATS_TEST_TMPDIR/estimd.log"
	slots_pub "$in" b.jsonl --host vm1 --no-power --count 2 --seed 12
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 2 60
	run jq -c '[.msg.model, (.msg.zones | length)]' "$BATS_TEST_TMPDIR/tap.log"
	assert_output "$(printf '["estimator",2]\n[null,0]')"
	kill -0 "$PID_estimd"
	wb_wait_for 30 counter_at_least "$BATS_TEST_TMPDIR/tap.all" slots_no_model 1
}
