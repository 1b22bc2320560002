#!/usr/bin/env bats
# estimd refuses schema-valid but implausible slots on receipt; one cannot stop other hosts' estimates.

load estimd_helper

teardown() { wb_kill_all; }

@test "an aligned slot ending at t1 = 2^63-1 is refused (implausible_time); other hosts keep their estimates" {
	estimd_start "estimate/" \
		--model "" --stat_interval 100ms --state_file ""
	python3 "$BATS_TEST_DIRNAME/estimd_slots.py" --count 5 >"$BATS_TEST_TMPDIR/slots.jsonl"
	# the first slot, as host "evil", ends at 2^63-1: valid for the schema, 292 years ahead
	python3 - "$BATS_TEST_TMPDIR/slots.jsonl" >"$BATS_TEST_TMPDIR/feed.jsonl" <<-'EOF2'
		import json, sys
		lines = [json.loads(l) for l in open(sys.argv[1])]
		evil = json.loads(json.dumps(lines[0]))
		evil["topic"] = "aligned/evil"
		evil["msg"].update(host="evil", t0=2**63 - 1 - 10**9, t1=2**63 - 1)
		for l in [evil] + lines:
		    print(json.dumps(l))
	EOF2
	run "$WATTBUS" pub --wait 10s "$in" <"$BATS_TEST_TMPDIR/feed.jsonl"
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 5 20 '"topic": *"estimate/metal1"'
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.all" 1 20 '"name": *"implausible_time", *"value": *1'
	run python3 - "$BATS_TEST_TMPDIR/tap.log" <<-'EOF2'
		import json, sys
		ests = [json.loads(l)["msg"] for l in open(sys.argv[1]) if '"estimate/' in l]
		assert [e["host"] for e in ests] == ["metal1"] * 5, ests
		assert all(0 < e["total_epoch"] < 2**62 for e in ests), [e["total_epoch"] for e in ests]
		print("ok")
	EOF2
	assert_output "ok"
	grep -q "rejected frame on topic 'aligned/evil' (implausible_time): t0 .* ahead of this host's clock" "$BATS_TEST_TMPDIR/estimd.log"
}
