#!/bin/bash
# The five daemons together on this machine, three benchmarks (bench/run.sh runs
# them; each prints figures and "BENCH key=value" lines):
#
#   pipeline.sh overhead N     CPU (user + sys, all threads, from
#                              /proc/PID/task/*/schedstat) and peak RSS (VmHWM) of
#                              each stage at 1 s slots (powerd and usaged at 1 s) with
#                              N live processes: N sleepers (bench/usaged_sleepers.c,
#                              started after usaged) and BUSY busy ones (stress-ng
#                              --cpu-load 10), over DURATION seconds, exportd scraped
#                              every SCRAPE_EVERY seconds as Prometheus would.
#   pipeline.sh freshness K    slot end (the usage message's t) -> the slot on /metrics,
#                              over K slots, powerd and usaged at USAGE_INTERVAL.
#   pipeline.sh scale N        one slot of N synthetic processes through alignd,
#                              estimd and exportd (bench/scale.py plays powerd and usaged).
#   pipeline.sh floor N        the bus alone: five stand-ins (bench/bus_floor.c) carrying
#                              the overhead run's messages over czmq and nothing else,
#                              measured as the overhead run measures the stages.
#
# powerd reads a fake 8-zone powercap tree (bench/fake_rapl.py advances it once a
# second: measured mode, as on a server with RAPL); usaged runs in bpf mode as
# root with BTF, else procfs (auto). Sockets and logs in a temporary directory.
#
# Environment: WB_BUILD (build folder), DURATION (60), WARMUP (5), BUSY (3),
# SCRAPE_EVERY (15), USAGE_INTERVAL (200ms), KEEP=1 keeps the directory,
# SMAPS_DIR=DIR saves each stage's /proc/PID/smaps and resident page frames at the
# end of an overhead window (bench/smaps.py DIR sums them per mapping: where the PSS goes).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
B=${WB_BUILD:-$root/build}
case $B in /*) ;; *) B=$root/$B ;; esac
PY=/usr/bin/python3
DURATION=${DURATION:-60}
WARMUP=${WARMUP:-5}
BUSY=${BUSY:-3}
SCRAPE_EVERY=${SCRAPE_EVERY:-15}
USAGE_INTERVAL=${USAGE_INTERVAL:-200ms}
what=${1:-}
arg=${2:-}
case $what in overhead | freshness | scale | floor) ;; *)
	echo "usage: bench/pipeline.sh overhead NPROCS | freshness SLOTS | scale NPROCS | floor NPROCS" >&2
	exit 2
	;;
esac
for s in powerd usaged alignd estimd exportd; do
	[ -x "$B/wattbus-$s" ] || {
		echo "bench/pipeline.sh: $B/wattbus-$s is missing: build first (make BUILD=...)" >&2
		exit 2
	}
done
MODEL=$(ls "$root"/data/models/*.json 2>/dev/null | head -n 1)
T=$(mktemp -d /tmp/wb-pipeline-bench.XXXXXX)
# The fake powercap tree on tmpfs where there is one, as sysfs is in memory: on a disk
# file system, reopening a replaced file can wait for the journal (a wake-up of powerd
# per zone and second that a real tree does not cost).
SYS=$(mktemp -d /dev/shm/wb-pipeline-sys.XXXXXX 2>/dev/null) || SYS=$T/sys
RT=$T/run
mkdir -p "$RT"
pids=()
declare -A pid_of
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ "${KEEP:-0}" = 1 ]; then echo "kept $T ($SYS)" >&2; else rm -rf "$T" "$SYS"; fi
}
trap cleanup EXIT
trap 'exit 143' INT TERM # so that cleanup runs when bench/run.sh's timeout or Ctrl-C stops us

spawn() { # NAME CMD...: in the background, log in $T/NAME.log
	local name=$1
	shift
	"$@" >"$T/$name.log" 2>&1 &
	pid_of[$name]=$!
	pids+=($!)
}

# stage NAME FLAGS...: one of the five, with the common flags
stage() {
	local s=$1
	shift
	spawn "$s" "$B/wattbus-$s" --runtime_dir "$RT" --host bench "$@"
}

wait_log() { # NAME REGEX SECONDS
	local i
	for i in $(seq $(($3 * 10))); do
		grep -qsE "$2" "$T/$1.log" && return 0
		kill -0 "${pid_of[$1]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench/pipeline.sh: $1 did not log /$2/ within $3 s:" >&2
	tail -n 5 "$T/$1.log" >&2
	return 1
}

exportd_start() { # FLAGS...: sets URL
	stage exportd --listen 127.0.0.1:0 "$@"
	wait_log exportd 'port [0-9]+' 10
	URL=http://127.0.0.1:$(grep -oE 'port [0-9]+' "$T/exportd.log" | head -n 1 | cut -d' ' -f2)/metrics
}

# The whole pipeline on the fake tree; powerd and usaged at $1.
pipeline_start() {
	local ival=$1 period
	period=$($PY -c "import sys; v = sys.argv[1]; print(float(v[:-2]) / 1000 if v.endswith('ms') else float(v[:-1]))" "$ival")
	spawn writer "$PY" "$here/fake_rapl.py" "$SYS" --period "$period" --phase "$($PY -c "print($period / 2)")"
	for _ in $(seq 50); do [ -e "$SYS/class/powercap/intel-rapl:1:2/energy_uj" ] && break; sleep 0.1; done
	stage powerd --sysfs_root "$SYS" --msr_root "$T/none" --source rapl --interval "$ival"
	stage usaged --interval "$ival"
	stage alignd
	stage estimd ${MODEL:+--model "$MODEL"}
	exportd_start
	wait_log usaged 'running \(mode' 30
	# ready when the first estimate is on /metrics
	for _ in $(seq 150); do
		curl -sf "$URL" | grep -qE '^wattbus_exportd_estimates_total\{host="bench"\} [1-9]' && return 0
		sleep 0.2
	done
	echo "bench/pipeline.sh: no estimate on $URL within 30 s; logs:" >&2
	tail -n 3 "$T"/*.log >&2
	return 1
}

cpu_ns() { # all threads of a pid, ns on CPU (user + sys)
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s }'
}

ctxt() { # context switches (voluntary + involuntary) of all threads of a pid
	cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { s += $2 } END { printf "%d\n", s }'
}

minflt() { # minor page faults of a pid (all threads): what the kernel does for its heap
	awk '{ print $10 }' /proc/"$1"/stat 2>/dev/null || echo 0
}

syscw() { # write system calls of a pid (all threads)
	awk '/^syscw:/ { print $2 }' /proc/"$1"/io 2>/dev/null || echo 0
}

modes() { # "stage=mode ..." from wattbus_stage_info, once every stage has sent a stat message
	local m i
	for i in $(seq 30); do
		m=$(modes_now)
		[ "$(wc -w <<<"$m")" -ge 5 ] && break
		sleep 0.5
	done
	echo "$m"
}

modes_now() {
	curl -sf "$URL" | $PY -c '
import re, sys
m = {}
for line in sys.stdin:
    if line.startswith("wattbus_stage_info{"):
        s = re.search(r"stage=\"([^\"]*)\"", line); o = re.search(r"mode=\"([^\"]*)\"", line)
        if s and o: m[s.group(1)] = o.group(1)
print(" ".join("%s=%s" % kv for kv in sorted(m.items())))'
}

STAGES="powerd usaged alignd estimd exportd"
declare -A c_start x_start w_start f_start
window=0

# window_start / window_end: a measuring window over the five processes named by
# the stages (pid_of); window_table KEY then prints what each used in it.
window_start() {
	local s
	for s in $STAGES; do
		c_start[$s]=$(cpu_ns "${pid_of[$s]}")
		x_start[$s]=$(ctxt "${pid_of[$s]}")
		f_start[$s]=$(minflt "${pid_of[$s]}")
		w_start[$s]=$(syscw "${pid_of[$s]}")
	done
	window_t0=$(date +%s%N)
}

window_end() {
	window=$(($(date +%s%N) - window_t0))
}

# window_table KEY: CPU (all threads), RSS, peak RSS, PSS, wake-ups and writes of each
# stage over the window, the totals, and "BENCH pipeline.KEY.STAGE.*" lines.
window_table() {
	local n=$1 s total=0 hwm_total=0 rss_total=0 pss_total=0 x_total=0 w_total=0 hwm pss
	printf "%-8s %9s %8s %9s %9s %9s %6s %9s %9s\n" stage cpu_ms "%core" rss_MiB peak_MiB pss_MiB peak/rss wakeup/s writes/s
	for s in $STAGES; do
		local p=${pid_of[$s]} secs cpu_d x_d w_d rss
		cpu_d=$(($(cpu_ns "$p") - c_start[$s]))
		x_d=$(($(ctxt "$p") - x_start[$s]))
		w_d=$(($(syscw "$p") - w_start[$s]))
		hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$p/status")
		rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$p/status")
		# PSS: shared library pages split between the processes that map them
		pss=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup")
		total=$((total + cpu_d))
		hwm_total=$((hwm_total + hwm))
		rss_total=$((rss_total + rss))
		pss_total=$((pss_total + pss))
		x_total=$((x_total + x_d))
		w_total=$((w_total + w_d))
		secs=$(awk -v w=$window 'BEGIN { print w / 1e9 }')
		awk -v s="$s" -v c=$cpu_d -v w=$window -v r="$rss" -v h="$hwm" -v p="$pss" -v x=$x_d -v y=$w_d -v t="$secs" \
			'BEGIN { printf "%-8s %9.1f %8.3f %9.1f %9.1f %9.1f %6.2fx %9.1f %9.1f\n", s, c / 1e6, c / w * 100, r / 1024, h / 1024, p / 1024, h / r, x / t, y / t }'
		echo "BENCH pipeline.$n.$s.cpu_pct=$(awk -v c=$cpu_d -v w=$window 'BEGIN { printf "%.4f", c / w * 100 }')"
		echo "BENCH pipeline.$n.$s.hwm_kib=$hwm"
		echo "BENCH pipeline.$n.$s.rss_kib=$rss"
		echo "BENCH pipeline.$n.$s.pss_kib=$pss"
		echo "BENCH pipeline.$n.$s.wakeups_per_s=$(awk -v x=$x_d -v t="$secs" 'BEGIN { printf "%.1f", x / t }')"
		echo "BENCH pipeline.$n.$s.writes_per_s=$(awk -v y=$w_d -v t="$secs" 'BEGIN { printf "%.1f", y / t }')"
		echo "BENCH pipeline.$n.$s.minflt_per_s=$(awk -v f=$(($(minflt "$p") - f_start[$s])) -v t="$secs" 'BEGIN { printf "%.1f", f / t }')"
	done
	awk -v c=$total -v w=$window -v r=$rss_total -v h=$hwm_total -v p=$pss_total -v x=$x_total -v y=$w_total \
		'BEGIN { t = w / 1e9; printf "%-8s %9.1f %8.3f %9.1f %9.1f %9.1f %6s %9.1f %9.1f\n", "total", c / 1e6, c / w * 100, r / 1024, h / 1024, p / 1024, "", x / t, y / t }'
	echo "(rss: VmRSS at the end, steady; peak: VmHWM; pss: Pss of /proc/PID/smaps_rollup at the end, shared pages split between the processes mapping them; wakeup/s: voluntary + involuntary context switches of all threads; writes/s: write system calls, /proc/PID/io syscw)"
	echo "BENCH pipeline.$n.total.cpu_pct=$(awk -v c=$total -v w=$window 'BEGIN { printf "%.4f", c / w * 100 }')"
	echo "BENCH pipeline.$n.total.hwm_kib=$hwm_total"
	echo "BENCH pipeline.$n.total.pss_kib=$pss_total"
	echo "BENCH pipeline.$n.total.rss_kib=$rss_total"
	echo "BENCH pipeline.$n.total.wakeups_per_s=$(awk -v x=$x_total -v w=$window 'BEGIN { printf "%.1f", x / (w / 1e9) }')"
	echo "BENCH pipeline.$n.total.writes_per_s=$(awk -v y=$w_total -v w=$window 'BEGIN { printf "%.1f", y / (w / 1e9) }')"
	echo "(sum of PSS at the end, shared libraries counted once: $(awk -v k=$pss_total 'BEGIN { printf "%.1f", k / 1024 }') MiB)"
	echo "BENCH pipeline.$n.seconds=$((window / 1000000000))"
}

# load_start N: the overhead run's machine: N sleepers and BUSY busy processes.
load_start() {
	cc -O2 -o "$T/sleepers" "$here/usaged_sleepers.c"
	spawn busy stress-ng --cpu "$BUSY" --cpu-load 10 --timeout $((DURATION + WARMUP + 120))s
	spawn sleepers "$T/sleepers" "$1"
	wait_log sleepers ready 120
}

overhead() {
	local n=$1
	pipeline_start 1s
	load_start "$n"
	sleep "$WARMUP"
	local w0 w1
	window_start
	w0=$(cpu_ns "${pid_of[writer]}")
	local end=$((SECONDS + DURATION)) scrapes=0 series
	while [ $SECONDS -lt $end ]; do
		sleep $((SCRAPE_EVERY < end - SECONDS ? SCRAPE_EVERY : end - SECONDS))
		[ $SECONDS -lt $end ] && curl -sf -o /dev/null -H 'Accept-Encoding: gzip' "$URL" && scrapes=$((scrapes + 1))
	done
	window_end
	echo "pipeline overhead: $n sleepers + $BUSY busy processes, $(ls /proc | grep -c '^[0-9]') processes on the machine, $((window / 1000000)) ms window, $scrapes scrapes"
	echo "modes: $(modes)"
	series=$(curl -sf "$URL" | awk '/^wattbus_exportd_series\{level="process"\}/ { print $2 }')
	echo "process series on /metrics: ${series:-?}"
	window_table "$n"
	[ -z "${SMAPS_DIR:-}" ] || $PY "$here/smaps.py" --save "$SMAPS_DIR" $(for s in $STAGES; do echo "$s=${pid_of[$s]}"; done)
	w1=$(cpu_ns "${pid_of[writer]}")
	echo "(not counted: the fake RAPL writer used $(awk -v c=$((w1 - w0)) 'BEGIN { printf "%.1f", c / 1e6 }') ms)"
	echo "BENCH pipeline.$n.machine_procs=$(ls /proc | grep -c '^[0-9]')"
	echo "BENCH pipeline.$n.modes=$(modes | tr ' ' ',')"
	echo "BENCH pipeline.$n.process_series=${series:-0}"
}

freshness() {
	pipeline_start "$USAGE_INTERVAL"
	$PY "$here/freshness.py" --estimd "ipc://$RT/estimd.sock" --metrics "$URL" --host bench --slots "$1"
	echo "BENCH freshness.interval=$USAGE_INTERVAL"
	echo "BENCH freshness.modes=$(modes | tr ' ' ',')"
}

scale() {
	local feed="ipc://$T/feed-power.sock,ipc://$T/feed-usage.sock"
	stage alignd --sub "$feed" --stat_interval 1s
	stage estimd --stat_interval 1s ${MODEL:+--model "$MODEL"}
	# Only the estimates counter on the page: the prober polls it, and rendering
	# 100,000 processes would be timed instead (the render rows measure that).
	exportd_start --sub "ipc://$RT/estimd.sock" --metrics_allow 'wattbus_exportd_estimates_total'
	$PY "$here/scale.py" --power "ipc://$T/feed-power.sock" --usage "ipc://$T/feed-usage.sock" \
		--alignd "ipc://$RT/alignd.sock" --estimd "ipc://$RT/estimd.sock" --metrics "$URL" --procs "$1" \
		--pids "alignd=${pid_of[alignd]},estimd=${pid_of[estimd]},exportd=${pid_of[exportd]}"
	for s in alignd estimd exportd; do
		echo "BENCH scale.$s.hwm_kib=$(awk '/VmHWM/ { print $2 }' "/proc/${pid_of[$s]}/status")"
	done
}

# The bus alone: five stand-ins (bench/bus_floor.c) wired as the stages are,
# sending what they send at 1 s slots (sizes of a 1,000-process run's
# messages: usaged sends what changed), with a stat message after every fifth,
# and doing nothing else, on a machine loaded as the overhead run's (N
# sleepers, BUSY busy). What the window shows is the floor under the overhead
# run's CPU and PSS with this bus on this machine.
floor() {
	cc -O2 -o "$T/bus_floor" "$here/bus_floor.c" -lczmq -lzmq
	local f=$T/bus_floor e=ipc://$RT/floor
	spawn exportd "$f" --pub "$e-exportd.sock" --topic stat/floor --size 1024 --on estimate/ --per 5 \
		--sub "$e-powerd.sock" --sub "$e-usaged.sock" --sub "$e-alignd.sock" --sub "$e-estimd.sock" \
		--sub "$e-exportd.sock" --subscribe estimate/ --subscribe stat/
	spawn estimd "$f" --pub "$e-estimd.sock" --topic estimate/floor --size 5000 --on aligned/ --stat-every 5 \
		--sub "$e-alignd.sock" --subscribe aligned/
	spawn alignd "$f" --pub "$e-alignd.sock" --topic aligned/floor --size 3300 --on usage/ --stat-every 5 \
		--sub "$e-powerd.sock" --sub "$e-usaged.sock" --subscribe power/ --subscribe usage/
	spawn usaged "$f" --pub "$e-usaged.sock" --topic usage/floor --size 2500 --every 1000 --stat-every 5
	spawn powerd "$f" --pub "$e-powerd.sock" --topic power/floor --size 1152 --every 1000 --stat-every 5
	local s
	for s in $STAGES; do wait_log "$s" ready 10; done
	load_start "$1"
	sleep "$WARMUP"
	window_start
	sleep "$DURATION"
	window_end
	echo "the bus alone: five bare czmq processes carrying the pipeline's messages at 1 s slots, $1 sleepers + $BUSY busy processes, $((window / 1000000)) ms window"
	window_table floor
}

"$what" "$arg"
