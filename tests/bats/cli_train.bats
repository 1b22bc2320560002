#!/usr/bin/env bats
# wattbus train: recordings of a metered host's aligned slots (recorded from a
# replayed stream with a known power truth) in, a Kepler-format model out whose
# coefficients are the truth's, in the form that fits it (linear for a line,
# logistic for a logistic curve), with its held-out error; or published as a
# model message.

load helper

teardown() { wb_kill_all; }

# record_slots NAME ARGS...: estimd_slots.py ARGS as a recording NAME.rec, through the bus.
record_slots() {
	local name=$1
	shift
	python3 "$BATS_TEST_DIRNAME/estimd_slots.py" "$@" >"$BATS_TEST_TMPDIR/$name.jsonl"
	local n ep
	n=$(wc -l <"$BATS_TEST_TMPDIR/$name.jsonl")
	ep=$(wb_ep "rec_$name")
	wb_spawn "rec_$name" "$WATTBUS" record --count "$n" "$ep" "$BATS_TEST_TMPDIR/$name.rec" aligned/
	"$WATTBUS" pub --wait 30s "$ep" <"$BATS_TEST_TMPDIR/$name.jsonl"
	wb_wait_lines "$BATS_TEST_TMPDIR/rec_$name.log" 1 30 "$n messages written"
}

fake_machine() { # DIR: 4 CPUs of one socket, 16 GiB, 3.5 GHz
	mkdir -p "$1/proc" "$1/sys/devices/system/cpu/cpu0/cpufreq"
	for i in 0 1 2 3; do
		printf 'processor\t: %d\nmodel name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz\nphysical id\t: 0\n\n' $i
	done >"$1/proc/cpuinfo"
	printf 'MemTotal:       16777216 kB\n' >"$1/proc/meminfo"
	echo 3500000 >"$1/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
}

@test "train recovers a linear relation and picks the linear form" {
	record_slots lin --count 100 --seed 4
	fake_machine "$BATS_TEST_TMPDIR/m"
	run env WATTBUS_PROCFS_ROOT="$BATS_TEST_TMPDIR/m/proc" WATTBUS_SYSFS_ROOT="$BATS_TEST_TMPDIR/m/sys" \
		"$WATTBUS" train --out "$BATS_TEST_TMPDIR/lin" "$BATS_TEST_TMPDIR/lin.rec"
	assert_success
	# The error table: every form, every zone, 80 training and 20 held-out slots.
	assert_line --regexp '^linear +package +80 +20 '
	assert_line --regexp '^logistic +dram +80 +20 '
	assert_line --regexp '^exponential +package +80 +20 '
	assert_line --partial "chosen: SGDRegressorTrainer-wattbus-metal1 (linear)"
	run python3 - "$BATS_TEST_TMPDIR/lin" <<-'EOF'
		import json, sys
		w = json.load(open(sys.argv[1] + "/weight.json"))
		md = json.load(open(sys.argv[1] + "/metadata.json"))
		for zone, bias, slope in (("package", 15, 0.006), ("dram", 3, 0.0008)):
		    aw = w[zone]["All_Weights"]
		    f = aw["Numerical_Variables"]["bpf_cpu_time_ms"]
		    assert abs(aw["Bias_Weight"] - bias) < 1e-3, (zone, aw)
		    assert abs(f["weight"] / f["scale"] - slope) < 1e-7, (zone, f)
		    assert 0 <= md[zone + "_mae"] < 1e-3, md
		# one <zone>_mae per zone of weight.json, as Kepler's trainers write them
		assert "core_mae" not in md and "platform_mae" not in md and md["output_type"] == "AbsPower", md
		assert md["trainer"] == "SGDRegressorTrainer" and md["wattbus_host"] == "metal1", md
		# flat: Kepler's estimator makes every nested object of metadata.json a Model
		assert [k for k, v in md.items() if isinstance(v, dict)] == ["machine_spec"], md
		assert md["model_name"] == w["model_name"] == "SGDRegressorTrainer-wattbus-metal1", md
		assert md["machine_spec"] == {"processor": "intel_xeon_platinum_8259cl", "cores": 4, "chips": 1,
		                              "memory": 16, "frequency": 3500}, md["machine_spec"]
		assert md["wattbus_train_slots"] == 80 and md["wattbus_test_slots"] == 20, md
		print("ok")
	EOF
	assert_success
	assert_output "ok"
	# estimd reads what train writes.
	run "$WB_BUILD/wattbus-estimd" -n --model "$BATS_TEST_TMPDIR/lin/weight.json"
	assert_success
}

@test "train recovers a logistic relation and picks the logistic form" {
	# package = 80 W / (1 + exp(-0.003 (cpu_ms - 2000))) + 20 W
	record_slots lgs --count 100 --seed 5 --logistic 80,2000,0.003,20
	run "$WATTBUS" train --out "$BATS_TEST_TMPDIR/lgs" "$BATS_TEST_TMPDIR/lgs.rec"
	assert_success
	assert_line --partial "chosen: LogisticRegressionTrainer-wattbus-metal1 (logistic)"
	run python3 - "$BATS_TEST_TMPDIR/lgs" <<-'EOF'
		import json, sys
		w = json.load(open(sys.argv[1] + "/weight.json"))
		md = json.load(open(sys.argv[1] + "/metadata.json"))
		aw = w["package"]["All_Weights"]
		s = aw["Numerical_Variables"]["bpf_cpu_time_ms"]["scale"]
		A, x0, k, C = aw["CurveFit_Weights"]
		# The curve is in CPU time / scale: back in CPU-ms/s it is the truth.
		assert abs(A - 80) < 0.1 and abs(C - 20) < 0.1, (A, C)
		assert abs(x0 * s - 2000) < 2 and abs(k / s - 0.003) < 3e-5, (x0 * s, k / s)
		assert md["model_class"] == "curvefit" and md["package_mae"] < 0.05, md
		print("ok")
	EOF
	assert_success
	assert_output "ok"
	# The linear fit's held-out error on the same curve is in the table, and worse.
	run "$WATTBUS" train --form linear --out "$BATS_TEST_TMPDIR/lgs_lin" "$BATS_TEST_TMPDIR/lgs.rec"
	assert_success
	lin_mae=$(awk '$1 == "linear" && $2 == "package" { print $5 }' <<<"$output")
	python3 -c "import sys; assert float(sys.argv[1]) > 1, sys.argv[1]" "$lin_mae"
	# estimd reads the curve fit back (the trainer's name in model_name tells the form).
	run "$WB_BUILD/wattbus-estimd" -n --model "$BATS_TEST_TMPDIR/lgs/weight.json"
	assert_success
}

