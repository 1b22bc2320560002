#!/bin/bash
# PID 1 of fresh pid/mount/net/uts/ipc/cgroup namespaces (see systemd_boot.bats):
# an overlay of / with `make install` in it, then systemd as PID 1 running
# systemd_boot_check.sh. Usage: systemd_boot_inner.sh WORKDIR
set -eu
W=$1
here=$(cd "$(dirname "$0")" && pwd)
mount --make-rprivate /
mkdir -p "$W/ovl"
mount -t tmpfs tmpfs "$W/ovl"
mkdir -p "$W/ovl/upper" "$W/ovl/work" "$W/ovl/merged"
mount -t overlay overlay -o "lowerdir=/,upperdir=$W/ovl/upper,workdir=$W/ovl/work" "$W/ovl/merged"
M=$W/ovl/merged
mount -t proc proc "$M/proc"
mount --rbind /sys "$M/sys"
mount --rbind /dev "$M/dev"
mount -t tmpfs tmpfs "$M/run"
mount -t tmpfs tmpfs "$M/tmp"

# What a package's postinst does: install, create the group, enable the target.
# -o all: install what is built, never rebuild it with another PREFIX.
env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -C "$WB_ROOT" -o all BUILD="$WB_BUILD" PREFIX="$WB_PREFIX" \
	DESTDIR="$M" install >"$W/install.log" 2>&1
systemd-sysusers --root="$M" >/dev/null
systemctl --root="$M" enable wattbus.target 2>/dev/null

# powerd on a fake RAPL tree with a root-only energy_uj, through its EnvironmentFile.
sysconf=$(sed -n 's|^EnvironmentFile=-\(.*\)/default/wattbus-powerd$|\1|p' "$M$WB_PREFIX/lib/systemd/system/wattbus-powerd.service")
mkdir -p "$M$sysconf/default"
echo 'WATTBUS_POWERD_OPTS="--sysfs_root /opt/wbfake/sys --interval 1s"' >"$M$sysconf/default/wattbus-powerd"
echo 'WATTBUS_USAGED_OPTS="--interval 1s"' >"$M$sysconf/default/wattbus-usaged"
mkdir -p "$M/opt/wbfake"
cp "$(ls "$WB_ROOT"/data/models/*.json | head -n 1)" "$M/opt/wbfake/model.json"
echo 'WATTBUS_ESTIMD_OPTS="--model /opt/wbfake/model.json"' >"$M$sysconf/default/wattbus-estimd"
z=$M/opt/wbfake/sys/class/powercap/intel-rapl:0
mkdir -p "$z"
echo package-0 >"$z/name"
echo 262143328850 >"$z/max_energy_range_uj"
echo 1000000 >"$z/energy_uj"
chmod 0400 "$z/energy_uj"

# A SANITIZE=1 build: LeakSanitizer cannot read /proc/PID/task inside the units'
# sandbox and would turn every exit status into its own; leaks are checked outside.
if grep -q __asan_init "$WB_BUILD/wattbus-exportd"; then
	mkdir -p "$M/etc/systemd/system/wattbus-.service.d"
	printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0\n' >"$M/etc/systemd/system/wattbus-.service.d/asan.conf"
fi

cp "$here/systemd_boot_check.sh" "$M/usr/local/bin/wbcheck"
cat >"$M/etc/systemd/system/wbcheck.service" <<UNIT
[Unit]
Description=wattbus boot test
After=wattbus.target
[Service]
Type=oneshot
Environment=WB_PREFIX=$WB_PREFIX
StandardOutput=append:/report/check.log
StandardError=append:/report/check.log
ExecStart=/usr/local/bin/wbcheck
UNIT
cat >"$M/etc/systemd/system/wbtest.target" <<UNIT
[Unit]
Description=wattbus boot test
Wants=multi-user.target wbcheck.service
UNIT
mkdir -p "$M/report"
mount --bind "$W/report" "$M/report"
cd "$M"
mkdir -p .oldroot
pivot_root . .oldroot
umount -l /.oldroot
exec env container=wattbus-test /lib/systemd/systemd --system --unit=wbtest.target --log-target=journal --show-status=no
