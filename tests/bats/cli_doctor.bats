#!/usr/bin/env bats
# wattbus doctor on fake sysfs/procfs/dev trees: which meters, GPUs, BPF and cgroup
# setup it finds, the mode it predicts for powerd, usaged and estimd, and the
# stages that run (found where top finds them) with the mode they say they run in.

load helper

setup() {
	# A world-readable place (the trees are also read as nobody below).
	F=$(mktemp -d /tmp/wb-doctor.XXXXXX)
	chmod 0755 "$F"
	mkdir -p "$F/sys" "$F/proc/self" "$F/proc/sys/kernel" "$F/dev"
}

teardown() {
	wb_kill_all
	rm -rf "$F"
}

doctor() {
	"$WATTBUS" doctor --sysfs-root "$F/sys" --kernel-sysfs "$F/sys" --proc-root "$F/proc" --dev-root "$F/dev" "$@"
}

rapl_zone() { # rapl_zone DIR NAME ENERGY_UJ
	local d=$F/sys/class/powercap/$1
	mkdir -p "$d"
	echo "$2" >"$d/name"
	echo "$3" >"$d/energy_uj"
	echo 262143328850 >"$d/max_energy_range_uj"
}

@test "a readable RAPL tree: powerd rapl, estimd measured" {
	rapl_zone intel-rapl:0 package-0 1000
	rapl_zone intel-rapl:0:0 core 500
	rapl_zone intel-rapl:1 package-1 2000
	mkdir -p "$F/sys/class/powercap/dtpm" # a powercap entry that is no RAPL zone
	run doctor --json
	assert_success
	[ "$(echo "$output" | jq -r '.rapl.state')" = readable ]
	[ "$(echo "$output" | jq -r '.rapl.zones | length')" = 3 ]
	[ "$(echo "$output" | jq -r '[.rapl.zones[].name] | sort | join(",")')" = core,package-0,package-1 ]
	[ "$(echo "$output" | jq -r '.stages.powerd.mode')" = rapl ]
	# powerd's own discovery: its zone names
	[ "$(echo "$output" | jq -r '.stages.powerd.reason')" = "3 zones: package-0, core-0, package-1" ]
	[ "$(echo "$output" | jq -r '.stages.estimd.mode')" = measured ]
	run doctor
	assert_success
	assert_output --regexp 'RAPL +readable +3 zones in .*/class/powercap: '
	assert_output --regexp 'powerd +rapl +3 zones: package-0, core-0, package-1'
	assert_output --regexp 'estimd +measured '
}

