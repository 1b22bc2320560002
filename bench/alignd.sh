#!/bin/bash
# alignd throughput: slots per second with 10,000 processes in every usage
# message (engine alone, and decode + align + encode). Builds its small C
# program against the build folder's objects and prints the figures.
#   WB_BUILD=build bench/alignd.sh [SLOTS [PROCS]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${WB_BUILD:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
cd "$root"
make -s BUILD="$build" "$build/wattbus-alignd" >&2
mods=$(ls alignd/*.c | grep -v '/main\.c$' | sed "s|^|$build/|; s|\.c$|.o|")
mkdir -p "$build/bench"
# shellcheck disable=SC2046
cc -std=gnu11 -O2 -g -D_GNU_SOURCE -Ilib -I"$build/gen" $(pkg-config --cflags libczmq msgpack) \
	-o "$build/bench/alignd_bench" bench/alignd_bench.c $mods "$build/libwattbus.a" \
	$(make -s --no-print-directory libs-alignd)
exec "$build/bench/alignd_bench" "${1:-300}" "${2:-10000}"
