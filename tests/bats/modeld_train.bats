#!/usr/bin/env bats
# modeld's offline trainer: POST /train with Kepler's TrainRequest answers a zip of the
# trained pipeline in Kepler's layout; unpacked and imported, modeld serves it on POST
# /model. A known law comes back within the model's held-out MAE; bad requests get a
# 400 naming the field, counted; kepler-model-server's own test data is accepted.

load helper
load modeld_helper

teardown() { wb_kill_all; }

MAKE_REQ=$WB_ROOT/tests/data/train/make_request.py

# train BODY_FILE: POST /train; prints the status and the content type; the answer in $BATS_TEST_TMPDIR/answer.
train() {
	curl -sS --max-time 60 -o "$BATS_TEST_TMPDIR/answer" -w '%{http_code} %{content_type}\n' \
		-H 'Content-Type: application/json' --data-binary @"$1" "$MD_URL/train"
}

counter() {
	grep '"topic":"stat/' "$BATS_TEST_TMPDIR/tap.all" | tail -n 1 |
		jq -r --arg n "$1" '.msg.counters[] | select(.name == $n) | .value'
}

@test "a TrainRequest of a known law: the pipeline zip, imported, serves the law within its MAE" {
	python3 "$MAKE_REQ" --name law --spelling prome_response >"$BATS_TEST_TMPDIR/req.json"
	md_start modeld --sub ""
	run train "$BATS_TEST_TMPDIR/req.json"
	assert_output '200 application/zip'
	mkdir "$BATS_TEST_TMPDIR/law"
	(cd "$BATS_TEST_TMPDIR/law" && unzip -q "$BATS_TEST_TMPDIR/answer")
	run jq -c '[.name, .abs_trainers, .skipped_trainers]' "$BATS_TEST_TMPDIR/law/metadata.json"
	assert_output '["law",["SGDRegressorTrainer"],"PolynomialRegressionTrainer"]'
	grep -q 'http: /train: pipeline law from 100 intervals' "$BATS_TEST_TMPDIR/modeld.log"
	wb_kill_all
	md_start served --sub "" --import "$BATS_TEST_TMPDIR/law"
	for out in AbsPower DynPower; do
		run md_post "{\"metrics\":[\"bpf_cpu_time_ms\"],\"output_type\":\"$out\",\"weight\":true}"
		assert_line --index 0 200
		cp "$BATS_TEST_TMPDIR/answer" "$BATS_TEST_TMPDIR/$out.json"
	done
	run jq -r .model_name "$BATS_TEST_TMPDIR/AbsPower.json"
	assert_output SGDRegressorTrainer_0
	# the law at 0..4 busy CPUs (1000 ms of CPU time a second each), within the MAE served
	md_law_within_mae "$BATS_TEST_TMPDIR/AbsPower.json"
	# the zip answer of the imported model is the trained folder, byte for byte
	run curl -sS --max-time 10 -o "$BATS_TEST_TMPDIR/model.zip" -w '%{http_code}' \
		--data-binary '{"metrics":["bpf_cpu_time_ms"],"output_type":"AbsPower"}' "$MD_URL/model"
	assert_output 200
	run unzip -p "$BATS_TEST_TMPDIR/model.zip" weight.json
	assert_output "$(cat "$BATS_TEST_TMPDIR/law/rapl-sysfs/AbsPower/ThirdParty/SGDRegressorTrainer_0/weight.json")"
}

