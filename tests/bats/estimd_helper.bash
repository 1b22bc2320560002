# estimd suites: wattbus-estimd between two ipc endpoints in the test's temp dir, its output
# tapped, and Kepler's model server stood in for by kepler_model_server.py.
load helper

# estimd_start TOPICS [FLAG VALUE ...]: estimd reading $in, publishing on $out, with the flags;
# tap.log holds its messages of TOPICS (space-separated, e.g. "estimate/ model/"), tap.all its
# stat messages too.
estimd_start() {
	local topics=$1
	shift
	in=$(wb_ep aligned)
	out=$(wb_ep estimd)
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --sub "$in" --pub "$out" "$@"
	# shellcheck disable=SC2086 # one argument per topic
	wb_tap tap "$out" $topics
}

# model_server_start SCRIPT: the stand-in model server answering by SCRIPT
# (kepler_model_server.py --script), its requests in requests.jsonl; $url is its address.
model_server_start() {
	wb_spawn server python3 "$BATS_TEST_DIRNAME/kepler_model_server.py" --port-file "$BATS_TEST_TMPDIR/port" \
		--log "$BATS_TEST_TMPDIR/requests.jsonl" --script "$1"
	wb_wait_for 30 test -s "$BATS_TEST_TMPDIR/port"
	url="http://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/port")"
}

# slots_pub ENDPOINT FILE [ARGS]: estimd_slots.py ARGS written to FILE (in the test's temp dir)
# and published on ENDPOINT.
slots_pub() {
	local ep=$1 file=$BATS_TEST_TMPDIR/$2
	shift 2
	python3 "$BATS_TEST_DIRNAME/estimd_slots.py" "$@" >"$file"
	run "$WATTBUS" pub --wait 30s "$ep" <"$file"
	assert_success
}

# estimd_refuses MESSAGE FLAG...: estimd -n with the flags fails as a configuration error
# (exit 2) and says MESSAGE.
estimd_refuses() {
	local msg=$1
	shift
	run "$WB_BUILD/wattbus-estimd" -n "$@"
	assert_failure 2
	assert_output --partial "$msg"
}
