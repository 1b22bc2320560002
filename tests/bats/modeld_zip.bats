#!/usr/bin/env bats
# The weight=false answer is what Kepler's server serves: a zip of the model's whole
# folder, every file byte for byte (pickles and model files included, which Kepler's
# estimator loads), or a published archive's entries as they are plus its weight file.
# Archive-only models (no weight file) are listed and served for weight=false, never
# for weight=true. A model from the bus carries an XGBoost linear model per zone that
# its metadata.json names, and nothing it does not have.
# (tests/bats/modeld_kepler_estimator.bats loads these answers in Kepler's real
# estimator; opt-in.)

load helper
load modeld_helper

teardown() { wb_kill_all; }

PUB=$WB_ROOT/tests/data/kepler-model-db/published
G=rapl-sysfs/AbsPower/BPFOnly

# zip_of NODE_TYPE TRAINER: POST a weight=false request for that model into $BATS_TEST_TMPDIR/answer.
zip_of() {
	curl -sS --max-time 10 -o "$BATS_TEST_TMPDIR/answer" -w '%{http_code} %{content_type}\n' \
		-H 'Content-Type: application/json' \
		--data-binary "{\"metrics\":[\"bpf_cpu_time_ms\",\"bpf_page_cache_hit\"],\"output_type\":\"AbsPower\",\"node_type\":$1,\"trainer_name\":\"$2\",\"loose_node_type\":false}" \
		"$MD_URL/model"
}

# same_as_folder DIR: the answer holds every file under DIR, byte for byte, and nothing else.
same_as_folder() {
	python3 - "$BATS_TEST_TMPDIR/answer" "$1" <<-'EOF'
		import os, sys, zipfile
		z = zipfile.ZipFile(sys.argv[1])
		got = {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()}
		want = {}
		for root, _, files in os.walk(sys.argv[2]):
		    for f in files:
		        p = os.path.join(root, f)
		        want[os.path.relpath(p, sys.argv[2])] = open(p, "rb").read()
		assert sorted(got) == sorted(want), (sorted(got), sorted(want))
		for k in want:
		    assert got[k] == want[k], k
		print(len(want), "files")
	EOF
}

@test "weight=false: a folder's every file, a published archive's entries plus its weight file" {
	md_start modeld --sub "" --import "$PUB"

	# An unpacked archive: the pickles, Kepler's component file, metadata.json, weight.json.
	run zip_of 1 LogarithmicRegressionTrainer
	assert_output "200 application/zip"
	run same_as_folder "$PUB/$G/LogarithmicRegressionTrainer_1"
	assert_success
	assert_output "8 files"

	# An archive-only folder (no weight.json): served for weight=false ...
	run zip_of 2 LinearRegressionTrainer
	assert_output "200 application/zip"
	run same_as_folder "$PUB/$G/LinearRegressionTrainer_2"
	assert_success
	assert_output "7 files"

	# ... as the published archive alone is, entry for entry.
	run zip_of 1 LinearRegressionTrainer
	assert_output "200 application/zip"
	run python3 - "$BATS_TEST_TMPDIR/answer" "$PUB/$G/LinearRegressionTrainer_1.zip" <<-'EOF'
		import sys, zipfile
		got, pub = zipfile.ZipFile(sys.argv[1]), zipfile.ZipFile(sys.argv[2])
		assert got.namelist() == pub.namelist(), (got.namelist(), pub.namelist())
		assert all(got.read(n) == pub.read(n) for n in pub.namelist())
		print(len(pub.namelist()), "entries")
	EOF
	assert_success
	assert_output "7 entries"

	# A published archive with its weight file beside: the entries, then weight.json = that file.
	run zip_of 1 SGDRegressorTrainer
	assert_output "200 application/zip"
	run python3 - "$BATS_TEST_TMPDIR/answer" "$PUB/$G/SGDRegressorTrainer_1.zip" "$PUB/$G/SGDRegressorTrainer_1.json" <<-'EOF'
		import sys, zipfile
		got, pub = zipfile.ZipFile(sys.argv[1]), zipfile.ZipFile(sys.argv[2])
		assert got.namelist() == pub.namelist() + ["weight.json"], got.namelist()
		assert all(got.read(n) == pub.read(n) for n in pub.namelist())
		assert got.read("weight.json") == open(sys.argv[3], "rb").read()
		print("ok")
	EOF
	assert_success
	assert_output "ok"
}

