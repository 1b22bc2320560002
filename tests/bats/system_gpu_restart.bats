#!/usr/bin/env bats
# GPU figures that a restart must not move: a GPU's learned idle power (the lowest power of a slot
# with no compute process) survives a powerd restart and an estimd restart, so idle and the
# processes' GPU joules are what an uninterrupted run gives. The stand-in NVML (tests/fake_nvml.c)
# has GPU 0 with a driver energy counter (it goes on across powerd's restart) and GPU 1 with
# power only (integrated by powerd from its start), both idling at 70 W and at 100 W with one
# process. The slot in which powerd was down held only part of a slot's energy: estimd learned
# it as the idle power (66.3 -> 62.8 W on a real GPU, 0 W for a power-only one), and an estimd
# restart forgot what it had learned.

load helper

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root for usaged's eBPF (procfs's 10 ms ticks miss light processes in a slot)"
	RT=$BATS_TEST_TMPDIR/run
	PORT=$((20000 + RANDOM % 20000))
	mkdir -p "$RT"
	export WB_FAKE_NVML=$BATS_TEST_TMPDIR/nvml.txt
	LIB=$WB_BUILD/tests/libfake-nvml.so
}

teardown() { wb_kill_all; }

# gpus MW [PROC_LINES...]: both GPUs at MW milliwatts from now on. GPU 0's counter goes on from
# where it is (its energy so far is kept in $E0_MJ, $SINCE); it advances every 100 ms, so that a
# sample read late on powerd's 200 ms grid still reads the energy at its grid time (a counter
# read continuously would make each slot's power noisy by the lateness, and a minimum of noisy
# powers drifts down on a loaded machine: a fault of its own, not the restart's).
gpus() {
	local mw=$1 now
	shift
	now=$(date +%s.%N)
	if [ -n "${SINCE:-}" ]; then
		E0_MJ=$(awk -v e="$E0_MJ" -v mw="$MW" -v a="$SINCE" -v b="$now" 'BEGIN { printf "%d", e + mw * (b - a) }')
	fi
	SINCE=$now MW=$mw
	printf '%s\n' "gpu uuid=GPU-r-0 name=FakeH100 energy_mj=$E0_MJ power_mw=$mw since=$SINCE update_ms=100" \
		"gpu uuid=GPU-r-1 name=FakeA10 energy_mj=- power_mw=$mw" "$@" >"$WB_FAKE_NVML.tmp"
	mv -f "$WB_FAKE_NVML.tmp" "$WB_FAKE_NVML"
}

scrape() { curl -sf "http://127.0.0.1:$PORT/metrics"; }

# metric NAME FILTER: the sum of NAME's series whose line matches FILTER (from $SNAP if set).
metric() {
	{ if [ -n "${SNAP:-}" ]; then cat "$SNAP"; else scrape; fi; } |
		awk -v m="$1" -v f="$2" 'index($0, m "{") == 1 && $0 ~ f { s += $NF } END { printf "%.6f\n", s }'
}

# near VALUE WANT REL: within REL (a fraction) of WANT
near() {
	awk -v v="$1" -v w="$2" -v r="$3" 'BEGIN { d = v - w; if (d < 0) d = -d; ok = d <= r * w
		printf "%s vs %s (+-%g %%): %s\n", v, w, r * 100, ok ? "ok" : "OFF"; exit !ok }'
}

idle_learned() {
	near "$(metric kepler_node_gpu_idle_watts 'gpu="0"')" 70 0.01 &&
		near "$(metric kepler_node_gpu_idle_watts 'gpu="1"')" 70 0.01
}

# both GPUs' total grew by at least $1 J since $G0 and $G1
grew() {
	awk -v a="$(metric kepler_node_gpu_joules_total 'gpu="0"')" -v b="$(metric kepler_node_gpu_joules_total 'gpu="1"')" \
		-v a0="$G0" -v b0="$G1" -v d="$1" 'BEGIN { exit !(a >= a0 + d && b >= b0 + d) }'
}

# the process has GPU energy (one series over all its GPUs, as Kepler labels it)
p_on_gpus() {
	awk -v a="$(metric kepler_process_gpu_joules_total "pid=\"$P\"")" 'BEGIN { exit !(a > 0) }'
}

start_powerd() {
	wb_spawn "powerd$1" "$WB_BUILD/wattbus-powerd" --runtime_dir "$RT" --host gpuhost --interval 200ms \
		--stat_interval 1s --source nvml --nvml_library "$LIB"
}

start_estimd() {
	wb_spawn "estimd$1" "$WB_BUILD/wattbus-estimd" --runtime_dir "$RT"
}

