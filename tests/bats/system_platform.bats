#!/usr/bin/env bats
# A BMC's platform power through the whole pipeline: powerd's redfish source (the stand-in BMC of
# powerd_redfish.bats, Dell's layout) and an hwmon zone, usaged on /proc, alignd, estimd and
# exportd. Checked: kepler_platform_watts with Kepler's labels shows the BMC's watts, the platform
# zone is in the node metrics, and no workload is given platform energy (estimd's default).

load helper

setup() {
	command -v openssl >/dev/null || skip "openssl is not installed"
	RT=$BATS_TEST_TMPDIR/run
	CTL=$BATS_TEST_TMPDIR/bmc
	SYS=$BATS_TEST_TMPDIR/sys
	mkdir -p "$RT" "$CTL" "$SYS/class/hwmon/hwmon0"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$CTL/key.pem" -out "$CTL/cert.pem" 2>/dev/null
	(umask 077 && echo "root:calvin" >"$BATS_TEST_TMPDIR/cred")
	echo ina3221 >"$SYS/class/hwmon/hwmon0/name"
	echo "GPU rail" >"$SYS/class/hwmon/hwmon0/power1_label"
	echo 20000000 >"$SYS/class/hwmon/hwmon0/power1_input"
	echo 350 >"$CTL/watts"
	COMMON=(--runtime_dir "$RT" --host plat --stat_interval 500ms)
}

teardown() { wb_kill_all; }

metrics() { curl -sS --max-time 5 "$URL/metrics"; }

# watts_ok: kepler_platform_watts is the BMC's 350 W, within 2 %: a slot's edges are
# interpolated from 1 s power samples, and on a loaded machine they come late (351.3 W was
# seen). Exact energy is powerd_redfish.bats's test; a wrong unit or scale is far off.
watts_ok() {
	metrics | awk -v want="$1" '$1 == want { ok = ($2 > 343 && $2 < 357) } END { exit !ok }'
}

@test "redfish platform power: kepler_platform_watts, node metrics, not attributed to workloads" {
	wb_spawn bmc python3 "$BATS_TEST_DIRNAME/redfish_bmc.py" --root "$WB_ROOT/tests/data/redfish/dell" \
		--ctl "$CTL" --cert "$CTL/cert.pem" --key "$CTL/key.pem"
	wb_wait_for 20 test -s "$CTL/port"
	bmc=127.0.0.1:$(cat "$CTL/port")
	wb_spawn powerd "$WB_BUILD/wattbus-powerd" "${COMMON[@]}" --sysfs_root "$SYS" --source hwmon,redfish \
		--redfish_url "https://$bmc" --redfish_credentials "$BATS_TEST_TMPDIR/cred" \
		--redfish_ca_file "$CTL/cert.pem" --redfish_interval 1s
	wb_spawn usaged "$WB_BUILD/wattbus-usaged" "${COMMON[@]}" --mode procfs --interval 1s
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" "${COMMON[@]}"
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" "${COMMON[@]}" --model "" --train false
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" "${COMMON[@]}" --listen 127.0.0.1:0
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 10 'port [0-9]'
	URL=http://127.0.0.1:$(grep -o 'port [0-9]*' "$BATS_TEST_TMPDIR/exportd.log" | head -n 1 | cut -d' ' -f2)
	series="kepler_platform_watts{source=\"redfish\",node_name=\"plat\",bmc_id=\"$bmc\",chassis_id=\"System.Embedded.1\",power_control_id=\"PowerControl\",power_control_name=\"\"}"
	wb_wait_for 60 watts_ok "$series" || { metrics | grep platform; false; }
	run metrics
	assert_line --regexp "^kepler_node_cpu_joules_total\\{node_name=\"plat\",zone=\"platform\",path=\"https://$bmc/redfish/v1/Chassis/System.Embedded.1/Power#/PowerControl/PowerControl\"\\} [0-9.]+$"
	assert_line --regexp '^kepler_node_cpu_joules_total\{node_name="plat",zone="gpu",path=".*/hwmon0/power1_input"\} [0-9.]+$'
	# processes got gpu energy, none of the platform's
	assert_line --regexp '^kepler_process_cpu_joules_total\{.*zone="gpu"\} '
	refute_line --regexp '^kepler_(process|container|pod|vm)_cpu_(joules_total|watts)\{.*zone="platform"'
	kill -0 "$PID_powerd"
}