@test "bad TrainRequests get a 400 naming the field, counted, and modeld keeps serving" {
	md_start modeld --sub "" --train_max_body_bytes 100000
	wb_tap tap "ipc://$MD_RT/modeld.sock"
	python3 "$MAKE_REQ" --points 21 >"$BATS_TEST_TMPDIR/good.json"
	bad() { # bad JQ_FILTER: the good request changed by the filter, posted
		jq -c "$1" "$BATS_TEST_TMPDIR/good.json" >"$BATS_TEST_TMPDIR/bad.json"
		train "$BATS_TEST_TMPDIR/bad.json" >/dev/null
		head -n 1 "$BATS_TEST_TMPDIR/answer"
	}
	run bad 'del(.name)'
	assert_output --partial 'name: the pipeline'"'"'s name is needed'
	run bad '.energy_source = "battery"'
	assert_output --partial 'energy_source: one of Kepler'"'"'s PowerSourceMap'
	run bad '.trainer.abs_trainers = ["XgboostFitTrainer"]'
	assert_output --partial 'trainer.abs_trainers: none of its trainers is one wattbus trains ("XgboostFitTrainer"'
	run bad '.trainer.isolator = "Guess"'
	assert_output --partial 'trainer.isolator: "Guess" is not one of'
	run bad '.prom_response.kepler_node_package_joules_total[1].values[3] = 7'
	assert_output 'prom_response.kepler_node_package_joules_total[1].values[3]: not a [time, "value"] pair'
	run bad '.energy_source = "acpi"'
	assert_output --partial 'prom_response: no interval with kepler_container_bpf_cpu_time_ms_total and a kepler_node_<component>_joules_total of source="acpi"'
	run train "$BATS_TEST_TMPDIR/good.json"
	assert_output '200 application/zip'
	# past train_max_body_bytes: 413; GET: 405
	python3 "$MAKE_REQ" --points 400 >"$BATS_TEST_TMPDIR/big.json"
	run train "$BATS_TEST_TMPDIR/big.json"
	assert_output --partial 413
	run curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$MD_URL/train"
	assert_output 405
	wb_wait_for 30 bash -c '[ "$(grep "\"topic\":\"stat/" "$0" | tail -n 1 | jq -c "[.msg.counters[] | select(.name | test(\"^train_(requests|pipelines|refused)$\")) | .value]")" = "[7,1,6]" ]' "$BATS_TEST_TMPDIR/tap.all" || {
		grep '"topic":"stat/' "$BATS_TEST_TMPDIR/tap.all" | tail -n 1
		false
	}
	# no scratch folder left in the store
	run find "$BATS_TEST_TMPDIR/store" -name '.train-*'
	assert_output ''
}

@test "train_max_body_bytes = 0: no /train" {
	md_start modeld --sub "" --train_max_body_bytes 0
	run curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --data-binary '{}' "$MD_URL/train"
	assert_output 404
}

@test "kepler-model-server's own test data (tests/data/prom_output/idle.json) trains" {
	gunzip -c "$WB_ROOT/tests/data/train/kepler_idle.json.gz" >"$BATS_TEST_TMPDIR/idle.json"
	jq -c --slurpfile idle "$BATS_TEST_TMPDIR/idle.json" -n '{name: "kepler_idle", energy_source: "rapl-sysfs",
		trainer: {abs_trainers: ["SGDRegressorTrainer", "PolynomialRegressionTrainer"], dyn_trainers: ["SGDRegressorTrainer"],
			idle_prom_response: $idle[0], isolator: "ProfileBackgroundIsolator", isolator_args: {}},
		prom_response: $idle[0]}' >"$BATS_TEST_TMPDIR/req.json"
	md_start modeld --sub ""
	run train "$BATS_TEST_TMPDIR/req.json"
	assert_output '200 application/zip'
	# 7 points 15 s apart: 6 intervals, one held out; the four rapl-sysfs components
	grep -q 'http: /train: pipeline kepler_idle from 6 intervals' "$BATS_TEST_TMPDIR/modeld.log"
	run bash -c "unzip -p '$BATS_TEST_TMPDIR/answer' rapl-sysfs/AbsPower/ThirdParty/SGDRegressorTrainer_0/weight.json | jq -c 'keys'"
	assert_output '["core","dram","package","uncore"]'
	run bash -c "unzip -p '$BATS_TEST_TMPDIR/answer' rapl-sysfs/DynPower/ThirdParty/SGDRegressorTrainer_0/metadata.json | jq -r '[.output_type, .wattbus_train_slots, .wattbus_test_slots] | @tsv'"
	assert_output "$(printf 'DynPower\t5\t1')"
}
