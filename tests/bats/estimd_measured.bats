#!/usr/bin/env bats
# estimd in measured mode: aligned slots with power in, estimates out whose
# parts add up exactly, and a trained model published on the bus.

load estimd_helper

teardown() { wb_kill_all; }

@test "measured slots: idle/active by CPU usage, exact attribution, groups, a trained model" {
	estimd_start "estimate/ model/" \
		--model "" --train_every 10 --train_min 8 --model_out "$BATS_TEST_TMPDIR/trained.json" --stat_interval 200ms
	slots_pub "$in" slots.jsonl --count 20
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 20 60 '"topic":"estimate/'
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 1 60 '"topic":"model/'

	# Every estimate against its slot, in exact integers (python keeps them exact; jq would not).
	run python3 - "$BATS_TEST_TMPDIR/slots.jsonl" "$BATS_TEST_TMPDIR/tap.log" <<-'EOF'
		import json, sys
		slots = [json.loads(l)["msg"] for l in open(sys.argv[1])]
		lines = [json.loads(l) for l in open(sys.argv[2])]
		ests = [l["msg"] for l in lines if l["topic"] == "estimate/metal1"]
		models = [l["msg"] for l in lines if l["topic"] == "model/metal1"]
		assert len(ests) == 20 and len(models) >= 1, (len(ests), len(models))
		for s, e in zip(slots, ests):
		    assert e["mode"] == "measured" and e["t0"] == s["t0"] and e["src"] == "estimd"
		    busy = s["cpu"]["user_ns"]
		    total = busy + s["cpu"]["idle_ns"]
		    for z, (sz, ez) in enumerate(zip(s["zones"], e["zones"])):
		        assert ez["energy_uj"] == sz["energy_uj"]
		        assert ez["active_uj"] == sz["energy_uj"] * busy // total, ez   # Kepler's ratio
		        assert ez["active_uj"] + ez["idle_uj"] == ez["energy_uj"]
		        parts = sum(p["energy_uj"][z] for p in e["procs"])
		        assert parts + ez.get("unattributed_uj", 0) == ez["active_uj"]
		        for p, sp in zip(e["procs"], s["procs"]):
		            exact = ez["active_uj"] * sp["cpu_ns"] / busy
		            assert abs(p["energy_uj"][z] - exact) < 1, (p, exact)
		        ctr = sum(p["energy_uj"][z] for p in e["procs"] if p["cgroup_id"] == 7)
		        assert e["containers"][0]["id"] == "abc" and e["containers"][0]["energy_uj"][z] == ctr
		        assert e["pods"][0]["id"] == "1234" and e["pods"][0]["energy_uj"][z] == ctr
		        assert e["services"][0]["id"] == "ssh.service"
		        assert e["services"][0]["energy_uj"][z] == e["procs"][2]["energy_uj"][z]
		m = models[-1]
		assert m["type"] == "AbsPower" and m["ncpu"] == 4 and m["features"] == ["bpf_cpu_time_ms"], m
		pkg = [z for z in m["zones"] if z["zone"] == "package"][0]
		# package = 15 W + 0.006 W per CPU-ms/s: the bias (means folded in) is the idle power
		assert abs(pkg["bias_w"] - 15) < 0.05 and abs(pkg["weights"][0] / pkg["scales"][0] - 0.006) < 6e-5, pkg
		print("ok")
	EOF
	assert_success
	assert_output "ok"
	# The trained model was written in Kepler's format and estimd itself loads it.
	run "$WB_BUILD/wattbus-estimd" -n --model "$BATS_TEST_TMPDIR/trained.json"
	assert_success
	run jq -r '.package.All_Weights.Numerical_Variables.bpf_cpu_time_ms | has("scale") and has("weight")' \
		"$BATS_TEST_TMPDIR/trained.json"
	assert_output "true"
	grep -q "trained model wattbus-metal1-" "$BATS_TEST_TMPDIR/estimd.log"
}