@test "energy_uj readable by root only, doctor as another user: the CVE-2020-8694 message" {
	[ "$(id -u)" = 0 ] || skip "needs root to make root-only files and run as nobody"
	rapl_zone intel-rapl:0 package-0 1000
	rapl_zone intel-rapl:0:2 dram 10
	chmod 0400 "$F"/sys/class/powercap/*/energy_uj
	cp "$WATTBUS" "$F/wattbus" # reachable by nobody wherever the build is
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$F/wattbus" doctor --sysfs-root "$F/sys" \
		--proc-root "$F/proc" --dev-root "$F/dev"
	assert_success
	assert_output --regexp 'RAPL +unreadable +2 zones in .*: .*package-0 \(unreadable\)'
	# One advice, powerd's, for the RAPL row and for powerd's verdict.
	assert_output --regexp 'RAPL .*
 +fix: energy_uj is readable by root only since Linux 5.10 \(CVE-2020-8694'
	assert_output --regexp 'powerd +none \(model mode\) +rapl: .*/energy_uj: Permission denied: energy_uj is readable by root only since Linux 5.10 \(CVE-2020-8694'
	assert_output --partial 'fix: uid 65534 cannot read energy_uj; `sudo wattbus doctor` shows what wattbus-powerd.service (root) gets'
	assert_output --regexp 'estimd +model '
	# The same tree read as root: the unit's view.
	run doctor --json
	[ "$(echo "$output" | jq -r '.stages.powerd.mode')" = rapl ]
	[ "$(echo "$output" | jq -r '.rapl.zones[0].mode')" = 256 ] # 0400
}

@test "nothing at all: model mode, procfs, and a fix for each" {
	run doctor
	assert_success
	assert_output --regexp 'RAPL +absent +.*/class/powercap: No such file or directory'
	assert_output --regexp 'MSR +absent +.*/cpu/0/msr: no such device; msr module not loaded'
	assert_output --partial 'fix: `modprobe msr`'
	assert_output --regexp 'hwmon +absent'
	assert_output --regexp 'BPF +no-btf +kernel .*BTF .*/kernel/btf/vmlinux missing'
	assert_output --regexp 'powerd +none \(model mode\) +rapl: .*/class/powercap: No such file or directory .*; msr: .*/cpu/0/msr: No such file or directory .*; hwmon: .*/class/hwmon: No such file or directory'
	assert_output --regexp 'usaged +procfs '
	assert_output --regexp 'estimd +model +no meter: node energy comes from the power model'
	run doctor --json
	assert_success
	[ "$(echo "$output" | jq -r '.stages.powerd.mode, .stages.usaged.mode, .stages.estimd.mode' | tr '\n' ' ')" = "none procfs model " ]
	[ "$(echo "$output" | jq -r '.cgroup.state')" = unknown ]
}

@test "no RAPL but a readable MSR on an Intel CPU: powerd msr; then an hwmon meter alone: hwmon" {
	mkdir -p "$F/dev/cpu/0"
	# A register file as the msr driver lays it out: register number = offset.
	python3 -c 'import struct, sys
f = open(sys.argv[1], "wb")
for reg, v in ((0x606, 0xA0E03), (0x611, 123456)):
	f.seek(reg); f.write(struct.pack("<Q", v))' "$F/dev/cpu/0/msr"
	printf 'processor\t: 0\nvendor_id\t: GenuineIntel\n' >"$F/proc/cpuinfo"
	echo 'msr 16384 0 - Live 0x0000000000000000' >"$F/proc/modules"
	run doctor --json
	[ "$(echo "$output" | jq -r '.msr.state, .msr.module_loaded, .stages.powerd.mode' | tr '\n' ' ')" = "readable true msr " ]
	[ "$(echo "$output" | jq -r '.stages.powerd.reason')" = "1 zone: package-0" ]
	[ "$(echo "$output" | jq -r '.stages.estimd.mode')" = measured ]
	# A CPU without RAPL MSRs (no register reads): msr is no meter.
	printf 'vendor_id\t: CentaurHauls\n' >"$F/proc/cpuinfo"
	: >"$F/dev/cpu/0/msr"
	run doctor --json
	[ "$(echo "$output" | jq -r '.msr.state, .stages.powerd.mode' | tr '\n' ' ')" = "no-rapl none " ]
	# An ACPI power meter through hwmon.
	mkdir -p "$F/sys/class/hwmon/hwmon3"
	echo power_meter >"$F/sys/class/hwmon/hwmon3/name"
	echo 231000000 >"$F/sys/class/hwmon/hwmon3/power1_average"
	echo 42 >"$F/sys/class/hwmon/hwmon3/power1_average_interval" # no meter file
	echo 45000 >"$F/sys/class/hwmon/hwmon3/temp1_input"          # no meter file
	run doctor --json
	[ "$(echo "$output" | jq -r '.hwmon.state, (.hwmon.meters | length), .hwmon.meters[0].file' | tr '\n' ' ')" = "readable 1 power1_average " ]
	[ "$(echo "$output" | jq -r '.stages.powerd.mode')" = hwmon ]
}

@test "BPF: BTF and CAP_BPF+CAP_PERFMON give bpf; without the capabilities procfs with the fix" {
	mkdir -p "$F/sys/kernel/btf"
	: >"$F/sys/kernel/btf/vmlinux"
	echo 6.1.0-18-amd64 >"$F/proc/sys/kernel/osrelease"
	printf 'Name:\twattbus\nCapEff:\t000000c000000000\n' >"$F/proc/self/status"
	run doctor --json
	[ "$(echo "$output" | jq -r '.bpf.state, .bpf.kernel, .bpf.cap_bpf_perfmon, .stages.usaged.mode' | tr '\n' ' ')" = "usable 6.1.0-18-amd64 true bpf " ]
	printf 'Name:\twattbus\nCapEff:\t0000000000000000\n' >"$F/proc/self/status"
	run doctor
	assert_output --regexp 'BPF +unprivileged +kernel 6.1.0-18-amd64; BTF .* present; no CAP_BPF\+CAP_PERFMON'
	assert_output --regexp 'usaged +procfs '
	assert_output --partial 'fix: run usaged as root or with CAP_BPF and CAP_PERFMON: wattbus-usaged.service grants exactly those'
	# Only CAP_SYS_ADMIN (older kernels) also loads BPF.
	printf 'CapEff:\t0000000000200000\n' >"$F/proc/self/status"
	echo 5.4.0 >"$F/proc/sys/kernel/osrelease"
	run doctor --json
	[ "$(echo "$output" | jq -r '.stages.usaged.mode')" = bpf ]
}

@test "cgroup version from mountinfo, and kubepods" {
	cat >"$F/proc/self/mountinfo" <<-'EOF'
		25 30 0:23 / /sys rw,nosuid shared:7 - sysfs sysfs rw
		35 25 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate
	EOF
	mkdir -p "$F/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice"
	run doctor --json
	[ "$(echo "$output" | jq -r '.cgroup.state, .cgroup.v2, .kubepods.state, .kubepods.paths[0]' | tr '\n' ' ')" = "v2 /sys/fs/cgroup present /sys/fs/cgroup/kubepods.slice " ]
	cat >"$F/proc/self/mountinfo" <<-'EOF'
		35 25 0:30 / /sys/fs/cgroup/unified rw shared:9 - cgroup2 cgroup2 rw
		36 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw shared:10 - cgroup cgroup rw,cpu,cpuacct
		37 25 0:32 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory
	EOF
	rm -rf "$F/sys/fs/cgroup/kubepods.slice"
	mkdir -p "$F/sys/fs/cgroup/memory/kubepods/besteffort"
	run doctor
	assert_output --regexp 'cgroup +hybrid +v2 at /sys/fs/cgroup/unified and 2 v1 hierarchies'
	assert_output --regexp 'kubepods +present +/sys/fs/cgroup/memory/kubepods: pods get kepler_pod_\* series'
	grep -v cgroup2 "$F/proc/self/mountinfo" >"$F/m" && mv "$F/m" "$F/proc/self/mountinfo"
	run doctor --json
	[ "$(echo "$output" | jq -r '.cgroup.state')" = v1 ]
}

@test "this machine: exit 0, valid JSON, and the cgroup version the file system type says" {
	run "$WATTBUS" doctor --json
	assert_success
	version=$(echo "$output" | jq -r '.cgroup.state')
	case $(stat -fc %T /sys/fs/cgroup) in
	cgroup2fs) [ "$version" = v2 ] ;;
	tmpfs) [ "$version" = v1 ] || [ "$version" = hybrid ] ;;
	esac
	[ -d /sys/fs/cgroup/unified ] && [ "$version" = hybrid ]
	# powercap absent here means RAPL absent in the report.
	if [ ! -d /sys/class/powercap ]; then
		[ "$(echo "$output" | jq -r '.rapl.state')" = absent ]
	fi
	[ "$(echo "$output" | jq -r '.perf.state')" = usable ] || [ -n "$(echo "$output" | jq -r '.perf.fix')" ]
}

