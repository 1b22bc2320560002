#!/usr/bin/env bats
# GPU energy end to end: powerd's nvml source on the stand-in libnvidia-ml (tests/fake_nvml.c,
# scripted by the file in $WB_FAKE_NVML), usaged, alignd, estimd and exportd. The GPU's energy
# in exportd is exactly what the stand-in's counter advanced; a shared GPU's active joules go to
# its processes by SM time; an exclusive GPU's active energy all goes to its one process (a
# process has one GPU series over all its GPUs, as in Kepler); a lost GPU leaves the other
# going; no library leaves powerd running without it.

load helper

setup() {
	RT=$BATS_TEST_TMPDIR/run
	PORT=$((20000 + RANDOM % 20000))
	mkdir -p "$RT"
	export WB_FAKE_NVML=$BATS_TEST_TMPDIR/nvml.txt
	LIB=$WB_BUILD/tests/libfake-nvml.so
}

teardown() { wb_kill_all; }

# nvml_script LINES...: the stand-in's answers from now on (replaced atomically).
nvml_script() {
	printf '%s\n' "$@" >"$WB_FAKE_NVML.tmp" && mv -f "$WB_FAKE_NVML.tmp" "$WB_FAKE_NVML"
}

scrape() { curl -sf "http://127.0.0.1:$PORT/metrics"; }

# metric_sum NAME [FILTER]: the sum of NAME's series whose line matches FILTER (awk regex),
# from $SNAP when set, else from a fresh scrape.
metric_sum() {
	{ if [ -n "${SNAP:-}" ]; then cat "$SNAP"; else scrape; fi; } |
		awk -v m="$1" -v f="${2:-}" 'index($0, m "{") == 1 && $0 ~ f { s += $NF } END { printf "%.6f\n", s }'
}

# is_value NAME FILTER VALUE: the sum is VALUE (as printed with 6 decimals).
is_value() {
	local v
	v=$(metric_sum "$1" "$2")
	echo "$1 $2: $v (want $3)"
	[ "$v" = "$3" ]
}

# The power messages on powerd's endpoint show gpu-0 with the processes of phase 2.
gpu_procs_published() {
	grep -q '"name":"gpu-0".*"gpu_procs":\[{"pid":'"$P1" "$BATS_TEST_TMPDIR/tap.log"
}

powerd_has_energy() {
	grep -q '"name":"gpu-0","zone":"gpu","path":"nvml:GPU-e2e-0","source":"nvml","energy_uj":'"$1"'[,}]' "$BATS_TEST_TMPDIR/tap.log"
}

# P2 got GPU energy: GPU 1's, as long as GPU 0's counter stands still.
p2_has_gpu1() {
	awk -v v="$(metric_sum kepler_process_gpu_joules_total "pid=\"$P2\"")" 'BEGIN { exit !(v > 0) }'
}

# GPU 1's total is past $tot.
gpu1_grew() {
	awk -v t="$tot" -v now="$(metric_sum kepler_node_gpu_joules_total 'gpu="1"')" 'BEGIN { exit !(now > t) }'
}

