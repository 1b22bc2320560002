#!/usr/bin/env bats
# wattbus top in a real terminal (tmux, 60 columns): every line it draws, the
# first included, fits the width, and `q` quits at once with exit 0.

load helper

EST='{"kind":"estimate","host":"a-rather-long-host-name","t0":1800000000000000000,"t1":1800000002000000000,"mode":"model","model":"ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1","ncpu":4,"cpu_usage_ratio":0.5,"zones":[{"name":"package-0","zone":"package","energy_uj":20000000,"active_uj":12000000,"idle_uj":8000000}],"procs":[{"pid":10,"comm":"busy","cpu_ns":1500000000,"energy_uj":[6000000]}]}'

setup() {
	command -v tmux >/dev/null || skip "needs tmux"
	SOCK=$BATS_TEST_TMPDIR/tmux
	# A socket path as long as make run's, so that the waiting line is wider than the terminal.
	EP_DIR=$BATS_TEST_TMPDIR/a/directory/as/deep/as/a/build/tree/run
	mkdir -p "$EP_DIR"
	EP=ipc://$EP_DIR/estimd.sock
}

teardown() {
	tmux -S "$SOCK" kill-server 2>/dev/null || true
	wb_kill_all
}

# The pane's lines, wrapped ones joined (-J), without the blank ones tmux pads it with.
pane() {
	tmux -S "$SOCK" capture-pane -p -J -t wb | sed '/^$/d'
}

@test "every line fits 60 columns, the waiting line and the frame's; q quits with exit 0" {
	tmux -S "$SOCK" new-session -d -s wb -x 60 -y 20 \
		"$WATTBUS top $EP; echo top-exited-\$?; sleep 600"
	wb_wait_for 20 bash -c "tmux -S '$SOCK' capture-pane -p -t wb | grep -q 'wattbus top'"
	run pane
	echo "$output"
	[ "$(echo "$output" | awk '{ if (length($0) > m) m = length($0) } END { print m }')" -le 60 ]
	assert_line --index 0 --regexp '^wattbus top: waiting for estimates on ipc://'

	echo "$EST" | "$WATTBUS" pub --wait 20s "$EP" >/dev/null
	wb_wait_for 20 bash -c "tmux -S '$SOCK' capture-pane -p -t wb | grep -q '^host a-rather'"
	run pane
	echo "$output"
	[ "$(echo "$output" | awk '{ if (length($0) > m) m = length($0) } END { print m }')" -le 60 ]
	assert_line --index 0 --regexp '^host a-rather-long-host-name  slot ending'
	assert_line --regexp '^package-0 +10\.000'

	tmux -S "$SOCK" send-keys -t wb q
	wb_wait_for 20 bash -c "tmux -S '$SOCK' capture-pane -p -t wb | grep -q 'top-exited-'"
	run pane
	assert_output --partial "top-exited-0"
}