@test "usage errors exit 2" {
	run "$WATTBUS" doctor --frobnicate
	assert_failure 2
	run "$WATTBUS" doctor extra
	assert_failure 2
	assert_output --partial "unexpected argument 'extra'"
	run "$WATTBUS" doctor --help
	assert_success
	assert_output --partial '--sysfs-root DIR'
}

@test "modeld: its socket in the runtime directory and the models its store holds" {
	rt=$BATS_TEST_TMPDIR/rt
	mkdir -p "$rt"
	store=$BATS_TEST_TMPDIR/models
	run env WATTBUS_RUNTIME_DIR="$rt" "$WATTBUS" doctor --sysfs-root "$F/sys" --proc-root "$F/proc" --dev-root "$F/dev" --modeld-store "$store" --json
	assert_success
	[ "$(jq -r '.stages.modeld.mode' <<<"$output")" = "not running" ]
	[ "$(jq -r '.stages.modeld.reason' <<<"$output")" = "no socket $rt/modeld.sock; no store at $store" ]
	[[ $(jq -r '.stages.modeld.fix' <<<"$output") == *"systemctl enable --now wattbus-modeld.service"* ]]
	# a running modeld with an imported-sized store: two models in one pipeline
	mkdir -p "$store/p/rapl-sysfs/AbsPower/BPFOnly/A_0" "$store/p/rapl-sysfs/DynPower/Basic/B_1"
	touch "$store/p/rapl-sysfs/AbsPower/BPFOnly/A_0/metadata.json" "$store/p/rapl-sysfs/DynPower/Basic/B_1/metadata.json"
	wb_spawn modeld "$WB_BUILD/wattbus-modeld" --runtime_dir "$rt" --listen 127.0.0.1:0 --sub "" --store "$BATS_TEST_TMPDIR/other"
	wb_wait_for 30 test -S "$rt/modeld.sock"
	run env WATTBUS_RUNTIME_DIR="$rt" "$WATTBUS" doctor --sysfs-root "$F/sys" --proc-root "$F/proc" --dev-root "$F/dev" --modeld-store "$store"
	assert_success
	assert_output --regexp "modeld +running +socket $rt/modeld.sock; store $store: 2 models in 1 pipeline"
}