@test "GPU energy and its attribution end to end through the stand-in NVML" {
	[ "$(id -u)" -eq 0 ] || skip "needs root for usaged's eBPF (procfs's 10 ms ticks miss light processes in a slot)"
	wb_spawn busy1 python3 -c 'import time
while True:
    sum(range(20000)); time.sleep(0.01)'
	wb_spawn busy2 python3 -c 'import time
while True:
    sum(range(20000)); time.sleep(0.01)'
	P1=$PID_busy1 P2=$PID_busy2
	# Phase 1: no compute process; GPU 0 has an energy counter (constant), GPU 1 only power.
	nvml_script "gpu uuid=GPU-e2e-0 name=FakeH100 energy_mj=1000 power_mw=0" \
		"gpu uuid=GPU-e2e-1 name=FakeA10 energy_mj=- power_mw=40000 exclusive=1"
	wb_spawn powerd "$WB_BUILD/wattbus-powerd" --runtime_dir "$RT" --host gpuhost --interval 200ms \
		--stat_interval 1s --source nvml --nvml_library "$LIB"
	wb_tap tap "ipc://$RT/powerd.sock" power/
	wb_spawn usaged "$WB_BUILD/wattbus-usaged" --runtime_dir "$RT" --host gpuhost --interval 1s
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$RT"
	# GPU 1's idle power is configured; GPU 0's is learned (0 W: no process while it stood still).
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" --runtime_dir "$RT" --gpu_idle_w gpu-1=40
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" --runtime_dir "$RT" --listen "127.0.0.1:$PORT"
	wb_wait_for 60 is_value kepler_node_gpu_joules_total 'gpu="0"' 0.000000
	wb_wait_for 60 bash -c "curl -sf http://127.0.0.1:$PORT/metrics | grep -q 'kepler_process_cpu_seconds_total{.*pid=\"$P2\"'"
	run scrape
	assert_output --partial 'kepler_node_gpu_info{node_name="gpuhost",gpu="1",gpu_uuid="GPU-e2e-1",gpu_name="FakeA10",vendor="nvidia"} 1'
	refute_output --partial 'zone="gpu"'

	# Phase 2: P1 and P2 share GPU 0 by SM 3:1; P2 alone on the exclusive GPU 1, at 100 W.
	nvml_script "gpu uuid=GPU-e2e-0 name=FakeH100 energy_mj=1000 power_mw=0" \
		"gpu uuid=GPU-e2e-1 name=FakeA10 energy_mj=- power_mw=100000 exclusive=1" \
		"proc gpu=0 pid=$P1 sm=75" "proc gpu=0 pid=$P2 sm=25" "proc gpu=1 pid=$P2 sm=-"
	wb_wait_for 30 gpu_procs_published
	# GPU 1: once P2 has some of it, every later slot lists P2 (the slot in which the power rose
	# before a sample listed P2 left its rest unattributed). From here its active energy is P2's.
	# GPU 0's counter has not moved since phase 1, so P2's GPU joules so far are GPU 1's.
	wb_wait_for 30 p2_has_gpu1
	SNAP=$BATS_TEST_TMPDIR/snap0
	scrape >"$SNAP"
	act0=$(metric_sum kepler_node_gpu_active_joules_total 'gpu="1"')
	mine0=$(metric_sum kepler_process_gpu_joules_total "pid=\"$P2\"")
	SNAP=""
	# GPU 0's counter advances by 10 steps of 2 J, each seen by powerd before the next.
	local mj=1000
	for _ in $(seq 10); do
		mj=$((mj + 2000))
		nvml_script "gpu uuid=GPU-e2e-0 name=FakeH100 energy_mj=$mj power_mw=0" \
			"gpu uuid=GPU-e2e-1 name=FakeA10 energy_mj=- power_mw=100000 exclusive=1" \
			"proc gpu=0 pid=$P1 sm=75" "proc gpu=0 pid=$P2 sm=25" "proc gpu=1 pid=$P2 sm=-"
		wb_wait_for 30 powerd_has_energy "${mj}000"
	done
	# Exactly the 20 J the counter advanced, all of it active (no idle power seen above 0 W).
	wb_wait_for 60 is_value kepler_node_gpu_joules_total 'gpu="0"' 20.000000
	SNAP=$BATS_TEST_TMPDIR/snap
	scrape >"$SNAP"
	run metric_sum kepler_node_gpu_active_joules_total 'gpu="0"'
	assert_output 20.000000
	# GPU 0's 20 J 3:1 by SM time, to within a microjoule per slot: P1 (on GPU 0 only) 15 J
	p1=$(metric_sum kepler_process_gpu_joules_total "pid=\"$P1\"")
	echo "P1 $p1 J"
	awk -v a="$p1" 'BEGIN { exit !(a > 14.9999 && a < 15.0001) }'
	# GPU 1 (integrated power, exclusive, 40 W idle configured): active + idle = total, and since
	# the first snapshot P2 got GPU 1's active energy (but for the 1 uJ a slot's rounding of the
	# idle part may leave) and its 5 J of GPU 0's.
	tot=$(metric_sum kepler_node_gpu_joules_total 'gpu="1"')
	act=$(metric_sum kepler_node_gpu_active_joules_total 'gpu="1"')
	idle=$(metric_sum kepler_node_gpu_idle_joules_total 'gpu="1"')
	mine=$(metric_sum kepler_process_gpu_joules_total "pid=\"$P2\"")
	echo "GPU 1: total $tot active $act idle $idle; P2 $mine J on both GPUs"
	echo "GPU 1 since the first snapshot: active +$(awk -v a="$act" -v b="$act0" 'BEGIN { printf "%.6f", a - b }') J, P2 +$(awk -v a="$mine" -v b="$mine0" 'BEGIN { printf "%.6f", a - b }') J"
	awk -v t="$tot" -v a="$act" -v i="$idle" -v m="$mine" -v a0="$act0" -v m0="$mine0" 'BEGIN {
		d = a + i - t; if (d < 0) d = -d
		e = (a - a0) + 5 - (m - m0); if (e < 0) e = -e
		exit !(t > 0 && a > a0 && d < 0.000002 && e < 0.0001) }'
	SNAP=""

	# GPU 0 lost: powerd says so and counts it; GPU 1 goes on.
	nvml_script "gpu uuid=GPU-e2e-0 name=FakeH100 energy_mj=$mj power_mw=0 lost=1" \
		"gpu uuid=GPU-e2e-1 name=FakeA10 energy_mj=- power_mw=100000 exclusive=1" \
		"proc gpu=1 pid=$P2 sm=-"
	wb_wait_lines "$BATS_TEST_TMPDIR/powerd.log" 1 30 'GPU is lost'
	wb_wait_for 30 gpu1_grew
	wb_wait_for 30 bash -c "curl -sf http://127.0.0.1:$PORT/metrics | grep -q 'wattbus_stage_events_total{.*stage=\"powerd\".*name=\"read_errors\"} [1-9]'"
	run metric_sum kepler_node_gpu_joules_total 'gpu="0"'
	assert_output 20.000000
}

