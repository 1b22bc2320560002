# Shared by the modeld_*.bats suites: start modeld on a free loopback port with its
# store in the test's temp dir, and ask it for models.

MD_EC2=$WB_ROOT/tests/data/kepler-model-db/ec2-0.7.11

# md_start NAME [modeld flags...]: MD_URL is set once it serves.
md_start() {
	local name=$1
	shift
	MD_RT=$BATS_TEST_TMPDIR/run
	mkdir -p "$MD_RT"
	: >"$BATS_TEST_TMPDIR/$name.log"
	wb_spawn "$name" "$WB_BUILD/wattbus-modeld" --runtime_dir "$MD_RT" --listen 127.0.0.1:0 \
		--stat_interval 1s --store "$BATS_TEST_TMPDIR/store" "$@"
	wb_wait_lines "$BATS_TEST_TMPDIR/$name.log" 1 10 'port [0-9]' || {
		cat "$BATS_TEST_TMPDIR/$name.log"
		return 1
	}
	MD_PORT=$(grep -o 'port [0-9]*' "$BATS_TEST_TMPDIR/$name.log" | tail -n 1 | cut -d' ' -f2)
	MD_URL=http://127.0.0.1:$MD_PORT
}

# md_post BODY: POST /model with a JSON body; prints the status, then the body.
md_post() {
	curl -sS --max-time 10 -o "$BATS_TEST_TMPDIR/answer" -w '%{http_code}\n' \
		-H 'Content-Type: application/json' --data-binary "$1" "$MD_URL/model"
	cat "$BATS_TEST_TMPDIR/answer"
}

# md_choice BODY: "STATUS MODEL_NAME MAE" of a weight=true request (the body gets weight true).
md_choice() {
	local body status
	body=$(jq -c '. + {weight: true}' <<<"$1")
	status=$(curl -sS --max-time 10 -o "$BATS_TEST_TMPDIR/answer" -w '%{http_code}' \
		-H 'Content-Type: application/json' --data-binary "$body" "$MD_URL/model")
	if [ "$status" = 200 ]; then
		echo "$status $(jq -r '"\(.model_name) \(.mae)"' "$BATS_TEST_TMPDIR/answer")"
	else
		echo "$status $(head -c 300 "$BATS_TEST_TMPDIR/answer")"
	fi
}

# md_law_within_mae WEIGHT_JSON: the trained law of the /train tests (package 20 W + 30 W, dram
# 5 W + 2 W per busy CPU: 1000 ms of CPU time a second) at 0..4 busy CPUs, within the served mae.
md_law_within_mae() {
	python3 - "$1" <<-'PY'
		import json, sys
		w = json.load(open(sys.argv[1]))
		mae = w["mae"]
		assert 0 < mae < 1, mae
		for zone, base, per_cpu in (("package", 20, 30), ("dram", 5, 2)):
		    a = w[zone]["All_Weights"]
		    f = a["Numerical_Variables"]["bpf_cpu_time_ms"]
		    for busy in range(5):
		        p = a["Bias_Weight"] + f["weight"] / f["scale"] * 1000 * busy
		        assert abs(p - (base + per_cpu * busy)) <= mae, (zone, busy, p, mae)
	PY
}
