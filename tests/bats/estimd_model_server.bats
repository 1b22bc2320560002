#!/usr/bin/env bats
# estimd as a client of a Kepler model server (POST /model, weight=true): it asks
# with its features, AbsPower and this machine's spec, swaps in the model that
# comes back, and keeps it through a refusal, a garbage answer and a server
# that is gone, each counted and logged, retrying with backoff.

load estimd_helper

teardown() { wb_kill_all; }

SHIPPED=ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1

fake_machine() { # DIR: a procfs and a sysfs with 4 CPUs of one socket, 16 GiB, 3.5 GHz
	mkdir -p "$1/proc" "$1/sys/devices/system/cpu/cpu0/cpufreq" "$1/sys/devices/system/cpu/cpu1/cpufreq"
	for i in 0 1 2 3; do
		printf 'processor\t: %d\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz\nphysical id\t: 0\ncpu MHz\t\t: 2500.000\n\n' $i
	done >"$1/proc/cpuinfo"
	printf 'MemTotal:       16777216 kB\nMemFree:         1000000 kB\n' >"$1/proc/meminfo"
	echo 3500000 >"$1/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
	echo 3100000 >"$1/sys/devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq"
}

@test "estimd asks the model server, swaps its model in, and keeps it through 400, garbage and a dead server" {
	fake_machine "$BATS_TEST_TMPDIR/m"
	cat >"$BATS_TEST_TMPDIR/SGDRegressorTrainer_7.json" <<-'EOF'
		{"model_name": "SGDRegressorTrainer_7",
		 "package": {"All_Weights": {"Bias_Weight": 50.0, "Categorical_Variables": {},
		   "Numerical_Variables": {"bpf_cpu_time_ms": {"scale": 1000.0, "weight": 2.0},
		                           "bpf_page_cache_hit": {"scale": 1.0, "weight": 0.0}}}}}
	EOF
	model_server_start "400,model:$BATS_TEST_TMPDIR/SGDRegressorTrainer_7.json,garbage,down"
	in=$(wb_ep aligned)
	out=$(wb_ep estimd)
	wb_spawn estimd env WATTBUS_PROCFS_ROOT="$BATS_TEST_TMPDIR/m/proc" WATTBUS_SYSFS_ROOT="$BATS_TEST_TMPDIR/m/sys" \
		"$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --host vm1 \
		--sub "$in" --pub "$out" --model "$WB_ROOT/data/models/$SHIPPED.json" --stat_interval 200ms \
		--model_server "$url" --model_retry 100ms --model_refresh 2s
	wb_tap tap "$out" estimate/

	# 400, then the model, then (at the refresh) garbage, then the server is gone.
	wb_wait_lines "$BATS_TEST_TMPDIR/estimd.log" 1 30 "switched to model SGDRegressorTrainer_7"
	run grep "switched to model SGDRegressorTrainer_7" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "from $url/model, trained on 96 CPUs"
	assert_output --partial "MAE 4.50 W as its model server states it"
	wb_wait_for 60 counter_at_least "$BATS_TEST_TMPDIR/tap.all" model_server_unreachable 2
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" model_server_refused)" = 1 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" model_server_bad_answer)" = 1 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" model_server_models)" = 1 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" models_received)" = 1 ]
	run grep -c "model server refused the request: POST $url/model: HTTP 400: cannot find model" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output 1
	run grep "answered no model estimd can use" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "$url/model:"
	assert_output --partial "keeping model SGDRegressorTrainer_7"
	run grep "model server unreachable" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "keeping model SGDRegressorTrainer_7"
	# Backoff: the retries after the server went stop doubling at model_refresh, they do not spin.
	run grep -o "next try in [0-9.]* s" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "next try in 0.1 s"
	assert_output --partial "next try in 0.2 s"

	# What it asked: Kepler's ModelRequest with this machine's spec.
	run python3 - "$BATS_TEST_TMPDIR/requests.jsonl" <<-'EOF'
		import json, sys
		reqs = [json.loads(l) for l in open(sys.argv[1])]
		assert len(reqs) == 4, len(reqs)
		for r in reqs:
		    assert r["path"] == "/model" and r["content_type"] == "application/json", r
		    b = json.loads(r["body"])
		    assert b["output_type"] == "AbsPower" and b["weight"] is True and b["source"] == "rapl-sysfs", b
		    assert b["metrics"][:2] == ["bpf_cpu_time_ms", "bpf_page_cache_hit"], b
		    assert b["machine_spec"] == {"processor": "intel_xeon_platinum_8259cl", "cores": 4, "chips": 1,
		                                 "memory": 16, "frequency": 3500}, b["machine_spec"]
		print("ok")
	EOF
	assert_success
	assert_output "ok"

	# With the server gone, slots are estimated with the model it gave: package =
	# 50 W + 2 W per 1000 CPU-ms/s, idle scaled by the core ratio 4 / 96 (its machine_spec).
	slots_pub "$in" b.jsonl --host vm1 --no-power --count 3 --seed 5
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 3 30
	run python3 - "$BATS_TEST_TMPDIR/b.jsonl" "$BATS_TEST_TMPDIR/tap.log" <<-'EOF'
		import json, sys
		slots = [json.loads(l)["msg"] for l in open(sys.argv[1])]
		ests = [json.loads(l)["msg"] for l in open(sys.argv[2])]
		assert len(ests) == 3
		for s, e in zip(slots, ests):
		    assert e["mode"] == "model" and e["model"] == "SGDRegressorTrainer_7", e["model"]
		    cpu_ms = sum(p["cpu_ns"] for p in s["procs"]) / 1e6
		    pkg = [z for z in e["zones"] if z["zone"] == "package"][0]
		    idle, active = 50 * 4 / 96, 2 * cpu_ms / 1000
		    assert abs(pkg["idle_uj"] - idle * 1e6) <= 1, (pkg, idle)
		    assert abs(pkg["active_uj"] - active * 1e6) <= 1, (pkg, active)
		print("ok")
	EOF
	assert_success
	assert_output "ok"
}

