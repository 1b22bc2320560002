#!/usr/bin/env bats
# Names are data: a host, comm or container name holding a newline, an escape
# sequence, a quote or bytes that are not UTF-8 reaches no terminal, script or
# JSON line raw. Identities (host, src, zone, model...) are refused by the codec;
# data (comm, container names) is escaped where it is printed.

load helper

teardown() { wb_kill_all; }

# no_raw_controls FILE: the file holds no C0 control but newline, no DEL, no C1 and no byte
# that is not UTF-8.
no_raw_controls() {
	python3 - "$1" <<-'PY'
		import re, sys
		b = open(sys.argv[1], "rb").read()
		try:
		    s = b.decode("utf-8")
		except UnicodeDecodeError as e:
		    sys.exit("not UTF-8: %r" % b[max(0, e.start - 20):e.end + 20])
		m = re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", s)
		if m:
		    sys.exit("raw control %r in %r" % (m.group(), s[max(0, m.start() - 20):m.end() + 20]))
	PY
}

# top_of JSON [FLAG...]: `wattbus top --plain --once` with the flags on $ep (wb_ep est), given
# JSON as the one estimate; what it printed is in top, its errors in top.err.
top_of() {
	local json=$1 top_pid
	shift
	ep=$(wb_ep est)
	"$WATTBUS" top --plain --once --timeout 20s "$@" "$ep" >"$BATS_TEST_TMPDIR/top" 2>"$BATS_TEST_TMPDIR/top.err" &
	top_pid=$!
	echo "$top_pid" >>"$BATS_TEST_TMPDIR/pids"
	printf '%s\n' "$json" | "$WATTBUS" pub --wait 30s "$ep" >/dev/null
	wait "$top_pid"
}

@test "top: a comm and a container name with an escape sequence, a newline and a quote print escaped" {
	# comm and container names are data from another host's kernel and kubelet: the codec takes them
	top_of '{"kind":"estimate","host":"h1","t0":1800000000000000000,"t1":1800000001000000000,"mode":"measured","ncpu":4,"cpu_usage_ratio":0.5,"zones":[{"name":"package-0","zone":"package","energy_uj":2000000,"active_uj":1000000,"idle_uj":1000000}],"procs":[{"pid":10,"comm":"ev\u001b[2J\"il\nx","cpu_ns":500000000,"energy_uj":[1000000]}],"containers":[{"id":"c1","name":"web\u001b]0;owned\u0007\u009b","cpu_ns":500000000,"energy_uj":[1000000]}]}'
	run cat "$BATS_TEST_TMPDIR/top"
	assert_line --regexp '^ +1\.000 +50\.0 +10  ev\\x1b\[2J"il\\nx$'
	assert_line --partial 'web\x1b]0;owned\x07\xc2\x9b'
	no_raw_controls "$BATS_TEST_TMPDIR/top"
	# a host name with a control character is refused by the producer's own codec
	run "$WATTBUS" pub --wait 1s "$ep" <<<'{"kind":"estimate","host":"h\u001b[2J","t0":1,"t1":2,"mode":"measured","zones":[]}'
	assert_failure
	assert_output --partial 'host: control character U+001B at byte 1'
}

@test "top: a line cut to the width never ends in half a character" {
	# the process row's comm starts after 41 bytes: at width 44 the cut falls inside the second é
	top_of '{"kind":"estimate","host":"h1","t0":1800000000000000000,"t1":1800000001000000000,"mode":"measured","ncpu":4,"cpu_usage_ratio":0.5,"zones":[{"name":"package-0","zone":"package","energy_uj":2000000,"active_uj":1000000,"idle_uj":1000000}],"procs":[{"pid":10,"comm":"\u00e9\u00e9\u00e9\u00e9","cpu_ns":500000000,"energy_uj":[1000000]}]}' --width 44
	run cat "$BATS_TEST_TMPDIR/top"
	assert_line --regexp '^ +1\.000 +50\.0 +10  é$'
	no_raw_controls "$BATS_TEST_TMPDIR/top"
}

