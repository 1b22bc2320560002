#!/usr/bin/env bats
# Model hot swap over the bus: an estimd with a meter trains a model and
# publishes it; an estimd on a meterless host started with model_from
# switches to it on the fly and says which model it uses and its error.

load estimd_helper

teardown() { wb_kill_all; }

@test "a meterless estimd switches to the model a metered estimd trains" {
	a_in=$(wb_ep a_aligned)
	a_out=$(wb_ep a_estimd)
	b_in=$(wb_ep b_aligned)
	b_out=$(wb_ep b_estimd)
	model="$WB_ROOT/data/models/ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1.json"
	wb_spawn metered "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --host metal1 \
		--sub "$a_in" --pub "$a_out" --model "" --train_every 20 --train_min 15
	wb_spawn meterless "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --host vm1 \
		--sub "$b_in" --pub "$b_out" --model "$model" --model_from "$a_out" --stat_interval 200ms
	wb_tap tap "$b_out" estimate/

	# Before: the shipped model-db model.
	slots_pub "$b_in" b1.jsonl --host vm1 --no-power --count 3 --seed 7
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 3 10
	run jq -r '.msg.model' "$BATS_TEST_TMPDIR/tap.log"
	assert_output "$(printf 'ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1\n%.0s' 1 2 3)"

	# The metered host trains on 60 measured slots: models after 20, 40 and 60.
	slots_pub "$a_in" a.jsonl --host metal1 --count 60 --seed 3
	wb_wait_lines "$BATS_TEST_TMPDIR/meterless.log" 1 15 "switched to model wattbus-metal1-"
	run grep "switched to model" "$BATS_TEST_TMPDIR/meterless.log"
	# Which model, from where, and its held-out error.
	assert_output --partial "from bus:metal1"
	assert_output --partial "held-out MAE"
	assert_output --partial "MAPE"

	# After: the trained model, whose numbers follow the metered host's power truth
	# (package = 15 W + 0.006 W per CPU-ms/s; same CPU count, so no core ratio).
	slots_pub "$b_in" b2.jsonl --host vm1 --no-power --count 3 --seed 8
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 6 10
	run python3 - "$BATS_TEST_TMPDIR/b2.jsonl" "$BATS_TEST_TMPDIR/tap.log" <<-'EOF'
		import json, sys
		slots = [json.loads(l)["msg"] for l in open(sys.argv[1])]
		ests = [json.loads(l)["msg"] for l in open(sys.argv[2])][3:]
		assert len(ests) == 3
		for s, e in zip(slots, ests):
		    assert e["mode"] == "model" and e["model"].startswith("wattbus-metal1-"), e["model"]
		    cpu_ms = sum(p["cpu_ns"] for p in s["procs"]) / 1e6
		    pkg = [z for z in e["zones"] if z["zone"] == "package"][0]
		    want = (15 + 0.006 * cpu_ms) * 1e6
		    assert abs(pkg["energy_uj"] - want) < 0.01 * want, (pkg, want)
		    assert abs(pkg["idle_uj"] - 15e6) < 0.15e6, pkg
		    assert sum(p["energy_uj"][0] for p in e["procs"]) + pkg.get("unattributed_uj", 0) == pkg["active_uj"]
		print("ok")
	EOF
	assert_success
	assert_output "ok"
}

@test "a model message that does not check out is refused and the model kept" {
	b_in=$(wb_ep b_aligned)
	b_out=$(wb_ep b_estimd)
	models=$(wb_ep models)
	model="$WB_ROOT/data/models/ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1.json"
	wb_spawn meterless "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --host vm1 \
		--sub "$b_in" --pub "$b_out" --model "$model" --model_from "$models"
	# Two weights for one feature (pub waits for estimd's subscription).
	run "$WATTBUS" pub --wait 30s "$models" <<-'EOF'
		{"kind":"model","host":"rogue","t":1,"name":"broken","type":"AbsPower","features":["bpf_cpu_time_ms"],"zones":[{"zone":"package","bias_w":1,"weights":[1,2],"scales":[1,1]}]}
	EOF
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/meterless.log" 1 10 "model rejected"
	run grep "model rejected" "$BATS_TEST_TMPDIR/meterless.log"
	assert_output --partial "keeping ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1"
	assert_output --partial "zones[0].weights: 2 weights for 1 features"
	run grep -c "switched to model" "$BATS_TEST_TMPDIR/meterless.log"
	assert_output "0"
}
