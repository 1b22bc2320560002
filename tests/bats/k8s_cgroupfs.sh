#!/bin/bash
# Run a command in a private mount namespace whose /sys/fs/cgroup is writable:
# a tmpfs with the host's cgroup hierarchies bound back, plus empty directories
# for the v1 controllers this VM has not mounted (net_cls, net_prio, perf_event,
# hugetlb). podman makes a pod's cgroup under every controller /proc/cgroups
# lists, and fails on the host's read-only /sys/fs/cgroup without this. The
# host's mounts are not touched.
#   k8s_cgroupfs.sh COMMAND [ARGS...]     (as root, under unshare -m)
set -eu
mount --make-rprivate /
old=$(mktemp -d)
mount --rbind /sys/fs/cgroup "$old"
subs=$(findmnt -rn -o TARGET -R /sys/fs/cgroup | sed -n 's|^/sys/fs/cgroup/||p')
mount -t tmpfs -o size=1m,mode=755 wattbus-cgroup /sys/fs/cgroup
for n in $subs; do
	mkdir -p "/sys/fs/cgroup/$n"
	mount --bind "$old/$n" "/sys/fs/cgroup/$n"
done
for n in $(awk 'NR > 1 && $4 == 1 { print $1 }' /proc/cgroups); do
	[ -e "/sys/fs/cgroup/$n" ] || mkdir -p "/sys/fs/cgroup/$n"
done
exec "$@"
