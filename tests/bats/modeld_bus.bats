#!/usr/bin/env bats
# A model published on the bus (as a training estimd publishes it) is filed in the
# store in Kepler's layout, served by POST /model to a machine of the same spec,
# still served after modeld restarts, and modeld's counters reach exportd's /metrics.

load helper
load modeld_helper

teardown() { wb_kill_all; }

SPEC='{"processor":"Intel(R) Xeon(R) CPU E3-1230 v6 @ 3.50GHz","cores":8,"chips":1,"memory_gib":31,"frequency_mhz":3900}'

# model_line HOST MAE [TYPE]: one model message as `wattbus pub` reads it.
model_line() {
	jq -nc --arg h "$1" --argjson mae "$2" --arg type "${3:-AbsPower}" --argjson spec "$SPEC" \
		'{topic: "model/\($h)", msg: {v: 1, kind: "model", host: $h, src: "estimd", t: 9, name: "trained",
		  type: $type, ncpu: 8, train_slots: 100, test_slots: 20, mae: $mae, mape: 2.5, spec: $spec,
		  features: ["bpf_cpu_time_ms"],
		  zones: [{zone: "package", bias_w: 12.5, weights: [3.25], scales: [1000], means: [400], mae_w: $mae, mape: 2.5}]}}'
}

REQ='{"metrics":["bpf_cpu_time_ms","cpu_cycles"],"output_type":"AbsPower","weight":true,"machine_spec":{"processor":"Intel(R) Xeon(R) CPU E3-1230 v6 @ 3.50GHz","cores":8,"chips":1,"memory":31,"frequency":3900}}'

@test "a model from the bus is stored in Kepler's layout, served, and still served after a restart" {
	local bus
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus" --trusted_trainers node-a,node-b,node-c
	model_line node-a 1.5 | "$WATTBUS" pub --wait 30s "$bus"
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'model/node-a (trained): stored as wattbus/rapl-sysfs/AbsPower/ThirdParty/SGDRegressorTrainer_0'
	local dir=$BATS_TEST_TMPDIR/store/wattbus
	run jq -c '.["0"]' "$dir/node_type_index.json"
	assert_output '{"attrs":{"processor":"intel_xeon_e3_1230v6","cores":8,"chips":1,"memory":31,"frequency":3900},"members":["node-a"]}'
	local m=$dir/rapl-sysfs/AbsPower/ThirdParty/SGDRegressorTrainer_0
	run jq -c '[.model_name, .mae, .mape, .features, .wattbus_host, .package_mae]' "$m/metadata.json"
	assert_output '["SGDRegressorTrainer_0",1.5,2.5,["bpf_cpu_time_ms"],"node-a",1.5]'
	# Kepler's weights; the mean folded into the bias: 12.5 - 3.25 * 400 / 1000
	run jq -c '.package.All_Weights | [.Bias_Weight, .Numerical_Variables.bpf_cpu_time_ms]' "$m/weight.json"
	assert_output '[11.2,{"scale":1000,"weight":3.25}]'
	run md_choice "$REQ"
	assert_output "200 SGDRegressorTrainer_0 1.5"

	# restart: the store is read back
	wb_kill_all
	md_start modeld2 --sub "$bus" --trusted_trainers node-a,node-b,node-c
	grep -q '1 models in 1 pipelines' "$BATS_TEST_TMPDIR/modeld2.log"
	run md_choice "$REQ"
	assert_output "200 SGDRegressorTrainer_0 1.5"
	run curl -sS --max-time 10 "$MD_URL/models"
	run jq -c '[.models[0].origin, .models[0].feature_group, .errors]' <<<"$output"
	assert_output '["bus:node-a","ThirdParty",[]]'
}

@test "a worse model of another host is kept out, a better one replaces it; bad ones are counted" {
	local bus
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus" --trusted_trainers node-a,node-b,node-c
	{
		model_line node-a 2.0
		model_line node-b 3.0
		model_line node-c 1.0
		model_line node-d 1.0 Watts
	} | "$WATTBUS" pub --wait 30s --interval 50ms "$bus"
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'model/node-d .*not stored: type "Watts" is neither'
	grep -q 'model/node-b (trained): .*SGDRegressorTrainer_0 kept, it has the lower mae (2)' "$BATS_TEST_TMPDIR/modeld.log"
	grep -q 'model/node-c (trained): replaced ' "$BATS_TEST_TMPDIR/modeld.log"
	run md_choice "$REQ"
	assert_output "200 SGDRegressorTrainer_0 1"
	# node-b's model was kept out: it left nothing in the store, not even a membership
	run jq -c '.["0"].members' "$BATS_TEST_TMPDIR/store/wattbus/node_type_index.json"
	assert_output '["node-a","node-c"]'
}

@test "modeld's stat counters become wattbus_stage_events_total in exportd" {
	local bus
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus" --trusted_trainers node-a,node-b,node-c
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" --runtime_dir "$MD_RT" --listen 127.0.0.1:0 \
		--stat_interval 1s --sub "ipc://$MD_RT/modeld.sock" --state_file ""
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 10 'port [0-9]'
	local ex_port
	ex_port=$(grep -o 'port [0-9]*' "$BATS_TEST_TMPDIR/exportd.log" | head -n 1 | cut -d' ' -f2)
	model_line node-a 1.5 | "$WATTBUS" pub --wait 30s "$bus"
	curl -sS --max-time 10 -o /dev/null --data-binary 'not json' "$MD_URL/model"
	wb_wait_for 30 bash -c 'm=$(curl -sS --max-time 5 "http://127.0.0.1:$0/metrics"); \
		grep -E "^wattbus_stage_events_total\{.*stage=\"modeld\".*name=\"models_stored\"\} 1$" <<<"$m" && \
		grep -E "^wattbus_stage_events_total\{.*stage=\"modeld\".*name=\"http_bad_requests\"\} 1$" <<<"$m" && \
		grep -E "^wattbus_stage_up\{.*stage=\"modeld\".*\} 1$" <<<"$m"' "$ex_port"
}

@test "a model from another host over tcp with CURVE" {
	local K=$BATS_TEST_TMPDIR/keys port
	mkdir -p "$K/allowed"
	for c in trainer modeld; do "$WATTBUS" keygen "$K/$c" >/dev/null; done
	cp "$K/modeld" "$K/allowed/"
	port=$(wb_free_port)
	md_start modeld --sub "tcp://127.0.0.1:$port" --trusted_trainers node-a --curve_cert "$K/modeld" --curve_peer "$K/trainer"
	model_line node-a 1.5 | "$WATTBUS" pub --wait 30s --curve-cert "$K/trainer" --curve-allow "$K/allowed" "tcp://127.0.0.1:$port"
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'model/node-a (trained): stored as '
	run md_choice "$REQ"
	assert_output "200 SGDRegressorTrainer_0 1.5"
}
