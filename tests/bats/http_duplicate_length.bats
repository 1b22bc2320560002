#!/usr/bin/env bats
# Two Content-Length headers make a request's end ambiguous (request smuggling
# behind a proxy): lib/httpd.c answers 400 before any stage's handler, so modeld
# and exportd alike refuse it, and keep serving.

load helper
load modeld_helper
load exportd_helper

teardown() { wb_kill_all; }

GOOD='{"metrics":["bpf_cpu_time_ms","bpf_page_cache_hit"],"output_type":"AbsPower","weight":true}'

# raw PORT METHOD PATH HEADER...: send a request with exactly these headers and a 2-byte body;
# prints the status line's code.
raw() {
	python3 - "$@" <<-'PY'
		import socket, sys
		port, method, path, headers = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
		s = socket.create_connection(("127.0.0.1", port), timeout=30)
		req = "%s %s HTTP/1.1\r\nHost: x\r\n" % (method, path) + "".join(h + "\r\n" for h in headers) + "\r\n{}"
		s.sendall(req.encode())
		data = b""
		while b"\r\n" not in data:
		    chunk = s.recv(4096)
		    if not chunk:
		        break
		    data += chunk
		print(data.split(b" ")[1].decode() if data.startswith(b"HTTP/") else "no answer: %r" % data)
	PY
}

@test "modeld: two Content-Length headers get 400; one gets an answer; modeld keeps serving" {
	md_start modeld --sub "" --import "$MD_EC2"
	run raw "$MD_PORT" POST /model 'Content-Length: 2' 'Content-Length: 2'
	assert_output 400
	run raw "$MD_PORT" POST /model 'Content-Length: 2' 'content-length: 40'
	assert_output 400
	# the same request with one header reaches modeld's handler (its own 400: not a model request)
	run raw "$MD_PORT" POST /model 'Content-Length: 2'
	assert_output 400
	grep -q '/model: 400 ' "$BATS_TEST_TMPDIR/modeld.log"
	grep -q 'http: 127.0.0.1: POST /model: 2 Content-Length headers, answered 400' "$BATS_TEST_TMPDIR/modeld.log"
	run md_choice "$GOOD"
	assert_output "200 LogarithmicRegressionTrainer_1 5.76"
}

@test "exportd: two Content-Length headers get 400, a scrape still 200" {
	ex_start
	run raw "$EX_PORT" GET /metrics 'Content-Length: 2' 'Content-Length: 2'
	assert_output 400
	run raw "$EX_PORT" GET /healthz 'Content-Length: 2'
	assert_output 200
}