@test "--sysfs-root moves only powerd's meters: BPF, cgroups, kubepods and usaged stay the machine's" {
	rapl_zone intel-rapl:0 package-0 1000
	run "$WATTBUS" doctor --json
	assert_success
	machine=$(jq -c '[.bpf.state, .bpf.btf, .cgroup.state, .kubepods.state, .kubepods.paths, .stages.usaged.mode, .msr.module_loaded]' <<<"$output")
	run "$WATTBUS" doctor --json --sysfs-root "$F/sys"
	assert_success
	[ "$(jq -c '[.bpf.state, .bpf.btf, .cgroup.state, .kubepods.state, .kubepods.paths, .stages.usaged.mode, .msr.module_loaded]' <<<"$output")" = "$machine" ]
	[ "$(jq -r '.bpf.btf' <<<"$output")" = /sys/kernel/btf/vmlinux ]
	# the meters do come from it
	[ "$(jq -r '.rapl.state, .stages.powerd.mode' <<<"$output" | tr '\n' ' ')" = "readable rapl " ]
	[ "$(jq -r '.roots.sysfs, .roots.kernel_sysfs' <<<"$output" | tr '\n' ' ')" = "$F/sys /sys " ]
}

@test "GPUs through powerd's nvml source: the stand-in NVML's GPUs, or why none" {
	export WB_FAKE_NVML=$BATS_TEST_TMPDIR/nvml.txt
	printf '%s\n' "gpu uuid=GPU-doc-0 name=FakeH100 energy_mj=1000 power_mw=0" \
		"gpu uuid=GPU-doc-1 name=FakeA10 energy_mj=5 power_mw=0" >"$WB_FAKE_NVML"
	run doctor --json --nvml-library "$WB_BUILD/tests/libfake-nvml.so"
	assert_success
	[ "$(jq -r '.gpu.state' <<<"$output")" = present ]
	[ "$(jq -c '[.gpu.gpus[] | [.zone, .model, .uuid]]' <<<"$output")" = '[["gpu-0","FakeH100","GPU-doc-0"],["gpu-1","FakeA10","GPU-doc-1"]]' ]
	run doctor --nvml-library "$WB_BUILD/tests/libfake-nvml.so"
	assert_output --regexp 'GPU +present +2 GPUs through NVML: gpu-0 \(FakeH100, GPU-doc-0\), gpu-1 \(FakeA10, GPU-doc-1\)'
	assert_output --partial 'fix: powerd measures them only where nvml is named beside its CPU meter'
	run doctor --json --nvml-library "$BATS_TEST_TMPDIR/none/libnvidia-ml.so.1"
	[ "$(jq -r '.gpu.state' <<<"$output")" = absent ]
	[[ $(jq -r '.gpu.detail' <<<"$output") == "nvml: cannot load $BATS_TEST_TMPDIR/none/libnvidia-ml.so.1"* ]]
}

