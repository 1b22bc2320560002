# Shared by the usaged suites: start usaged on an ipc endpoint in the test's
# temp dir, capture its messages with `wattbus tap`, and ask usaged_tap.py
# about them. Load after helper.
USAGED=$WB_BUILD/wattbus-usaged
TAPQ="python3 $BATS_TEST_DIRNAME/usaged_tap.py"

usaged_need_bpf() {
	[ "$(id -u)" -eq 0 ] || skip "eBPF needs root (uid $(id -u))"
	[ -r /sys/kernel/btf/vmlinux ] || skip "no kernel BTF at /sys/kernel/btf/vmlinux"
}

# usaged_start NAME [flags...]: start usaged publishing on $(wb_ep NAME); waits until it runs.
usaged_start() {
	local name=$1
	shift
	wb_spawn "$name" "$USAGED" --pub "$(wb_ep "$name")" --runtime_dir "$BATS_TEST_TMPDIR" \
		--stat_interval 1s "$@"
	wb_wait_for 10 grep -q "running (mode" "$BATS_TEST_TMPDIR/$name.log" || {
		cat "$BATS_TEST_TMPDIR/$name.log"
		return 1
	}
}

# usaged_tap NAME SECONDS [PREFIX...]: capture NAME's messages into $BATS_TEST_TMPDIR/NAME.tap in the background.
usaged_tap() {
	local name=$1 secs=$2
	shift 2
	wb_spawn "tap_$name" "$WATTBUS" tap --timeout "${secs}s" "$(wb_ep "$name")" "$@"
	# Callers give it an hour: it runs until teardown (its output is its log file), so a
	# loaded machine cannot end a capture before the test has read what it waits for. The
	# values are cumulative: a message before the subscription joined costs nothing.
	sleep 0.3
}

usaged_tapfile() {
	echo "$BATS_TEST_TMPDIR/tap_$1.log"
}

# proc_cpu_ns PID: utime + stime of /proc/PID/stat in ns (the comm may hold spaces).
proc_cpu_ns() {
	local hz f
	hz=$(getconf CLK_TCK)
	read -r -a f < <(sed -e 's/^.*) //' "/proc/$1/stat")
	echo $(((f[11] + f[12]) * (1000000000 / hz)))
}

# within PCT A B: |A - B| <= PCT % of B
within() {
	python3 -c "import sys; a, b, p = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[1]); \
print('%s vs %s: %.3f %%' % (sys.argv[2], sys.argv[3], 100 * abs(a - b) / b)); sys.exit(0 if b > 0 and abs(a - b) <= p / 100 * b else 1)" "$@"
}

# A busy loop that records its pid in $BATS_TEST_TMPDIR/NAME.pid.
busy_loop() {
	wb_spawn "$1" sh -c 'while :; do :; done'
	eval "echo \$PID_$1" >"$BATS_TEST_TMPDIR/$1.pid"
}

# ns since boot now (CLOCK_BOOTTIME, the clock of start_ns), to 10 ms.
usaged_boottime_ns() {
	awk '{ printf "%.0f\n", $1 * 1000000000 }' /proc/uptime
}

# proc_state PID: the state letter of /proc/PID/stat (R, S, T, ...).
proc_state() {
	local f
	read -r -a f < <(sed -e 's/^.*) //' "/proc/$1/stat")
	echo "${f[0]}"
}

# proc_stopped PID...: whether each PID is stopped (after kill -STOP: its CPU time is final).
proc_stopped() {
	local pid s
	for pid; do
		s=$(proc_state "$pid") || return 1
		[ "$s" = T ] || [ "$s" = t ] || return 1
	done
}

# proc_cpu_over NS PID: whether PID has used more than NS of CPU time (utime + stime).
proc_cpu_over() {
	[ "$(proc_cpu_ns "$2")" -gt "$1" ]
}

# usaged_usages NAME: how many usage messages NAME's tap holds so far.
usaged_usages() {
	local n
	n=$(grep -c '"kind":"usage"' "$(usaged_tapfile "$1")") || true
	echo "${n:-0}"
}

# usaged_settle NAME: wait until NAME's tap holds two whole usage messages more than now (the
# count may include a line the tap is still writing: three). Call it once the values it
# publishes are final (the processes stopped) and it published them: then the last listing in
# the tap is usaged's last word, not a message still on its way.
usaged_settle() {
	local n
	n=$(usaged_usages "$1")
	wb_wait_lines "$(usaged_tapfile "$1")" $((n + 3)) 30 '"kind":"usage"'
}

# frozen_workloads: a busy loop (PID_busy) and stress-ng at 50 % CPU (its worker in $worker), run
# until they have used 4 s and 2 s of CPU (a loaded machine takes longer; 2 % of less would mean
# little), then stopped, so that their /proc CPU time is final. workloads_teardown continues them.
frozen_workloads() {
	busy_loop busy
	wb_spawn stress stress-ng --cpu 1 --cpu-load 50 --cpu-method loop -q
	wb_wait_for 30 pgrep -P "$PID_stress"
	worker=$(pgrep -P "$PID_stress")
	[ -n "$worker" ]
	wb_wait_for 300 proc_cpu_over 4000000000 "$PID_busy"
	wb_wait_for 300 proc_cpu_over 2000000000 "$worker"
	STOPPED="$PID_busy $worker $PID_stress"
	# shellcheck disable=SC2086 # one argument per pid
	kill -STOP $STOPPED
	# shellcheck disable=SC2086
	wb_wait_for 30 proc_stopped $STOPPED
}

workloads_teardown() {
	# shellcheck disable=SC2086
	[ -n "${STOPPED:-}" ] && kill -CONT $STOPPED 2>/dev/null
	pkill -P "${PID_stress:-0}" 2>/dev/null || true
	wb_kill_all
}
