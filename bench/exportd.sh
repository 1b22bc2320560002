#!/bin/bash
# exportd: render time of /metrics with 10,000 processes, with and without gzip
# (in-process, bench/exportd_bench.c), then the real daemon fed through the bus
# with the same load: one scrape's latency with curl and scrapes per second
# under wrk, plain and gzip'd. Prints the figures.
# Lines "BENCH key=value" repeat the figures for bench/run.sh.
#   WB_BUILD=build bench/exportd.sh [PROCS [WRK_SECONDS]]   (WRK_SECONDS 0: no wrk runs)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${WB_BUILD:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
procs=${1:-10000}
secs=${2:-10}
cd "$root"
make -s BUILD="$build" "$build/wattbus-exportd" "$build/wattbus" >&2
mods=$(ls exportd/*.c | grep -v '/main\.c$' | sed "s|^|$build/|; s|\.c$|.o|")
mkdir -p "$build/bench"
# shellcheck disable=SC2046
cc -std=gnu11 -O2 -g -D_GNU_SOURCE -Ilib -I"$build/gen" $(pkg-config --cflags libczmq msgpack) \
	-o "$build/bench/exportd_bench" bench/exportd_bench.c $mods "$build/libwattbus.a" \
	$(make -s --no-print-directory libs-exportd)
"$build/bench/exportd_bench" "$procs" 1
"$build/bench/exportd_bench" "$procs" 2

tmp=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
"$build/wattbus-exportd" --runtime_dir "$tmp" --listen 127.0.0.1:0 --sub "ipc://$tmp/feed.sock" \
	--max_series 10000000 >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q 'port [0-9]' "$tmp/log" && break; sleep 0.05; done
port=$(grep -o 'port [0-9]*' "$tmp/log" | head -n 1 | cut -d' ' -f2)
url=http://127.0.0.1:$port/metrics
# 3 named processes + fillers; 2 zones (package, dram)
/usr/bin/python3 tests/bats/exportd_feed.py --procs $((procs - 3)) --slots 2 --start 1000000000000000000 |
	"$build/wattbus" pub "ipc://$tmp/feed.sock" 2>/dev/null
for _ in $(seq 200); do
	curl -s "$url" | grep -q '^wattbus_exportd_estimates_total{host="node-a"} 2$' && break
	sleep 0.05
done
echo "daemon: $procs processes x 2 zones fed through wattbus pub"
for enc in identity gzip; do
	curl -s -o /dev/null -H "Accept-Encoding: $enc" "$url"
	t=$(curl -s -o /dev/null -H "Accept-Encoding: $enc" -w '%{time_total} %{size_download}' "$url")
	render=$(curl -s "$url" | awk '/^wattbus_exportd_render_seconds/ {print $2}')
	printf '  one scrape, %-8s  %6.1f ms over loopback, %9s bytes\n' "$enc" "$(echo "$t" | awk '{print $1 * 1000}')" "${t#* }"
	echo "BENCH exportd.daemon.scrape_${enc}_ms=$(echo "$t" | awk '{print $1 * 1000}')"
	echo "BENCH exportd.daemon.scrape_${enc}_bytes=${t#* }"
done
echo "  (render of the previous scrape, as exportd measured it: ${render}s)"
# Memory across scrapes: the steady size after the scrapes above, then after 20 more of each
# encoding, and the peak (VmHWM): a scrape's buffers go back when its response is sent.
kib() { awk -v k="$1" '$1 == k":" { print $2 }' "/proc/$pid/status"; }
rss1=$(kib VmRSS)
for _ in $(seq 20); do
	curl -s -o /dev/null -H "Accept-Encoding: identity" "$url"
	curl -s -o /dev/null -H "Accept-Encoding: gzip" "$url"
done
rss2=$(kib VmRSS)
printf '  RSS %s KiB after the first scrapes, %s KiB after 40 more (%+d KiB); peak %s KiB\n' \
	"$rss1" "$rss2" $((rss2 - rss1)) "$(kib VmHWM)"
echo "BENCH exportd.daemon.rss_growth_40_scrapes_kib=$((rss2 - rss1))"
echo "BENCH exportd.daemon.hwm_kib=$(kib VmHWM)"
if [ "$secs" = 0 ]; then
	echo "  WRK_SECONDS 0: no wrk runs"
elif command -v wrk >/dev/null; then
	for enc in identity gzip; do
		rps=$(wrk -t1 -c4 -d"${secs}s" -H "Accept-Encoding: $enc" "$url" | awk '/Requests\/sec/ {print $2}')
		printf '  wrk -t1 -c4 -d%ss, %-8s  %8s scrapes/s\n' "$secs" "$enc" "$rps"
	done
	rps=$(wrk -t1 -c4 -d"${secs}s" "http://127.0.0.1:$port/healthz" | awk '/Requests\/sec/ {print $2}')
	printf '  wrk -t1 -c4 -d%ss, /healthz   %8s requests/s\n' "$secs" "$rps"
else
	echo "  wrk is not installed: no scrapes/s figure"
fi
echo "  exportd RSS after the run: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
echo "BENCH exportd.daemon.rss_kib=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)"