@test "estimd asks again at once when usaged's counters change, naming the counter features" {
	cat >"$BATS_TEST_TMPDIR/m.json" <<-'EOF'
		{"model_name": "SGDRegressorTrainer_2", "package": {"All_Weights": {"Bias_Weight": 40.0,
		 "Numerical_Variables": {"bpf_cpu_time_ms": {"scale": 1000.0, "weight": 1.0}}}}}
	EOF
	model_server_start "model:$BATS_TEST_TMPDIR/m.json"
	estimd_start "estimate/" --host vm1 --model "" --stat_interval 200ms \
		--model_server "$url/"
	wb_wait_lines "$BATS_TEST_TMPDIR/estimd.log" 1 30 "switched to model SGDRegressorTrainer_2"
	# A slot whose processes carry cycles and instructions (usaged with perf counters).
	python3 "$BATS_TEST_DIRNAME/estimd_slots.py" --host vm1 --no-power --count 1 --seed 2 |
		python3 -c 'import json, sys
for l in sys.stdin:
    m = json.loads(l)
    m["msg"]["counters"] = ["cycles", "instructions"]
    for p in m["msg"]["procs"]:
        p["cycles"], p["instructions"] = 1000000, 2000000
    print(json.dumps(m))' | "$WATTBUS" pub --wait 30s "$in"
	wb_wait_lines "$BATS_TEST_TMPDIR/requests.jsonl" 2 30
	run jq -c '.body | fromjson | .metrics' "$BATS_TEST_TMPDIR/requests.jsonl"
	assert_output "$(printf '%s\n' '["bpf_cpu_time_ms","bpf_page_cache_hit"]' '["bpf_cpu_time_ms","bpf_page_cache_hit","cpu_cycles","cpu_instructions"]')"
	# The same model again: not swapped a second time.
	wb_wait_for 30 counter_at_least "$BATS_TEST_TMPDIR/tap.all" model_server_models 2
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" models_received)" = 1 ]
}

@test "estimd refuses a model_server that is no URL and an estimator that is no unix socket" {
	estimd_refuses "model_server '127.0.0.1:8100': expected an http:// or https:// URL" --model_server "127.0.0.1:8100"
	estimd_refuses "estimator '/tmp/estimator.sock': expected unix:PATH" --estimator "/tmp/estimator.sock"
}
