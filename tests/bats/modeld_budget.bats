#!/usr/bin/env bats
# modeld that nobody can block or bloat: a budget per trainer host and in all (node
# types, models, bytes) and a rate per host, each refusal counted with the store
# unchanged; untrusted trainers' models kept apart, whatever mae they declare; an
# import named like the store's own pipeline refused while modeld keeps serving.

load helper
load modeld_helper

teardown() { wb_kill_all; }

SPEC='{"processor":"Intel(R) Xeon(R) CPU E3-1230 v6 @ 3.50GHz","cores":8,"chips":1,"memory_gib":31,"frequency_mhz":3900}'
REQ='{"metrics":["bpf_cpu_time_ms"],"output_type":"AbsPower","weight":true,"machine_spec":{"processor":"Intel(R) Xeon(R) CPU E3-1230 v6 @ 3.50GHz","cores":8,"chips":1,"memory":31,"frequency":3900}}'

# model_line HOST MAE [CORES]: one model message as `wattbus pub` reads it.
model_line() {
	jq -nc --arg h "$1" --argjson mae "$2" --argjson spec "$SPEC" --argjson cores "${3:-8}" \
		'{topic: "model/\($h)", msg: {v: 1, kind: "model", host: $h, src: "estimd", t: 9, name: "trained",
		  type: "AbsPower", train_slots: 100, test_slots: 20, mae: $mae, spec: ($spec + {cores: $cores}),
		  features: ["bpf_cpu_time_ms"],
		  zones: [{zone: "package", bias_w: 12.5, weights: [3.25], scales: [1000], mae_w: $mae}]}}'
}

# counter NAME: modeld's last stat value of NAME (its stat messages, tapped).
counter() {
	grep '"topic":"stat/' "$BATS_TEST_TMPDIR/tap.all" | tail -1 |
		jq -r --arg n "$1" '[.msg.counters[] | select(.name == $n) | .value][0] // 0'
}
heard_all() { # N: received + lost (seq gaps) reached N
	local last
	last=$(grep '"topic":"stat/' "$BATS_TEST_TMPDIR/tap.all" | tail -1)
	[ -n "$last" ] || return 1
	[ $(($(jq -r '[.msg.counters[] | select(.name == "models_received") | .value][0] // 0' <<<"$last") + $(jq -r '.msg.lost // 0' <<<"$last"))) -ge "$1" ]
}