@test "archive-only models are listed, served for weight=false and never for weight=true" {
	md_start modeld --sub "" --import "$PUB"
	run curl -sS --max-time 10 "$MD_URL/models"
	assert_success
	run jq -c '[.models[] | [.model_name, .weight, (if .archive then .archive | split("/") | last else "" end)]] | sort' <<<"$output"
	assert_output '[["LinearRegressionTrainer_1",false,"LinearRegressionTrainer_1.zip"],["LinearRegressionTrainer_2",false,""],["LogarithmicRegressionTrainer_1",true,""],["SGDRegressorTrainer_1",true,"SGDRegressorTrainer_1.zip"]]'
	run jq -c '.errors' <<<"$(curl -sS --max-time 10 "$MD_URL/models")"
	assert_output '[]'

	# Asked for by trainer: weight=false gets the archive-only model with the lower mae
	# (LinearRegressionTrainer_1, 25.05; _2 has 98.63), weight=true none.
	run md_post '{"metrics":["bpf_cpu_time_ms","bpf_page_cache_hit"],"output_type":"AbsPower","trainer_name":"LinearRegressionTrainer"}'
	assert_line --index 0 200
	run unzip -p "$BATS_TEST_TMPDIR/answer" metadata.json
	run jq -r .model_name <<<"$output"
	assert_output LinearRegressionTrainer_1
	run md_choice '{"metrics":["bpf_cpu_time_ms","bpf_page_cache_hit"],"output_type":"AbsPower","trainer_name":"LinearRegressionTrainer"}'
	assert_output --partial "400 cannot find a model: no weight-capable AbsPower model"
}

@test "a model from the bus: its folder zipped whole, an XGBoost linear model per zone equal to weight.json" {
	local bus
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus" --trusted_trainers node-a
	jq -nc '{topic: "model/node-a", msg: {v: 1, kind: "model", host: "node-a", src: "estimd", t: 9, name: "trained",
		type: "AbsPower", ncpu: 8, train_slots: 100, test_slots: 20, mae: 1.5, mape: 2.5,
		features: ["bpf_cpu_time_ms", "bpf_page_cache_hit"],
		zones: [{zone: "package", bias_w: 12.5, weights: [3.25, 0.5], scales: [1000, 7], means: [400, 3], mae_w: 1.5},
		        {zone: "dram", bias_w: 2.5, weights: [0.25, -0.125], scales: [1000, 1], mae_w: 0.5}]}}' |
		"$WATTBUS" pub --wait 30s "$bus"
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'stored as wattbus/rapl-sysfs/AbsPower/BPFOnly/SGDRegressorTrainer_0'
	run zip_of 0 SGDRegressorTrainer
	assert_output "200 application/zip"
	local dir=$BATS_TEST_TMPDIR/store/wattbus/$G/SGDRegressorTrainer_0
	run same_as_folder "$dir"
	assert_success
	assert_output "5 files"
	# What Kepler's estimator reads: metadata.json's model_class and model_file, the file it
	# names (per zone: model_file, features, fe_files), each zone's XGBoost JSON model. Its
	# gblinear weights evaluate as weight.json does (to float32: XGBoost's precision).
	run python3 - "$BATS_TEST_TMPDIR/answer" <<-'EOF'
		import json, struct, sys, zipfile
		z = zipfile.ZipFile(sys.argv[1])
		meta = json.loads(z.read("metadata.json"))
		assert meta["model_class"] == "xgboost", meta
		assert meta["fe_files"] == [] and meta["features"] == ["bpf_cpu_time_ms", "bpf_page_cache_hit"], meta
		index = json.loads(z.read(meta["model_file"]))
		weight = json.loads(z.read("weight.json"))
		assert sorted(index) == sorted(weight) == ["dram", "package"], (index, weight)
		f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
		for zone, c in index.items():
		    assert c["features"] == meta["features"] and c["fe_files"] == [], c
		    x = json.loads(z.read(c["model_file"]))["learner"]
		    assert x["gradient_booster"]["name"] == "gblinear", x
		    assert x["learner_model_param"]["num_feature"] == "2", x
		    assert json.loads(x["attributes"]["scikit_learn"])["booster"] == "gblinear", x
		    w = x["gradient_booster"]["model"]["weights"]
		    aw = weight[zone]["All_Weights"]
		    for v in ([0, 0], [24000, 0], [96000, 5000], [1.5, 3]):
		        lin = aw["Bias_Weight"] + sum(aw["Numerical_Variables"][f]["weight"] * x_ / aw["Numerical_Variables"][f]["scale"]
		                                      for f, x_ in zip(meta["features"], v))
		        xg = f32(w[2]) + sum(f32(wi) * f32(xi) for wi, xi in zip(w, v))
		        assert abs(xg - lin) <= 1e-5 * max(1, abs(lin)), (zone, v, xg, lin)
		# package: 12.5 - 3.25 * 400 / 1000 - 0.5 * 3 / 7 at rest
		assert abs(weight["package"]["All_Weights"]["Bias_Weight"] - (12.5 - 1.3 - 1.5 / 7)) < 1e-12
		print("ok")
	EOF
	assert_success
	assert_output "ok"
}

