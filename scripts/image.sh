#!/bin/sh
# Build the wattbus container image (`make image`): the binaries and data
# `make install PREFIX=/usr` produces, the shared libraries ldd says they load
# (this Debian host's packages), /etc/passwd and /etc/group with the wattbus
# user and group, and nothing else; then `podman build` on deploy/image/Containerfile.
#   scripts/image.sh [IMAGE]      default localhost/wattbus:VERSION
# Environment: IMAGE_BUILD (build dir of the /usr build, default build-image),
# PODMAN (default podman), KEEP_CONTEXT=1 keeps the staged context and prints it.
set -eu

cd "$(dirname "$0")/.."
version=$(sed -n 's/^VERSION := //p' Makefile)
image=${1:-localhost/wattbus:$version}
build=${IMAGE_BUILD:-build-image}
podman=${PODMAN:-podman}
uid=65532
gid=2150

command -v "$podman" >/dev/null || { echo "image: $podman not found (apt-get install podman)" >&2; exit 2; }
ctx=$(mktemp -d "${TMPDIR:-/var/tmp}/wattbus-image.XXXXXX")
[ -n "${KEEP_CONTEXT:-}" ] || trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs

# A build of its own with the image's paths (/usr, /etc), beside build/.
make -s -j2 BUILD="$build" PREFIX=/usr all
make -s BUILD="$build" PREFIX=/usr DESTDIR="$root" install >/dev/null
# Units, man pages, tmpfiles and sysusers are for hosts, not the image.
rm -rf "$root/usr/share/man" "$root/usr/lib/systemd" "$root/usr/lib/tmpfiles.d" "$root/usr/lib/sysusers.d"

# The shared libraries of every binary, at the paths the loader looks for them.
bins="$root/usr/bin/wattbus $(ls "$root"/usr/lib/wattbus/wattbus-*)"
# shellcheck disable=SC2086 # $bins is a list of paths without blanks
if ldd $bins | grep 'not found' >&2; then
	echo "image: a shared library is missing on this host" >&2
	exit 1
fi
# And the libraries loaded when a setting needs them (libcurl, libfreeipmi: lib/dl.h), with theirs.
dl=$(make -s dlopen-libs)
for p in $dl; do
	[ -e "$p" ] || { echo "image: $p is not installed on this host" >&2; exit 1; }
done
# shellcheck disable=SC2086 # $bins and $dl are lists of paths without blanks
for b in $bins $dl; do
	ldd "$b" | awk '/=> \// { print $3 } /^\t\// { print $1 }'
	case " $dl " in *" $b "*) echo "$b" ;; esac
done | sort -u | while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done

mkdir -p "$root/etc" "$root/run/wattbus" "$root/var/lib/wattbus/models" "$root/tmp"
chmod 1777 "$root/tmp"
printf 'root:x:0:0:root:/:/usr/sbin/nologin\nwattbus:x:%s:%s:wattbus:/nonexistent:/usr/sbin/nologin\n' $uid $gid >"$root/etc/passwd"
printf 'root:x:0:\nwattbus:x:%s:\n' $gid >"$root/etc/group"
# Mount points in a pod; for `podman run` without volumes, the wattbus user's (root can give them).
[ "$(id -u)" -ne 0 ] || chown -R $uid:$gid "$root/run/wattbus" "$root/var/lib/wattbus"

cp deploy/image/Containerfile "$ctx/Containerfile"
old=$("$podman" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
"$podman" build --quiet --no-cache -t "$image" -f "$ctx/Containerfile" "$ctx" >/dev/null
# The image this tag named before, now nameless, unless a container still uses it.
new=$("$podman" image inspect --format '{{.Id}}' "$image")
[ -z "$old" ] || [ "$old" = "$new" ] || "$podman" rmi "$old" >/dev/null 2>&1 || true
size=$("$podman" image inspect --format '{{.Size}}' "$image")
echo "image: $image, $((size / 1024)) KiB, $(echo "$bins" | wc -w) binaries"
[ -z "${KEEP_CONTEXT:-}" ] || echo "image: context kept in $ctx"
