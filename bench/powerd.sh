#!/bin/bash
# powerd's cost per sample and its sampling jitter, with 8 zones (a fake
# two-socket Intel powercap tree: package, core, uncore, dram per socket) at a
# 1 s and a 10 ms interval. CPU time comes from powerd's own stat messages
# (getrusage, microseconds; the default stat interval of 5 s, so its stat
# messages are included) and, as a cross-check, /proc/PID/stat (clock ticks).
# Lateness is powerd's own measure (wake-up after the grid time); t->tap is the
# time from a sample's grid time to its arrival at a subscriber.
# Peer: during the 1 s run, Debian's prometheus-node-exporter reads the same
# fake tree (--path.sysfs, only its rapl collector) and is scraped once a second
# with curl; its CPU time per scrape (all threads, /proc/PID/task/*/schedstat,
# ns) is printed next to powerd's per sample (PEER=0 leaves it out).
# Beside the 1 s run, the bus alone (bench/bus_floor.c): a 1 s timer that sends a
# message of the same size and reads nothing, its CPU per message printed as the
# floor under powerd's (what powerd's wake-up and send cost before any reading).
# Lines "BENCH key=value" repeat the figures for bench/run.sh.
#
# Usage: WB_BUILD=build bench/powerd.sh   (SECONDS_1S=30 SECONDS_10MS=10 PEER=1 to change the runs)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
B=${WB_BUILD:-$here/../build}
PD=$B/wattbus-powerd
WB=$B/wattbus
[ -x "$PD" ] && [ -x "$WB" ] || {
	echo "bench/powerd.sh: build first (make BUILD=...; WB_BUILD=$B)" >&2
	exit 2
}
S1=${SECONDS_1S:-30}
S10=${SECONDS_10MS:-10}
PEER=${PEER:-1}
NE=$(command -v prometheus-node-exporter || true)
T=$(mktemp -d /tmp/wb-powerd-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT

zone() {
	mkdir -p "$T/sys/class/powercap/$1"
	echo "$2" >"$T/sys/class/powercap/$1/name"
	echo 262143328850 >"$T/sys/class/powercap/$1/max_energy_range_uj"
	echo "$3" >"$T/sys/class/powercap/$1/energy_uj"
}
for s in 0 1; do
	zone "intel-rapl:$s" "package-$s" $((s * 1000 + 1))
	zone "intel-rapl:$s:0" core $((s * 1000 + 2))
	zone "intel-rapl:$s:1" uncore $((s * 1000 + 3))
	zone "intel-rapl:$s:2" dram $((s * 1000 + 4))
done

ticks() { # utime + stime of a pid, in clock ticks
	awk '{print $14 + $15}' "/proc/$1/stat"
}

cpu_ns() { # CPU time of all threads of a pid, ns (schedstat: finer than clock ticks)
	cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { print s }'
}

# The peer: node-exporter on the same tree, only the rapl collector (and no
# go_*/process_* metrics of its own, the cheapest it gets). Sets NE_PID, NE_URL.
peer_start() {
	local port
	port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$NE" --path.sysfs="$T/sys" --collector.disable-defaults --collector.rapl \
		--web.disable-exporter-metrics --web.listen-address="127.0.0.1:$port" >"$T/ne.log" 2>&1 &
	NE_PID=$!
	pids+=("$NE_PID")
	NE_URL=http://127.0.0.1:$port/metrics
	for _ in $(seq 50); do
		curl -sf -o /dev/null "$NE_URL" && break
		sleep 0.1
	done
	[ "$(curl -sf "$NE_URL" | grep -c '^node_rapl_.*_joules_total')" -eq 8 ] || {
		echo "node-exporter does not read the 8 zones: $(tail -3 "$T/ne.log")" >&2
		return 1
	}
}

run_one() {
	local interval=$1 secs=$2 name=$3
	local ep=ipc://$T/$name.sock
	"$WB" tap --time "$ep" >"$T/$name.tap" 2>/dev/null &
	local tap=$!
	pids+=("$tap")
	sleep 0.3
	# the samples are counted from the first and the last stat message: a short run needs them
	# more often than the default 5 s
	local stat_every=5s
	[ "$secs" -lt 15 ] && stat_every=1s
	"$PD" --sysfs_root "$T/sys" --msr_root "$T/none" --pub "$ep" --runtime_dir "$T" --host bench \
		--interval "$interval" --stat_interval "$stat_every" --log_level warning 2>"$T/$name.log" &
	local pd=$!
	pids+=("$pd")
	# The bus alone beside it (1 s run): a 1 s timer sending a message of the same size,
	# with a stat message every fifth, to a subscriber, and nothing read (bench/bus_floor.c)
	local floor=0 fpid fsink f0 f1
	if [ "$name" = one_s ]; then
		if cc -O2 -o "$T/bus_floor" "$here/bus_floor.c" -lczmq -lzmq 2>"$T/floor.err"; then
			# a stat message with every fifth message, as powerd's at 5 s (every one at 1 s)
			"$T/bus_floor" --pub "ipc://$T/floor.sock" --topic power/floor --size 1152 --every 1000 \
				--stat-every "${stat_every%s}" >"$T/floor.log" 2>&1 &
			fpid=$!
			"$T/bus_floor" --pub "ipc://$T/floor-sink.sock" --topic none --size 1 --sub "ipc://$T/floor.sock" \
				>/dev/null 2>&1 &
			fsink=$!
			pids+=("$fpid" "$fsink")
			floor=1
		else
			echo "note: bench/bus_floor.c did not build: no floor figure; $(head -n 1 "$T/floor.err")"
		fi
	fi
	sleep 1
	local peer=0 n0 n1 scrapes=0
	if [ "$name" = one_s ] && [ "$PEER" = 1 ] && [ -n "$NE" ] && peer_start; then
		peer=1
		curl -sf -o /dev/null "$NE_URL" # its first scrape sets things up: not counted
		sleep 0.5
		n0=$(cpu_ns "$NE_PID")
	fi
	local t0 k0
	k0=$(ticks "$pd")
	t0=$(date +%s.%N)
	[ $floor = 0 ] || f0=$(cpu_ns "$fpid")
	if [ $peer = 1 ]; then
		# one scrape a second, as powerd reads once a second, in the same window
		local end=$((SECONDS + secs))
		while [ $SECONDS -lt $end ]; do
			curl -sf -o /dev/null "$NE_URL" && scrapes=$((scrapes + 1))
			sleep 1
		done
		n1=$(cpu_ns "$NE_PID")
		echo "node-exporter (rapl collector only, same 8 zones): $scrapes scrapes, CPU $(((n1 - n0) / scrapes / 1000)) us/scrape; rss $(awk '/VmRSS/ { printf "%.1f MiB", $2 / 1024 }' "/proc/$NE_PID/status")"
		echo "BENCH peer.node_exporter.us_per_scrape=$(((n1 - n0) / scrapes / 1000))"
		echo "BENCH peer.node_exporter.rss_kib=$(awk '/VmRSS/ { print $2 }' "/proc/$NE_PID/status")"
		kill "$NE_PID"
	else
		sleep "$secs"
		if [ "$name" = one_s ] && [ "$PEER" = 1 ]; then
			echo "node-exporter: not installed or not working here; no peer figure"
		fi
	fi
	local k1 t1
	k1=$(ticks "$pd")
	t1=$(date +%s.%N)
	if [ $floor = 1 ]; then
		f1=$(cpu_ns "$fpid")
		awk -v c=$((f1 - f0)) -v a="$t0" -v b="$t1" 'BEGIN { n = b - a; printf "the bus alone (bench/bus_floor.c: a 1 s timer sending a message of the same size, nothing read): %.1f us per message\nBENCH powerd.floor.us_per_tick=%.1f\n", c / n / 1e3, c / n / 1e3 }'
		kill "$fpid" "$fsink"
		wait "$fpid" "$fsink" 2>/dev/null || true
	fi
	kill -TERM "$pd"
	wait "$pd" || true
	sleep 0.3
	kill "$tap" 2>/dev/null || true
	wait "$tap" 2>/dev/null || true
	/usr/bin/python3 - "$T/$name.tap" "$interval" "$k0" "$k1" "$t0" "$t1" "$(getconf CLK_TCK)" <<'EOF'
import json, sys
path, interval, k0, k1, t0, t1, hz = sys.argv[1:8]
stats, power = [], []
for line in open(path):
    m = json.loads(line)
    if m["topic"].startswith("stat/"):
        stats.append(m["msg"])
    elif m["topic"].startswith("power/"):
        power.append(m)
first, last = stats[0], stats[-1]  # the first one seen (a subscriber may miss the very first) and the one at stop
c = lambda s, n: next((x["value"] for x in s.get("counters", []) if x["name"] == n), 0)
samples = c(last, "samples") - c(first, "samples")
cpu_ns = last["cpu_ns"] - first["cpu_ns"]
per = cpu_ns / samples if samples else float("nan")
ival = {"1s": 1e9, "10ms": 1e7}[interval]
share = per / ival * 100
proc_per = (int(k1) - int(k0)) / int(hz) * 1e9 / ((float(t1) - float(t0)) * 1e9 / ival)
e2e = sorted(m["recv_ns"] - m["msg"]["t"] for m in power)
pct = lambda p: e2e[min(len(e2e) - 1, int(p / 100 * len(e2e)))] / 1e3
zones = len(power[-1]["msg"]["zones"]) if power else 0
print(f"interval {interval:>4}: {samples:5d} samples of {zones} zones; CPU {per / 1e3:7.1f} us/sample "
      f"= {share:.4f} % of one core (/proc/PID/stat: {proc_per / 1e3:.0f} us/sample, 1/{hz} s ticks); "
      f"rss {last['rss_bytes'] / 1048576:.1f} MiB")
print(f"BENCH powerd.{interval}.us_per_sample={per / 1e3:.1f}")
print(f"BENCH powerd.{interval}.samples={samples}")
print(f"BENCH powerd.{interval}.rss_kib={last['rss_bytes'] // 1024}")
print(f"BENCH powerd.{interval}.tap_p50_us={pct(50):.0f}")
print(f"BENCH powerd.{interval}.tap_p99_us={pct(99):.0f}")
print(f"               lateness mean {c(last, 'lateness_mean_ns') / 1e3:.1f} us, max {c(last, 'lateness_max_ns') / 1e3:.1f} us, "
      f"missed {c(last, 'samples_missed')}; t->tap p50 {pct(50):.0f} us, p99 {pct(99):.0f} us, max {e2e[-1] / 1e3:.0f} us")
EOF
}

echo "powerd bench: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
run_one 1s "$S1" one_s
run_one 10ms "$S10" ten_ms
