#!/usr/bin/env bats
# A foreign publisher (python3-zmq) sends 100,000 random and mutated frames to
# each stage that subscribes (alignd, estimd, exportd): the stage's sub lists
# an extra endpoint the test binds, next to the one that carries valid
# traffic for another host. No stage crashes; every frame is rejected and
# counted by reason in the stage's stat message (the reasons add up to the
# frames sent, each reason has at least the frames built for it and the
# random ones make up the rest); the valid traffic gives exactly the numbers
# it gives alone. See tests/bats/system_foreign.py. A few seconds per stage.

load helper

setup() {
	RT=$BATS_TEST_TMPDIR/run
	mkdir -p "$RT"
	COMMON=(--runtime_dir "$RT" --host foreign-test --stat_interval 200ms)
}

teardown() { wb_kill_all; }

foreign() {
	local stage=$1
	shift
	run timeout 300 /usr/bin/python3 "$BATS_TEST_DIRNAME/system_foreign.py" "$stage" --valid "$(wb_ep valid)" \
		--foreign "$(wb_ep foreign)" --out "ipc://$RT/$stage.sock" "$@"
	echo "$output"
	assert_success
	assert_line "ok"
	kill -0 "$STAGE_PID" || fail "$stage is gone"
	grep -q "rejected frame on topic" "$BATS_TEST_TMPDIR/$stage.log"
	# Rejections are logged at a bounded rate, not once per frame.
	[ "$(grep -c 'rejected frame' "$BATS_TEST_TMPDIR/$stage.log")" -lt 1000 ]
}

@test "alignd: 100,000 foreign frames rejected and counted by reason; valid slots exact" {
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" "${COMMON[@]}" --max_skew 0 \
		--sub "$(wb_ep valid),$(wb_ep foreign)"
	STAGE_PID=$!
	foreign alignd
}

@test "estimd: 100,000 foreign frames rejected and counted by reason; valid estimates exact" {
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" "${COMMON[@]}" --model "" \
		--sub "$(wb_ep valid),$(wb_ep foreign)"
	STAGE_PID=$!
	foreign estimd
}

@test "exportd: 100,000 foreign frames rejected and counted by reason; valid node energy exact" {
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" "${COMMON[@]}" --listen 127.0.0.1:0 \
		--sub "$(wb_ep valid),$(wb_ep foreign)"
	STAGE_PID=$!
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 10 'port [0-9]'
	url=http://127.0.0.1:$(grep -o 'port [0-9]*' "$BATS_TEST_TMPDIR/exportd.log" | head -n 1 | cut -d' ' -f2)
	foreign exportd --url "$url"
	# Its own pipeline-health metrics count the rejections too, and no foreign producer shows.
	run curl -sS "$url/metrics"
	refute_output --partial 'foreignd'
}