@test "train --publish sends the model as a model message" {
	record_slots lin --count 60 --seed 6
	ep=$(wb_ep models)
	wb_spawn tap "$WATTBUS" tap "$ep" model/
	fake_machine "$BATS_TEST_TMPDIR/m"
	run env WATTBUS_PROCFS_ROOT="$BATS_TEST_TMPDIR/m/proc" WATTBUS_SYSFS_ROOT="$BATS_TEST_TMPDIR/m/sys" \
		"$WATTBUS" train --form linear --publish "$ep" "$BATS_TEST_TMPDIR/lin.rec"
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 1 30
	run python3 - "$BATS_TEST_TMPDIR/tap.log" <<-'EOF'
		import json, sys
		m = json.loads(open(sys.argv[1]).readline())
		assert m["topic"] == "model/metal1", m["topic"]
		msg = m["msg"]
		assert msg["name"] == "SGDRegressorTrainer-wattbus-metal1" and msg["type"] == "AbsPower", msg
		assert msg["ncpu"] == 4 and msg["train_slots"] == 48 and msg["test_slots"] == 12, msg
		z = {x["zone"]: x for x in msg["zones"]}
		assert abs(z["package"]["bias_w"] - 15) < 1e-3, z
		assert abs(z["package"]["weights"][0] / z["package"]["scales"][0] - 0.006) < 1e-7, z
		# The trainer's machine and the held-out error, for a model server to file and rank it.
		assert msg["spec"] == {"processor": "intel_xeon_platinum_8259cl", "cores": 4, "chips": 1,
		                       "memory_gib": 16, "frequency_mhz": 3500}, msg["spec"]
		assert abs(msg["mae"] - sum(x.get("mae_w", 0) for x in msg["zones"])) < 1e-12, msg
		print("ok")
	EOF
	assert_success
	assert_output "ok"
}

@test "train refuses what it cannot train on, naming it" {
	record_slots nopower --count 30 --no-power
	run "$WATTBUS" train --out "$BATS_TEST_TMPDIR/x" "$BATS_TEST_TMPDIR/nopower.rec"
	assert_failure 1
	assert_output --partial "30 aligned slots, 0 usable"
	assert_output --partial "no model could be fitted"
	echo "not a recording" >"$BATS_TEST_TMPDIR/junk.rec"
	run "$WATTBUS" train "$BATS_TEST_TMPDIR/junk.rec"
	assert_failure 1
	assert_output --partial "junk.rec"
	record_slots a --count 30 --host a
	record_slots b --count 30 --host b
	run "$WATTBUS" train --out "$BATS_TEST_TMPDIR/x" "$BATS_TEST_TMPDIR/a.rec" "$BATS_TEST_TMPDIR/b.rec"
	assert_failure 2
	assert_output --partial "several hosts (a, b, ...): choose one with --host"
	run "$WATTBUS" train --host b --min-slots 10 --out "$BATS_TEST_TMPDIR/b" "$BATS_TEST_TMPDIR/a.rec" "$BATS_TEST_TMPDIR/b.rec"
	assert_success
	assert_output --partial "chosen: SGDRegressorTrainer-wattbus-b (linear)"
	run "$WATTBUS" train --form cubic "$BATS_TEST_TMPDIR/a.rec"
	assert_failure 2
	assert_output --partial "--form: 'cubic' is not auto"
}

@test "train refuses a fit whose power is not finite on the grid, says why, and writes another form or nothing" {
	# package = 0.5 W e^(0.0012 CPU-ms/s) + 20 W on 4 CPUs: the exponential fit is right here,
	# and infinite at 1e6 CPU-ms/s (1,000 busy CPUs), where estimd's grid check looks
	record_slots exp --count 100 --seed 6 --exponential 0.5,0.0012,20
	run "$WATTBUS" train --form exponential --out "$BATS_TEST_TMPDIR/exp" "$BATS_TEST_TMPDIR/exp.rec"
	assert_failure 1
	assert_line --regexp '^exponential +model ExponentialRegressionTrainer-wattbus-metal1: zone package gives inf W at bpf_cpu_time_ms=1e\+06: not finite, refused$'
	assert_output --partial "no model could be fitted"
	[ ! -e "$BATS_TEST_TMPDIR/exp/weight.json" ]
	run "$WATTBUS" train --out "$BATS_TEST_TMPDIR/auto" "$BATS_TEST_TMPDIR/exp.rec"
	assert_success
	assert_line --regexp '^exponential +model .*not finite, refused$'
	refute_output --partial "chosen: ExponentialRegressionTrainer"
	run "$WB_BUILD/wattbus-estimd" -n --model "$BATS_TEST_TMPDIR/auto/weight.json"
	assert_success
}
