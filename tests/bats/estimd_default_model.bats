#!/usr/bin/env bats
# estimd run from the build tree, before `make install` has put the default
# model in place: in auto and measured mode that is a warning and estimd runs;
# in model mode it is a configuration error that names the flag to set.

load helper

setup() {
	DEFAULT=$("$WB_BUILD/wattbus-estimd" --print-config | sed -n 's/^#model = //p')
	[ -n "$DEFAULT" ] || fail "no default model in --print-config"
	[ ! -e "$DEFAULT" ] || skip "the default model $DEFAULT is installed on this machine"
	RT=$BATS_TEST_TMPDIR/rt
}

teardown() {
	wb_kill_all
}

@test "auto and measured mode: a warning naming the file and --model, and estimd runs until stopped" {
	for mode in auto measured; do
		wb_spawn "est_$mode" "$WB_BUILD/wattbus-estimd" --runtime_dir "$RT/$mode" --mode "$mode"
		log=$BATS_TEST_TMPDIR/est_$mode.log
		wb_wait_for 20 grep -q "running (mode" "$log" || fail "$(cat "$log")"
		run grep "warning" "$log"
		assert_output --partial "$DEFAULT"
		assert_output --partial "--model"
		pid_var=PID_est_$mode
		kill -TERM "${!pid_var}"
		rc=0
		wait "${!pid_var}" || rc=$?
		[ "$rc" -eq 0 ] || fail "estimd --mode $mode exited $rc: $(cat "$log")"
	done
	run "$WB_BUILD/wattbus-estimd" -n --runtime_dir "$RT"
	assert_success
}

@test "model mode: exit 2, and the message names --model and the missing file" {
	run timeout 20 "$WB_BUILD/wattbus-estimd" --runtime_dir "$RT" --mode model
	[ "$status" -eq 2 ] || fail "exit $status: $output"
	assert_output --partial "$DEFAULT"
	assert_output --partial "--model"
	run timeout 20 "$WB_BUILD/wattbus-estimd" -n --runtime_dir "$RT" --mode model
	[ "$status" -eq 2 ]
	assert_output --partial "--model"
	# With --model it runs.
	wb_spawn est "$WB_BUILD/wattbus-estimd" --runtime_dir "$RT" --mode model --model "$(ls "$WB_ROOT"/data/models/*.json | head -n 1)"
	wb_wait_for 20 grep -q "running (mode" "$BATS_TEST_TMPDIR/est.log" || fail "$(cat "$BATS_TEST_TMPDIR/est.log")"
}
