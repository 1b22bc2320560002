#!/usr/bin/env bats
# Kepler's training path end to end, against a real Prometheus: a pipeline on powerd's fake
# meter (a known law: package 10 W + 5 W per busy CPU, ...) whose busy CPUs follow a scripted
# fake /proc, exportd serving Kepler 0.9's names, Debian's Prometheus scraping it; then
# modeld's POST /train on the query results (kepler-model-server's prom_response) and its
# online trainer on that Prometheus each recover the law within the model's held-out MAE, and
# estimd on a meterless host, given the model by modeld, estimates it within that MAE (or 2 %
# of the law where the MAE of a near-noiseless window is smaller: tests/bats/prom_train.py).
#
# make check trains on a 60 s window; WB_PROM_LONG=1 on 300 s (Kepler's PROM_QUERY_INTERVAL),
# as docs/modeld.md reports. WB_KEPLER=1 also runs kepler-model-server's own offline trainer
# (its sources at WB_KEPLER_SRC, /opt/kepler-model-server/src) on the same TrainRequest.

load helper
load exportd_helper
load modeld_helper

setup() {
	command -v prometheus >/dev/null || skip "no prometheus (Debian's prometheus package)"
	WINDOW_S=60
	[ -z "${WB_PROM_LONG:-}" ] || WINDOW_S=300
	# the fake machine has this machine's CPU count, as exportd's kepler_node_node_info
	# (this machine's cpuinfo) says: the model's cores and the meterless host's agree
	NCPU=$(grep -c '^processor' /proc/cpuinfo)
	LOAD=$BATS_TEST_DIRNAME/system_fake_load.py
	PT="python3 $BATS_TEST_DIRNAME/prom_train.py"
}

teardown() { wb_kill_all; }

# machine NAME LEVELS: a fake /proc (and cgroup2 tree) under $BATS_TEST_TMPDIR/NAME whose busy
# CPUs take the LEVELS (comma-separated) in turn, 6 s each, until the test ends: every level
# holds for whole 3 s intervals, so the fit sees 0 and 2 busy CPUs and the law is checked
# where there is data, not extrapolated.
machine() {
	mkdir -p "$BATS_TEST_TMPDIR/$1/proc" "$BATS_TEST_TMPDIR/$1/cg2"
	: >"$BATS_TEST_TMPDIR/load_$1.log"
	wb_spawn "load_$1" python3 "$LOAD" "$BATS_TEST_TMPDIR/$1/proc" "$BATS_TEST_TMPDIR/$1/cg2" \
		--ncpu "$NCPU" --levels "$2" --hold 6
	wb_wait_lines "$BATS_TEST_TMPDIR/load_$1.log" 1 30 '^ready'
}