@test "a zone name that is no file name is refused, counted, and the store keeps serving" {
	local bus
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus" --trusted_trainers node-a
	for zone in ../x weight Package dram; do
		jq -nc --arg z "$zone" '{topic: "model/node-a", msg: {v: 1, kind: "model", host: "node-a", src: "estimd", t: 9,
			name: "trained", type: "AbsPower", mae: 1.5, features: ["bpf_cpu_time_ms"],
			zones: [{zone: $z, bias_w: 1, weights: [1], scales: [1]}]}}'
	done | "$WATTBUS" pub --wait 30s "$bus"
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'stored as wattbus'
	run grep -c 'not stored: zones\[0\].zone' "$BATS_TEST_TMPDIR/modeld.log"
	assert_output 3
	run grep -F 'zone "../x"' "$BATS_TEST_TMPDIR/modeld.log"
	assert_success
	run find "$BATS_TEST_TMPDIR/store" -name 'x*'
	assert_output ""
}

@test "a model filed from the bus before the XGBoost files gets them at start, metadata.json saying so" {
	# as modeld wrote it before: weight.json and a metadata.json claiming model_file weight.json
	local dir=$BATS_TEST_TMPDIR/store/wattbus/$G/SGDRegressorTrainer_0
	mkdir -p "$dir"
	echo '{"name": "wattbus", "publisher": "wattbus-modeld"}' >"$BATS_TEST_TMPDIR/store/wattbus/metadata.json"
	echo '{"0": {"attrs": {"processor": "", "cores": 8, "chips": 1, "memory": 0, "frequency": 0}, "members": ["node-a"]}}' \
		>"$BATS_TEST_TMPDIR/store/wattbus/node_type_index.json"
	echo '{"package": {"All_Weights": {"Bias_Weight": 11.2, "Categorical_Variables": {}, "Numerical_Variables": {"bpf_cpu_time_ms": {"scale": 1000, "weight": 3.25}, "bpf_page_cache_hit": {"scale": 4, "weight": 1}}}}}' >"$dir/weight.json"
	echo '{"model_name": "SGDRegressorTrainer_0", "model_class": "scikit", "model_file": "weight.json", "features": ["bpf_cpu_time_ms", "bpf_page_cache_hit"], "fe_files": [], "output_type": "AbsPower", "mae": 1.5, "mape": 2, "wattbus_host": "node-a"}' >"$dir/metadata.json"
	md_start modeld --sub "" --trusted_trainers node-a
	grep -q "$dir: written again with the XGBoost files Kepler's estimator loads" "$BATS_TEST_TMPDIR/modeld.log"
	run zip_of 0 SGDRegressorTrainer
	assert_output "200 application/zip"
	run same_as_folder "$dir"
	assert_output "4 files"
	run python3 - "$BATS_TEST_TMPDIR/answer" <<-'PY'
		import json, sys, zipfile
		z = zipfile.ZipFile(sys.argv[1])
		meta = json.loads(z.read("metadata.json"))
		assert (meta["model_class"], meta["model_file"], meta["mae"]) == ("xgboost", "SGDRegressorTrainer_0.json", 1.5), meta
		idx = json.loads(z.read(meta["model_file"]))
		w = json.loads(z.read(idx["package"]["model_file"]))["learner"]["gradient_booster"]["model"]["weights"]
		assert w == [3.25 / 1000, 1 / 4, 11.2], w
		print("ok")
	PY
	assert_output "ok"
	# once: the next start finds nothing to write
	wb_kill_all
	md_start modeld2 --sub "" --trusted_trainers node-a
	run grep -c "written again" "$BATS_TEST_TMPDIR/modeld2.log"
	assert_output 0
}
