#!/bin/sh
# estimd benchmark: time to attribute one slot of 100,000 processes (and to
# encode its estimate). Builds bench/estimd_attrib.c against the estimd modules
# in $WB_BUILD (default: build) and prints the figures.
#   bench/estimd.sh [PROCS] [RUNS]
set -eu
cd "$(dirname "$0")/.."
B=${WB_BUILD:-build}
B=${B%/}
# every estimd module (all of estimd/*.c but main.c), as the Makefile links them
objs=$(for f in estimd/*.c; do [ "$f" = estimd/main.c ] || basename "$f" .c; done)
make -s BUILD="$B" $(for o in $objs; do printf '%s/estimd/%s.o ' "$B" "$o"; done) "$B/libwattbus.a"
mkdir -p "$B/bench"
# shellcheck disable=SC2046
${CC:-cc} -std=gnu11 -O2 -g -D_GNU_SOURCE -Ilib -I"$B/gen" -o "$B/bench/estimd_attrib" bench/estimd_attrib.c \
	$(for o in $objs; do printf '%s/estimd/%s.o ' "$B" "$o"; done) "$B/libwattbus.a" \
	$(make -s --no-print-directory libs-estimd)
"$B/bench/estimd_attrib" "${1:-100000}" "${2:-21}"
