#!/usr/bin/env bats
# Slow or hostile HTTP clients cannot exhaust exportd: unknown paths get 404,
# oversized requests 431/414, idle connections beyond the per-address limit are
# refused and the rest closed after http_timeout; a normal scrape from another
# address succeeds all the while, and the one event loop keeps applying estimates.

load helper
load exportd_helper

teardown() { wb_kill_all; }

# idle_clients SRC PORT N REFUSED: N idle connections from SRC; prints "refused K" once
# REFUSED of them were closed by exportd (or after 60 s), then "closed K" once all N
# were (or after 120 s). Polls: no fixed wait, whatever the load.
idle_clients() {
	python3 - "$@" <<-'EOF'
		import select, socket, sys, time
		src, port, n, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
		socks = []
		for _ in range(n):
		    s = socket.socket()
		    s.bind((src, 0))
		    s.connect(("127.0.0.1", port))
		    socks.append(s)
		gone = set()
		def count():
		    for i, s in enumerate(socks):
		        if i in gone or not select.select([s], [], [], 0)[0]:
		            continue
		        try:
		            if s.recv(1) == b"":
		                gone.add(i)
		        except OSError:
		            gone.add(i)
		    return len(gone)
		end = time.monotonic() + 60
		while count() < want and time.monotonic() < end:
		    time.sleep(0.05)
		print("refused", count(), flush=True)
		end = time.monotonic() + 120
		while count() < n and time.monotonic() < end:
		    time.sleep(0.05)
		print("closed", count(), flush=True)
	EOF
}

@test "hostile requests get errors while a normal scrape succeeds at the same time" {
	ex_start --max_connections 64 --max_connections_per_ip 8 --http_timeout 3s --max_header_bytes 8192
	ex_feed --slots 1 --start 1000000000000000000
	ex_wait_estimates 1
	# 40 idle connections from 127.0.0.2: 8 are let in, 32 refused at once
	wb_spawn idle idle_clients 127.0.0.2 "$EX_PORT" 40 32
	wb_wait_lines "$BATS_TEST_TMPDIR/idle.log" 1 60 '^refused'
	assert_equal "$(grep '^refused' "$BATS_TEST_TMPDIR/idle.log")" "refused 32"
	# while those 8 sit there: bad requests from 127.0.0.1 get errors...
	big=$(head -c 20000 /dev/zero | tr '\0' a)
	run curl -sS -o /dev/null -w '%{http_code}' -H "X-Padding: $big" "$EX_URL/metrics"
	assert_output 431
	run curl -sS -o /dev/null -w '%{http_code}' "$EX_URL/metrics?$big"
	assert_output 414
	for p in /admin /metrics.gz /metrics/x /.. /healthz?x=1/../metrics; do
		run curl -sS -o /dev/null -w '%{http_code}' --path-as-is "$EX_URL$p"
		[ "$output" = 404 ] || [ "$p" = '/healthz?x=1/../metrics' -a "$output" = 200 ] || fail "$p: $output"
	done
	# ...and a normal scrape succeeds, with the data, and new estimates still get in
	run curl -sS -w '\n%{http_code}' --max-time 5 "$EX_URL/metrics"
	assert_line '200'
	assert_line 'kepler_node_cpu_joules_total{node_name="node-a",zone="package",path="/sys/class/powercap/intel-rapl:0"} 10.000000'
	ex_feed --slots 1 --start 1000000001000000000
	ex_wait_estimates 2
	# the idle ones are closed once http_timeout (3 s) has passed
	wb_wait_lines "$BATS_TEST_TMPDIR/idle.log" 1 120 '^closed'
	assert_equal "$(grep '^closed' "$BATS_TEST_TMPDIR/idle.log")" "closed 40"
	run curl -sS -o /dev/null -w '%{http_code}' "$EX_URL/healthz"
	assert_output 200
}

@test "max_connections bounds the connections of all clients together" {
	# no reserve: the backlog behaviour of max_connections itself
	# http_timeout long enough that the idle ones still hold every slot when the first
	# scrape is tried, however loaded the machine
	ex_start --max_connections 10 --max_connections_per_ip 0 --reserved_connections 0 --http_timeout 15s
	# 15 idle connections: 10 are taken in, 5 wait in the kernel's backlog (none refused)
	wb_spawn idle idle_clients 127.0.0.3 "$EX_PORT" 15 0
	wb_wait_lines "$BATS_TEST_TMPDIR/idle.log" 1 60 '^refused'
	# all 10 slots are held now: a scrape waits in the backlog too
	run curl -sS -o /dev/null -w '%{http_code}' --max-time 1 "$EX_URL/metrics"
	refute_output 200
	# the idle ones time out after 15 s, and so do the 5 from the backlog after them
	run curl -sS -o /dev/null -w '%{http_code}' --max-time 90 "$EX_URL/metrics"
	assert_output 200
	wb_wait_lines "$BATS_TEST_TMPDIR/idle.log" 1 120 '^closed'
	assert_equal "$(grep '^closed' "$BATS_TEST_TMPDIR/idle.log")" "closed 15"
}

@test "a client that sends its request slowly cannot grow exportd past max_header_bytes" {
	ex_start --max_header_bytes 4096 --http_timeout 2s
	python3 - "$EX_PORT" >"$BATS_TEST_TMPDIR/slow.out" <<-'EOF'
		import socket, sys, time
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
		s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
		sent = 0
		try:
		    # 100 bytes every 20 ms: never idle for long, but the header keeps growing
		    for _ in range(200):
		        s.sendall(b"X-A: " + b"a" * 93 + b"\r\n")
		        sent += 100
		        time.sleep(0.02)
		except OSError:
		    pass
		s.settimeout(5)
		try:
		    print(s.recv(200).split(b"\r\n")[0].decode(), sent)
		except OSError as e:
		    print("closed", sent)
	EOF
	run cat "$BATS_TEST_TMPDIR/slow.out"
	assert_output --regexp '^(HTTP/1.1 431 .*|closed) [0-9]+$'
	# cut off on the way (431, then a reset), not left to send all of its 20000 bytes
	[ "$(awk '{print $NF}' "$BATS_TEST_TMPDIR/slow.out")" -lt 20000 ]
	run curl -sS -o /dev/null -w '%{http_code}' "$EX_URL/healthz"
	assert_output 200
}
