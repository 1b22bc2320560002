#!/usr/bin/env bats
# A stage that cannot serve what it exists for stops: modeld whose HTTP address is taken, and
# exportd asked for an address of no interface here, exit 1 with a message that names the address
# asked for and the reason (libmicrohttpd's own message named "port 0"). exportd's taken port:
# exportd_config.bats.

load helper

setup() {
	port=$(wb_free_port)
	wb_hold_port "$port"
	mkdir -p "$BATS_TEST_TMPDIR/run"
}

teardown() { wb_kill_all; }

@test "modeld: its port taken, it exits 1 naming the address" {
	run -1 timeout 60 "$WB_BUILD/wattbus-modeld" --runtime_dir "$BATS_TEST_TMPDIR/run" \
		--store "$BATS_TEST_TMPDIR/store" --listen "127.0.0.1:$port"
	assert_output --partial "error: http: cannot listen on 127.0.0.1:$port (listen \"127.0.0.1:$port\"): Address already in use"
	refute_output --partial "port 0"
	refute_output --partial "running"
}

@test "an address of no interface here is named too, and a free port still serves" {
	run -1 timeout 60 "$WB_BUILD/wattbus-exportd" --runtime_dir "$BATS_TEST_TMPDIR/run" \
		--listen "192.0.2.1:$port"
	assert_output --partial "cannot listen on 192.0.2.1:$port (listen \"192.0.2.1:$port\"): Cannot assign requested address"
	# port 0: the kernel picks one, logged, and it answers, over IPv4 and IPv6 alike
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" --runtime_dir "$BATS_TEST_TMPDIR/run" --listen 0
	wb_wait_for 30 grep -q "serving /metrics.*(port [1-9]" "$BATS_TEST_TMPDIR/exportd.log"
	local p
	p=$(grep -o "(port [0-9]*)" "$BATS_TEST_TMPDIR/exportd.log" | tr -dc 0-9)
	run curl -sf "http://127.0.0.1:$p/healthz"
	assert_success
	if [ -e /proc/net/if_inet6 ]; then
		run curl -sfg "http://[::1]:$p/healthz"
		assert_success
	fi
}
