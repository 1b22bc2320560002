#!/bin/sh
# Install the Debian packages wattbus needs that are missing on this machine.
#   scripts/deps.sh build   compilers and libraries
#   scripts/deps.sh test    also what the tests and benchmarks run (bats, prometheus, ...)
#   scripts/deps.sh missing build|test   only print what is missing
# Installs only what dpkg reports missing; needs root (or sudo) for apt-get.
set -eu

BUILD_PKGS="build-essential pkg-config python3 clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev
libczmq-dev libzmq3-dev libmsgpack-dev libjansson-dev libinih-dev libsystemd-dev libmicrohttpd-dev libcurl4-openssl-dev libfreeipmi-dev libzip-dev"
TEST_PKGS="bats bats-assert bats-support python3-zmq python3-msgpack prometheus prometheus-node-exporter
stress-ng curl jq iproute2 procps systemd libclang-rt-14-dev clang-format valgrind wrk hyperfine tmux parallel gnuplot-nox
podman runc catatonit python3-yaml python3-kubernetes python3-jsonschema openssl groff-base"

list=""
if [ "${1:-}" = missing ]; then
	list=1
	shift
fi
case "${1:-build}" in
build) want="$BUILD_PKGS" ;;
test) want="$BUILD_PKGS $TEST_PKGS" ;;
*) echo "usage: $0 [missing] build|test" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$list" ]; then
	echo "$missing"
	exit 0
fi
[ -z "$missing" ] && exit 0

echo "wattbus: installing:$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing or a day old.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
	$SUDO apt-get update -q >&2
fi
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing >&2