# stages HOST [powerd flags...]: usaged (procfs mode on HOST's fake /proc) and alignd on their
# own endpoints under $BATS_TEST_TMPDIR/HOST/run; powerd too when flags are given. Slots are
# 200 ms: a scrape sees the last slot published, so a 3 s rate covers 3 s give or take the
# pipeline's lag jitter rounded to a slot, and each slot of error puts idle power x slot / 3 s
# into an interval (0.67 W of the fake package's 10 W idle; 3.3 W with 1 s slots).
stages() {
	local host=$1 rt=$BATS_TEST_TMPDIR/$1/run
	shift
	mkdir -p "$rt"
	if [ $# -gt 0 ]; then
		wb_spawn "powerd_$host" "$WB_BUILD/wattbus-powerd" --runtime_dir "$rt" --host "$host" \
			--interval 100ms --proc_root "$BATS_TEST_TMPDIR/$host/proc" "$@"
	fi
	wb_spawn "usaged_$host" "$WB_BUILD/wattbus-usaged" --runtime_dir "$rt" --host "$host" \
		--mode procfs --proc_root "$BATS_TEST_TMPDIR/$host/proc" --interval 200ms
	wb_spawn "alignd_$host" "$WB_BUILD/wattbus-alignd" --runtime_dir "$rt" --host "$host"
}

# the newest sample time Prometheus has of the metered node's package energy (empty: none yet)
last_sample() {
	promval 'timestamp(kepler_node_package_joules_total{node_name="metered",mode="dynamic"})'
}
# has_until T: Prometheus holds a sample at T or later
has_until() {
	local t
	t=$(last_sample)
	[ -n "$t" ] && [ "$t" != null ] && awk -v t="$t" -v want="$1" 'BEGIN { exit !(t >= want) }'
}

@test "Prometheus-scraped fake meter: /train and the online trainer recover its law; a meterless host is estimated within the MAE" {
	# the metered host: busy CPUs 0, 1, 2 in a shuffled turn, 6 s each
	machine metered 0,1,2
	stages metered --source fake
	wb_spawn estimd_metered "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR/metered/run" \
		--host metered --model ""
	ex_start --sub "ipc://$BATS_TEST_TMPDIR/metered/run/estimd.sock" \
		--metrics kepler-0.9 --state_file ""
	PROM_SCRAPE=1s prom_start
	# WINDOW_S seconds of samples from the first one on
	wb_wait_for 120 has_until 0
	t0=$(last_sample)
	start=$(awk -v t="$t0" 'BEGIN { printf "%d", t + 1 }')
	end=$((start + WINDOW_S))
	wb_wait_for $((WINDOW_S * 3 + 60)) has_until "$end"

	# (a) POST /train with Kepler's prom_response from that Prometheus. idle_prom_response is
	# the same: MinIdleIsolator takes nothing from it, but Kepler's trainer takes its feature
	# groups from its queries (offline_trainer.py, init_pipeline) and trains none without.
	$PT response "$PROM" "$start" "$end" 3 >"$BATS_TEST_TMPDIR/prom_response.json"
	jq '{name: "fake", energy_source: "rapl-sysfs", trainer: {abs_trainers: ["SGDRegressorTrainer"], dyn_trainers: ["SGDRegressorTrainer"], isolator: "MinIdleIsolator", isolator_args: {}, idle_prom_response: .}, prom_response: .}' \
		"$BATS_TEST_TMPDIR/prom_response.json" >"$BATS_TEST_TMPDIR/req.json"
	# what kepler-model-server's extractor needs besides: every rapl-sysfs component (uncore
	# as 0 J), both BPFOnly features, and the four container labels (Prometheus drops empty ones)
	run jq -r '[(.kepler_node_uncore_joules_total | length), (.kepler_container_bpf_page_cache_hit_total | length), (.kepler_container_bpf_cpu_time_ms_total[0].metric | [.container_id, .pod_name, .container_namespace] | join(" "))] | map(tostring) | join(" ")' \
		"$BATS_TEST_TMPDIR/prom_response.json"
	assert_output "2 1 3f1e2d4c5b6a79880716253443526170819203a4b5c6d7e8f90a1b2c3d4e5f60 system_processes system"
	md_start offline --sub ""
	run curl -sS --max-time 60 -o "$BATS_TEST_TMPDIR/fake.zip" -w '%{http_code}' \
		--data-binary @"$BATS_TEST_TMPDIR/req.json" "$MD_URL/train"
	assert_output 200
	mkdir "$BATS_TEST_TMPDIR/fake"
	(cd "$BATS_TEST_TMPDIR/fake" && unzip -q "$BATS_TEST_TMPDIR/fake.zip")
	m=$BATS_TEST_TMPDIR/fake/rapl-sysfs/AbsPower/ThirdParty/SGDRegressorTrainer_0
	jq --slurpfile meta "$m/metadata.json" '. + {mae: $meta[0].mae}' "$m/weight.json" >"$BATS_TEST_TMPDIR/offline.json"
	run $PT law "$BATS_TEST_TMPDIR/offline.json" 2
	echo "/train: $output" >&3
	assert_success
	# the intervals are the window's, at Kepler's 3 s step
	run grep -o 'pipeline fake from [0-9]* intervals' "$BATS_TEST_TMPDIR/offline.log"
	n=${output//[!0-9]/}
	[ "$n" -ge $((WINDOW_S / 3 - 4)) ] && [ "$n" -le $((WINDOW_S / 3)) ]
	# kepler-model-server's own trainer on the same request (WB_KEPLER=1; docs/modeld.md)
	if [ "${WB_KEPLER:-0}" = 1 ]; then
		run python3 "$BATS_TEST_DIRNAME/kepler_train.py" "${WB_KEPLER_SRC:-/opt/kepler-model-server/src}" \
			"$BATS_TEST_TMPDIR/req.json" "$BATS_TEST_TMPDIR/kepler"
		echo "Kepler's trainer: $(grep ' mae ' <<<"$output" | tr '\n' ';')" >&3
		assert_success
		assert_line --partial "rapl-sysfs/AbsPower/BPFOnly/SGDRegressorTrainer_"
	fi

	# (b) the online trainer, on the same Prometheus over its last train_window (in the
	# offline one's place: its endpoint and store)
	kill "$PID_offline"
	wb_wait_for 30 bash -c '! kill -0 "$0" 2>/dev/null' "$PID_offline"
	md_start online --sub "" --prometheus "$PROM" --train_interval 1h --train_window "${WINDOW_S}s" \
		--train_step 3s --trusted_trainers prometheus
	wb_wait_lines "$BATS_TEST_TMPDIR/online.log" 1 120 'prometheus: .*trained on [0-9]* intervals' || {
		cat "$BATS_TEST_TMPDIR/online.log"
		false
	}
	run md_post '{"metrics":["bpf_cpu_time_ms"],"output_type":"AbsPower","weight":true}'
	assert_line --index 0 200
	cp "$BATS_TEST_TMPDIR/answer" "$BATS_TEST_TMPDIR/online.json"
	run $PT law "$BATS_TEST_TMPDIR/online.json" 2
	echo "online: $output" >&3
	assert_success
	mae=$(jq -r .mae "$BATS_TEST_TMPDIR/online.json")

	# (c) a meterless host (no powerd: no power source), one busy CPU, its model from modeld
	machine meterless 1
	stages meterless
	wb_spawn estimd_meterless "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR/meterless/run" \
		--host meterless --model "" --model_server "$MD_URL" --model_retry 1s --stat_interval 1s
	wb_tap est "ipc://$BATS_TEST_TMPDIR/meterless/run/estimd.sock" estimate/
	wb_wait_lines "$BATS_TEST_TMPDIR/estimd_meterless.log" 1 60 "switched to model SGDRegressorTrainer_0"
	# 25 whole slots (5 s) estimated with it
	n=$(grep -c '"topic":"estimate/' "$BATS_TEST_TMPDIR/est.log" || true)
	wb_wait_lines "$BATS_TEST_TMPDIR/est.log" $((n + 26)) 60 '"topic":"estimate/'
	run $PT estimate "$BATS_TEST_TMPDIR/est.log" "$mae" 25
	echo "meterless: $output" >&3
	assert_success
}
