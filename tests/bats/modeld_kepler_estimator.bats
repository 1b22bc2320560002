#!/usr/bin/env bats
# Kepler's REAL estimator sidecar (kepler-model-server's estimate/estimator.py,
# unmodified) loads the model modeld serves through MODEL_SERVER_URL (POST /model,
# weight=false: the zip) and answers; estimd hands it its slots (--estimator), and
# its node watts equal estimd's local evaluation of the same weight file, slot by
# slot and zone by zone. Two models: one modeld received on the bus (an XGBoost
# linear model per zone) and a published kepler-model-db archive (scikit-learn
# pickles).
#
# Opt-in (not in make check: it needs Kepler's sources, Debian's python3 ML packages
# and root for a private /tmp): WB_KEPLER=1, with Kepler's src/ at WB_KEPLER_SRC
# (default /opt/kepler-model-server/src). docs/modeld.md says how to get both.

load helper
load modeld_helper

KEPLER_SRC=${WB_KEPLER_SRC:-/opt/kepler-model-server/src}
G=rapl-sysfs/AbsPower/BPFOnly

setup() {
	[ "${WB_KEPLER:-0}" = 1 ] || skip "Kepler's real estimator: set WB_KEPLER=1 (docs/modeld.md)"
	[ -f "$KEPLER_SRC/kepler_model/estimate/estimator.py" ] ||
		skip "no kepler-model-server sources at $KEPLER_SRC (WB_KEPLER_SRC; docs/modeld.md)"
	local missing
	missing=$(/usr/bin/python3 -c '
import importlib.util
mods = "sklearn scipy pandas numpy joblib xgboost flask requests requests_file psutil cpuinfo pyudev prometheus_client click".split()
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))')
	[ -z "$missing" ] || skip "Debian python3 packages missing for Kepler's estimator: $missing"
	unshare -m true 2>/dev/null || skip "unshare -m (a private /tmp for the estimator's fixed socket) needs root"
}

teardown() { wb_kill_all; }

# kepler_start URL: Kepler's estimator asking the model server at URL, in a mount namespace
# whose /tmp is $KT (its socket path, /tmp/estimator.sock, is fixed); KSOCK is that socket.
kepler_start() {
	KT=$BATS_TEST_TMPDIR/ktmp
	mkdir -p "$KT/cfg" "$KT/mnt" "$KT/res"
	cp -r "$KEPLER_SRC" "$KT/src"
	KSOCK=$KT/estimator.sock
	wb_spawn kepler unshare -m --propagation private /bin/sh -c \
		'mount --bind "$0" /tmp && cd /tmp && exec env CONFIG_PATH=/tmp/cfg MNT_PATH=/tmp/mnt RESOURCE_DIR=/tmp/res PYTHONPATH=/tmp/src MODEL_SERVER_ENABLE=true MODEL_SERVER_URL="$1" /usr/bin/python3 -m kepler_model.estimate.estimator --log-level debug --config-dir /tmp/cfg' \
		"$KT" "$1"
	wb_wait_for 120 test -S "$KSOCK" || {
		cat "$BATS_TEST_TMPDIR/kepler.log"
		return 1
	}
}

