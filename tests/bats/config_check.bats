#!/usr/bin/env bats
# `-n` refuses what the stage would refuse at run time, with the same message and
# exit 2, and a config path that is not a regular file is refused at once.

load helper

teardown() { wb_kill_all; }

# refused STAGE WANT ARGS...: -n and a real start both exit 2 naming the fault.
refused() {
	local stage=$1 want=$2
	shift 2
	run timeout 20 "$WB_BUILD/wattbus-$stage" -n "$@"
	assert_failure 2
	assert_output --partial "$want"
	run timeout 20 "$WB_BUILD/wattbus-$stage" --runtime_dir "$BATS_TEST_TMPDIR/run" "$@"
	assert_failure 2
	assert_output --partial "$want"
}

conf() {
	printf '%b' "$1" >"$BATS_TEST_TMPDIR/w.conf"
	echo "$BATS_TEST_TMPDIR/w.conf"
}

@test "host with a '/', a key set twice, a duration under its floor, a hexadecimal number" {
	refused alignd "[global] host: 'a/b' holds a '/' (topics are KIND/HOST)" \
		-c "$(conf '[global]\nhost = a/b\n')"
	refused estimd "w.conf:5: [estimd] state_every: set twice (first on line 2)" \
		-c "$(conf '[estimd]\nstate_every = 2s\n[global]\n[estimd]\nstate_every = 5s\n')"
	refused alignd "[alignd] state_every: 1ns is outside [100ms, 1h] (or 0: off)" \
		-c "$(conf '[alignd]\nstate_every = 1ns\n')"
	refused exportd "--state_every: [exportd] state_every: 50ms is outside [100ms, 1h] (or 0: off)" \
		--state_every 50ms
	refused alignd "[global] hwm: '0x10' is not a decimal integer" -c "$(conf '[global]\nhwm = 0x10\n')"
	refused alignd "[alignd] tick: '0x10ms' is not a duration" -c "$(conf '[alignd]\ntick = 0x10ms\n')"
	refused alignd "[global] host: 'a\\x1b[2J' holds a control character" \
		-c "$(conf '[global]\nhost = a\x1b[2J\n')"
	# what stays valid: 0 (off), the floor itself, a decimal number with a leading zero
	run "$WB_BUILD/wattbus-alignd" -n -c "$(conf '[global]\nhwm = 010\n[alignd]\nstate_every = 0\n')"
	assert_success
	run "$WB_BUILD/wattbus-exportd" -n --state_every 100ms
	assert_success
}

@test "a config path that is not a regular file is refused, not read for ever" {
	for path in /dev/zero /dev/null "$BATS_TEST_TMPDIR"; do
		WATTBUS_CONF=$path run timeout 20 "$WB_BUILD/wattbus-alignd" -n
		assert_failure 2
		assert_output "wattbus-alignd: $path: not a regular file"
	done
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	run timeout 20 "$WB_BUILD/wattbus-powerd" -n -c "$BATS_TEST_TMPDIR/fifo"
	assert_failure 2
	assert_output --partial "fifo: not a regular file"
}
