#!/usr/bin/env bats
# modeld's online trainer: with prometheus set, it range-queries Kepler's training metrics
# over train_window at train_step every train_interval, trains, and files the models in its
# pipeline as from trainer host "prometheus", by the bus's rules (trusted_trainers).

load helper
load modeld_helper

teardown() { wb_kill_all; }

# fake_prom: a stand-in Prometheus serving make_request.py's law; PROM_URL once it listens.
fake_prom() {
	python3 "$WB_ROOT/tests/data/train/make_request.py" --prom-only >"$BATS_TEST_TMPDIR/results.json"
	: >"$BATS_TEST_TMPDIR/prom.log"
	wb_spawn prom python3 "$WB_ROOT/tests/data/train/fake_prometheus.py" \
		"$BATS_TEST_TMPDIR/results.json" "$BATS_TEST_TMPDIR/queries.log"
	wb_wait_lines "$BATS_TEST_TMPDIR/prom.log" 1 20 '^port [0-9]'
	PROM_URL=http://127.0.0.1:$(grep -o '[0-9]*$' "$BATS_TEST_TMPDIR/prom.log" | head -n 1)
}

@test "trained from Prometheus: the law filed in the store's pipeline and served within its MAE" {
	fake_prom
	md_start modeld --sub "" --prometheus "$PROM_URL/" --train_interval 1h --train_window 300s \
		--train_step 3s --trusted_trainers prometheus
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'prometheus: .*trained on 100 intervals' || {
		cat "$BATS_TEST_TMPDIR/modeld.log"
		false
	}
	# every training metric asked, over the window at the step
	run jq -r 'select(.query == "kepler_container_bpf_cpu_time_ms_total") | "\(.path) \((.end | tonumber) - (.start | tonumber)) \(.step)"' "$BATS_TEST_TMPDIR/queries.log"
	assert_output '/api/v1/query_range 300 3.000'
	run jq -s 'length' "$BATS_TEST_TMPDIR/queries.log"
	assert_output 10
	run md_post '{"metrics":["bpf_cpu_time_ms"],"output_type":"AbsPower","weight":true}'
	assert_line --index 0 200
	md_law_within_mae "$BATS_TEST_TMPDIR/answer"
	run bash -c "curl -sS --max-time 10 '$MD_URL/models' | jq -r '.models[] | \"\(.pipeline) \(.output_type) \(.origin)\"' | sort"
	assert_output "$(printf 'wattbus AbsPower bus:prometheus\nwattbus DynPower bus:prometheus')"
}

@test "not in trusted_trainers: filed apart; Prometheus down: counted, modeld serves on" {
	fake_prom
	md_start modeld --sub "" --prometheus "$PROM_URL" --train_interval 1h
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'prometheus: .*trained on 100 intervals'
	run bash -c "curl -sS --max-time 10 '$MD_URL/models' | jq -r '[.models[].pipeline] | unique | .[]'"
	assert_output wattbus-untrusted
	wb_kill_all
	md_start down --sub "" --prometheus "http://prometheus.invalid/" --train_interval 1h --prometheus_timeout 2s
	wb_tap tap "ipc://$MD_RT/modeld.sock"
	wb_wait_lines "$BATS_TEST_TMPDIR/down.log" 1 30 'prometheus: .*this round is dropped'
	wb_wait_for 30 bash -c '[ "$(grep "\"topic\":\"stat/" "$0" | tail -n 1 | jq -r ".msg.counters[] | select(.name == \"prom_queries_failed\") | .value")" = 1 ]' "$BATS_TEST_TMPDIR/tap.all"
	run curl -sS --max-time 10 "$MD_URL/healthz"
	assert_output ok
}