# pub_raw ENDPOINT: binds, waits for a subscriber, sends the frames below.
pub_raw() {
	python3 - "$1" <<-'PY'
		import msgpack, sys, zmq
		# use_bin_type=False: bytes go out as a msgpack string (one that is not UTF-8)
		ctx = zmq.Context()
		s = ctx.socket(zmq.XPUB)
		s.bind(sys.argv[1])
		s.recv()
		def usage(host, comm):
		    return msgpack.packb({"v": 1, "kind": "usage", "host": host, "src": "t", "epoch": 1, "seq": 0,
		        "t": 5, "full": True,
		        "cpu": {k: 1 for k in ("user_ns", "nice_ns", "system_ns", "idle_ns", "iowait_ns", "irq_ns", "softirq_ns", "steal_ns")},
		        "procs": [{"pid": 1, "tid": 1, "ppid": 0, "comm": comm, "cpu_ns": 1}]}, use_bin_type=False)
		s.send_multipart([b"usage/h", usage("h", b'a\x1b[2J"\n\xff')])
		s.send_multipart([b"usage/h\nx", usage("h\nx", "ok")])
		s.close(linger=30000)
		ctx.term()
	PY
}

@test "tap: JSON lines escape control characters, invalid UTF-8 and quotes; --check refuses a host with a newline" {
	ep=$(wb_ep raw)
	wb_spawn tap "$WATTBUS" tap --count 2 --timeout 60s "$ep"
	pub_raw "$ep"
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 2 15
	no_raw_controls "$BATS_TEST_TMPDIR/tap.log"
	run jq -r 'select(.topic == "usage/h") | .msg.procs[0].comm' "$BATS_TEST_TMPDIR/tap.log"
	# the ESC and the newline as JSON escapes, the quote escaped, the stray byte as '?'
	assert_output "$(printf 'a\033[2J"\n?')"
	grep -qF '"comm":"a\u001B[2J\"\n?"' "$BATS_TEST_TMPDIR/tap.log"
	run jq -r 'select(.topic == "usage/h\nx") | .msg.host' "$BATS_TEST_TMPDIR/tap.log"
	assert_output "$(printf 'h\nx')"

	wb_spawn check "$WATTBUS" tap --check --count 2 --timeout 60s "$(wb_ep raw2)"
	pub_raw "$(wb_ep raw2)"
	wb_wait_lines "$BATS_TEST_TMPDIR/check.log" 2 15
	no_raw_controls "$BATS_TEST_TMPDIR/check.log"
	run jq -r '.rejected + " " + .error' "$BATS_TEST_TMPDIR/check.log"
	assert_line 'type procs[0].comm: string is not valid UTF-8'
	assert_line 'type host: control character U+000A at byte 1 (a name holds none)'
}

@test "compare --plot: a recorded host name cannot run a gnuplot command; one with a newline is refused" {
	command -v gnuplot >/dev/null || skip "gnuplot is not installed (scripts/deps.sh test installs gnuplot-nox)"
	cd "$BATS_TEST_TMPDIR"
	# Without the doubled quote this title would call system(): gnuplot joins strings with '.'.
	host="x' . system('touch pwned') . '"
	python3 "$BATS_TEST_DIRNAME/compare_streams.py" q.rec --host-b "$host" --seconds 30
	run "$WATTBUS" compare --from q.rec --summary ref/platform meter-0 --plot q.svg
	assert_success
	assert_output --partial "B = $host/meter-0 (platform, exec)"
	[ -s q.svg ]
	[ ! -e pwned ]
	grep -qF "system(" q.svg
	# A newline in the host would end gnuplot's command: the codec refuses the name when reading.
	python3 "$BATS_TEST_DIRNAME/compare_streams.py" n.rec --host-b "$(printf 'x\nsystem("touch pwned2")\n')" --seconds 30
	run "$WATTBUS" compare --from n.rec --summary ref/platform meter-0 --plot n.svg
	assert_failure
	assert_output --partial "no power samples of zone meter-0"
	[ ! -e pwned2 ]
	[ ! -e n.svg ]
}

@test "doctor: a sysfs zone name with an escape sequence, a quote and a stray byte prints escaped" {
	F=$(mktemp -d "$BATS_TEST_TMPDIR/doctor.XXXXXX")
	mkdir -p "$F/sys/class/powercap/intel-rapl:0" "$F/proc/self" "$F/proc/sys/kernel" "$F/dev"
	printf 'pack\033[2J"age\377\n' >"$F/sys/class/powercap/intel-rapl:0/name"
	echo 1000 >"$F/sys/class/powercap/intel-rapl:0/energy_uj"
	run "$WATTBUS" doctor --sysfs-root "$F/sys" --proc-root "$F/proc" --dev-root "$F/dev"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/doctor.out"
	no_raw_controls "$BATS_TEST_TMPDIR/doctor.out"
	assert_output --partial 'pack\x1b[2J"age\xff'
}
