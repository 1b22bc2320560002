#!/usr/bin/env bats
# Pod and container names from a kubelet stand-in (TLS, bearer token) serving a
# real PodList: they land on the pod and container series; a deleted pod keeps
# its names; 401, garbage, a 10 MB answer and a kubelet down are counted and
# logged, keep the last names and leave the energy alone.
load helper
load kube_helper
load exportd_helper

setup() {
	command -v openssl >/dev/null || skip "openssl is not installed"
	K=$BATS_TEST_TMPDIR/kube
	mkdir -p "$K"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$K/key.pem" -out "$K/ca.crt" 2>/dev/null
	# laid out as a projected service-account volume: token is a link into ..data
	mkdir -p "$K/..data1"
	head -c 24 /dev/urandom | base64 >"$K/..data1/token"
	ln -s ..data1 "$K/..data"
	ln -s ..data/token "$K/token"
	echo ok >"$K/mode"
	# exportd_feed.py's pod pod-1 with container c0ffee is the web pod's app container here
	sed -e 's/0b6c2f4e-1a2b-4c3d-9e8f-0123456789ab/pod-1/' \
		-e 's/80d6ae0197c2a3be4ec46d171996105891dedf626ea3040f2dd2bf00e63c436e/c0ffee/' \
		"$WB_ROOT/tests/data/kube/pods.json" >"$K/pods.json"
	kubelet_start
}

teardown() { wb_kill_all; }

# ex_kube [flags]: exportd asking the stand-in every 300 ms.
ex_kube() {
	ex_start --kube_source "${KSRC:-kubelet}" --kube_url "https://127.0.0.1:$KPORT" \
		--kube_token_file "$K/token" --kube_ca_file "$K/ca.crt" --kube_interval 1s "$@"
}

# requests_after N MODE: the stand-in answered a request in MODE after its Nth.
requests_after() {
	awk -v n="$1" -v m="$2" '$1 > n && $4 == m { f = 1 } END { exit !f }' "$K/requests.log"
}

# event NAME: exportd's stage counter NAME (empty when not there yet).
event() {
	ex_metrics | grep -F "wattbus_stage_events_total{" | grep -F "stage=\"exportd\"" |
		grep -F "name=\"$1\"}" | awk '{print $NF}'
}

event_at_least() { [ "$(event "$1")" ] && [ "$(event "$1")" -ge "$2" ]; }

named() {
	ex_metrics | grep -qF 'pod_name="web-7d4b9c8f6d-x2x8k",pod_namespace="shop"'
}

@test "kubelet /pods over TLS with a token: pod and container series carry the PodList's names" {
	ex_kube --metrics kepler,kepler-0.9
	wb_spawn feed ex_feed --slots 0 --realtime --len 0.5
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	wb_wait_for 30 named
	run ex_metrics
	assert_output --regexp 'kepler_pod_cpu_joules_total\{node_name="node-a",pod_id="pod-1",pod_name="web-7d4b9c8f6d-x2x8k",pod_namespace="shop",state="running",zone="package"\} [0-9.]+'
	# the kubelet's container name wins over what estimd said ("web")
	assert_output --regexp 'kepler_container_cpu_joules_total\{node_name="node-a",container_id="c0ffee",container_name="app",runtime="containerd",pod_id="pod-1",state="running",zone="package"\}'
	assert_output --regexp 'kepler_container_cpu_seconds_total\{node_name="node-a",container_id="c0ffee",container_name="app",runtime="containerd",pod_id="pod-1",state="running"\} [0-9.]+'
	# and Kepler 0.9's container series, its pod's names as the pod series have them
	assert_output --regexp 'kepler_container_package_joules_total\{node_name="node-a",container_id="c0ffee",pod_name="web-7d4b9c8f6d-x2x8k",container_namespace="shop",container_name="app",mode="dynamic",source="rapl-sysfs"\} [0-9.]+'
	refute_output --partial 'pod_name="pod-1"'
	assert_output --partial 'wattbus_exportd_kube_names{kind="pod"} 4'
	assert_output --partial 'wattbus_exportd_kube_names{kind="container"} 6'
	grep -q ' /pods 200 ok$' "$K/requests.log"
	run grep -c ' /pods 401 ' "$K/requests.log"
	assert_output 0
}

@test "API server: the pods of kube_node, asked with a fieldSelector" {
	# the web pod runs on another node: its names must not be taken
	python3 - "$K/pods.json" <<-'EOF'
		import json, sys
		d = json.load(open(sys.argv[1]))
		d["items"][0]["spec"]["nodeName"] = "node-b"
		json.dump(d, open(sys.argv[1], "w"))
	EOF
	# kube_node unset: [global] host names the node, as on the DaemonSet (WATTBUS_GLOBAL_HOST)
	KSRC=apiserver ex_kube --host node-a
	wb_spawn feed ex_feed --slots 0 --realtime --len 0.5
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	wb_wait_for 30 bash -c 'curl -sS "$0/metrics" | grep -qF "wattbus_exportd_kube_names{kind=\"pod\"} 3"' "$EX_URL"
	grep -qF '/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a 200 ok' "$K/requests.log"
	# slots applied after the names came: the pod stays under its uid
	n=$(ex_value 'wattbus_exportd_estimates_total{host="node-a"}')
	wb_wait_for 30 bash -c '[ "$(curl -sS "$0/metrics" | grep -F "wattbus_exportd_estimates_total{host=\"node-a\"}" | awk "{print \$NF}")" -ge "$1" ]' "$EX_URL" $((${n:-0} + 2))
	run ex_metrics
	assert_output --partial 'pod_id="pod-1",pod_name="pod-1",pod_namespace=""'
	assert_output --partial 'container_id="c0ffee",container_name="web"'
	# and kube_node is checked before anything is asked
	run "$WB_BUILD/wattbus-exportd" -n --kube_node 'node-a&x=1'
	assert_failure 2
	assert_output --partial 'kube_node'
}

