#!/bin/bash
# Instructions (callgrind's Ir) for one slot of N processes through alignd,
# estimd and exportd as each daemon handles it, without the sockets: alignd
# decodes the usage frame, aligns and encodes the aligned frame; estimd decodes
# that, attributes and encodes the estimate; exportd decodes the estimate and
# applies it. Each in-process bench marks its slot (bench/bench.h); everything
# else (building the input, the timed runs) is not counted. Instruction counts
# do not move with the machine's load, unlike milliseconds.
#   WB_BUILD=build bench/callgrind.sh [PROCS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
B=${WB_BUILD:-$root/build}
case $B in /*) ;; *) B=$root/$B ;; esac
export WB_BUILD=$B
procs=${1:-100000}
command -v valgrind >/dev/null || {
	echo "bench/callgrind.sh: valgrind is missing (scripts/deps.sh test installs it)" >&2
	exit 2
}
# Build the three programs (their own runs are small: one or two slots).
"$here/alignd.sh" 1 1000 >/dev/null
"$here/estimd.sh" 1000 1 >/dev/null
"$here/exportd.sh" 1000 0 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { # NAME PROGRAM ARGS...: Ir inside the marked slot
	local name=$1
	shift
	valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$tmp/$name.out" "$@" \
		>"$tmp/$name.log" 2>&1 || {
		echo "bench/callgrind.sh: $name under valgrind failed:" >&2
		tail -n 5 "$tmp/$name.log" >&2
		return 1
	}
	awk '/^summary:/ { print $2 }' "$tmp/$name.out"
}
a=$(ir alignd "$B/bench/alignd_bench" 2 "$procs")
e=$(ir estimd "$B/bench/estimd_attrib" "$procs" 1)
x=$(ir exportd "$B/bench/exportd_bench" "$procs" 4 1)
t=$((a + e + x))
printf 'callgrind: one slot of %d processes, instructions (Ir)\n' "$procs"
printf '  %-8s %14d\n' alignd "$a" estimd "$e" exportd "$x" total "$t"
echo "BENCH callgrind.procs=$procs"
echo "BENCH callgrind.alignd_ir=$a"
echo "BENCH callgrind.estimd_ir=$e"
echo "BENCH callgrind.exportd_ir=$x"
echo "BENCH callgrind.total_ir=$t"
