#!/usr/bin/env bats
# Optional HTTPS (libmicrohttpd with GnuTLS) and HTTP basic auth from the config.

load helper
load exportd_helper

setup() { command -v openssl >/dev/null || skip "openssl is not installed"; }
teardown() { wb_kill_all; }

selfsigned() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 \
		-keyout "$BATS_TEST_TMPDIR/key.pem" -out "$BATS_TEST_TMPDIR/cert.pem" 2>/dev/null
}

@test "HTTPS with tls_cert and tls_key" {
	selfsigned
	EX_SCHEME=https ex_start --tls_cert "$BATS_TEST_TMPDIR/cert.pem" --tls_key "$BATS_TEST_TMPDIR/key.pem"
	ex_feed --slots 1 --start 1000000000000000000
	run curl -sS --cacert "$BATS_TEST_TMPDIR/cert.pem" -w '\n%{http_code}' "$EX_URL/healthz"
	assert_output 'ok

200'
	wb_wait_for 10 bash -c 'curl -sS --cacert "$1" "$0/metrics" | grep -q "^wattbus_exportd_estimates_total{host=\"node-a\"} 1$"' "$EX_URL" "$BATS_TEST_TMPDIR/cert.pem"
	run curl -sS --cacert "$BATS_TEST_TMPDIR/cert.pem" --compressed "$EX_URL/metrics"
	assert_line 'kepler_node_cpu_watts{node_name="node-a",zone="package",path="/sys/class/powercap/intel-rapl:0"} 10.000000'
	# plain HTTP on the TLS port gets nothing useful; the server stays up
	run curl -sS -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$EX_PORT/metrics"
	refute_output 200
	run curl -sS -o /dev/null -w '%{http_code}' --cacert "$BATS_TEST_TMPDIR/cert.pem" "$EX_URL/healthz"
	assert_output 200
	grep -q '(mode https)' "$BATS_TEST_TMPDIR/exportd.log"
}

@test "HTTPS refuses TLS 1.0 and 1.1, accepts 1.2 and 1.3" {
	selfsigned
	EX_SCHEME=https ex_start --tls_cert "$BATS_TEST_TMPDIR/cert.pem" --tls_key "$BATS_TEST_TMPDIR/key.pem"
	# OpenSSL 3 offers TLS 1.0/1.1 only at security level 0: that is asked for, so that a
	# refusal is the server's, not the client's
	for v in tls1 tls1_1; do
		run timeout 20 openssl s_client -connect "127.0.0.1:$EX_PORT" -"$v" -cipher 'DEFAULT@SECLEVEL=0' </dev/null
		assert_failure
		refute_output --regexp 'Protocol *: TLSv1(\.1)?$'
	done
	for v in tls1_2 tls1_3; do
		run timeout 20 openssl s_client -connect "127.0.0.1:$EX_PORT" -"$v" -CAfile "$BATS_TEST_TMPDIR/cert.pem" </dev/null
		assert_success
		assert_output --partial 'Verify return code: 0 (ok)'
	done
	run curl -sS -o /dev/null -w '%{http_code}' --cacert "$BATS_TEST_TMPDIR/cert.pem" "$EX_URL/healthz"
	assert_output 200
}

@test "basic auth guards /metrics; /healthz stays open" {
	printf 's3cr:et\n' >"$BATS_TEST_TMPDIR/pass"
	ex_start --auth_user prom --auth_password_file "$BATS_TEST_TMPDIR/pass"
	run curl -sS -D - -o /dev/null "$EX_URL/metrics"
	assert_line --partial 'HTTP/1.1 401'
	assert_line --partial 'WWW-Authenticate: Basic realm="wattbus"'
	run curl -sS -o /dev/null -w '%{http_code}' -u prom:wrong "$EX_URL/metrics"
	assert_output 401
	run curl -sS -o /dev/null -w '%{http_code}' -u prom:s3cr "$EX_URL/metrics"
	assert_output 401
	run curl -sS -o /dev/null -w '%{http_code}' -u other:s3cr:et "$EX_URL/metrics"
	assert_output 401
	run curl -sS -o /dev/null -w '%{http_code}' -u prom:s3cr:et "$EX_URL/metrics"
	assert_output 200
	run curl -sS -o /dev/null -w '%{http_code}' "$EX_URL/healthz"
	assert_output 200
}

@test "TLS and auth settings are checked at start" {
	D=$WB_BUILD/wattbus-exportd
	run "$D" -n --tls_cert /etc/hostname
	assert_failure 2
	assert_output --partial 'tls_cert and tls_key go together'
	run "$D" -n --auth_user prom
	assert_failure 2
	assert_output --partial 'auth_user and auth_password_file go together'
	# a key that is not a key: exportd says so and exits 1 (runtime failure)
	echo junk >"$BATS_TEST_TMPDIR/junk.pem"
	run timeout 10 "$D" --runtime_dir "$BATS_TEST_TMPDIR/run" --listen 127.0.0.1:0 \
		--tls_cert "$BATS_TEST_TMPDIR/junk.pem" --tls_key "$BATS_TEST_TMPDIR/junk.pem"
	assert_failure 1
	assert_output --partial 'cannot serve on 127.0.0.1:0'
	run timeout 10 "$D" --runtime_dir "$BATS_TEST_TMPDIR/run" --listen 127.0.0.1:0 \
		--auth_user prom --auth_password_file "$BATS_TEST_TMPDIR/none"
	assert_failure 2
	assert_output --partial "auth_password_file $BATS_TEST_TMPDIR/none"
}
