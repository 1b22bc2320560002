#!/usr/bin/env bats
# A stage stops at once with a peer that accepts and never answers: its request
# runs as a job (lib/job.h) that the stop cancels, aborting the transfer through
# libcurl's progress callback, where it waited up to the request's own deadline
# before (set here to its maximum). Each test waits for the exit with a deadline
# and checks the exit status and the log's word that the job was cancelled;
# docs/ARCHITECTURE.md gives the stop times measured.

load helper

setup() {
	wb_spawn peer python3 "$BATS_TEST_DIRNAME/hung_peer.py" --port-file "$BATS_TEST_TMPDIR/port" \
		--log "$BATS_TEST_TMPDIR/requests.log"
	wb_wait_for 20 test -s "$BATS_TEST_TMPDIR/port"
	PEER=http://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/port")
}
teardown() { wb_kill_all; }

# stop_and_check NAME REQUEST: NAME (a wb_spawn name) has REQUEST in flight; SIGTERM, and it
# exits 0 having cancelled the job.
stop_and_check() {
	wb_wait_for 30 grep -q "$2" "$BATS_TEST_TMPDIR/requests.log"
	wb_stop_cancelled "$1" "$PEER"
}

@test "powerd stops with a BMC that never answers" {
	(umask 077 && echo "root:calvin" >"$BATS_TEST_TMPDIR/bmc.cred")
	wb_spawn powerd "$WB_BUILD/wattbus-powerd" --pub "$(wb_ep powerd)" --runtime_dir "$BATS_TEST_TMPDIR" \
		--host testhost --source redfish --redfish_url "$PEER" --redfish_insecure true \
		--redfish_credentials "$BATS_TEST_TMPDIR/bmc.cred" --redfish_timeout 60s
	stop_and_check powerd "GET /redfish/v1/Chassis"
}

@test "exportd stops with a kubelet that never answers" {
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" --runtime_dir "$BATS_TEST_TMPDIR" --listen 127.0.0.1:0 \
		--sub "$(wb_ep estimd)" --kube_source kubelet --kube_url "$PEER" --kube_token_file "" \
		--kube_ca_file "" --kube_timeout 600s
	stop_and_check exportd "GET /pods"
}

@test "estimd stops with a model server that never answers" {
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --host vm1 \
		--sub "$(wb_ep aligned)" --pub "$(wb_ep estimd)" --model "" --model_server "$PEER" \
		--model_server_timeout 600s
	stop_and_check estimd "POST /model"
}

@test "modeld stops with a Prometheus that never answers (its online trainer)" {
	wb_spawn modeld "$WB_BUILD/wattbus-modeld" --runtime_dir "$BATS_TEST_TMPDIR" --listen 127.0.0.1:0 \
		--sub "" --store "$BATS_TEST_TMPDIR/store" --prometheus "$PEER" --prometheus_timeout 600s
	stop_and_check modeld "GET /api/v1/query_range"
}

@test "no wait on the loop can be set to outlast the units' WatchdogSec" {
	# The one wait that holds a loop iteration is estimd's slot wait for its sidecar; every
	# other wait for a peer, each exec run included, is a job off the loop. exec_timeout keeps
	# its 20 s maximum for `wattbus probe` and `doctor`, which wait for a first run.
	for unit in "$WB_ROOT"/systemd/wattbus-powerd.service "$WB_ROOT"/systemd/wattbus-estimd.service; do
		grep -q '^WatchdogSec=30s$' "$unit" || fail "$unit: WatchdogSec is not 30s; the keys' maxima follow it"
	done
	run "$WB_BUILD/wattbus-powerd" -n --source exec --exec true --exec_timeout 30s
	assert_failure 2
	assert_output --partial "exec_timeout: 30s is outside [1ms, 20s]"
	run "$WB_BUILD/wattbus-estimd" -n --estimator unix:/nonexistent --estimator_timeout 30s
	assert_failure 2
	assert_output --partial "estimator_timeout: 30s is outside [1ms, 10s]"
}
