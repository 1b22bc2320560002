#!/usr/bin/env bats
# estimd's model file: a bad one is refused with the file and the JSON key
# (exit 2 at start); SIGHUP reloads it, and a bad one keeps the running model.

load estimd_helper

teardown() { wb_kill_all; }

SHIPPED=ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1

bad_model() { # FILE KIND
	case $2 in
	missing_scale) printf '{"package": {"All_Weights": {"Bias_Weight": 10, "Numerical_Variables": {"bpf_cpu_time_ms": {"weight": 2}}}}}' ;;
	zero_scale) printf '{"package": {"All_Weights": {"Numerical_Variables": {"bpf_cpu_time_ms": {"scale": 0.0, "weight": 2}}}}}' ;;
	nan) printf '{"dram": {"All_Weights": {"Bias_Weight": NaN, "Numerical_Variables": {"bpf_cpu_time_ms": {"scale": 1}}}}}' ;;
	no_zone) printf '{"model_name": "empty"}' ;;
	esac >"$1"
}

@test "bad model files are refused at start with the file and the JSON key" {
	for kind in missing_scale zero_scale nan no_zone; do
		bad_model "$BATS_TEST_TMPDIR/$kind.json" $kind
	done
	estimd_refuses "missing_scale.json: package.All_Weights.Numerical_Variables.bpf_cpu_time_ms.scale: missing" --model "$BATS_TEST_TMPDIR/missing_scale.json"
	estimd_refuses "zero_scale.json: package.All_Weights.Numerical_Variables.bpf_cpu_time_ms.scale: 0 is not a positive scale" --model "$BATS_TEST_TMPDIR/zero_scale.json"
	estimd_refuses "nan.json: dram.All_Weights.Bias_Weight: NaN is not a finite number" --model "$BATS_TEST_TMPDIR/nan.json"
	estimd_refuses "no_zone.json: package: missing: no zone" --model "$BATS_TEST_TMPDIR/no_zone.json"
	# Not only -n: a daemon started with it exits 2 too, before binding anything.
	run "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --pub "$(wb_ep x)" --sub "$(wb_ep y)" \
		--model "$BATS_TEST_TMPDIR/nan.json"
	assert_failure 2
	run "$WB_BUILD/wattbus-estimd" -n --model "$WB_ROOT/data/models/$SHIPPED.json"
	assert_success
}

@test "SIGHUP reloads the model file; a bad file keeps the running model" {
	cp "$WB_ROOT/data/models/$SHIPPED.json" "$BATS_TEST_TMPDIR/model.json"
	estimd_start "estimate/" \
		--model "$BATS_TEST_TMPDIR/model.json" --stat_interval 200ms --max_zone_w 500
	feed() { python3 "$BATS_TEST_DIRNAME/estimd_slots.py" --host vm1 --no-power --count 1 --seed "$1" |
		"$WATTBUS" pub --wait 30s "$in"; }

	feed 1
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 1 10

	# A broken file: refused with its key, the model in use stays.
	bad_model "$BATS_TEST_TMPDIR/model.json" zero_scale
	kill -HUP "$PID_estimd"
	wb_wait_lines "$BATS_TEST_TMPDIR/estimd.log" 1 10 "reload failed"
	run grep "reload failed" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "model.json: package.All_Weights.Numerical_Variables.bpf_cpu_time_ms.scale: 0 is not a positive scale"
	feed 2
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 2 10

	# A good file with another model: used from the next slot on.
	jq '.model_name = "second" | .package.All_Weights.Bias_Weight = 100' \
		"$WB_ROOT/data/models/$SHIPPED.json" >"$BATS_TEST_TMPDIR/model.json"
	kill -HUP "$PID_estimd"
	wb_wait_lines "$BATS_TEST_TMPDIR/estimd.log" 1 10 "reloaded model second"
	feed 3
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 3 10
	# A model over [global] max_zone_w (500 W here), with another key changed: the whole
	# reload is refused, as at start, not the settings taken and the model kept.
	jq '.model_name = "third" | .package.All_Weights.Bias_Weight = 1000' \
		"$WB_ROOT/data/models/$SHIPPED.json" >"$BATS_TEST_TMPDIR/model.json"
	kill -HUP "$PID_estimd"
	wb_wait_lines "$BATS_TEST_TMPDIR/estimd.log" 1 10 "reload: model third"
	run grep "reload: model third" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "above the zone's bound of 500 W, refused; keeping the running config and model"
	run grep -c "reloaded model third" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output 0
	feed 4
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 4 10
	run jq -r .msg.model "$BATS_TEST_TMPDIR/tap.log"
	assert_line --index 0 "$SHIPPED"
	assert_line --index 1 "$SHIPPED"
	assert_line --index 2 "second"
	assert_line --index 3 "second"
	# The daemon never stopped.
	kill -0 "$PID_estimd"
}
