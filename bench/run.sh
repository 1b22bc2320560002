#!/bin/bash
# `make bench`: every benchmark of bench/, then one markdown table of the
# figures next to the budgets of DESIGN.md and, where a peer exists, the
# peer's figure measured in the same run on the same machine, with the ratio.
# Asserts nothing about time: it reports. Exits 1 only when a benchmark could
# not run at all (the table says which, the log says why).
#
# Output: the table on stdout and in $WB_BUILD/bench/report.md; each
# benchmark's own output in $WB_BUILD/bench/logs/NAME.log; the raw figures
# (BENCH key=value lines) in $WB_BUILD/bench/figures.txt.
#
# Environment (see bench/README.md): WB_BUILD, DURATION (60: seconds per
# pipeline overhead run), BENCH_ONLY (names of the benchmarks to run, e.g.
# "scale freshness"), POWERD_SECONDS (30), USAGED_WINDOW (20), FRESH_SLOTS (100),
# SCALE_PROCS (100000), USAGED_ROUNDS (9), USAGE_INTERVAL (200ms, for freshness).
# BENCH_QUICK=1: every benchmark at small sizes, a few seconds each (about 2
# minutes in all), to check that each one runs and prints its figures (CI); the
# figures of a quick run say nothing about the budgets.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
B=${WB_BUILD:-$root/build}
case $B in /*) ;; *) B=$root/$B ;; esac
export WB_BUILD=$B
OUT=$B/bench
LOGS=$OUT/logs
mkdir -p "$LOGS"
FIG=$OUT/figures.txt
STATUS=$OUT/status.txt
: >"$FIG"
: >"$STATUS"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	: "${DURATION:=5}" "${POWERD_SECONDS:=3}" "${POWERD_10MS_SECONDS:=2}" "${USAGED_WINDOW:=3}" "${USAGED_ROUNDS:=1}"
	: "${FRESH_SLOTS:=10}" "${SCALE_PROCS:=2000}" "${BIG_PROCS:=2000}" "${EXPORTD_PROCS:=1000}" "${LOSS_SECONDS:=4}"
	export WARMUP=${WARMUP:-1} SCRAPE_EVERY=${SCRAPE_EVERY:-2} LOOPS=${LOOPS:-10000}
fi
DURATION=${DURATION:-60}
BIG_PROCS=${BIG_PROCS:-10000}
export DURATION
ALL="powerd usaged alignd estimd exportd callgrind overhead1000 floor overhead10000 scale freshness loss"
ONLY=${BENCH_ONLY:-$ALL}
started=$(date +%s)

{
	echo "BENCH machine.cpus=$(nproc)"
	echo "BENCH machine.cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "BENCH machine.kernel=$(uname -r)"
	echo "BENCH machine.load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "BENCH machine.date=$(date -u +%Y-%m-%dT%H:%MZ)"
	echo "BENCH machine.revision=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
	echo "BENCH machine.root=$([ "$(id -u)" -eq 0 ] && echo yes || echo no)"
	echo "BENCH machine.duration=$DURATION"
	echo "BENCH machine.quick=${BENCH_QUICK:-0}"
	echo "BENCH machine.big_procs=$BIG_PROCS"
	echo "BENCH machine.exportd_procs=${EXPORTD_PROCS:-10000}"
} | sed 's/^BENCH //' >>"$FIG"

# Ctrl-C or a TERM: the running benchmark's group gets it too (timeout passes it on).
current=
interrupted() {
	echo "bench: interrupted" >&2
	[ -n "$current" ] && kill -TERM "$current" 2>/dev/null
	wait
	exit 130
}
trap interrupted INT TERM

# run NAME TIMEOUT_S COMMAND...: one benchmark, its output to its log, its
# BENCH lines to the figures, its exit status to the status file.
run() {
	local name=$1 limit=$2 t0 rc
	shift 2
	case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
	t0=$(date +%s)
	echo "bench: $name (at most ${limit} s; log $LOGS/$name.log)" >&2
	# timeout runs it in a process group of its own and signals the whole group:
	# no daemon or sleeper outlives a benchmark that ran over.
	timeout --kill-after 10 "$limit" "$@" >"$LOGS/$name.log" 2>&1 &
	current=$!
	wait "$current"
	rc=$?
	current=
	sed -n 's/^BENCH //p' "$LOGS/$name.log" >>"$FIG"
	echo "$name $rc $(($(date +%s) - t0))" >>"$STATUS"
	if [ $rc -ne 0 ]; then
		echo "bench: $name FAILED (exit $rc); last lines of its log:" >&2
		tail -n 5 "$LOGS/$name.log" | sed 's/^/    /' >&2
	fi
}

run powerd 180 env SECONDS_1S="${POWERD_SECONDS:-30}" SECONDS_10MS="${POWERD_10MS_SECONDS:-10}" "$here/powerd.sh"
run usaged 400 env SIZES="$BIG_PROCS" ROUNDS="${USAGED_ROUNDS:-9}" WINDOW="${USAGED_WINDOW:-20}" "$here/usaged.sh"
run alignd 120 "$here/alignd.sh" 10 "${SCALE_PROCS:-100000}"
run estimd 120 "$here/estimd.sh" "${SCALE_PROCS:-100000}" 21
run exportd 240 bash -c '"$1/exportd.sh" "$4" 0 && "$2/bench/exportd_bench" "$3" 1 5' _ "$here" "$B" "${SCALE_PROCS:-100000}" "${EXPORTD_PROCS:-10000}"
run callgrind 900 "$here/callgrind.sh" "${SCALE_PROCS:-100000}"
run overhead1000 $((DURATION + 180)) "$here/pipeline.sh" overhead 1000
run floor $((DURATION + 180)) "$here/pipeline.sh" floor 1000
run overhead10000 $((DURATION + 240)) "$here/pipeline.sh" overhead "$BIG_PROCS"
run scale 180 "$here/pipeline.sh" scale "${SCALE_PROCS:-100000}"
run freshness 300 "$here/pipeline.sh" freshness "${FRESH_SLOTS:-100}"
run loss 120 /usr/bin/python3 "$here/loss.py" "$B" --seconds "${LOSS_SECONDS:-12}"

{
	echo "machine.load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "machine.seconds=$(($(date +%s) - started))"
} >>"$FIG"
[ "$ONLY" = "$ALL" ] || export BENCH_PARTIAL=1
/usr/bin/python3 "$here/report.py" "$FIG" "$STATUS" >"$OUT/report.md"
rc=$?
cat "$OUT/report.md"
echo "bench: report in $OUT/report.md, logs in $LOGS/" >&2
exit $rc
