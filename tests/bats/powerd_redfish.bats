#!/usr/bin/env bats
# powerd's redfish source against a stand-in BMC (tests/bats/redfish_bmc.py: HTTPS with a
# certificate made here, basic auth, DMTF's mockup documents in tests/data/redfish/): chassis
# discovery for three layouts, the BMC's watts held between polls and integrated on the
# grid, a BMC that hangs, fails or talks garbage while the other sources go on, and the
# credentials file's checks.

load powerd_helper

CTL=$BATS_TEST_TMPDIR/bmc
CRED=$BATS_TEST_TMPDIR/bmc.cred

setup() {
	command -v openssl >/dev/null || skip "openssl is not installed"
	mkdir -p "$CTL"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 \
		-keyout "$CTL/key.pem" -out "$CTL/cert.pem" 2>/dev/null
	(umask 077 && echo "root:calvin" >"$CRED")
	# a second source that must keep publishing whatever the BMC does
	wb_put "$PDR/sys/class/hwmon/hwmon0/name" ina3221
	wb_put "$PDR/sys/class/hwmon/hwmon0/power1_label" "GPU rail"
	wb_put "$PDR/sys/class/hwmon/hwmon0/power1_input" 20000000
}
teardown() { wb_kill_all; }

# rf_bmc LAYOUT: start the stand-in on tests/data/redfish/LAYOUT; sets RF_URL.
rf_bmc() {
	rm -f "$CTL/port"
	wb_spawn bmc python3 "$BATS_TEST_DIRNAME/redfish_bmc.py" --root "$WB_ROOT/tests/data/redfish/$1" \
		--ctl "$CTL" --cert "$CTL/cert.pem" --key "$CTL/key.pem" --user root --password calvin
	wb_wait_for 20 test -s "$CTL/port"
	RF_URL=https://127.0.0.1:$(cat "$CTL/port")
}

# rf_start [FLAGS]: powerd with the redfish source (and hwmon), polling the BMC every second.
# The timeout is well above what the stand-in takes (its slow mode's 0.3 s included), so that
# a loaded machine does not turn an answer into a timeout, and two of them into a rebase.
rf_start() {
	pd_start --source hwmon,redfish --redfish_url "$RF_URL" --redfish_credentials "$CRED" \
		--redfish_ca_file "$CTL/cert.pem" --redfish_interval 1s --redfish_timeout 3s "$@"
}

# rf_served_n PATTERN N: the time (ns) of the Nth reading served matching PATTERN, or fail.
rf_served_n() {
	local t
	t=$(grep -E -- "$1" "$CTL/served" 2>/dev/null | sed -n "$2p" | cut -d' ' -f1)
	[ -n "$t" ] && echo "$t"
}

# rf_rows_after ZONE T: "t energy_uj" rows of ZONE with t after T.
rf_rows_after() {
	pd_power_rows "$1" | awk -v c="$2" '$1 > c {print $1, $4}'
}

rf_wait_rows_after() {
	wb_wait_for 30 bash -c '[ "$(pd_power_rows "$0" | awk -v c="$1" '"'"'$1 > c'"'"' | wc -l)" -ge "$2" ]' "$1" "$2" "$3"
}

# rf_watts_after ZONE W PATTERN: once the BMC served a reading matching PATTERN twice (so
# powerd holds it: polls are one after the other), the zone's energy grows by exactly W
# watts times the time between samples.
rf_watts_after() {
	local zone=$1 w=$2 pat=$3 t
	wb_wait_for 30 rf_served_n "$pat" 2
	t=$(rf_served_n "$pat" 2)
	rf_wait_rows_after "$zone" "$t" 25
	rf_rows_after "$zone" "$t" >"$BATS_TEST_TMPDIR/$zone-$w.tsv"
	pd_watts_ok "$BATS_TEST_TMPDIR/$zone-$w.tsv" "$w" >&3
}