@test "3,000 hostile model messages: modeld keeps serving the honest model, the store stays within budget, every refusal counted" {
	local bus
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus" --trusted_trainers honest --max_node_types 16 --max_node_types_per_host 2 \
		--max_models 32 --max_models_per_host 4 --max_store_bytes 200000 --max_store_bytes_per_host 20000 \
		--models_per_host_per_minute 30
	wb_tap tap "ipc://$MD_RT/modeld.sock" stat/
	model_line honest 2.0 | "$WATTBUS" pub --wait 30s "$bus"
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'model/honest (trained): stored as wattbus/'
	run md_choice "$REQ"
	assert_output "200 SGDRegressorTrainer_0 2"

	# 1,000 liars (another host each, the honest machine, a mae of 1e-300), 1,000 models from
	# one host (its rate), 1,000 machines that never were (a node type each).
	{
		for i in $(seq 0 999); do echo "liar-$i"; done | jq -Rc --argjson spec "$SPEC" \
			'{topic: "model/\(.)", msg: {v: 1, kind: "model", host: ., src: "estimd", t: 9, name: "trained", type: "AbsPower",
			  mae: 1e-300, spec: $spec, features: ["bpf_cpu_time_ms"], zones: [{zone: "package", bias_w: 999, weights: [0], scales: [1]}]}}'
		seq 0 999 | jq -c --argjson spec "$SPEC" \
			'{topic: "model/flood", msg: {v: 1, kind: "model", host: "flood", src: "estimd", t: ., name: "trained", type: "AbsPower",
			  mae: 1, spec: $spec, features: ["bpf_cpu_time_ms"], zones: [{zone: "package", bias_w: ., weights: [1], scales: [1]}]}}'
		seq 0 999 | jq -c --argjson spec "$SPEC" \
			'{topic: "model/spam-\(.)", msg: {v: 1, kind: "model", host: "spam-\(.)", src: "estimd", t: 9, name: "trained",
			  type: "AbsPower", mae: 1, spec: ($spec + {cores: (100 + .)}), features: ["bpf_cpu_time_ms"],
			  zones: [{zone: "package", bias_w: 1, weights: [1], scales: [1]}]}}'
	} >"$BATS_TEST_TMPDIR/hostile.jsonl"
	run wc -l <"$BATS_TEST_TMPDIR/hostile.jsonl"
	assert_output 3000
	local cpu0
	cpu0=$(awk '{print $14 + $15}' "/proc/$PID_modeld/stat")
	"$WATTBUS" pub --wait 30s --interval 2ms "$bus" <"$BATS_TEST_TMPDIR/hostile.jsonl"
	wb_wait_for 120 heard_all 3001

	# Still serving, the honest model: the liars' mae counts for nothing.
	run curl -sS --max-time 10 "$MD_URL/healthz"
	assert_output ok
	run md_choice "$REQ"
	assert_output "200 SGDRegressorTrainer_0 2"

	# Within the budget: node types in all, models, bytes of model files.
	local types models bytes
	types=$(cat "$BATS_TEST_TMPDIR"/store/*/node_type_index.json | jq -s '[.[] | length] | add')
	models=$(find "$BATS_TEST_TMPDIR/store" -name metadata.json -path '*Trainer_*' | wc -l)
	bytes=$(find "$BATS_TEST_TMPDIR/store" -path '*Trainer_*' -type f -printf '%s\n' | awk '{s += $1} END {print s}')
	echo "store: $types node types, $models models, $bytes bytes of model files, $(du -sb "$BATS_TEST_TMPDIR/store" | cut -f1) bytes in all"
	[ "$types" -le 16 ]
	[ "$models" -le 32 ]
	[ "$bytes" -le 200000 ]
	# The flood got its rate's worth (30 a minute, a bucket of 30), the spam its node types' worth.
	local over rate kept stored rejected received
	over=$(counter models_over_budget)
	rate=$(counter models_rate_limited)
	kept=$(counter models_kept)
	stored=$(counter models_stored)
	rejected=$(counter models_rejected)
	received=$(counter models_received)
	echo "received $received: stored $stored, kept $kept, over budget $over, rate limited $rate, rejected $rejected"
	echo "modeld CPU for the 3,000: $(($(awk '{print $14 + $15}' "/proc/$PID_modeld/stat") - cpu0)) ticks of $(getconf CLK_TCK)/s"
	[ "$over" -ge 900 ]
	[ "$rate" -ge 900 ]
	[ "$received" -eq $((stored + kept + over + rate + rejected)) ]
	run grep -c 'not stored: over the budget: a new node type would pass max_node_types (max_node_types = 16)' "$BATS_TEST_TMPDIR/modeld.log"
	echo "log: $output lines of the node type refusal"
	grep 'not stored: over the budget' "$BATS_TEST_TMPDIR/modeld.log" | head -3
	[ "$output" -ge 1 ]
	# Refused models left nothing: no spam host past the budget is a member of a node type.
	run jq -r '[.[] | .members[]] | map(select(startswith("spam-"))) | length' "$BATS_TEST_TMPDIR/store/wattbus-untrusted/node_type_index.json"
	[ "$output" -le 16 ]
	# exported like the other counters
	run jq -r '.msg.counters[].name' < <(grep '"topic":"stat/' "$BATS_TEST_TMPDIR/tap.all" | tail -1)
	assert_line models_over_budget
	assert_line models_rate_limited
}

@test "an untrusted trainer's low-mae model is kept apart: served only when its pipeline is named" {
	local bus
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus" --trusted_trainers honest
	{
		model_line honest 2.0
		model_line liar 1e-300
	} | "$WATTBUS" pub --wait 30s --interval 50ms "$bus"
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'model/liar (trained): stored as wattbus-untrusted/'
	run md_choice "$REQ"
	assert_output "200 SGDRegressorTrainer_0 2"
	run md_choice "$(jq -c '. + {pipeline_name: "wattbus-untrusted"}' <<<"$REQ")"
	assert_output "200 SGDRegressorTrainer_0 1e-300"
	run curl -sS --max-time 10 "$MD_URL/models"
	run jq -c '[.pipelines[] | [.name, .untrusted]] | sort' <<<"$output"
	assert_output '[["wattbus",false],["wattbus-untrusted",true]]'
}

@test "importing a pipeline named like the store's own is refused with the reason; modeld keeps serving" {
	local p=$BATS_TEST_TMPDIR/squat bus
	mkdir -p "$p/rapl-sysfs/AbsPower/BPFOnly"
	echo '{"name": "wattbus"}' >"$p/metadata.json"
	cp "$MD_EC2/node_type_index.json" "$p/"
	cp -r "$MD_EC2/rapl-sysfs/AbsPower/BPFOnly/SGDRegressorTrainer_1" "$p/rapl-sysfs/AbsPower/BPFOnly/"
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus" --trusted_trainers honest --import "$p" --import "$MD_EC2"
	run grep "import $p: refused" "$BATS_TEST_TMPDIR/modeld.log"
	assert_output --partial "its name wattbus is the one this store files models from the bus under (pipeline = wattbus, untrusted_pipeline = wattbus-untrusted)"
	run curl -sS --max-time 10 "$MD_URL/models"
	run jq -c '[.errors[].path, ([.pipelines[].name] | sort)]' <<<"$output"
	assert_output "[\"$p\",[\"ec2-0.7.11\"]]"
	# the other import is served, and models from the bus are filed and served
	run md_choice '{"metrics":["bpf_cpu_time_ms","bpf_page_cache_hit"],"output_type":"AbsPower"}'
	assert_output "200 LogarithmicRegressionTrainer_1 5.76"
	model_line honest 0.5 | "$WATTBUS" pub --wait 30s "$bus"
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'model/honest (trained): stored as wattbus/'
	run md_choice "$REQ"
	assert_output "200 SGDRegressorTrainer_0 0.5"
}
