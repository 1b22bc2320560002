#!/bin/bash
# usaged's overhead, printed as figures:
#  1. context-switch microbenchmark (perf bench sched pipe, else stress-ng --switch; pinned
#     to one CPU) without and with usaged's eBPF attached, alternating: the slowdown; and
#     the switch program's own time per call from kernel.bpf_stats (which adds its own
#     clock reads: an upper bound). A third arm of each round runs it with a program on
#     the same hook that does nothing (bench/switch_floor.bpf.c): the floor, what the
#     hook's dispatch alone costs on this machine;
#  2. usaged's own CPU time (all threads, ns from /proc/PID/task/*/schedstat), RSS and peak RSS
#     at 1,000 and 10,000 live processes, in bpf mode and in procfs mode (per-process
#     /proc/<pid>/stat, the method Kepler >= 0.10 uses), at a 1 s interval: the ratio.
# Needs root and kernel BTF for the bpf figures (procfs figures are printed anyway).
#
# Usage: WB_BUILD=build bench/usaged.sh   (ROUNDS=5 LOOPS=50000 WINDOW=20 SIZES="1000 10000" to change)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
B=${WB_BUILD:-$here/../build}
case $B in /*) ;; *) B=$here/../$B ;; esac
U=$B/wattbus-usaged
[ -x "$U" ] || {
	echo "bench/usaged.sh: build first (make BUILD=...; WB_BUILD=$B)" >&2
	exit 2
}
ROUNDS=${ROUNDS:-5}
LOOPS=${LOOPS:-50000}
WINDOW=${WINDOW:-20}
SIZES=${SIZES:-1000 10000}
CPU=$(($(nproc) - 1))
T=$(mktemp -d /tmp/wb-usaged-bench.XXXXXX)
pids=()
stats_old=
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	# kernel.bpf_stats_enabled back as it was, should the run stop while it is on
	[ -z "$stats_old" ] || sysctl -qw kernel.bpf_stats_enabled="$stats_old"
	rm -rf "$T"
}
trap cleanup EXIT

bpf_ok=1
if [ "$(id -u)" -ne 0 ] || [ ! -r /sys/kernel/btf/vmlinux ]; then
	bpf_ok=0
	echo "note: not root or no BTF: bpf figures skipped"
fi
cc -O2 -o "$T/sleepers" "$here/usaged_sleepers.c"

# bg_start LOG REGEX CMD...: CMD in the background, its output in LOG, until a line of LOG
# matches REGEX (10 s at most, and not after CMD ended); sets BG_PID
bg_start() {
	local log=$1 re=$2
	shift 2
	"$@" >"$log" 2>&1 &
	BG_PID=$!
	pids+=("$BG_PID")
	for _ in $(seq 100); do
		grep -qE "$re" "$log" && return 0
		kill -0 "$BG_PID" 2>/dev/null || break
		sleep 0.1
	done
	cat "$log" >&2
	bg_stop "$BG_PID"
	return 1
}

# bg_stop PID: stop what bg_start started, and forget it
bg_stop() {
	local p kept=()
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	for p in "${pids[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
	pids=("${kept[@]}")
}

# start_usaged MODE: usaged in the background; sets UPID
start_usaged() {
	bg_start "$T/u.log" "running \(mode" "$U" --mode "$1" --interval 1s --pub "ipc://$T/u.sock" --runtime_dir "$T" || return 1
	UPID=$BG_PID
}

stop_usaged() {
	bg_stop "$UPID"
}

# cpu_ns PID: CPU time of all its threads, ns
cpu_ns() {
	local s=0 t
	for t in /proc/"$1"/task/*/schedstat; do
		read -r v _ <"$t"
		s=$((s + v))
	done
	echo "$s"
}

