#!/usr/bin/env bats
# ipc sockets are 0660 with the configured group; the unprivileged stages run as
# a non-root user in that group; a user outside it cannot read the bus.

load helper

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to create a group and switch users"
	command -v setpriv >/dev/null || skip "setpriv (util-linux) missing"
	G=wbt$$
	groupadd "$G"
	GID=$(getent group "$G" | cut -d: -f3)
	# A runtime dir the stages' user can reach: the bats temp dir may sit in a private $TMPDIR
	# (mode 700), which that user cannot traverse.
	PUB=$(mktemp -d /tmp/wb-ipc-perms.XXXXXX)
	chmod 0755 "$PUB"
	RT=$PUB/run
	mkdir -p "$RT"
	chgrp "$G" "$RT"
	chmod 2770 "$RT"
	AS_USER=(setpriv --reuid=65534 --regid="$GID" --clear-groups)
}

teardown() {
	wb_kill_all
	[ -n "${G:-}" ] && groupdel "$G" 2>/dev/null
	[ -n "${PUB:-}" ] && rm -rf "$PUB"
	true
}

@test "sockets are created 0660 with socket_group" {
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$RT" --socket_group "$G" --sub "$(wb_ep none)"
	wb_wait_for 10 test -S "$RT/alignd.sock"
	run stat -c '%a %G' "$RT/alignd.sock"
	assert_output "660 $G"
}

@test "alignd, estimd and exportd work as a non-root user; outsiders cannot read the bus" {
	port=$((20000 + RANDOM % 20000))
	# powerd stands in with a script (no meter here); root publishes into the group's directory.
	wb_spawn meter bash -c "'$WB_ROOT/examples/meter-to-bus.py' --host h --watts 20 --interval 0.5 --zone package | '$WATTBUS' pub --wait 30s 'ipc://$RT/powerd.sock'"
	wb_spawn usaged "$WB_BUILD/wattbus-usaged" --runtime_dir "$RT" --socket_group "$G" --host h --mode procfs --interval 1s
	for s in alignd estimd exportd; do
		extra=()
		[ "$s" = estimd ] && extra=(--model "$(ls "$WB_ROOT"/data/models/*.json | head -n 1)")
		[ "$s" = exportd ] && extra=(--listen "127.0.0.1:$port" --sub "ipc://$RT/estimd.sock")
		wb_spawn "$s" "${AS_USER[@]}" "$WB_BUILD/wattbus-$s" --runtime_dir "$RT" --socket_group "$G" "${extra[@]}"
	done
	wb_wait_for 90 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q 'kepler_node_cpu_joules_total{node_name=\"h\",zone=\"package\"'"
	for s in alignd estimd exportd; do
		run ps -o user= -p "$(pgrep -f "wattbus-$s --runtime_dir $RT" | head -n 1)"
		assert_output nobody
	done
	# The same user without the group sees nothing on usaged's socket.
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$WATTBUS" tap --timeout 3s "ipc://$RT/usaged.sock"
	assert_output ""
	run "${AS_USER[@]}" "$WATTBUS" tap --count 1 --timeout 10s "ipc://$RT/usaged.sock"
	assert_output --partial '"topic":'
}
