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

@test "wrong passwords from one address get 429 and are counted; other addresses are not held up" {
	printf 's3cr:et\n' >"$BATS_TEST_TMPDIR/pass"
	ex_start --auth_user prom --auth_password_file "$BATS_TEST_TMPDIR/pass" --auth_max_failures 3 --auth_penalty 15s
	code() { curl -sS -o /dev/null -w '%{http_code}' "$@" "$EX_URL/metrics"; }
	wrong=0 throttled=0
	# guess from 127.0.0.1 until the penalty answers; repeat when it ran out before the check below
	for round in 1 2 3; do
		for i in $(seq 1 20); do
			c=$(code -u "prom:guess$i")
			case $c in
			401) wrong=$((wrong + 1)) ;;
			429) throttled=$((throttled + 1)) && break ;;
			*) fail "guess $i: $c" ;;
			esac
		done
		[ "$c" = 429 ] || fail "20 wrong passwords and no 429"
		[ "$round" != 1 ] || [ "$wrong" = 3 ] || fail "throttled after $wrong wrong passwords, not 3"
		# another address, right password: not held up
		other=$(code --interface 127.0.0.2 -u prom:s3cr:et)
		# the right password from the penalised address: 429 still, without a check
		again=$(code -u prom:s3cr:et)
		[ "$again" = 429 ] && throttled=$((throttled + 1)) && break
		[ "$again" = 200 ] || fail "right password after the penalty: $again"
	done
	[ "$again" = 429 ] || fail "the penalty never outlasted two requests"
	assert_equal "$other" 200
	run curl -sS -D - -o /dev/null -u prom:s3cr:et "$EX_URL/metrics"
	throttled=$((throttled + 1))
	assert_line --partial 'HTTP/1.1 429'
	assert_line --regexp '^Retry-After: [0-9]+'
	# counted exactly: each 401 for a wrong password, each 429
	run curl -sS --interface 127.0.0.2 -u prom:s3cr:et "$EX_URL/metrics"
	assert_line "wattbus_exportd_auth_failures_total $wrong"
	assert_line "wattbus_exportd_auth_throttled_total $throttled"
	# once the penalty is over, the right password works again
	wb_wait_for 90 bash -c '[ "$(curl -sS -o /dev/null -w "%{http_code}" -u prom:s3cr:et "$0/metrics")" = 200 ]' "$EX_URL"
	grep -q 'http: 127.0.0.1: wrong user or password for /metrics' "$BATS_TEST_TMPDIR/exportd.log"
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
