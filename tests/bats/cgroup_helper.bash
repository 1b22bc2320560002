# Cgroups made by a test: where cgroup v2 is mounted, making a cgroup path and its missing
# parents (remembered in MADE), and removing them again, deepest first. Suites that use it set
# MADE=() in setup and call wb_cgroups_remove in teardown, after the processes are gone.

# N random bytes as lower-case hex (container ids, pod uids).
hex() {
	od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'
}

cg2_mount() {
	awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo
}

# mkcg DIR: make DIR and its missing parents, remembering what we made
mkcg() {
	local d=$1 parts=() p
	while [ ! -d "$d" ]; do
		parts=("$d" "${parts[@]}")
		d=$(dirname "$d")
	done
	for p in "${parts[@]}"; do
		mkdir "$p" && MADE+=("$p")
	done
}

wb_cgroups_remove() {
	local i
	for ((i = ${#MADE[@]} - 1; i >= 0; i--)); do rmdir "${MADE[$i]}" 2>/dev/null || true; done
}