# same_watts LOCAL_MODEL SEED: estimd with LOCAL_MODEL and estimd with Kepler's estimator get
# the same 8 slots; prints each slot's node watts from both and checks they are equal.
same_watts() {
	local in_l in_k out_l out_k
	in_l=$(wb_ep aligned_l)
	in_k=$(wb_ep aligned_k)
	out_l=$(wb_ep estimd_l)
	out_k=$(wb_ep estimd_k)
	mkdir -p "$BATS_TEST_TMPDIR/l" "$BATS_TEST_TMPDIR/k"
	wb_spawn estimd_l "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR/l" --host vm1 \
		--sub "$in_l" --pub "$out_l" --model "$1" --stat_interval 1s
	# The first answer downloads, unpacks and loads the model (seconds on a loaded machine):
	# estimd's warm-up request waits for it under the default estimator_answer_max, and the
	# slots go once it came. A slot waits up to 5 s (not the default 200 ms) so that a loaded
	# machine does not hand one to the local model (none here).
	wb_spawn estimd_k "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR/k" --host vm1 \
		--sub "$in_k" --pub "$out_k" --model "" --stat_interval 1s \
		--estimator "unix:$KSOCK" --estimator_timeout 5s
	wb_wait_lines "$BATS_TEST_TMPDIR/estimd_k.log" 1 180 'the warm-up request answered'
	wb_tap tap_l "$out_l" estimate/
	wb_tap tap_k "$out_k" estimate/
	python3 "$BATS_TEST_DIRNAME/estimd_slots.py" --host vm1 --no-power --count 8 --seed "$2" >"$BATS_TEST_TMPDIR/slots.jsonl"
	"$WATTBUS" pub --wait 30s "$in_l" <"$BATS_TEST_TMPDIR/slots.jsonl"
	"$WATTBUS" pub --wait 30s "$in_k" <"$BATS_TEST_TMPDIR/slots.jsonl"
	wb_wait_lines "$BATS_TEST_TMPDIR/tap_l.log" 8 60
	wb_wait_lines "$BATS_TEST_TMPDIR/tap_k.log" 8 180
	python3 - "$BATS_TEST_TMPDIR/tap_l.log" "$BATS_TEST_TMPDIR/tap_k.log" "$BATS_TEST_TMPDIR/slots.jsonl" <<-'EOF'
		import json, sys
		loc = [json.loads(l)["msg"] for l in open(sys.argv[1])]
		kep = [json.loads(l)["msg"] for l in open(sys.argv[2])]
		slots = [json.loads(l)["msg"] for l in open(sys.argv[3])]
		assert len(loc) == len(kep) == 8, (len(loc), len(kep))
		worst = 0
		for s, a, b in zip(slots, loc, kep):
		    assert b["model"] == "estimator", b["model"]
		    za = {z["zone"]: z for z in a["zones"]}
		    zb = {z["zone"]: z for z in b["zones"]}
		    # estimd keeps the zones a weight file gives power; Kepler answers 0 W for the others
		    # (model-db's core and uncore)
		    zero = {"idle_uj": 0, "active_uj": 0}
		    assert za and set(za) <= set(zb), (sorted(za), sorted(zb))
		    za = {zone: za.get(zone, zero) for zone in zb}
		    cpu_ms = sum(p["cpu_ns"] for p in s["procs"]) / 1e6
		    row = []
		    for zone in sorted(za):
		        for part in ("idle_uj", "active_uj"):
		            x, y = za[zone][part], zb[zone][part]
		            # XGBoost evaluates in float32: a relative 1e-6, and 1 uJ of rounding
		            assert abs(x - y) <= max(2, 2e-6 * abs(x)), (zone, part, x, y)
		            worst = max(worst, abs(x - y))
		        row.append("%s %.4f/%.4f W" % (zone, (za[zone]["idle_uj"] + za[zone]["active_uj"]) / 1e6,
		                                        (zb[zone]["idle_uj"] + zb[zone]["active_uj"]) / 1e6))
		    print("cpu %9.1f ms/s: %s (local/Kepler)" % (cpu_ms, ", ".join(row)))
		print("8 slots equal; largest difference %d uJ" % worst)
	EOF
	# Kepler's estimator is still there: no answer of it went into a closed socket.
	kill -0 "$PID_kepler"
}

@test "Kepler's estimator loads a model modeld received on the bus and answers as estimd's local evaluation" {
	local bus
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus" --trusted_trainers trainer-a
	# No core count in the spec: Kepler's estimator then answers core_ratio 1, so that the
	# idle watts compare unscaled.
	jq -nc '{topic: "model/trainer-a", msg: {v: 1, kind: "model", host: "trainer-a", src: "estimd", t: 9,
		name: "trained", type: "AbsPower", train_slots: 100, test_slots: 20, mae: 1.5, mape: 2.5,
		spec: {processor: "Intel(R) Xeon(R) CPU E3-1230 v6 @ 3.50GHz", chips: 1, memory_gib: 31},
		features: ["bpf_cpu_time_ms", "bpf_page_cache_hit"],
		zones: [{zone: "package", bias_w: 31.5, weights: [9.75, 0.5], scales: [3000, 7], means: [1200, 3], mae_w: 1.5},
		        {zone: "dram", bias_w: 2.25, weights: [0.625, 0.125], scales: [2000, 1], means: [800, 0], mae_w: 0.5}]}}' |
		"$WATTBUS" pub --wait 30s "$bus"
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 "stored as wattbus/$G/SGDRegressorTrainer_0"
	kepler_start "$MD_URL"
	run same_watts "$BATS_TEST_TMPDIR/store/wattbus/$G/SGDRegressorTrainer_0/weight.json" 21
	echo "$output"
	assert_success
	assert_line --partial "8 slots equal"
	# It loaded modeld's model, by the name metadata.json gives, as an XGBoost model.
	run grep -c -E "set model SGDRegressorTrainer_0 for AbsPower|'model_class': 'xgboost'" "$BATS_TEST_TMPDIR/kepler.log"
	[ "$output" -ge 2 ]
}

@test "Kepler's estimator loads a published archive modeld imported and answers as estimd's local evaluation" {
	# The published form: <group>/<name>.zip (scikit-learn pickles) and <name>.json beside it.
	local p=$BATS_TEST_TMPDIR/pipeline
	mkdir -p "$p/$G"
	echo '{"name": "published-sgd"}' >"$p/metadata.json"
	cp "$MD_EC2/node_type_index.json" "$p/"
	cp "$WB_ROOT/tests/data/kepler-model-db/published/$G"/SGDRegressorTrainer_1.{zip,json} "$p/$G/"
	md_start modeld --sub "" --import "$p"
	kepler_start "$MD_URL"
	run same_watts "$p/$G/SGDRegressorTrainer_1.json" 22
	echo "$output"
	assert_success
	assert_line --partial "8 slots equal"
	run grep "set model SGDRegressorTrainer_1 for AbsPower" "$BATS_TEST_TMPDIR/kepler.log"
	assert_success
}
