#!/usr/bin/env bats
# What every daemon shares (lib/daemon.c), shown on alignd: config errors with
# file:line, flags, stat messages, SIGHUP reload, clean stop, endpoint conflicts.

load helper

setup() {
	D=$WB_BUILD/wattbus-alignd
	RT=$BATS_TEST_TMPDIR/run
}
teardown() { wb_kill_all; }

@test "-n accepts the built-in defaults and a valid file" {
	run "$D" -n
	assert_success
	assert_output "(built-in defaults): ok"
	printf '[global]\nlog_level = debug\n[alignd]\nmax_lag = 3s\n[exportd]\nlisten = 127.0.0.1:9\n' >"$BATS_TEST_TMPDIR/ok.conf"
	run "$D" -n -c "$BATS_TEST_TMPDIR/ok.conf"
	assert_success
	assert_output "$BATS_TEST_TMPDIR/ok.conf: ok"
}

@test "-n rejects an unknown key, a bad value and a syntax error with file:line, exit 2" {
	f=$BATS_TEST_TMPDIR/bad.conf
	printf '[alignd]\n; fine so far\ncolour = blue\n' >"$f"
	run "$D" -n -c "$f"
	assert_failure 2
	assert_output "wattbus-alignd: $f:3: unknown key 'colour' in [alignd]"
	printf '[global]\nstat_interval = often\n' >"$f"
	run "$D" -n -c "$f"
	assert_failure 2
	assert_output --partial "$f:2: [global] stat_interval: 'often' is not a duration"
	printf '[alignd]\nmax_lag 3s\n' >"$f"
	run "$D" -n -c "$f"
	assert_failure 2
	assert_output --partial "$f:2: syntax error"
	printf '[alignd]\n[powerd_typo]\n' >"$f"
	run "$D" -n -c "$f"
	assert_failure 2
	assert_output --partial "$f:2: unknown section [powerd_typo]"
	run "$D" -n -c "$BATS_TEST_TMPDIR/missing.conf"
	assert_failure 2
	assert_output --partial "missing.conf: cannot open"
}

@test "flags override the file, and bad flags are usage errors" {
	printf '[alignd]\nmax_lag = often\n' >"$BATS_TEST_TMPDIR/f.conf"
	run "$D" -n -c "$BATS_TEST_TMPDIR/f.conf" --max_lag 2s
	assert_failure 2 # the file is still read and wrong
	printf '[alignd]\nmax_lag = 9s\n' >"$BATS_TEST_TMPDIR/f.conf"
	run "$D" -n -c "$BATS_TEST_TMPDIR/f.conf" --max_lag soon
	assert_failure 2
	assert_output --partial "--max_lag: [alignd] max_lag: 'soon' is not a duration"
	run "$D" --no-such-flag
	assert_failure 2
	assert_output --partial "unknown option '--no-such-flag'"
	run "$D" --max_lag
	assert_failure 2
	assert_output --partial "needs a value"
	WATTBUS_CONF=$BATS_TEST_TMPDIR/f.conf run "$D" -n
	assert_success
	assert_output "$BATS_TEST_TMPDIR/f.conf: ok"
}

