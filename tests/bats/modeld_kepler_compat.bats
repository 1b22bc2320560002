#!/usr/bin/env bats
# wattbus-modeld against Kepler's own model server: the same requests on the same
# pipeline (ec2-0.7.11) choose the same models as Kepler's server did when its
# answers were recorded (tests/data/kepler-model-server), but for the deliberate
# differences docs/modeld.md lists.

load helper
load modeld_helper

teardown() { wb_kill_all; }

@test "modeld chooses what Kepler's model server chose, but for the documented differences" {
	md_start modeld --sub "" --import "$MD_EC2"
	run python3 "$WB_ROOT/tools/modeld_compare.py" --against \
		"$WB_ROOT/tests/data/kepler-model-server/answers.jsonl" "$MD_URL" "$MD_EC2"
	echo "$output"
	assert_success
	assert_line "17 of 21 requests as recorded, 4 deliberate differences, 0 unexpected"
}
