# alignd suites: start wattbus-alignd on ipc endpoints in the test's temp dir
# and drive it with one alignd_sim.py scenario (streams with analytic answers).
load helper

# alignd_start [FLAG VALUE ...]: alignd reading $IN (and $IN2 if set), publishing on $OUT.
# A slot waits for its power sample up to --max_lag 60s, so that the exact answers do not
# depend on how quickly a loaded machine runs alignd; a test of max_lag gives its own.
alignd_start() {
	IN=$(wb_ep in)
	OUT=$(wb_ep out)
	local subs=(--sub "$IN")
	[ -z "${IN2:-}" ] || subs+=(--sub "$IN2")
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$BATS_TEST_TMPDIR" "${subs[@]}" --pub "$OUT" \
		--stat_interval 100ms --tick 10ms --max_lag 60s "$@"
}

# alignd_sim SCENARIO: run it against the alignd started above (output in $output).
alignd_sim() {
	local ins=(--in "$IN")
	[ -z "${IN2:-}" ] || ins+=(--in "$IN2")
	run python3 "$BATS_TEST_DIRNAME/alignd_sim.py" "$1" "${ins[@]}" --out "$OUT" "${@:2}"
}
