#!/usr/bin/env bats
# docs/wattbus.conf is what the daemons' key tables say, and every default parses.

load helper

@test "docs/wattbus.conf matches the daemons' key tables (make conf regenerates it)" {
	# The model path depends on PREFIX; compare everything else.
	run diff <(grep -v '/share/wattbus/' "$WB_ROOT/docs/wattbus.conf") \
		<("$WB_ROOT/tools/genconf.sh" "$WB_BUILD" | grep -v '/share/wattbus/')
	assert_success
}

@test "every stage accepts the default config, and every default uncommented" {
	conf=$BATS_TEST_TMPDIR/all.conf
	# Uncomment "#key = value" lines whose value is not empty; drop the model path (PREFIX-dependent).
	sed -E -e 's/^#([a-z_]+ = .+)$/\1/' "$WB_ROOT/docs/wattbus.conf" | grep -v '/share/wattbus/' >"$conf"
	grep -q '^interval = 1s' "$conf"
	# Not installed: estimd's default model is not under PREFIX yet; name the repository's.
	model=$(ls "$WB_ROOT"/data/models/*.json | head -n 1)
	for s in powerd usaged alignd estimd exportd modeld; do
		extra=()
		[ "$s" = estimd ] && extra=(--model "$model")
		run "$WB_BUILD/wattbus-$s" -n -c "$WB_ROOT/docs/wattbus.conf" "${extra[@]}"
		assert_success
		run "$WB_BUILD/wattbus-$s" -n -c "$conf" "${extra[@]}"
		assert_success
		assert_output "$conf: ok"
	done
	# wattbus vmpub reads [global] and [vmpub] like a stage; -s and -H take their values, VM and
	# ENDPOINT are its arguments.
	run "$WATTBUS" vmpub -n -c "$conf" -s ipc:///nowhere/estimd.sock -H hv vm1 tcp://127.0.0.1:5610
	assert_success
	assert_output "$conf: ok"
	run "$WATTBUS" vmpub -n -c "$conf" -s ipc:///nowhere/estimd.sock vm1
	assert_failure 2
	assert_output --partial "usage: wattbus vmpub"
	run "$WATTBUS" vmpub -n -c "$conf" --curve-cert /nowhere/hv vm1 tcp://127.0.0.1:5610
	assert_failure 2
	assert_output --partial "curve_cert needs curve_allow"
	# its --help names the verb and its manual, not a wattbus-vmpub program or page
	run "$WATTBUS" vmpub --help
	assert_success
	assert_line "usage: wattbus vmpub [-c FILE] [-n] [-v] [--KEY VALUE ...]"
	assert_line "See wattbus(1) and docs/VM.md."
	refute_output --partial "wattbus-vmpub"
}
