#!/usr/bin/env bats
# powerd's ipmi source: the DCMI power reading through libfreeipmi, held between requests and
# integrated on the grid. OpenIPMI's ipmi_sim answers DCMI Get Power Reading with "invalid
# command" (checked: it serves no DCMI), so the BMC is a stand-in at libfreeipmi's boundary
# (tests/bats/ipmi_standin.c, preloaded into powerd), scripted through files.

load powerd_helper

CTL=$BATS_TEST_TMPDIR/bmc
CRED=$BATS_TEST_TMPDIR/bmc.cred
STANDIN=$WB_BUILD/tests/libipmi_standin.so

setup() {
	[ -f "$STANDIN" ] || skip "$STANDIN not built (make $STANDIN)"
	mkdir -p "$CTL"
	(umask 077 && echo "root:calvin" >"$CRED")
	wb_put "$PDR/sys/class/hwmon/hwmon0/name" ina3221
	wb_put "$PDR/sys/class/hwmon/hwmon0/power1_label" "GPU rail"
	wb_put "$PDR/sys/class/hwmon/hwmon0/power1_input" 20000000
	# powerd with the stand-in preloaded (only powerd: the tap and the tools run as they are)
	cat >"$BATS_TEST_TMPDIR/powerd-standin" <<-SH
		#!/bin/sh
		exec env LD_PRELOAD="$STANDIN" WB_IPMI_STANDIN="$CTL" "$WB_BUILD/wattbus-powerd" "\$@"
	SH
	chmod +x "$BATS_TEST_TMPDIR/powerd-standin"
	PD=$BATS_TEST_TMPDIR/powerd-standin
}
teardown() { wb_kill_all; }

ip_start() {
	pd_start --source hwmon,ipmi --ipmi_interval 1s --ipmi_timeout 500ms "$@"
}

ip_served_n() {
	local t
	t=$(grep -E -- "$1" "$CTL/served" 2>/dev/null | sed -n "$2p" | cut -d' ' -f1)
	[ -n "$t" ] && echo "$t"
}

# ip_watts_after W: once the BMC answered W twice (requests are one after the other, so powerd
# holds W), the zone's energy grows by exactly W watts times the time between samples.
ip_watts_after() {
	local w=$1 t
	wb_wait_for 30 ip_served_n " $w\$" 2
	t=$(ip_served_n " $w\$" 2)
	wb_wait_for 30 bash -c '[ "$(pd_power_rows platform | awk -v c="$0" '"'"'$1 > c'"'"' | wc -l)" -ge 25 ]' "$t"
	pd_power_rows platform | awk -v c="$t" '$1 > c {print $1, $4}' >"$BATS_TEST_TMPDIR/p-$w.tsv"
	pd_watts_ok "$BATS_TEST_TMPDIR/p-$w.tsv" "$w" >&3
}

@test "ipmi: DCMI over lanplus, energy is the integral of the BMC's watts" {
	echo 180 >"$CTL/watts"
	ip_start --ipmi_host bmc-test --ipmi_credentials "$CRED"
	wb_wait_for 30 bash -c 'pd_power_values platform | grep -q .'
	run bash -c "pd_tap_lines | jq -r 'select(.topic == \"power/testhost\") | .msg.zones[] | select(.source == \"ipmi\") | [.name, .zone, .path] | join(\" \")' | sort -u"
	assert_output "platform platform ipmi://bmc-test/dcmi"
	ip_watts_after 180
	echo 260 >"$CTL/watts"
	ip_watts_after 260
	# one session for all the readings, with the user from the credentials file
	run cut -d' ' -f2- "$CTL/sessions"
	assert_output "open bmc-test root"
	grep -q 'ipmi: DCMI power reading of bmc-test (IPMI 2.0 lanplus), every 1.0 s' "$BATS_TEST_TMPDIR/powerd.log"
}

@test "ipmi: in-band, path ipmi://local/dcmi" {
	echo 95 >"$CTL/watts"
	ip_start
	wb_wait_for 30 bash -c 'pd_power_values platform | grep -q .'
	run bash -c "pd_tap_lines | jq -r 'select(.topic == \"power/testhost\") | .msg.zones[] | select(.source == \"ipmi\") | .path' | sort -u"
	assert_output "ipmi://local/dcmi"
	ip_watts_after 95
}

