#!/usr/bin/env bats
# The five stages end to end: a fake powercap tree advanced by the test and a
# busy process; then with no meter (model mode); then with powerd replaced by a
# script piped into `wattbus pub`.

load helper

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root for usaged's eBPF"
	RT=$BATS_TEST_TMPDIR/run
	PORT=$((20000 + RANDOM % 20000))
	mkdir -p "$RT"
	SYS=$BATS_TEST_TMPDIR/sys
	MODEL=$(ls "$WB_ROOT"/data/models/*.json | head -n 1)
}

teardown() { wb_kill_all; }

# A fake RAPL tree (flat, as /sys/class/powercap lists zones): package-0 at 30 W and its
# dram subzone at 5 W, advanced every 100 ms.
fake_meter() {
	local p=$SYS/class/powercap/intel-rapl:0 d=$SYS/class/powercap/intel-rapl:0:0
	mkdir -p "$p" "$d"
	echo package-0 >"$p/name"
	echo dram >"$d/name"
	for z in "$p" "$d"; do
		echo 262143328850 >"$z/max_energy_range_uj"
		echo 0 >"$z/energy_uj"
	done
	cat >"$BATS_TEST_TMPDIR/meter.sh" <<-EOF
		start=\$(date +%s%N)
		while :; do
			now=\$(date +%s%N)
			echo \$(( (now - start) * 30 / 1000 )) >"$p/e.t" && mv "$p/e.t" "$p/energy_uj"
			echo \$(( (now - start) * 5 / 1000 )) >"$d/e.t" && mv "$d/e.t" "$d/energy_uj"
			sleep 0.1
		done
	EOF
	wb_spawn meter bash "$BATS_TEST_TMPDIR/meter.sh"
}

start_pipeline() { # extra powerd flags, or "none" to leave powerd out
	if [ "${1:-}" != none ]; then
		wb_spawn powerd "$WB_BUILD/wattbus-powerd" --runtime_dir "$RT" --host e2e --interval 200ms "$@"
	fi
	wb_spawn usaged "$WB_BUILD/wattbus-usaged" --runtime_dir "$RT" --host e2e --interval 1s
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$RT"
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" --runtime_dir "$RT" --model "$MODEL"
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" --runtime_dir "$RT" --listen "127.0.0.1:$PORT"
}

scrape() { curl -sf "http://127.0.0.1:$PORT/metrics"; }

# Sum of a metric's values over series matching a label filter (awk regex on the line),
# from a fresh scrape, or from the snapshot file $SNAP when set (several sums of one scrape).
metric_sum() {
	{ if [ -n "${SNAP:-}" ]; then cat "$SNAP"; else scrape; fi; } |
		awk -v m="$1" -v f="${2:-}" 'index($0, m "{") == 1 && $0 ~ f { s += $NF } END { printf "%.6f\n", s }'
}

busy_joules() {
	metric_sum kepler_process_cpu_joules_total 'comm="stress-ng-cpu".*zone="package"'
}

# busy_grows: the busy process's joules grow past what they were ($first, above 0).
busy_grows() {
	local now
	now=$(busy_joules)
	echo "busy process: $first J then $now J"
	awk -v a="$first" -v b="$now" 'BEGIN { exit !(b > a && a > 0) }'
}

# watts_near W: the node's package power (the last slot's energy over its length) is W within 5 %.
# Waited for: the first slots start before the meter's first sample.
watts_near() {
	awk -v w="$(metric_sum kepler_node_cpu_watts 'zone="package"')" -v want="$1" \
		'BEGIN { print "node package watts: " w; exit !(w > 0.95 * want && w < 1.05 * want) }'
}

# Per zone: active + idle == total, and the processes' sum <= active (floats in joules).
check_node_sums() {
	local zone=$1
	local total active idle procs
	# One scrape for all four sums: slots keep arriving between scrapes.
	SNAP=$BATS_TEST_TMPDIR/snapshot
	scrape >"$SNAP"
	total=$(metric_sum kepler_node_cpu_joules_total "zone=\"$zone\"")
	active=$(metric_sum kepler_node_cpu_active_joules_total "zone=\"$zone\"")
	idle=$(metric_sum kepler_node_cpu_idle_joules_total "zone=\"$zone\"")
	procs=$(metric_sum kepler_process_cpu_joules_total "zone=\"$zone\"")
	echo "zone $zone: total $total active $active idle $idle processes $procs"
	SNAP=""
	awk -v t="$total" -v a="$active" -v i="$idle" -v p="$procs" 'BEGIN {
		if (t <= 0) exit 1
		d = a + i - t; if (d < 0) d = -d
		if (d > 0.001) exit 2          # exact in uJ; allow the text rounding
		if (p > a + 0.001) exit 3
	}'
}

@test "measured: the busy process's joules grow; active + idle = total; processes <= active" {
	fake_meter
	start_pipeline --sysfs_root "$SYS" --source rapl
	wb_spawn busy stress-ng --cpu 1 --cpu-load 80 --timeout 300s
	wb_wait_for 90 bash -c "curl -sf http://127.0.0.1:$PORT/metrics | grep -q 'kepler_process_cpu_joules_total{.*comm=\"stress-ng-cpu\".*zone=\"package\"'"
	first=$(busy_joules)
	wb_wait_for 60 busy_grows
	check_node_sums package
	check_node_sums dram
	# The exe label: the binary the process runs (stress-ng's workers are forks that rename
	# themselves, so comm and exe differ), read by usaged from /proc/PID/exe.
	# One series for the worker (other stress-ng runs on the machine have their own pids).
	exe=$(readlink -f "$(command -v stress-ng)")
	# the worker: the child of the test's stress-ng that has a process series (stress-ng may
	# have more than one child; a loaded machine can list them in any order)
	worker_series() {
		local pid
		scrape >"$BATS_TEST_TMPDIR/exe.scrape"
		for pid in $(pgrep -P "$PID_busy"); do
			if grep -qF "kepler_process_cpu_joules_total{node_name=\"e2e\",pid=\"$pid\",comm=\"stress-ng-cpu\",exe=\"$exe\"," "$BATS_TEST_TMPDIR/exe.scrape"; then
				worker=$pid
				return 0
			fi
		done
		return 1
	}
	wb_wait_for 60 worker_series
	run bash -c "curl -sf http://127.0.0.1:$PORT/metrics | grep -F ',pid=\"$worker\",' | grep -c '^kepler_process_cpu_joules_total{.*zone=\"package\"'"
	assert_output 1
	run scrape
	assert_output --partial 'kepler_node_cpu_joules_total{node_name="e2e",zone="package",path="'"$SYS"'/class/powercap/intel-rapl:0"}'
	# The meter's 30 W shows as node power. (The fake meter's file lags its clock by up to a
	# write period plus scheduling, so a slot on a loaded machine may read off; one reads right.)
	wb_wait_for 30 watts_near 30
}

@test "model mode: no meter, the same sums hold and the busy process's joules grow" {
	start_pipeline --sysfs_root "$BATS_TEST_TMPDIR/empty" --msr_root "$BATS_TEST_TMPDIR/empty"
	wb_spawn busy stress-ng --cpu 1 --cpu-load 80 --timeout 300s
	wb_wait_for 90 bash -c "curl -sf http://127.0.0.1:$PORT/metrics | grep -q 'kepler_process_cpu_joules_total{.*comm=\"stress-ng-cpu\".*zone=\"package\"'"
	first=$(busy_joules)
	wb_wait_for 60 busy_grows
	check_node_sums package
	grep -q "mode model" "$BATS_TEST_TMPDIR/estimd.log"
}

@test "powerd replaced by a script through wattbus pub drives the same pipeline" {
	start_pipeline none
	wb_spawn meter bash -c "'$WB_ROOT/examples/meter-to-bus.py' --host e2e --zone package --watts 40 --interval 0.5 | '$WATTBUS' pub --src meter-to-bus --wait 30s 'ipc://$RT/powerd.sock'"
	wb_wait_for 90 bash -c "curl -sf http://127.0.0.1:$PORT/metrics | grep -q 'kepler_node_cpu_joules_total{node_name=\"e2e\",zone=\"package\"'"
	# 40 W from the script: measured mode, and node power reads 40 W.
	wb_wait_for 30 watts_near 40
	check_node_sums package
	grep -q "mode measured" "$BATS_TEST_TMPDIR/estimd.log"
}
