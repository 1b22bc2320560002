#!/usr/bin/env bats
# POST /model on the imported ec2-0.7.11 pipeline answers what Kepler's selection
# rules choose. The expected column was derived by hand from the pipeline's
# metadata.json files (mae, mape) and node_type_index.json: valid feature groups
# for the metrics, the node type (requested, or by machine spec: covered, else the
# most similar), with loose_node_type the group's node types with the most cores
# when the type has no model there, weight-capable only, the filter, the lowest mae.

load helper
load modeld_helper

teardown() { wb_kill_all; }

BPF='"bpf_cpu_time_ms","bpf_page_cache_hit"'
CNT='"cache_miss","cpu_cycles","cpu_instructions"'
IRQ='"bpf_block_irq","bpf_net_rx_irq","bpf_net_tx_irq"'

# request (without weight, added by md_choice) | expected "STATUS MODEL MAE" or "400"
TABLE=(
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\"}|200 LogarithmicRegressionTrainer_1 5.76"
	"{\"metrics\":[$CNT,$BPF],\"output_type\":\"AbsPower\"}|200 LogarithmicRegressionTrainer_1 5.76"
	"{\"metrics\":[$CNT],\"output_type\":\"AbsPower\"}|200 LogarithmicRegressionTrainer_5 9.39"
	"{\"metrics\":[$CNT],\"output_type\":\"AbsPower\",\"trainer_name\":\"SGDRegressorTrainer\"}|200 SGDRegressorTrainer_3 10.72"
	"{\"metrics\":[$CNT,$BPF],\"output_type\":\"AbsPower\",\"trainer_name\":\"SGD\"}|200 SGDRegressorTrainer_3 10.72"
	"{\"metrics\":[$CNT,$BPF,$IRQ],\"output_type\":\"AbsPower\",\"filter\":\"mape:1\"}|200 LogarithmicRegressionTrainer_5 9.39"
	"{\"metrics\":[$CNT,$BPF,$IRQ],\"output_type\":\"AbsPower\",\"filter\":\"mape:0.3\"}|200 ExponentialRegressionTrainer_5 40.09"
	"{\"metrics\":[$CNT,$BPF,$IRQ],\"output_type\":\"AbsPower\",\"filter\":\"mae:10;mape:20\"}|200 LogarithmicRegressionTrainer_1 5.76"
	"{\"metrics\":[$CNT],\"output_type\":\"AbsPower\",\"filter\":\"mae:9\"}|400"
	"{\"metrics\":[$CNT],\"output_type\":\"AbsPower\",\"node_type\":4}|200 SGDRegressorTrainer_4 26.95"
	"{\"metrics\":[$BPF,$IRQ],\"output_type\":\"AbsPower\",\"node_type\":4}|200 LogarithmicRegressionTrainer_4 60.73"
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"node_type\":3}|200 SGDRegressorTrainer_3 59.64"
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"node_type\":9}|200 LogarithmicRegressionTrainer_5 28.13"
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"node_type\":9,\"loose_node_type\":false}|400"
	"{\"metrics\":[$CNT],\"output_type\":\"DynPower\",\"node_type\":4}|200 LogarithmicRegressionTrainer_1 6.43"
	"{\"metrics\":[$CNT],\"output_type\":\"DynPower\",\"node_type\":4,\"loose_node_type\":false}|400"
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"machine_spec\":{\"processor\":\"Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz\",\"cores\":96,\"chips\":2,\"memory\":755,\"frequency\":3500}}|200 SGDRegressorTrainer_3 59.64"
	"{\"metrics\":[$CNT],\"output_type\":\"AbsPower\",\"machine_spec\":{\"processor\":\"intel_xeon_platinum_8259cl\"}}|200 SGDRegressorTrainer_0 13.1"
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"machine_spec\":{\"processor\":\"intel_xeon_platinum_8488c\",\"cores\":96,\"chips\":1,\"memory\":500,\"frequency\":3800}}|200 LogarithmicRegressionTrainer_5 28.13"
	"{\"metrics\":[$CNT],\"output_type\":\"AbsPower\",\"machine_spec\":{\"processor\":\"Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz\",\"cores\":64,\"chips\":2,\"memory\":480,\"frequency\":3000}}|200 LogarithmicRegressionTrainer_1 12.01"
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"pipeline_name\":\"ec2-0.7.11\"}|200 LogarithmicRegressionTrainer_1 5.76"
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"pipeline_name\":\"nope\"}|400"
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"source\":\"acpi\"}|400"
	"{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"trainer_name\":\"XgboostFitTrainer\"}|400"
	"{\"metrics\":[],\"output_type\":\"AbsPower\"}|400"
	"{\"metrics\":[\"bpf_cpu_time_ms\"],\"output_type\":\"AbsPower\"}|400"
	"{\"metrics\":[$BPF],\"output_type\":\"DynPower\"}|400"
)

