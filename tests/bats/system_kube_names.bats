#!/usr/bin/env bats
# The five stages with busy processes placed in kubepods cgroups, as the
# kubelet lays them out with the systemd driver (a containerd scope in a
# burstable pod slice) and with the cgroupfs driver (besteffort/pod<uid>/<id>),
# and a kubelet stand-in serving the PodList those pods are in: the pod and
# container series carry the PodList's names.
load helper
load kube_helper
load cgroup_helper

setup() {
	[ "$(id -u)" -eq 0 ] || skip "making cgroups needs root"
	command -v openssl >/dev/null || skip "openssl is not installed"
	CG2=$(cg2_mount)
	[ -n "$CG2" ] || skip "no cgroup2 mounted"
	MADE=()
	RT=$BATS_TEST_TMPDIR/run
	K=$BATS_TEST_TMPDIR/kube
	mkdir -p "$RT" "$K"
	MODEL=$(ls "$WB_ROOT"/data/models/*.json | head -n 1)
}

teardown() {
	wb_kill_all
	wb_cgroups_remove
}

# kubelet: the fixture PodList with this run's uids and container ids, served over TLS.
kubelet() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$K/key.pem" -out "$K/ca.crt" 2>/dev/null
	head -c 24 /dev/urandom | base64 >"$K/token"
	sed -e "s/0b6c2f4e-1a2b-4c3d-9e8f-0123456789ab/$WEB_UID/" \
		-e "s/80d6ae0197c2a3be4ec46d171996105891dedf626ea3040f2dd2bf00e63c436e/$APP_ID/" \
		-e "s/5d1e7a90-2b3c-4d5e-8f9a-abcdef012345/$JOB_UID/" \
		-e "s/845e91831319e89c4d656bdb80c278ac09a7230d61e5dfd2e1b1fbb436ac8917/$REPORT_ID/" \
		"$WB_ROOT/tests/data/kube/pods.json" >"$K/pods.json"
	kubelet_start
}

pipeline() {
	local e=$BATS_TEST_TMPDIR/empty
	wb_spawn powerd "$WB_BUILD/wattbus-powerd" --runtime_dir "$RT" --host k8s --interval 500ms \
		--sysfs_root "$e" --msr_root "$e"
	wb_spawn usaged "$WB_BUILD/wattbus-usaged" --runtime_dir "$RT" --host k8s --interval 500ms \
		--mode procfs
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$RT"
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" --runtime_dir "$RT" --model "$MODEL"
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" --runtime_dir "$RT" --listen 127.0.0.1:0 \
		--kube_source kubelet --kube_url "https://127.0.0.1:$(cat "$K/port")" \
		--kube_token_file "$K/token" --kube_ca_file "$K/ca.crt" --kube_interval 1s --stale_after 3s
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 30 'port [0-9]'
	URL=http://127.0.0.1:$(grep -o 'port [0-9]*' "$BATS_TEST_TMPDIR/exportd.log" | head -n 1 | cut -d' ' -f2)
}

scrape() { curl -sS --max-time 10 "$URL/metrics"; }
has() { scrape | grep -qE "$1"; }

@test "busy processes in kubepods cgroups (systemd and cgroupfs drivers): series named from the kubelet" {
	WEB_UID=$(hex 4)-$(hex 2)-$(hex 2)-$(hex 2)-$(hex 6)
	JOB_UID=$(hex 4)-$(hex 2)-$(hex 2)-$(hex 2)-$(hex 6)
	APP_ID=$(hex 32)
	REPORT_ID=$(hex 32)
	local sd=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${WEB_UID//-/_}.slice/cri-containerd-$APP_ID.scope
	local fs=/kubepods/besteffort/pod$JOB_UID/$REPORT_ID
	mkcg "$CG2$sd"
	mkcg "$CG2$fs"
	kubelet
	pipeline
	wb_spawn web sh -c 'while :; do :; done'
	wb_spawn report sh -c 'while :; do :; done'
	echo "$PID_web" >"$CG2$sd/cgroup.procs"
	echo "$PID_report" >"$CG2$fs/cgroup.procs"
	wb_wait_for 60 has "kepler_pod_cpu_joules_total\{node_name=\"k8s\",pod_id=\"$WEB_UID\",pod_name=\"web-7d4b9c8f6d-x2x8k\",pod_namespace=\"shop\",state=\"running\",zone=\"package\"\}"
	wb_wait_for 60 has "kepler_pod_cpu_joules_total\{node_name=\"k8s\",pod_id=\"$JOB_UID\",pod_name=\"report-28731540-q7k2p\",pod_namespace=\"batch\",state=\"running\",zone=\"package\"\}"
	run scrape
	assert_output --regexp "kepler_container_cpu_joules_total\{node_name=\"k8s\",container_id=\"$APP_ID\",container_name=\"app\",runtime=\"containerd\",pod_id=\"$WEB_UID\",state=\"running\",zone=\"package\"\} [0-9.]+"
	# the cgroupfs driver names the directory by the bare id: the runtime is not known
	assert_output --regexp "kepler_container_cpu_joules_total\{node_name=\"k8s\",container_id=\"$REPORT_ID\",container_name=\"report\",runtime=\"unknown\",pod_id=\"$JOB_UID\",state=\"running\",zone=\"package\"\} [0-9.]+"
	assert_output --regexp "kepler_container_cpu_seconds_total\{node_name=\"k8s\",container_id=\"$APP_ID\",container_name=\"app\",runtime=\"containerd\",pod_id=\"$WEB_UID\",state=\"running\"\} [0-9.]+"
	refute_output --partial "pod_name=\"$WEB_UID\""
	refute_output --partial "pod_name=\"$JOB_UID\""
	# the report pod is deleted: its processes end, the kubelet stops listing it
	kill "$PID_report"
	python3 - "$K/pods.json" "$JOB_UID" <<-'EOF'
		import json, sys
		d = json.load(open(sys.argv[1]))
		d["items"] = [p for p in d["items"] if p["metadata"]["uid"] != sys.argv[2]]
		json.dump(d, open(sys.argv[1], "w"))
	EOF
	wb_wait_for 60 has 'wattbus_exportd_kube_names\{kind="pod"\} 3'
	wb_wait_for 60 has "kepler_container_cpu_seconds_total\{node_name=\"k8s\",container_id=\"$REPORT_ID\",container_name=\"report\",runtime=\"unknown\",pod_id=\"$JOB_UID\",state=\"terminated\"\}"
	run scrape
	assert_output --regexp "kepler_pod_cpu_joules_total\{node_name=\"k8s\",pod_id=\"$JOB_UID\",pod_name=\"report-28731540-q7k2p\",pod_namespace=\"batch\",state=\"(running|terminated)\",zone=\"package\"\}"
	refute_output --partial "pod_name=\"$JOB_UID\""
}
