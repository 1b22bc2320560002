#!/usr/bin/env bats
# Bad requests to modeld get a clear 4xx naming the fault and are counted in its
# stat message; oversized bodies get 413 and slow clients are cut at
# http_request_timeout; a good request is answered all the while.

load helper
load modeld_helper

teardown() { wb_kill_all; }

GOOD='{"metrics":["bpf_cpu_time_ms","bpf_page_cache_hit"],"output_type":"AbsPower","weight":true}'

# counter NAME: its value in modeld's latest stat message (the tap's log).
counter() {
	grep '"topic":"stat/' "$BATS_TEST_TMPDIR/tap.all" | tail -n 1 |
		jq -r --arg n "$1" '.msg.counters[] | select(.name == $n) | .value'
}

@test "bad requests get 400/404/405/413 with their reason, are counted, and modeld keeps serving" {
	md_start modeld --sub "" --import "$MD_EC2" --max_body_bytes 65536
	wb_tap tap "ipc://$MD_RT/modeld.sock"
	run md_post 'this is not json'
	assert_line --index 0 400
	assert_line --index 1 --partial 'not JSON'
	run md_post '{"metrics":"bpf_cpu_time_ms","output_type":"AbsPower"}'
	assert_line --index 0 400
	assert_line --index 1 'metrics: expected a list of feature names'
	run md_post '{"metrics":[],"output_type":"Watts"}'
	assert_line --index 0 400
	assert_line --index 1 'output_type: unknown "Watts" (AbsPower or DynPower)'
	run md_post '{"metrics":[],"output_type":"AbsPower","weight":1}'
	assert_line --index 1 'weight: expected true or false'
	run md_post '{"metrics":[],"output_type":"AbsPower","node_type":[4]}'
	assert_line --index 1 'node_type: expected an integer'
	# 1 MB: announced (refused before it is read) and chunked (read, dropped)
	head -c 1048576 /dev/zero | tr '\0' ' ' >"$BATS_TEST_TMPDIR/big"
	run curl -sS --max-time 30 -o /dev/null -w '%{http_code}' --data-binary @"$BATS_TEST_TMPDIR/big" "$MD_URL/model"
	assert_output 413
	run curl -sS --max-time 30 -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' \
		--data-binary @"$BATS_TEST_TMPDIR/big" "$MD_URL/model"
	assert_output 413
	run curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$MD_URL/model"
	assert_output 405
	run curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X DELETE "$MD_URL/models"
	assert_output 405
	run curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$MD_URL/nope"
	assert_output 404
	run md_choice "$GOOD"
	assert_output "200 LogarithmicRegressionTrainer_1 5.76"
	# 5 parse faults and 3 of path or method; 2 too large; 1 good request
	wb_wait_for 30 bash -c '[ "$(grep "\"topic\":\"stat/" "$0" | tail -n 1 | jq -c "[.msg.counters[] | select(.name | test(\"^(http_bad_requests|http_too_large|model_requests|http_4xx)$\")) | .value]")" = "[1,8,2,10]" ]' "$BATS_TEST_TMPDIR/tap.all" || {
		grep '"topic":"stat/' "$BATS_TEST_TMPDIR/tap.all" | tail -n 1
		false
	}
	grep -q 'http: 127.0.0.1 /model: 400 output_type: unknown "Watts"' "$BATS_TEST_TMPDIR/modeld.log"
}

@test "a client that trickles its request is cut at http_request_timeout; others are served meanwhile" {
	md_start modeld --sub "" --import "$MD_EC2" --http_request_timeout 2s --http_timeout 60s
	wb_tap tap "ipc://$MD_RT/modeld.sock"
	cat >"$BATS_TEST_TMPDIR/slow.py" <<-'EOF'
		import socket, sys, time
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
		s.sendall(b"POST /model HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
		end = time.monotonic() + 120
		s.settimeout(0.5)
		while time.monotonic() < end:
		    try:
		        s.sendall(b"{")
		        if s.recv(1) == b"":
		            break
		    except socket.timeout:
		        continue
		    except OSError:
		        break
		print("closed", flush=True)
	EOF
	wb_spawn slow python3 "$BATS_TEST_TMPDIR/slow.py" "$MD_PORT"
	run md_choice "$GOOD"
	assert_output "200 LogarithmicRegressionTrainer_1 5.76"
	wb_wait_lines "$BATS_TEST_TMPDIR/slow.log" 1 120 '^closed'
	wb_wait_for 30 bash -c '[ "$(grep "\"topic\":\"stat/" "$0" | tail -n 1 | jq -r ".msg.counters[] | select(.name == \"http_request_timeouts\") | .value")" = 1 ]' "$BATS_TEST_TMPDIR/tap.all"
	grep -q 'closed, no complete request and answer within 2.0 s' "$BATS_TEST_TMPDIR/modeld.log"
}
