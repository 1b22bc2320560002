#!/usr/bin/env bats
# No impossible watt (docs/estimd.md): a model whose curve overflows is refused
# before it is used, from a file and from a model server, naming the point; a
# sidecar answer that no zone can draw is refused and counted, and the local
# model stands in, clipped as Kepler's estimator clips (model-db's
# LogarithmicRegressionTrainer_5, whose package P(0) is -612 W).

load estimd_helper

teardown() { wb_kill_all; }

EC2=$WB_ROOT/tests/data/kepler-model-db/ec2-0.7.11/rapl-sysfs/AbsPower/BPFOnly

@test "a model whose curve overflows is refused from a file and from a model server, naming the point" {
	# model-db's ExponentialRegressionTrainer_4: dram 678.4 e^(page cache hits / 1) - 661.4
	estimd_refuses "model ExponentialRegressionTrainer_4: zone dram gives inf W at bpf_page_cache_hit=1000 (the other features 0): not finite, refused" --model "$EC2/ExponentialRegressionTrainer_4/weight.json"
	run "$WB_BUILD/wattbus-estimd" -n --model "$EC2/LogarithmicRegressionTrainer_5/weight.json"
	assert_success

	cp "$EC2/ExponentialRegressionTrainer_4/weight.json" "$BATS_TEST_TMPDIR/ExponentialRegressionTrainer_4.json"
	model_server_start "model:$BATS_TEST_TMPDIR/ExponentialRegressionTrainer_4.json"
	estimd_start "estimate/" --host vm1 --model "$EC2/LogarithmicRegressionTrainer_5/weight.json" \
		--stat_interval 200ms --model_server "$url" --model_retry 10s
	wb_wait_for 30 counter_at_least "$BATS_TEST_TMPDIR/tap.all" models_implausible 1
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" model_server_bad_answer)" = 1 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" models_received)" = 0 ]
	run grep "answered a model estimd refuses" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "zone dram gives inf W at bpf_page_cache_hit=1000"
	assert_output --partial "keeping model LogarithmicRegressionTrainer_5"
}

@test "sidecar answers no zone can draw are refused and counted; the local model stands in, clipped at 0" {
	sock="$BATS_TEST_TMPDIR/estimator.sock"
	wb_spawn sidecar python3 "$BATS_TEST_DIRNAME/kepler_estimator.py" --socket "$sock" \
		--log "$BATS_TEST_TMPDIR/requests.jsonl" --script answer,hostile,negative,idle_above
	wb_wait_for 30 test -S "$sock"
	estimd_start "estimate/" --host vm1 --model "$EC2/LogarithmicRegressionTrainer_5/weight.json" \
		--stat_interval 200ms --estimator "unix:$sock" --estimator_timeout 5s
	# the first exchange is estimd's warm-up at start (answered, dropped); the slots get the rest
	wb_wait_for 60 grep -q "the warm-up request answered" "$BATS_TEST_TMPDIR/estimd.log"
	slots_pub "$in" b.jsonl --host vm1 --no-power --count 4 --ncpu 96 --seed 21
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 4 60
	wb_wait_for 30 counter_at_least "$BATS_TEST_TMPDIR/tap.all" estimator_implausible 4
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_answered)" = 0 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" model_implausible)" = 0 ]
	run grep "answer refused as implausible" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "powers.package: 99999 W at the slot's features, -99999 W at zero usage: above the zone's bound (bound 5000 W); slot of vm1 from the local model LogarithmicRegressionTrainer_5"
	# Every slot from the local model: package 65.153 ln(4687645.8 u + 1) - 612.03 clipped at 0
	# (u = CPU-ms/s / its scale), all of it active (P(0) < 0 is idle 0); dram its constant 31.38 W.
	run python3 - "$BATS_TEST_TMPDIR/b.jsonl" "$BATS_TEST_TMPDIR/tap.log" "$EC2/LogarithmicRegressionTrainer_5/weight.json" <<-'EOF'
		import json, math, sys
		slots = [json.loads(l)["msg"] for l in open(sys.argv[1])]
		ests = [json.loads(l)["msg"] for l in open(sys.argv[2])]
		pw = json.load(open(sys.argv[3]))["package"]["All_Weights"]
		a, b, c = pw["CurveFit_Weights"]
		scale = pw["Numerical_Variables"]["bpf_cpu_time_ms"]["scale"]
		assert len(ests) == 4, len(ests)
		for s, e in zip(slots, ests):
		    assert e["model"] == "LogarithmicRegressionTrainer_5", e["model"]
		    slot_s = (s["t1"] - s["t0"]) / 1e9
		    cpu_ms = sum(p["cpu_ns"] for p in s["procs"] if p["pid"]) / 1e6 / slot_s
		    want = max(0.0, a * math.log(b * cpu_ms / scale + 1) + c)
		    z = {x["zone"]: x for x in e["zones"]}
		    assert sorted(z) == ["dram", "package"], z
		    pkg = z["package"]
		    assert pkg["idle_uj"] == 0, pkg
		    assert abs(pkg["energy_uj"] / 1e6 / slot_s - want) < 1e-3, (pkg, want, cpu_ms)
		    assert abs(z["dram"]["idle_uj"] / 1e6 / slot_s - 31.384477124183) < 1e-3, z["dram"]
		    print("%.1f CPU-ms/s: package %.3f W" % (cpu_ms, want))
		print("ok")
	EOF
	assert_success
	assert_output --partial "ok"
}