@test "stat messages, SIGHUP reload (kept on a bad file), clean stop on SIGTERM" {
	conf=$BATS_TEST_TMPDIR/d.conf
	printf '[global]\nlog_level = info\n' >"$conf"
	wb_spawn alignd "$D" -c "$conf" --runtime_dir "$RT" --host testhost --stat_interval 200ms --sub "$(wb_ep nothing)"
	wb_wait_for 10 test -S "$RT/alignd.sock"
	run "$WATTBUS" tap --check --count 2 --timeout 10s "ipc://$RT/alignd.sock" stat/
	assert_success
	run jq -r '[.topic, .msg.stage, .msg.src, .msg.version, (.msg.frames_out > 0), (.msg.rss_bytes > 0)] | @tsv' <<<"${lines[1]}"
	assert_output $'stat/testhost\talignd\talignd\t0.1.0\ttrue\ttrue'

	printf '[alignd]\nnonsense = 1\n' >"$conf"
	kill -HUP "$PID_alignd"
	wb_wait_for 5 grep -q "reload failed, keeping the running config: $conf:2: unknown key 'nonsense'" "$BATS_TEST_TMPDIR/alignd.log"
	kill -0 "$PID_alignd"
	printf '[global]\nlog_level = debug\n' >"$conf"
	kill -HUP "$PID_alignd"
	wb_wait_for 5 grep -q "reloaded" "$BATS_TEST_TMPDIR/alignd.log"
	run "$WATTBUS" tap --count 1 --timeout 10s "ipc://$RT/alignd.sock" stat/
	assert_success

	kill -TERM "$PID_alignd"
	rc=0
	wait "$PID_alignd" || rc=$?
	[ "$rc" -eq 0 ]
	grep -q "stopping on Terminated" "$BATS_TEST_TMPDIR/alignd.log"
}

@test "a second instance does not steal a running stage's endpoint" {
	wb_spawn first "$D" --runtime_dir "$RT" --sub "$(wb_ep nothing)"
	wb_wait_for 10 grep -q "running" "$BATS_TEST_TMPDIR/first.log" # bound and listening
	run timeout 60 "$D" --runtime_dir "$RT" --sub "$(wb_ep nothing)"
	assert_failure 1
	assert_output --partial "another process is listening there"
	kill -0 "$PID_first"
	run "$WATTBUS" tap --count 1 --timeout 10s "ipc://$RT/alignd.sock" stat/
	assert_success
}

@test "sd_notify: READY=1 once running, WATCHDOG=1 at half of WATCHDOG_USEC, STOPPING=1" {
	sock=$BATS_TEST_TMPDIR/notify.sock
	cat >"$BATS_TEST_TMPDIR/notify.py" <<-'PY'
		import socket, sys, time
		s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
		s.bind(sys.argv[1])
		s.settimeout(60)
		end = time.time() + 60
		while time.time() < end:
		    try:
		        msg = s.recv(4096).decode()
		    except socket.timeout:
		        break
		    print(msg.replace("\n", " "), flush=True)
	PY
	wb_spawn notify python3 "$BATS_TEST_TMPDIR/notify.py" "$sock"
	wb_wait_for 5 test -S "$sock"
	NOTIFY_SOCKET=$sock WATCHDOG_USEC=400000 wb_spawn alignd "$D" --runtime_dir "$RT" --sub "$(wb_ep nothing)"
	wb_wait_for 10 grep -q "READY=1" "$BATS_TEST_TMPDIR/notify.log"
	wb_wait_lines "$BATS_TEST_TMPDIR/notify.log" 3 5 WATCHDOG=1
	kill -TERM "$PID_alignd"
	wb_wait_for 5 grep -q "STOPPING=1" "$BATS_TEST_TMPDIR/notify.log"
}

@test "-n rejects what the daemon would: a host that is not UTF-8, a pattern that does not close" {
	f=$BATS_TEST_TMPDIR/bad.conf
	printf '[global]\nhost = caf\xe9\n' >"$f"
	run "$D" -n -c "$f"
	assert_failure 2
	assert_output --partial "$f:2: [global] host: "
	assert_output --partial "is not valid UTF-8"
	run "$D" -n --host "$(printf 'a\tb')"
	assert_failure 2
	assert_output --partial "--host: [global] host: 'a\\tb' holds a control character"
	printf '[exportd]\nmetrics_allow = wattbus_*, kepler_[node\n' >"$f"
	run "$WB_BUILD/wattbus-exportd" -n -c "$f"
	assert_failure 2
	assert_output --partial "$f:2: [exportd] metrics_allow: pattern 'kepler_[node' has a [ without its ]"
}