@test "POST /model on ec2-0.7.11 answers the hand-derived choice of every row" {
	md_start modeld --sub "" --import "$MD_EC2"
	grep -q 'imported pipeline ec2-0.7.11 .*: 78 models' "$BATS_TEST_TMPDIR/modeld.log"
	local fails=0 row req want got
	for row in "${TABLE[@]}"; do
		req=${row%|*}
		want=${row##*|}
		got=$(md_choice "$req")
		if [ "$want" = 400 ]; then
			[[ $got == "400 cannot find a model: "* ]] && continue
		else
			[ "$got" = "$want" ] && continue
		fi
		echo "request $req: got '$got', expected '$want'"
		fails=$((fails + 1))
	done
	[ "$fails" = 0 ]
}

@test "weight=true adds model_name, the node type's machine_spec and mae to weight.json" {
	md_start modeld --sub "" --import "$MD_EC2"
	run md_post "{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"weight\":true}"
	assert_success
	assert_line --index 0 200
	run jq -c '[.model_name, .mae, .machine_spec.processor, .machine_spec.cores, (.package.All_Weights.CurveFit_Weights | length)]' "$BATS_TEST_TMPDIR/answer"
	assert_output '["LogarithmicRegressionTrainer_1",5.76,"intel_xeon_e5_2686v4",72,3]'
}

@test "weight=false answers a zip of the chosen model's weight.json and metadata.json" {
	md_start modeld --sub "" --import "$MD_EC2"
	local zip=$BATS_TEST_TMPDIR/model.zip
	run curl -sS --max-time 10 -D "$BATS_TEST_TMPDIR/headers" -o "$zip" -w '%{http_code}' \
		--data-binary "{\"metrics\":[$CNT],\"output_type\":\"AbsPower\",\"node_type\":4}" "$MD_URL/model"
	assert_output 200
	grep -qi '^content-type: application/zip' "$BATS_TEST_TMPDIR/headers"
	run python3 - "$zip" "$MD_EC2/rapl-sysfs/AbsPower/CounterOnly/SGDRegressorTrainer_4" <<-'EOF'
		import json, sys, zipfile
		z = zipfile.ZipFile(sys.argv[1])
		print(sorted(z.namelist()))
		for name in ("weight.json", "metadata.json"):
		    assert json.loads(z.read(name)) == json.load(open(sys.argv[2] + "/" + name)), name
		print(json.loads(z.read("metadata.json"))["model_name"])
	EOF
	assert_success
	assert_output "['metadata.json', 'weight.json']
SGDRegressorTrainer_4"
}

@test "GET /best-models: the lowest mae per output type and feature group" {
	md_start modeld --sub "" --import "$MD_EC2"
	run curl -sS --max-time 10 "$MD_URL/best-models"
	assert_success
	run jq -cS . <<<"$output"
	assert_output '{"AbsPower":{"BPFIRQ":"LogarithmicRegressionTrainer_1","BPFOnly":"LogarithmicRegressionTrainer_1","Basic":"LogarithmicRegressionTrainer_1","CounterIRQCombined":"LogarithmicRegressionTrainer_1","CounterOnly":"LogarithmicRegressionTrainer_5"},"DynPower":{"Basic":"LogarithmicRegressionTrainer_1","CounterIRQCombined":"LogarithmicRegressionTrainer_1","CounterOnly":"LogarithmicRegressionTrainer_1"}}'
	run curl -sS --max-time 10 "$MD_URL/best-models?output-type=AbsPower&feature-group=CounterOnly&node-type=4"
	assert_output '{"AbsPower":{"CounterOnly":"SGDRegressorTrainer_4"}}'
	run curl -sS --max-time 10 "$MD_URL/best-models?output-type=AbsPower&feature-group=BPFOnly&filter=mape:1"
	assert_output '{"AbsPower":{"BPFOnly":"LogarithmicRegressionTrainer_5"}}'
}

@test "GET /models lists every model with its origin, and the entries it skipped with path and reason" {
	local pipe=$BATS_TEST_TMPDIR/ec2
	cp -r "$MD_EC2" "$pipe"
	echo '{"model_name": ' >"$pipe/rapl-sysfs/AbsPower/BPFOnly/SGDRegressorTrainer_4/metadata.json"
	md_start modeld --sub "" --import "$pipe"
	run curl -sS --max-time 10 "$MD_URL/models"
	assert_success
	run jq -c '[(.models | length), (.models[0] | .origin), (.errors | length), (.errors[0].path | endswith("BPFOnly/SGDRegressorTrainer_4/metadata.json")), (.errors[0].reason | test("unexpected|end of file"))]' <<<"$output"
	assert_output "[77,\"import:$pipe\",1,true,true]"
	grep -q 'SGDRegressorTrainer_4/metadata.json: skipped' "$BATS_TEST_TMPDIR/modeld.log"
	# the pipeline still serves what it could read
	run md_choice "{\"metrics\":[$BPF],\"output_type\":\"AbsPower\",\"node_type\":4}"
	assert_output "200 LogarithmicRegressionTrainer_4 60.73"
}