# A socket file that nothing listens on: what a killed stage leaves.
stale_socket() {
	python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$1"
}

@test "the running pipeline: found in build/run beside the program as top finds it, each stage and its mode" {
	# the programs in a build/ of their own, as make run runs them, with its run/ beside them
	build=$BATS_TEST_TMPDIR/build
	mkdir -p "$build/run" "$F/proc"
	for b in "$WB_BUILD"/wattbus "$WB_BUILD"/wattbus-*; do ln -s "$b" "$build/"; done
	rt=$build/run
	printf 'cpu  100 0 50 1000 0 0 0 0 0 0\n' >"$F/proc/stat"
	common=(--runtime_dir "$rt" --stat_interval 1s --host doc)
	wb_spawn powerd "$build/wattbus-powerd" "${common[@]}" --interval 200ms --source fake --proc_root "$F/proc"
	wb_spawn usaged "$build/wattbus-usaged" "${common[@]}" --mode procfs --interval 1s
	wb_spawn alignd "$build/wattbus-alignd" "${common[@]}"
	wb_wait_for 30 test -S "$rt/alignd.sock"
	stale_socket "$rt/estimd.sock"
	run env -u WATTBUS_RUNTIME_DIR "$build/wattbus" doctor --json --sysfs-root "$F/sys" --dev-root "$F/dev" --wait 10s
	assert_success
	[ "$(jq -r '.running.dir' <<<"$output")" = "$rt" ]
	[ "$(jq -r '.running.stages | [.powerd, .usaged, .alignd, .estimd, .exportd, .modeld] | map(.state) | join(" ")' <<<"$output")" = "running running running stale absent absent" ]
	[ "$(jq -r '.running.stages.powerd.mode, .running.stages.usaged.mode' <<<"$output" | tr '\n' ' ')" = "fake procfs " ]
	# the running stages' own word wins over the prediction (no meter on these roots)
	[ "$(jq -r '.stages.powerd.mode, .stages.usaged.mode' <<<"$output" | tr '\n' ' ')" = "fake procfs " ]
	[[ $(jq -r '.stages.powerd.reason' <<<"$output") == "running: its stat message says mode fake; doctor predicts none here"* ]]
	[[ $(jq -r '.stages.powerd.fix' <<<"$output") == *SIMULATED* ]]
	run env -u WATTBUS_RUNTIME_DIR "$build/wattbus" doctor --sysfs-root "$F/sys" --dev-root "$F/dev" --wait 10s
	assert_output --partial "running   sockets in $rt"
	assert_output --regexp 'powerd +running +mode fake, version '
	assert_output --regexp 'estimd +stale +a socket left by a stopped process'
	assert_output --regexp 'exportd +absent +no socket'
	# WATTBUS_RUNTIME_DIR elsewhere: nothing runs there, and doctor says where it looked
	run env WATTBUS_RUNTIME_DIR="$BATS_TEST_TMPDIR/elsewhere" "$build/wattbus" doctor --sysfs-root "$F/sys" --dev-root "$F/dev"
	assert_output --regexp "running +no stage: no socket with a listener in $BATS_TEST_TMPDIR/elsewhere"
}