@test "ipmi: failing, hanging or inactive BMC is counted and logged; hwmon goes on" {
	echo 300 >"$CTL/watts"
	ip_start --ipmi_host bmc-test --ipmi_credentials "$CRED"
	wb_wait_for 30 bash -c 'pd_power_values platform | grep -q .'
	echo fail >"$CTL/mode"
	errs=$(pd_stat_counter read_errors)
	pd_wait_stat read_errors $((errs + 2)) 30
	wb_wait_for 30 grep -q 'ipmi: bmc-test: DCMI Get Power Reading: session timeout' "$BATS_TEST_TMPDIR/powerd.log"
	echo inactive >"$CTL/mode"
	perrs=$(pd_stat_counter parse_errors)
	pd_wait_stat parse_errors $((perrs + 2)) 30
	wb_wait_for 30 grep -q 'ipmi: bmc-test: DCMI power measurement is not active on the BMC' "$BATS_TEST_TMPDIR/powerd.log"
	# hangs: the hwmon zone is published at every sample meanwhile
	echo hang >"$CTL/mode"
	last=$(pd_power_rows - | tail -1 | cut -d' ' -f1)
	wb_wait_for 30 bash -c '[ "$(pd_power_rows - | awk -v c="$0" '"'"'$1 > c'"'"' | wc -l)" -ge 40 ]' "$last"
	pd_tap_lines | grep '"topic":"power/testhost"' >"$BATS_TEST_TMPDIR/snap"
	[ "$(grep -c '"gpu-0"' "$BATS_TEST_TMPDIR/snap")" -eq "$(wc -l <"$BATS_TEST_TMPDIR/snap")" ]
	# the held reading went stale: the platform zone is left out meanwhile
	run ! bash -c 'tail -3 "$0" | grep -q platform' "$BATS_TEST_TMPDIR/snap"
	rm -f "$CTL/mode"
	t=$(date +%s%N)
	wb_wait_for 30 bash -c '[ "$(pd_power_rows platform | awk -v c="$0" '"'"'$1 > c'"'"' | wc -l)" -ge 3 ]' "$t"
	pd_wait_stat rebased 1 30
	kill -0 "$PID_powerd"
}

@test "ipmi: a credentials file others can read is refused; a wrong password is counted" {
	chmod 640 "$CRED"
	pd_start --source ipmi --ipmi_host bmc-test --ipmi_credentials "$CRED"
	wb_wait_for 30 grep -q "ipmi_credentials $CRED: mode 0640 lets group or others at the BMC's password; refused" "$BATS_TEST_TMPDIR/powerd.log"
	[ ! -s "$CTL/sessions" ]
	wb_kill_all
	rm -f "$CRED"
	(umask 077 && echo "root:wrong" >"$CRED")
	ip_start --ipmi_host bmc-test --ipmi_credentials "$CRED"
	pd_wait_stat read_errors 2 30
	wb_wait_for 30 grep -q 'ipmi: bmc-test: cannot open a session: password invalid' "$BATS_TEST_TMPDIR/powerd.log"
	run ! grep -q wrong "$BATS_TEST_TMPDIR/powerd.log"
	run "$WB_BUILD/wattbus-powerd" -n --source ipmi --ipmi_host bmc-test
	assert_failure
	assert_output --partial "ipmi_host bmc-test needs ipmi_credentials"
}

@test "ipmi: powerd stops with a BMC that never answers; the request is left behind" {
	echo hang >"$CTL/mode"
	ip_start --ipmi_host bmc-test --ipmi_credentials "$CRED" --ipmi_timeout 60s
	# the session is open and the reading asked for: libfreeipmi holds the request
	wb_wait_for 30 grep -q "open bmc-test" "$CTL/sessions"
	wb_stop powerd
	grep -q "stopping: cancelled the job DCMI power reading of bmc-test" "$BATS_TEST_TMPDIR/powerd.log"
	# libfreeipmi's call cannot be interrupted: the stop waits its bound (1 s), not ipmi_timeout
	grep -q "stopping: the job DCMI power reading of bmc-test still runs 1.0 s after its cancel: left to end with the process" "$BATS_TEST_TMPDIR/powerd.log"
}
