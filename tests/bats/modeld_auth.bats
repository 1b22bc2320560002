#!/usr/bin/env bats
# modeld's HTTP API takes exportd's auth and TLS options (lib/httpd.c, one code):
# with auth_user every path but /healthz needs the user, /models included; wrong
# passwords are counted and, past auth_max_failures, answered 429 for auth_penalty.

load helper
load modeld_helper

setup() { command -v openssl >/dev/null || skip "openssl is not installed"; }
teardown() { wb_kill_all; }

code() { curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }

@test "auth_user: /models, /model and /best-models need the user; /healthz does not; wrong passwords are throttled" {
	printf 's3cret\n' >"$BATS_TEST_TMPDIR/pass"
	md_start modeld --sub "" --import "$MD_EC2" --auth_user reader \
		--auth_password_file "$BATS_TEST_TMPDIR/pass" --auth_max_failures 2 --auth_penalty 60s
	run code "$MD_URL/models"
	assert_output 401
	run code -H 'Content-Type: application/json' --data '{"metrics":["bpf_cpu_time_ms"],"output_type":"AbsPower"}' "$MD_URL/model"
	assert_output 401
	run code "$MD_URL/best-models"
	assert_output 401
	run code "$MD_URL/healthz"
	assert_output 200
	run curl -sS --max-time 10 -u reader:s3cret "$MD_URL/models"
	run jq '.models | length' <<<"$output"
	assert_output 78
	run code -u reader:s3cret -H 'Content-Type: application/json' \
		--data '{"metrics":["bpf_cpu_time_ms","bpf_page_cache_hit"],"output_type":"AbsPower","weight":true}' "$MD_URL/model"
	assert_output 200
	# two wrong passwords, then the address waits: even the right one gets 429 meanwhile
	run code -u reader:nope "$MD_URL/models"
	assert_output 401
	run code -u reader:nope "$MD_URL/models"
	assert_output 401
	run curl -sS -o /dev/null -D - --max-time 10 -u reader:s3cret "$MD_URL/models"
	assert_line --partial "429"
	assert_line --regexp '^Retry-After: [0-9]+'
	grep -q 'wrong user or password for /models' "$BATS_TEST_TMPDIR/modeld.log"
	# counted in modeld's stat messages
	wb_tap tap "ipc://$MD_RT/modeld.sock" stat/
	run jq -r '[.msg.counters[] | select(.name | startswith("http_auth")) | "\(.name) \(.value)"] | .[]' \
		< <(grep '"topic":"stat/' "$BATS_TEST_TMPDIR/tap.all" | tail -1)
	assert_line "http_auth_failures 2"
	assert_line "http_auth_throttled 1"
}

@test "auth_user without auth_password_file is refused at start; HTTPS with tls_cert and tls_key" {
	run "$WB_BUILD/wattbus-modeld" -n --auth_user reader
	assert_failure 2
	assert_output --partial "auth_user and auth_password_file go together"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 \
		-keyout "$BATS_TEST_TMPDIR/key.pem" -out "$BATS_TEST_TMPDIR/cert.pem" 2>/dev/null
	printf 's3cret\n' >"$BATS_TEST_TMPDIR/pass"
	md_start modeld --sub "" --import "$MD_EC2" --tls_cert "$BATS_TEST_TMPDIR/cert.pem" \
		--tls_key "$BATS_TEST_TMPDIR/key.pem" --auth_user reader --auth_password_file "$BATS_TEST_TMPDIR/pass"
	local url=https://127.0.0.1:$MD_PORT
	run code --cacert "$BATS_TEST_TMPDIR/cert.pem" "$url/models"
	assert_output 401
	run code --cacert "$BATS_TEST_TMPDIR/cert.pem" -u reader:s3cret "$url/models"
	assert_output 200
}