@test "no NVML library: powerd says why and publishes its other zones" {
	SYS=$BATS_TEST_TMPDIR/sys
	mkdir -p "$SYS/class/powercap/intel-rapl:0"
	echo package-0 >"$SYS/class/powercap/intel-rapl:0/name"
	echo 262143328850 >"$SYS/class/powercap/intel-rapl:0/max_energy_range_uj"
	echo 5000 >"$SYS/class/powercap/intel-rapl:0/energy_uj"
	wb_spawn powerd "$WB_BUILD/wattbus-powerd" --runtime_dir "$RT" --host gpuhost --interval 200ms \
		--stat_interval 1s --sysfs_root "$SYS" --source rapl,nvml \
		--nvml_library "$BATS_TEST_TMPDIR/none/libnvidia-ml.so.1"
	wb_tap tap "ipc://$RT/powerd.sock" power/
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 1 30 '"name":"package-0"'
	run cat "$BATS_TEST_TMPDIR/powerd.log"
	assert_output --partial "source nvml is not usable: cannot load $BATS_TEST_TMPDIR/none/libnvidia-ml.so.1"
	assert_output --partial "running (mode rapl)"
	refute_output --partial '"zone":"gpu"'
}

@test "gpu_idle_w: a bad entry is a configuration error that names the key" {
	run "$WB_BUILD/wattbus-estimd" -n --gpu_idle_w gpu=abc
	assert_failure 2
	assert_output --partial "gpu_idle_w: 'gpu=abc'"
	run "$WB_BUILD/wattbus-estimd" -n --gpu_idle_w gpu=17,gpu-1=20
	assert_success
}
