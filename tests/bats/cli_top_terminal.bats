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

# A busy host: two CPU zones and two GPUs, 30 processes, 8 containers, 6 pods whose uids share a
# long head (and two that differ only in their tail), 4 VMs: about 60 lines when drawn in full.
big_estimate() {
	python3 - <<-'PY'
		import json
		dt = 2_000_000_000
		zones = [
		    {"name": "package-0", "zone": "package", "path": "simulated:/proc/stat", "energy_uj": 40_000_000, "active_uj": 30_000_000, "idle_uj": 10_000_000},
		    {"name": "dram-0", "zone": "dram", "path": "simulated:/proc/stat", "energy_uj": 8_000_000, "active_uj": 4_000_000, "idle_uj": 4_000_000},
		    {"name": "gpu-0", "zone": "gpu", "path": "nvml:GPU-aaaa", "uuid": "GPU-aaaa", "model": "FakeH100", "energy_uj": 600_000_000, "active_uj": 500_000_000, "idle_uj": 100_000_000},
		    {"name": "gpu-1", "zone": "gpu", "path": "nvml:GPU-bbbb", "uuid": "GPU-bbbb", "model": "FakeA10", "energy_uj": 100_000_000, "active_uj": 60_000_000, "idle_uj": 40_000_000},
		]
		def e(k):
		    return [k * 1000, k * 100, k * 10000, 0]
		procs = [{"pid": 100 + i, "comm": "proc%02d" % i, "cpu_ns": 10_000_000 * (30 - i), "energy_uj": e(30 - i)} for i in range(30)]
		conts = [{"id": "c%02d" % i + "f" * 60, "name": "container-%d" % i, "cpu_ns": 1000, "energy_uj": e(80 - i)} for i in range(8)]
		head = "kubepods-burstable-pod7d1c3f2a_9e4b_4c5d_8a6f_0b1c2d3e4f5"
		pods = [{"id": head + "%d" % i, "cpu_ns": 1000, "energy_uj": e(60 - i)} for i in range(6)]
		vms = [{"id": "vm-%d" % i, "name": "guest-%d" % i, "cpu_ns": 1000, "energy_uj": e(50 - i)} for i in range(4)]
		print(json.dumps({"kind": "estimate", "host": "busy-host", "t0": 1800000000000000000, "t1": 1800000000000000000 + dt,
		                  "mode": "measured", "ncpu": 8, "cpu_usage_ratio": 0.5, "zones": zones, "procs": procs,
		                  "containers": conts, "pods": pods, "vms": vms}))
	PY
}

# top_fits COLS ROWS: top in a COLS x ROWS terminal on the big estimate; every line fits, the
# header and the zones show, every table has its title and its "+N more" line, the pods stay
# distinct; `?` shows the keys and any key goes back.
top_fits() {
	local cols=$1 rows=$2
	tmux -S "$SOCK" new-session -d -s wb -x "$cols" -y "$rows" "$WATTBUS top $EP; sleep 600"
	wb_wait_for 20 bash -c "tmux -S '$SOCK' capture-pane -p -t wb | grep -q 'wattbus top'"
	big_estimate | "$WATTBUS" pub --wait 20s "$EP" >/dev/null
	wb_wait_for 20 bash -c "tmux -S '$SOCK' capture-pane -p -t wb | grep -q '^host busy-host'"
	# the pane as drawn, blank lines included (the first line is the terminal's first row)
	run tmux -S "$SOCK" capture-pane -p -t wb
	echo "$output"
	[ "$(echo "$output" | awk '{ if (length($0) > m) m = length($0) } END { print m }')" -le "$cols" ]
	assert_line --index 0 --regexp '^host busy-host  SIMULATED meter  slot ending'
	if [ "$cols" -ge 80 ]; then assert_line --regexp '^package-0 .*simulated$'; fi
	assert_line --regexp '^ZONE +TOTAL W'
	assert_line --regexp '^package-0 +20\.000 +15\.000 +5\.000'
	assert_line --regexp '^dram-0 +4\.000 '
	assert_line --regexp '^node +'
	for title in PROCESSES CONTAINERS PODS VMS GPUS; do
		assert_line --regexp "^$title "
	done
	# each table shows what fits and says how many more there are
	[ "$(echo "$output" | grep -cE '^ +\+[0-9]+ more$')" -ge 4 ]
	procs_more=$(sed -n '/^PROCESSES/,/more$/p' <<<"$output" | grep -oE '\+[0-9]+ more' | grep -oE '[0-9]+')
	procs_shown=$(sed -n '/^PROCESSES/,/more$/p' <<<"$output" | grep -cE ' proc[0-9]{2}')
	[ $((procs_more + procs_shown)) -eq 30 ]
	# the pods that are shown read differently, however narrow
	pods=$(sed -n '/^PODS/,/more$/p' <<<"$output" | grep -vE '^PODS|more$' | awk '{print $3}')
	[ -n "$pods" ]
	[ "$(echo "$pods" | sort | uniq -d)" = "" ]
	# `?` shows the keys, any other key goes back to the frame
	tmux -S "$SOCK" send-keys -t wb '?'
	wb_wait_for 20 bash -c "tmux -S '$SOCK' capture-pane -p -t wb | grep -q 'keys'"
	run tmux -S "$SOCK" capture-pane -p -t wb
	assert_line --regexp '^ +q +quit'
	tmux -S "$SOCK" send-keys -t wb x
	wb_wait_for 20 bash -c "tmux -S '$SOCK' capture-pane -p -t wb | grep -q '^host busy-host'"
}

@test "80x24 with GPU zones, containers, pods and VMs: header and zones always show, the tables share the rest" {
	top_fits 80 24
}

@test "50x20: the same, cut to 50 columns, with pod ids that stay distinct" {
	top_fits 50 20
}