median() {
	sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# one context-switch run on one CPU: microseconds per round trip (two switches)
switch_run() {
	if command -v perf >/dev/null && perf bench sched pipe -l 1000 >/dev/null 2>&1; then
		taskset -c "$CPU" perf bench sched pipe -l "$LOOPS" 2>/dev/null | awk '/usecs\/op/ { print $1 }'
	else
		taskset -c "$CPU" stress-ng --switch 1 --switch-ops "$LOOPS" --metrics-brief 2>&1 |
			awk '/nanosecs per context switch/ { for (i = 1; i <= NF; i++) if ($i == "nanosecs") print $(i - 1) / 1000 * 2 }'
	fi
}

# The empty program and its loader; sets floor_ok
floor_ok=0
if [ $bpf_ok -eq 1 ]; then
	if clang -g -O2 -target bpf -I"$here/../bpf" -c "$here/switch_floor.bpf.c" -o "$T/switch_floor.bpf.o" 2>"$T/floor.err" &&
		cc -O2 -o "$T/switch_floor" "$here/switch_floor.c" -lbpf 2>>"$T/floor.err"; then
		floor_ok=1
	else
		echo "note: the empty switch program did not build (clang, libbpf-dev): no floor figure; $(head -n 1 "$T/floor.err")"
	fi
fi

# start_floor: the empty program attached, in the background; sets FPID and FLOOR_ID
start_floor() {
	bg_start "$T/floor.out" '^attached' "$T/switch_floor" "$T/switch_floor.bpf.o" || return 1
	FPID=$BG_PID
	FLOOR_ID=$(awk '/^attached/ { print $2 }' "$T/floor.out")
}

stop_floor() {
	bg_stop "$FPID"
}

echo "== context switches: $ROUNDS rounds of $LOOPS round trips, alternating without and with usaged (bpf)$([ $floor_ok = 1 ] && echo ", and with an empty program on its hook")"
if [ $bpf_ok -eq 1 ]; then
	: >"$T/without"
	: >"$T/with"
	: >"$T/empty"
	for r in $(seq "$ROUNDS"); do
		switch_run >>"$T/without"
		start_usaged bpf
		sleep 1
		switch_run >>"$T/with"
		stop_usaged
		if [ $floor_ok = 1 ] && start_floor; then
			switch_run >>"$T/empty"
			stop_floor
		fi
	done
	wo=$(median <"$T/without")
	wi=$(median <"$T/with")
	echo "without usaged: $(tr '\n' ' ' <"$T/without")us/op -> median $wo us"
	echo "with usaged:    $(tr '\n' ' ' <"$T/with")us/op -> median $wi us"
	awk -v a="$wo" -v b="$wi" 'BEGIN { printf "slowdown: %.2f %% (ratio %.4f; budget: docs/ARCHITECTURE.md)\n", (b / a - 1) * 100, b / a }'
	lo=$(sort -g "$T/without" | head -n 1)
	li=$(sort -g "$T/with" | head -n 1)
	awk -v a="$lo" -v b="$li" 'BEGIN { printf "best runs: %.3f -> %.3f us: %.2f %%\n", a, b, (b / a - 1) * 100 }'
	if [ -s "$T/empty" ]; then
		we=$(median <"$T/empty")
		echo "empty program:  $(tr '\n' ' ' <"$T/empty")us/op -> median $we us"
		awk -v a="$wo" -v b="$we" 'BEGIN { printf "empty program slowdown: %.2f %% (the hook alone)\n", (b / a - 1) * 100 }'
	fi

	# The programs' own cost per switch, from the kernel's BPF run-time statistics.
	cat >"$T/pinfo.c" <<'C'
#include <bpf/bpf.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	struct bpf_prog_info info = {0};
	__u32 len = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(atoi(argv[1]));
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
		return 1;
	printf("%llu %llu\n", (unsigned long long)info.run_cnt, (unsigned long long)info.run_time_ns);
	return 0;
}
C
	# per_call ID NAME: one switch run with kernel.bpf_stats on, NAME's calls and ns per call
	per_call() {
		local c0 t0 c1 t1
		sysctl -qw kernel.bpf_stats_enabled=1
		read -r c0 t0 < <("$T/pinfo" "$1")
		switch_run >/dev/null
		read -r c1 t1 < <("$T/pinfo" "$1")
		sysctl -qw kernel.bpf_stats_enabled="$stats_old"
		awk -v n=$((c1 - c0)) -v t=$((t1 - t0)) -v name="$2" 'BEGIN { printf "%s: %d calls, %.0f ns per call (kernel.bpf_stats, its own clock reads included)\n", name, n, t / n }'
	}
	if cc -o "$T/pinfo" "$T/pinfo.c" -lbpf 2>/dev/null && command -v bpftool >/dev/null; then
		stats_old=$(sysctl -n kernel.bpf_stats_enabled)
		start_usaged bpf
		# usaged's own switch program (on_switch, or on_switch_counters where counters are
		# read), found through the links it holds: other usaged instances may run beside it.
		id=$(for f in /proc/"$UPID"/fdinfo/*; do awk '/^prog_id:/ { print $2 }' "$f"; done |
			while read -r p; do bpftool -j prog show id "$p"; echo; done | python3 -c 'import json, sys
for line in sys.stdin:
    if line.strip() and json.loads(line).get("name", "").startswith("on_switch"):
        print(json.loads(line)["id"])')
		if [ -n "$id" ]; then
			per_call "$id" on_switch
		else
			echo "note: usaged's switch program not found among its links: no per-call figure"
		fi
		stop_usaged
		if [ $floor_ok = 1 ] && start_floor; then
			per_call "$FLOOR_ID" empty_switch
			stop_floor
		fi
		stats_old=
	fi
fi

echo
echo "== usaged CPU at a 1 s interval, ${WINDOW} s windows (processes started after usaged, so they are in its map)"
printf "%-8s %8s %12s %10s %10s %10s\n" mode procs cpu_ms "%core" rss_MiB peak_MiB
for n in $SIZES; do
	for mode in bpf procfs; do
		[ "$mode" = bpf ] && [ $bpf_ok -eq 0 ] && continue
		start_usaged "$mode"
		"$T/sleepers" "$n" >"$T/sleepers.out" &
		spid=$!
		pids+=("$spid")
		for _ in $(seq 600); do
			grep -q ready "$T/sleepers.out" && break
			sleep 0.1
		done
		sleep 3 # a few intervals to take them in
		c0=$(cpu_ns "$UPID")
		sleep "$WINDOW"
		c1=$(cpu_ns "$UPID")
		rss=$(awk '/VmRSS/ { print $2 }' "/proc/$UPID/status")
		hwm=$(awk '/VmHWM/ { print $2 }' "/proc/$UPID/status")
		ms=$(((c1 - c0) / 1000000))
		pct=$(awk -v ns=$((c1 - c0)) -v w="$WINDOW" 'BEGIN { printf "%.3f", ns / (w * 1e9) * 100 }')
		printf "%-8s %8d %12d %10s %10.1f %10.1f\n" "$mode" "$n" "$ms" "$pct" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$(awk -v k="$hwm" 'BEGIN { print k / 1024 }')"
		echo "$mode $n $((c1 - c0))" >>"$T/cpu"
		kill "$spid"
		wait "$spid" 2>/dev/null || true
		stop_usaged
		sleep 1
	done
done
if [ $bpf_ok -eq 1 ]; then
	for n in $SIZES; do
		awk -v n="$n" '$2 == n { v[$1] = $3 } END { if (v["bpf"] > 0) printf "procs %d: procfs / bpf CPU = %.1f\n", n, v["procfs"] / v["bpf"] }' "$T/cpu"
	done
fi