@test "a config line past inih's 200 bytes (a long sub list) is read whole" {
	f=$BATS_TEST_TMPDIR/long.conf
	subs=$(for i in $(seq 1 40); do printf 'ipc://%s/h%02d.sock, ' "$BATS_TEST_TMPDIR" "$i"; done)
	printf '[alignd]\nsub = %sipc://%s/last.sock\n' "$subs" "$BATS_TEST_TMPDIR" >"$f"
	[ "$(sed -n 2p "$f" | wc -c)" -gt 1000 ]
	run "$D" -n -c "$f"
	assert_success
	wb_spawn alignd "$D" -c "$f" --runtime_dir "$RT"
	wb_wait_lines "$BATS_TEST_TMPDIR/alignd.log" 1 10 "subscribed to ipc://$BATS_TEST_TMPDIR/last.sock"
	run grep -c "subscribed to" "$BATS_TEST_TMPDIR/alignd.log"
	assert_output 41
}

@test "SIGHUP names the [global] keys that keep their old values until a restart" {
	conf=$BATS_TEST_TMPDIR/d.conf
	printf '[global]\nhwm = 1000\n' >"$conf"
	wb_spawn alignd "$D" -c "$conf" --runtime_dir "$RT" --sub "$(wb_ep nothing)"
	wb_wait_for 10 test -S "$RT/alignd.sock"
	printf '[global]\nhwm = 2000\nlog_level = debug\nstat_interval = 1s\n' >"$conf"
	kill -HUP "$PID_alignd"
	wb_wait_lines "$BATS_TEST_TMPDIR/alignd.log" 1 10 "reloaded $conf; \[global\] stat_interval, hwm keep their old values until a restart"
	printf '[global]\nhwm = 1000\n' >"$conf"
	kill -HUP "$PID_alignd"
	wb_wait_lines "$BATS_TEST_TMPDIR/alignd.log" 2 10 "reloaded $conf"
	run grep -c "keep their old values" "$BATS_TEST_TMPDIR/alignd.log"
	assert_output 1 # back to the running values: nothing to say
}

@test "producer restarts (new epochs) are logged at a bounded rate and all counted" {
	t0=$(date +%s%N) # before alignd: no line of its log is older
	wb_spawn alignd "$D" --runtime_dir "$RT" --sub "$(wb_ep in)" --stat_interval 100ms
	wb_wait_for 10 test -S "$RT/alignd.sock"
	now=$(date +%s%N)
	# Until alignd's SUB is connected, messages go nowhere: wait for the first to be counted.
	for e in $(seq 1 60); do
		echo "{\"kind\":\"power\",\"host\":\"h\",\"src\":\"powerd\",\"epoch\":$e,\"seq\":0,\"t\":$now,\"interval_ns\":1000000000,\"zones\":[]}"
	done >"$BATS_TEST_TMPDIR/epochs.jsonl"
	wb_spawn pub bash -c "while :; do \"$WATTBUS\" pub --interval 1ms \"$(wb_ep in)\" <\"$BATS_TEST_TMPDIR/epochs.jsonl\" || exit 1; done"
	wb_wait_for 60 bash -c '[ "$("$0" tap --count 1 --timeout 10s "$1" stat/ | jq -r ".msg.restarts")" -ge 50 ]' \
		"$WATTBUS" "ipc://$RT/alignd.sock"
	kill -TERM -- "-$PID_pub" 2>/dev/null || true
	# At most 10 lines per 10 s window, each window opening at least 10 s after the one
	# before: 10 * (1 + elapsed / 10) by now (elapsed taken after counting, from before
	# alignd started). Logging every restart gives 50 lines or more: over that unless the
	# 50 restarts took 40 s (usaged_map_full.bats bounds its warnings the same way).
	run grep -c "producer restarted" "$BATS_TEST_TMPDIR/alignd.log"
	elapsed=$((($(date +%s%N) - t0) / 1000000000))
	echo "$output restart lines in $elapsed s"
	[ "$output" -ge 1 ]
	[ "$output" -le $((10 * (1 + elapsed / 10))) ]
}
