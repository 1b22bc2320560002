#!/bin/bash
# valgrind on every stage (not part of make check: minutes, and valgrind is slow):
# record a short bus session of the pipeline on a fake meter, then run each
# stage under `valgrind --leak-check=full --error-exitcode=9`: powerd on the
# fake meter and usaged in procfs mode (the sources), alignd, estimd and
# exportd fed by `wattbus replay` of the recording (and exportd scraped), each
# stopped with SIGTERM. Prints one line per stage and exits non-zero when
# valgrind reports an error or a leak in any of them.
#
#   WB_BUILD=build tests/valgrind_replay.sh [SECONDS]
set -u
B=${WB_BUILD:-build}
B=$(cd "$B" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
secs=${1:-6}
T=$(mktemp -d /tmp/wb-valgrind.XXXXXX)
RT=$T/run
mkdir -p "$RT"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
}
trap cleanup EXIT
bg() { # LOG cmd...
	local log=$1
	shift
	"$@" >"$T/$log.log" 2>&1 &
	pids+=($!)
}
COMMON=(--runtime_dir "$RT" --host vg --stat_interval 500ms)
MODEL=$(ls "$here"/../data/models/*.json | head -n 1)

# 1. A session to record: the real pipeline on a fake meter.
touch "$T/meter.on"
bg meter /usr/bin/python3 "$here/bats/system_fake_meter.py" "$T/sys" "$T/meter.on" 40 8
sleep 0.5
bg powerd "$B/wattbus-powerd" "${COMMON[@]}" --sysfs_root "$T/sys" --msr_root "$T/none" --source rapl --interval 250ms
bg usaged "$B/wattbus-usaged" "${COMMON[@]}" --mode procfs --interval 500ms
bg alignd "$B/wattbus-alignd" "${COMMON[@]}"
bg estimd "$B/wattbus-estimd" "${COMMON[@]}" --model "$MODEL" --train_min 2 --train_every 4 --train_window 20
for s in powerd usaged alignd estimd; do
	bg "rec-$s" "$B/wattbus" record --duration "${secs}s" "ipc://$RT/$s.sock" "$T/$s.rec"
done
sleep $((secs + 1))
cleanup
pids=()
for s in powerd usaged alignd estimd; do
	printf '%-8s recorded %s bytes\n' "$s" "$(stat -c %s "$T/$s.rec")"
done

VG=(valgrind --leak-check=full --error-exitcode=9 --errors-for-leak-kinds=definite,possible
	--show-leak-kinds=definite,possible --track-fds=no --num-callers=30)
status=0
# run_vg STAGE: wait for the stage under valgrind (stopped by the caller with SIGTERM), report.
report() {
	local s=$1 pid=$2
	wait "$pid"
	local rc=$?
	local summary
	summary=$(grep -E "ERROR SUMMARY|definitely lost|possibly lost|in use at exit" "$T/vg-$s.log" | sed 's/^==[0-9]*== //' | tr '\n' ';')
	printf '%-8s exit %s: %s\n' "$s" "$rc" "$summary"
	[ "$rc" -eq 0 ] || status=1
}

# 2. Each stage under valgrind.
VRT=$T/vrun
mkdir -p "$VRT"
VC=(--runtime_dir "$VRT" --host vg --stat_interval 500ms)
touch "$T/meter.on"
bg meter /usr/bin/python3 "$here/bats/system_fake_meter.py" "$T/sys" "$T/meter.on" 40 8
"${VG[@]}" "$B/wattbus-powerd" "${VC[@]}" --sysfs_root "$T/sys" --msr_root "$T/none" --source rapl --interval 250ms \
	>"$T/vg-powerd.log" 2>&1 &
p=$!
sleep "$secs"
kill -TERM $p
report powerd $p

"${VG[@]}" "$B/wattbus-usaged" "${VC[@]}" --mode procfs --interval 500ms >"$T/vg-usaged.log" 2>&1 &
p=$!
sleep "$secs"
kill -TERM $p
report usaged $p

"${VG[@]}" "$B/wattbus-alignd" "${VC[@]}" --max_skew 0 --sub "ipc://$T/in-power.sock,ipc://$T/in-usage.sock" \
	>"$T/vg-alignd.log" 2>&1 &
p=$!
"$B/wattbus" replay --speed 4 --wait 30s "$T/powerd.rec" "ipc://$T/in-power.sock" >"$T/replay-p.log" 2>&1 &
r1=$!
"$B/wattbus" replay --speed 4 --wait 30s "$T/usaged.rec" "ipc://$T/in-usage.sock" >"$T/replay-u.log" 2>&1 &
r2=$!
wait $r1 $r2
sleep 1
kill -TERM $p
report alignd $p

"${VG[@]}" "$B/wattbus-estimd" "${VC[@]}" --model "$MODEL" --train_min 2 --train_every 4 --train_window 20 \
	--model_out "$T/trained.json" --sub "ipc://$T/in-aligned.sock" >"$T/vg-estimd.log" 2>&1 &
p=$!
"$B/wattbus" replay --speed 4 --wait 30s "$T/alignd.rec" "ipc://$T/in-aligned.sock" >"$T/replay-a.log" 2>&1
sleep 1
kill -TERM $p
report estimd $p

"${VG[@]}" "$B/wattbus-exportd" "${VC[@]}" --listen 127.0.0.1:0 \
	--sub "ipc://$T/in-est.sock,ipc://$T/in-stat.sock" >"$T/vg-exportd.log" 2>&1 &
p=$!
"$B/wattbus" replay --speed 4 --wait 30s "$T/estimd.rec" "ipc://$T/in-est.sock" >"$T/replay-e.log" 2>&1 &
r1=$!
"$B/wattbus" replay --speed 4 --wait 30s "$T/powerd.rec" "ipc://$T/in-stat.sock" >"$T/replay-s.log" 2>&1 &
r2=$!
for _ in $(seq 100); do
	port=$(grep -o 'port [0-9]*' "$T/vg-exportd.log" | head -n 1 | cut -d' ' -f2)
	[ -n "$port" ] && break
	sleep 0.2
done
wait $r1 $r2
for _ in 1 2 3; do curl -s --compressed -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/metrics" >/dev/null; done
curl -s "http://127.0.0.1:$port/metrics" | grep -c '^kepler_node_cpu_joules_total' | sed 's/^/exportd  node series on \/metrics: /'
kill -TERM $p
report exportd $p

echo "logs in $T"
trap - EXIT
cleanup
exit $status
