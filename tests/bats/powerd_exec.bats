#!/usr/bin/env bats
# powerd's exec source: a command run at every sample, or a stream, printing
# "ZONE VALUE uj|w [kind=KIND] [range=UJ]" lines; totals exact, failures counted.

load powerd_helper

teardown() { wb_kill_all; }

@test "sample mode: counters with a range wrap exactly, watts integrate, a failing run is skipped" {
	out=$BATS_TEST_TMPDIR/meter.out
	wb_put "$out" "pdu-0 990 uj kind=platform range=999" "fan 12.5 w"
	# the start-up run may take up to exec_timeout (each sample's run at most the interval):
	# room for a loaded machine
	pd_start --source exec --exec "cat $out; test ! -e $BATS_TEST_TMPDIR/fail" --exec_timeout 10s
	pd_wait_energy pdu-0 990
	raw=990 total=990
	for inc in 5 500 499 1 999 3; do
		raw=$(((raw + inc) % 1000))
		total=$((total + inc))
		wb_put "$out" "pdu-0 $raw uj kind=platform range=999" "fan 12.5 w"
		pd_wait_energy pdu-0 $total
	done
	pd_values_ok pdu-0 990 995 1495 1994 1995 2994 2997
	run bash -c "pd_tap_lines | jq -c 'select(.topic == \"power/testhost\") | [.msg.zones[] | [.name, .zone, .source, .path, .max_energy_range_uj]]' | tail -1"
	assert_output "[[\"pdu-0\",\"platform\",\"exec\",\"cat $out; test ! -e $BATS_TEST_TMPDIR/fail\",999],[\"fan\",\"other\",\"exec\",\"cat $out; test ! -e $BATS_TEST_TMPDIR/fail\",null]]"
	# 12.5 W between the first and the last sample seen
	pd_power_rows fan | awk '{print $1, $4}' >"$BATS_TEST_TMPDIR/fan.tsv"
	pd_watts_ok "$BATS_TEST_TMPDIR/fan.tsv" 12.5
	# the command fails: counted, no zone published from that run. A loaded machine may already
	# have counted runs that passed exec_timeout, which share the warning's rate limit (10 in 10 s).
	failed=$(pd_stat_counter exec_failures)
	touch "$BATS_TEST_TMPDIR/fail"
	pd_wait_stat exec_failures $((${failed:-0} + 2))
	wb_wait_for 15 grep -q "exec: 'cat .*': exited with status 1; its zones skip this sample" "$BATS_TEST_TMPDIR/powerd.log"
	rm "$BATS_TEST_TMPDIR/fail"
	wb_put "$out" "pdu-0 $(((raw + 7) % 1000)) uj kind=platform range=999" "fan 12.5 w"
	pd_wait_energy pdu-0 $((total + 7))
	[ "$(pd_stat_mode)" = exec ]
}

@test "sample mode: a meter not ready at start is run at every sample; its zones come with its first good run" {
	out=$BATS_TEST_TMPDIR/meter.out
	pd_start --source exec --exec "cat $out"
	wb_wait_for 30 grep -q "exec: 'cat $out': exited with status 1; it runs again at every sample" "$BATS_TEST_TMPDIR/powerd.log"
	pd_wait_stat exec_failures 3
	[ "$(pd_stat_mode)" = exec ]
	run ! grep -q "no usable power meter" "$BATS_TEST_TMPDIR/powerd.log"
	wb_put "$out" "pdu-0 500 uj kind=platform"
	wb_wait_for 30 grep -q "exec: zone pdu-0" "$BATS_TEST_TMPDIR/powerd.log"
	wb_put "$out" "pdu-0 800 uj kind=platform"
	pd_wait_energy pdu-0 800
	wb_put "$out" "pdu-0 1300 uj kind=platform"
	pd_wait_energy pdu-0 1300
}

@test "sample mode: a SIGHUP with the command corrected runs the new one while there are no zones" {
	out=$BATS_TEST_TMPDIR/meter.out
	conf=$BATS_TEST_TMPDIR/powerd.conf
	printf '[powerd]\nsource = exec\nexec = cat %s.typo\n' "$out" >"$conf"
	wb_put "$out" "pdu-0 500 uj"
	pd_start -c "$conf"
	wb_wait_for 30 grep -q "exec: 'cat $out.typo': exited with status 1; it runs again at every sample" "$BATS_TEST_TMPDIR/powerd.log"
	printf '[powerd]\nsource = exec\nexec = cat %s\n' "$out" >"$conf"
	kill -HUP "$PID_powerd"
	wb_wait_for 30 grep -q "exec: zone pdu-0" "$BATS_TEST_TMPDIR/powerd.log"
	wb_put "$out" "pdu-0 900 uj"
	pd_wait_energy pdu-0 900
	[ "$(pd_tap_lines | grep -o '"epoch":[0-9]*' | sort -u | wc -l)" -eq 1 ]
}

@test "stream mode: lines as they come, restarted when the command ends" {
	out=$BATS_TEST_TMPDIR/stream.out
	wb_put "$out" "gpu-0 1000 uj"
	cmd="while [ -e $out ]; do cat $out; sleep 0.02; done; echo 'gpu-0 bad uj'; exit 3"
	pd_start --source exec --exec "$cmd" --exec_mode stream
	pd_wait_energy gpu-0 1000
	wb_put "$out" "gpu-0 4000 uj"
	pd_wait_energy gpu-0 4000
	rm "$out"
	pd_wait_stat exec_failures 1
	pd_wait_stat parse_errors 1
	wb_wait_for 15 grep -q "exited with status 3; restarting it in 1 s" "$BATS_TEST_TMPDIR/powerd.log"
	wb_put "$out" "gpu-0 4500 uj"
	pd_wait_energy gpu-0 4500 5
	grep -q "exec: restarted" "$BATS_TEST_TMPDIR/powerd.log"
	pd_values_ok gpu-0 1000 4000 4500
}