@test "redfish: Power PowerControl, energy is the integral of the served watts, polls no faster than redfish_interval" {
	echo 100 >"$CTL/watts"
	rf_bmc power
	rf_start
	wb_wait_for 30 bash -c 'pd_power_values platform | grep -q .'
	run bash -c "pd_tap_lines | jq -c 'select(.topic == \"power/testhost\") | [.msg.zones[] | select(.source == \"redfish\") | [.name, .zone, .source, .path, .max_energy_range_uj]] | select(length > 0)' | head -1"
	assert_output "[[\"platform\",\"platform\",\"redfish\",\"$RF_URL/redfish/v1/Chassis/1U/Power#/PowerControl/0\",null]]"
	rf_watts_after platform 100 'Power 100'
	# the BMC's watts change: after it served the new value twice, 250 W exactly
	echo 250.5 >"$CTL/watts"
	rf_watts_after platform 250.5 'Power 250.5'
	# every poll after discovery is a second or more after the one before
	python3 - "$CTL/requests" <<-'PY'
		import sys
		t = [int(l.split()[0]) for l in open(sys.argv[1]) if "/Power " in l]
		span = (t[-1] - t[0]) / 1e9
		print("%d polls over %.1f s" % (len(t), span))
		sys.exit(0 if len(t) >= 5 and len(t) - 1 <= span / 1.0 + 1 else 1)
	PY
	grep -q 'redfish: chassis 1U: PowerControl 0 "System Input Power"' "$BATS_TEST_TMPDIR/powerd.log"
}

@test "redfish: EnvironmentMetrics PowerWatts is preferred to the deprecated Power" {
	echo 374 >"$CTL/watts"
	rf_bmc envmetrics
	rf_start
	wb_wait_for 30 bash -c 'pd_power_values platform | grep -q .'
	run bash -c "pd_tap_lines | jq -r 'select(.topic == \"power/testhost\") | .msg.zones[] | select(.source == \"redfish\") | .name + \" \" + .path' | sort -u"
	assert_output "platform $RF_URL/redfish/v1/Chassis/1U/EnvironmentMetrics#/PowerWatts"
	rf_watts_after platform 374 'EnvironmentMetrics 374'
}

@test "redfish: Dell's layout, System.Embedded.1/Power; a chassis without power gives no zone; a failed discovery is done again" {
	echo 421 >"$CTL/watts"
	# the second chassis fails once, after the first one's zone was found: discovery starts
	# over and finds the same zone again, not a second one
	echo /redfish/v1/Chassis/Enclosure.Internal.0-1 >"$CTL/fail_once"
	rf_bmc dell
	rf_start
	wb_wait_for 30 bash -c 'pd_power_values platform | grep -q .'
	run bash -c "pd_tap_lines | jq -r 'select(.topic == \"power/testhost\") | .msg.zones[] | select(.source == \"redfish\") | .name + \" \" + .path' | sort -u"
	assert_output "platform $RF_URL/redfish/v1/Chassis/System.Embedded.1/Power#/PowerControl/PowerControl"
	# the zone is published before discovery has looked at the second chassis again
	wb_wait_for 30 grep -q 'chassis Enclosure.Internal.0-1 has neither EnvironmentMetrics nor Power' "$BATS_TEST_TMPDIR/powerd.log"
	[ ! -e "$CTL/fail_once" ]
	grep -q 'redfish: GET .*/Chassis/Enclosure.Internal.0-1: HTTP 500' "$BATS_TEST_TMPDIR/powerd.log"
	[ "$(grep -c -- '-> zone' "$BATS_TEST_TMPDIR/powerd.log")" -eq 1 ]
	rf_watts_after platform 421 'System.Embedded.1/Power 421'
}

# n_rows ZONE: how many samples published ZONE so far.
n_rows() { pd_power_values "$1" | wc -l; }

