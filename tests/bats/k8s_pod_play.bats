#!/usr/bin/env bats
# The DaemonSet's pod (deploy/kubernetes) played by podman from the image
# `make image` builds: five containers on one emptyDir, powerd reading a fake
# powercap tree through its hostPath volume, usaged with CAP_BPF,
# CAP_PERFMON and CAP_SYS_PTRACE only, the other three as uid 65532 on a
# read-only root; a scrape
# of exportd shows the node's energy from every stage. What podman 4.3 plays
# differently from a kubelet is changed by k8s_pod.py and said there.
# Builds the image (minutes): runs only with WB_K8S_POD=1.

load helper

setup() {
	[ "${WB_K8S_POD:-}" = 1 ] || skip "builds the container image and plays the pod (minutes): set WB_K8S_POD=1"
	[ "$(id -u)" -eq 0 ] || skip "podman kube play with hostPath and capabilities needs root"
	for t in podman runc catatonit unshare findmnt; do
		command -v "$t" >/dev/null || skip "$t is not installed (scripts/deps.sh test)"
	done
	T=$BATS_TEST_TMPDIR
	NAME=wattbus-test-$$
	NODE=k8s-node-$RANDOM
	# podman's defaults ask for more open files and processes than this VM's hard limits,
	# and Debian 12's crun refuses hybrid cgroup hosts: runc, and limits within the host's.
	printf '[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n' >"$T/containers.conf"
	export CONTAINERS_CONF=$T/containers.conf
}

teardown() {
	wb_kill_all
}

@test "podman kube play runs the DaemonSet's pod and exportd serves the node's energy" {
	run "$WB_ROOT/scripts/image.sh"
	assert_success
	image=$(grep -m1 -o 'image: [^ ]*' "$WB_ROOT/deploy/kubernetes/daemonset.yaml" | cut -d' ' -f2)
	assert_output --partial "image: $image,"

	touch "$T/meter.on"
	wb_spawn meter python3 "$BATS_TEST_DIRNAME/system_fake_meter.py" "$T/sys" "$T/meter.on" 30 5
	wb_wait_for 10 test -f "$T/sys/class/powercap/intel-rapl:0/energy_uj"
	mkdir -m 1777 "$T/run"
	python3 "$BATS_TEST_DIRNAME/k8s_pod.py" "$WB_ROOT/deploy/kubernetes" "$NAME" "$T/sys/class/powercap" "$T/run" \
		:9102 "$NODE" >"$T/play.yaml"
	mkdir "$T/out"
	run unshare -m "$BATS_TEST_DIRNAME/k8s_cgroupfs.sh" "$BATS_TEST_DIRNAME/k8s_pod_play.sh" "$T/play.yaml" "$NAME" "$T/out"
	for c in powerd usaged alignd estimd exportd; do echo "# $c: $(tail -n 1 "$T/out/$c.log" 2>/dev/null)" >&3; done
	assert_success

	# Every stage up, named by the node (WATTBUS_GLOBAL_HOST), powerd reading the fake meter
	# through the hostPath volume at the sysfs root the environment gave it.
	run grep -c "^wattbus_stage_up{host=\"$NODE\",.*} 1$" "$T/out/metrics2"
	assert_output 5
	run grep "^kepler_node_cpu_joules_total{" "$T/out/metrics2"
	assert_output --partial "kepler_node_cpu_joules_total{node_name=\"$NODE\",zone=\"package\",path=\"/fake-sys/class/powercap/intel-rapl:0\"}"
	# No more energy than the meter counted (it started at 1000 J, 1e9 uJ).
	meter_j=$(awk '{ print ($1 - 1000000000) / 1e6 }' "$T/sys/class/powercap/intel-rapl:0/energy_uj")
	got_j=$(sed -n 's/^kepler_node_cpu_joules_total{.*zone="package".*} //p' "$T/out/metrics2")
	awk -v a="$got_j" -v m="$meter_j" 'BEGIN { exit !(a > 0 && a <= m) }'

	# usaged: eBPF with its two capabilities where the kernel lets it, procfs otherwise.
	grep -E "running \(mode (bpf|procfs)\)" "$T/out/usaged.log"
	mode=$(grep -o 'running (mode [a-z]*)' "$T/out/usaged.log" | tail -n 1)
	echo "# usaged: $mode" >&3
	# alignd, estimd and exportd ran as uid 65532 in group wattbus: their state files say so.
	for s in alignd estimd exportd; do
		[ "$(stat -c %u:%g "$T/run/$s.state")" = 65532:2150 ]
	done
}
