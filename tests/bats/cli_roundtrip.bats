#!/usr/bin/env bats
# wattbus pub | wattbus tap is exact for a message of every kind. (pub binds and
# waits for tap's subscription before its first message: no head start needed.)

load helper

teardown() { wb_kill_all; }

@test "pub | tap round trip is exact for every kind" {
	ep=$(wb_ep roundtrip)
	wb_spawn tap "$WATTBUS" tap --count 6 --timeout 60s "$ep"
	run "$WATTBUS" pub --wait 30s "$ep" <"$WB_ROOT/tests/data/messages.jsonl"
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 6 10
	# Same topics and maps, key for key, in the same order of messages.
	run diff <(jq -cS . "$WB_ROOT/tests/data/messages.jsonl") <(jq -cS . "$BATS_TEST_TMPDIR/tap.log")
	assert_success
}

@test "pub stamps the envelope keys a line leaves out" {
	ep=$(wb_ep stamp)
	wb_spawn tap "$WATTBUS" tap --check --count 2 --timeout 60s "$ep"
	printf '%s\n' \
		'{"kind":"power","host":"h1","t":1000000000,"interval_ns":1000000000,"zones":[]}' \
		'{"kind":"power","host":"h1","t":2000000000,"interval_ns":1000000000,"zones":[]}' |
		"$WATTBUS" pub --src script --wait 30s "$ep"
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 2 10
	run jq -r '[.topic, .msg.v, .msg.src, .msg.seq] | @tsv' "$BATS_TEST_TMPDIR/tap.log"
	assert_line --index 0 $'power/h1\t1\tscript\t0'
	assert_line --index 1 $'power/h1\t1\tscript\t1'
	# Both carry the same epoch.
	[ "$(jq -r .msg.epoch "$BATS_TEST_TMPDIR/tap.log" | sort -u | wc -l)" -eq 1 ]
}

@test "pub refuses an invalid line with its line number and goes on" {
	ep=$(wb_ep refuse)
	wb_spawn tap "$WATTBUS" tap --count 1 --timeout 60s "$ep"
	run "$WATTBUS" pub --wait 30s "$ep" <<-'EOF'
		{"kind":"power","host":"h1","t":"soon","interval_ns":1000000000,"zones":[]}
		not json
		{"kind":"power","host":"h1","t":5,"interval_ns":1000000000,"zones":[]}
	EOF
	assert_failure 1
	assert_output --partial "stdin:1: not sent (type): t: expected an unsigned integer, got a string"
	assert_output --partial "stdin:2:"
	assert_output --partial "1 sent, 2 lines rejected"
	wb_wait_for 10 test -s "$BATS_TEST_TMPDIR/tap.log"
	run jq -r .msg.t "$BATS_TEST_TMPDIR/tap.log"
	assert_output 5
}