@test "redfish: a BMC that hangs, answers 500 or garbage is counted and logged; hwmon goes on" {
	echo 300 >"$CTL/watts"
	rf_bmc power
	rf_start
	wb_wait_for 30 bash -c 'pd_power_values platform | grep -q .'
	# slow but within redfish_timeout: its readings are taken, the zone stays
	echo slow:0.3 >"$CTL/mode"
	n=$(grep -c . "$CTL/served")
	wb_wait_for 30 bash -c '[ "$(grep -c . "$0")" -ge "$1" ]' "$CTL/served" $((n + 2))
	t=$(rf_served_n . $((n + 2)))
	rf_wait_rows_after platform "$t" 3
	[ "$(pd_stat_counter read_errors)" -eq 0 ]
	# hangs: each poll times out (read_errors), the held reading goes stale and the zone
	# is left out, while the hwmon zone is published at every sample
	echo hang >"$CTL/mode"
	errs=$(pd_stat_counter read_errors)
	pd_wait_stat read_errors $((errs + 2)) 30
	last=$(pd_power_rows - | tail -1 | cut -d' ' -f1)
	wb_wait_for 30 bash -c '[ "$(pd_power_rows - | awk -v c="$0" '"'"'$1 > c'"'"' | wc -l)" -ge 10 ]' "$last"
	# every sample since has the hwmon zone
	pd_tap_lines >"$BATS_TEST_TMPDIR/snap"
	run bash -c "jq -c 'select(.topic == \"power/testhost\" and .msg.t > $last) | [.msg.zones[].name] | index(\"gpu-0\")' '$BATS_TEST_TMPDIR/snap' | sort | uniq -c"
	assert_output --regexp '^ *[0-9]+ 0$'
	# after the hold (2 intervals + the timeout) the platform zone is left out
	wb_wait_for 30 bash -c '[ -n "$(pd_tap_lines | tail -3 | jq -r "select(.topic == \"power/testhost\") | .msg.zones[].name" | grep -v platform)" ] && ! pd_tap_lines | tail -3 | grep -q platform'
	grep -q 'redfish: GET .*/redfish/v1/Chassis/1U/Power: .*timed\? \?out\|redfish: GET .*/Power: .*[Tt]imeout' "$BATS_TEST_TMPDIR/powerd.log"
	# 500s
	echo 500 >"$CTL/mode"
	errs=$(pd_stat_counter read_errors)
	pd_wait_stat read_errors $((errs + 2)) 30
	wb_wait_for 30 grep -q 'redfish: GET .*/Power: .*500' "$BATS_TEST_TMPDIR/powerd.log"
	# garbage
	echo garbage >"$CTL/mode"
	perrs=$(pd_stat_counter parse_errors)
	pd_wait_stat parse_errors $((perrs + 2)) 30
	wb_wait_for 30 grep -q 'redfish: .*/Power: not JSON' "$BATS_TEST_TMPDIR/powerd.log"
	# the BMC is back: the zone returns, the gap counted as a rebase (its energy is unknown)
	rm -f "$CTL/mode"
	t=$(date +%s%N)
	rf_wait_rows_after platform "$t" 3
	pd_wait_stat rebased 1 30
	# hwmon was never left out
	[ "$(pd_stat_counter zone_samples_skipped)" -ge 1 ]
	pd_tap_lines | grep '"topic":"power/testhost"' >"$BATS_TEST_TMPDIR/snap"
	[ "$(grep -c '"gpu-0"' "$BATS_TEST_TMPDIR/snap")" -eq "$(wc -l <"$BATS_TEST_TMPDIR/snap")" ]
	kill -0 "$PID_powerd"
}

@test "redfish: a credentials file others can read is refused; a wrong password is counted" {
	rf_bmc power
	chmod 644 "$CRED"
	pd_start --source redfish --redfish_url "$RF_URL" --redfish_credentials "$CRED" \
		--redfish_ca_file "$CTL/cert.pem"
	wb_wait_for 30 grep -q "redfish_credentials $CRED: mode 0644 lets group or others at the BMC's password; refused" "$BATS_TEST_TMPDIR/powerd.log"
	wb_kill_all
	rf_bmc power
	rm -f "$CRED"
	(umask 077 && echo "root:wrong" >"$CRED")
	rf_start
	pd_wait_stat read_errors 2 30
	wb_wait_for 30 grep -q 'redfish: GET .*/redfish/v1/Chassis: .*401.*(check redfish_credentials)' "$BATS_TEST_TMPDIR/powerd.log"
	run ! grep -q calvin "$BATS_TEST_TMPDIR/powerd.log"
	run ! grep -q wrong "$BATS_TEST_TMPDIR/powerd.log"
}

@test "redfish: TLS is verified unless redfish_insecure, which warns" {
	echo 123 >"$CTL/watts"
	rf_bmc power
	# the test's CA is not the system's: refused and counted
	pd_start --source hwmon,redfish --redfish_url "$RF_URL" --redfish_credentials "$CRED" --redfish_interval 1s
	pd_wait_stat read_errors 2 30
	run ! bash -c 'pd_power_values platform | grep -q .'
	wb_kill_all
	rf_bmc power
	pd_start --source hwmon,redfish --redfish_url "$RF_URL" --redfish_credentials "$CRED" --redfish_interval 1s \
		--redfish_insecure true
	wb_wait_for 30 bash -c 'pd_power_values platform | grep -q .'
	grep -q "redfish_insecure is set: the BMC at $RF_URL is not verified" "$BATS_TEST_TMPDIR/powerd.log"
	# plain http is refused outright (the password would go in clear)
	run "$PD" -n --source redfish --redfish_url http://127.0.0.1:1 --redfish_credentials "$CRED"
	assert_failure
	assert_output --partial "plain http would send the BMC's password in clear"
}