@test "a rotated token (the projected volume's link swapped) is read again at the next poll" {
	ex_kube
	wb_wait_for 30 event_at_least kube_ok 1
	mkdir "$K/..data2"
	head -c 24 /dev/urandom | base64 >"$K/..data2/token"
	ln -s ..data2 "$K/..data.new" && mv -T "$K/..data.new" "$K/..data"
	n=$(wc -l <"$K/requests.log")
	wb_wait_for 30 requests_after "$n" ok
	run grep -c ' 401 ' "$K/requests.log"
	assert_output 0
}

@test "a pod deleted mid-run keeps its names; the list without it is taken" {
	ex_kube
	wb_spawn feed ex_feed --slots 0 --realtime --len 0.5
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	wb_wait_for 30 named
	python3 - "$K/pods.json" <<-'EOF'
		import json, sys
		d = json.load(open(sys.argv[1]))
		d["items"] = [p for p in d["items"] if p["metadata"]["uid"] != "pod-1"]
		json.dump(d, open(sys.argv[1], "w"))
	EOF
	wb_wait_for 30 bash -c 'curl -sS "$0/metrics" | grep -qF "wattbus_exportd_kube_names{kind=\"pod\"} 3"' "$EX_URL"
	# still running (the feed goes on) and still named
	before=$(ex_value 'kepler_pod_cpu_joules_total{node_name="node-a",pod_id="pod-1",pod_name="web-7d4b9c8f6d-x2x8k"')
	wb_wait_for 30 bash -c '[ "$(curl -sS "$0/metrics" | grep -F "kepler_pod_cpu_joules_total{node_name=\"node-a\",pod_id=\"pod-1\",pod_name=\"web-7d4b9c8f6d-x2x8k\"" | awk "{print \$NF}")" != "$1" ]' "$EX_URL" "$before"
	run ex_metrics
	refute_output --partial 'pod_name="pod-1"'
	assert_output --partial 'container_id="c0ffee",container_name="app"'
}

@test "401, garbage, 10 MB, kubelet down: counted and logged, the last names kept, energy unaffected" {
	ex_kube --kube_timeout 5s
	wb_spawn feed ex_feed --slots 0 --realtime --len 0.5
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	wb_wait_for 30 named
	n=0
	for mode in 401 garbage huge down; do
		n=$(wc -l <"$K/requests.log")
		echo "$mode" >"$K/mode"
		wb_wait_for 60 requests_after "$n" "$mode"
	done
	# each failure is a counter of its own
	wb_wait_for 30 event_at_least kube_status 1
	wb_wait_for 30 event_at_least kube_malformed 1
	wb_wait_for 30 event_at_least kube_too_big 1
	wb_wait_for 30 bash -c '[ "$(( $(curl -sS "$0/metrics" | grep -F "stage=\"exportd\"" | grep -E "name=\"kube_(connect|error)\"" | awk "{s += \$NF} END {print s+0}") ))" -ge 1 ]' "$EX_URL"
	grep -q 'kube: .*status 401.*the last names stay' "$BATS_TEST_TMPDIR/exportd.log"
	grep -q 'kube: .*not JSON.*the last names stay' "$BATS_TEST_TMPDIR/exportd.log"
	grep -q 'kube: .*the last names stay' "$BATS_TEST_TMPDIR/exportd.log"
	# the names from the last good answer stay, and the pod's energy still grows
	named
	a=$(ex_value 'kepler_pod_cpu_joules_total{node_name="node-a",pod_id="pod-1",pod_name="web-7d4b9c8f6d-x2x8k",pod_namespace="shop",state="running",zone="package"}')
	wb_wait_for 30 bash -c 'awk -v a="$1" -v b="$(curl -sS "$0/metrics" | grep -F "kepler_pod_cpu_joules_total{node_name=\"node-a\",pod_id=\"pod-1\",pod_name=\"web-7d4b9c8f6d-x2x8k\"" | awk "{print \$NF}")" "BEGIN { exit !(b > a) }"' "$EX_URL" "$a"
	run ex_metrics
	assert_output --partial 'wattbus_exportd_kube_names{kind="pod"} 4'
	# the kubelet back: names go on
	n=$(wc -l <"$K/requests.log")
	echo ok >"$K/mode"
	wb_wait_for 60 requests_after "$n" ok
	named
}

@test "a wrong token file, a CA that does not match: counted, no names, energy still exported" {
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other \
		-keyout "$K/other.key" -out "$K/other.crt" 2>/dev/null
	ex_kube --kube_ca_file "$K/other.crt"
	wb_spawn feed ex_feed --slots 0 --realtime --len 0.5
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	wb_wait_for 30 event_at_least kube_tls 1
	grep -q 'kube: .*the last names stay' "$BATS_TEST_TMPDIR/exportd.log"
	wb_wait_for 30 bash -c 'curl -sS "$0/metrics" | grep -q "^kepler_pod_cpu_joules_total"' "$EX_URL"
	run ex_metrics
	assert_output --partial 'pod_id="pod-1",pod_name="pod-1",pod_namespace=""'
	refute_output --partial 'wattbus_exportd_kube_names'
	wb_kill_all
	# the token: a file that does not exist
	kubelet_start port2
	ex_kube --kube_token_file "$K/nonexistent"
	wb_wait_for 30 event_at_least kube_token_unreadable 1
	grep -q "kube: token file $K/nonexistent: No such file" "$BATS_TEST_TMPDIR/exportd.log"
}