# stop NAME: SIGTERM to the process NAME started, and wait for it to exit
stop() {
	local pid
	pid=$(eval echo "\$PID_$1")
	kill -TERM "$pid"
	wb_wait_for 30 bash -c "! kill -0 $pid 2>/dev/null"
}

@test "a powerd and an estimd restart move no GPU figure: learned idle kept, processes' joules as uninterrupted" {
	wb_spawn busy python3 -c 'import time
while True:
    sum(range(20000)); time.sleep(0.01)'
	P=$PID_busy
	E0_MJ=1000000
	gpus 70000
	start_powerd 1
	wb_spawn usaged "$WB_BUILD/wattbus-usaged" --runtime_dir "$RT" --host gpuhost --interval 1s
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$RT"
	start_estimd 1
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" --runtime_dir "$RT" --listen "127.0.0.1:$PORT"
	# idle at 70 W, learned from the slots with no compute process
	wb_wait_for 60 idle_learned
	echo "learned: $(metric kepler_node_gpu_idle_watts gpu=\"0\") $(metric kepler_node_gpu_idle_watts gpu=\"1\")" >&3

	# powerd restarts while the GPUs idle: GPU 0's counter goes on (bridged), GPU 1's integral
	# starts again (a gap): the slot of the gap holds part of a slot's energy.
	G0=$(metric kepler_node_gpu_joules_total 'gpu="0"') G1=$(metric kepler_node_gpu_joules_total 'gpu="1"')
	stop powerd1
	wb_wait_for 30 bash -c "[ \$(grep -c 'stopping on' '$BATS_TEST_TMPDIR/powerd1.log') -ge 1 ]"
	start_powerd 2
	wb_wait_for 60 grew 700
	run idle_learned
	echo "$output"
	assert_success

	# 100 W with the process on both GPUs: 30 W is its, 70 W idle
	gpus 100000 "proc gpu=0 pid=$P sm=50" "proc gpu=1 pid=$P sm=50"
	wb_wait_for 60 p_on_gpus
	# estimd restarts while the process runs (no slot to learn idle from): it resumes what it
	# learned from its state file
	stop estimd1
	G0=$(metric kepler_node_gpu_joules_total 'gpu="0"') G1=$(metric kepler_node_gpu_joules_total 'gpu="1"')
	start_estimd 2
	wb_wait_lines "$BATS_TEST_TMPDIR/estimd2.log" 1 30 "learned GPU idle of 2 zones"
	# from after its first estimate (which also brings in, as node energy only, the slots published
	# while it was down: no process gets a share of those): 250 J is more than the one 1 s slot
	# of estimd1 that exportd may still have taken in after G0 was read
	wb_wait_for 60 grew 250
	SNAP=$BATS_TEST_TMPDIR/snap0
	scrape >"$SNAP"
	for g in 0 1; do
		eval "tot0_$g=$(metric kepler_node_gpu_joules_total "gpu=\"$g\"")"
		eval "idle0_$g=$(metric kepler_node_gpu_idle_joules_total "gpu=\"$g\"")"
	done
	mine0=$(metric kepler_process_gpu_joules_total "pid=\"$P\"")
	SNAP=""
	G0=$tot0_0 G1=$tot0_1
	wb_wait_for 60 grew 1000
	SNAP=$BATS_TEST_TMPDIR/snap1
	scrape >"$SNAP"
	run idle_learned
	echo "$output"
	assert_success
	# as an uninterrupted run splits 100 W: 70 % idle, 30 % the process's (an estimd that
	# forgot the learned idle gave it all 100 %)
	all=0
	for g in 0 1; do
		tot=$(metric kepler_node_gpu_joules_total "gpu=\"$g\"")
		idle=$(metric kepler_node_gpu_idle_joules_total "gpu=\"$g\"")
		eval "t0=\$tot0_$g i0=\$idle0_$g"
		echo "GPU $g: +$(awk -v a="$tot" -v b="$t0" 'BEGIN { print a - b }') J, idle +$(awk -v a="$idle" -v b="$i0" 'BEGIN { print a - b }') J"
		near "$(awk -v a="$idle" -v b="$i0" 'BEGIN { print a - b }')" "$(awk -v a="$tot" -v b="$t0" 'BEGIN { print 0.7 * (a - b) }')" 0.01
		all=$(awk -v s="$all" -v a="$tot" -v b="$t0" 'BEGIN { print s + a - b }')
	done
	# the process's one GPU series (both GPUs): 30 % of both GPUs' energy
	mine=$(metric kepler_process_gpu_joules_total "pid=\"$P\"")
	echo "process +$(awk -v a="$mine" -v b="$mine0" 'BEGIN { print a - b }') J of $all J"
	near "$(awk -v a="$mine" -v b="$mine0" 'BEGIN { print a - b }')" "$(awk -v a="$all" 'BEGIN { print 0.3 * a }')" 0.01
}
