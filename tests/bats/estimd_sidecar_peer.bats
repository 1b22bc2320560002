#!/usr/bin/env bats
# Kepler's estimator sidecar is a peer estimd keeps (docs/estimd.md): a late
# answer is read and dropped, never answered by closing the socket (Kepler's
# estimator dies writing into a closed one); while an answer is pending the
# slots use the local model without waiting; a hung sidecar never holds the
# stop; and a socket another user could have bound is refused, with the reason.

load estimd_helper

teardown() { wb_kill_all; }

stat_counter() {
	grep '"topic":"stat/' "$1" | tail -1 | jq -r --arg n "$2" '[.msg.counters[] | select(.name == $n) | .value][0] // 0'
}
counter_at_least() { [ "$(stat_counter "$1" "$2")" -ge "$3" ]; }

local_model() {
	cat >"$BATS_TEST_TMPDIR/local.json" <<-'JSON'
		{"model_name": "local-SGDRegressorTrainer",
		 "package": {"All_Weights": {"Bias_Weight": 20.0, "Categorical_Variables": {},
		   "Numerical_Variables": {"bpf_cpu_time_ms": {"scale": 1000.0, "weight": 1.0}}}}}
	JSON
}

# estimd on the sidecar at $1, extra flags after it.
start_estimd() {
	local sock=$1
	shift
	in=$(wb_ep aligned)
	out=$(wb_ep estimd)
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" --runtime_dir "$BATS_TEST_TMPDIR" --host vm1 \
		--sub "$in" --pub "$out" --model "$BATS_TEST_TMPDIR/local.json" --stat_interval 200ms \
		--estimator "unix:$sock" "$@"
	wb_tap tap "$out" estimate/
}

@test "a sidecar whose first answers take 2 s survives them and serves the next slots" {
	local_model
	sock="$BATS_TEST_TMPDIR/estimator.sock"
	# The warm-up and the first slot's request each answered after 2 s (a first model load),
	# far past the slot's wait (the default, 200 ms); then answers at once.
	wb_spawn sidecar python3 "$BATS_TEST_DIRNAME/kepler_estimator.py" --socket "$sock" \
		--log "$BATS_TEST_TMPDIR/requests.jsonl" --slow 2 --script slow,slow,answer
	wb_wait_for 30 test -S "$sock"
	start_estimd "$sock"
	wb_wait_for 60 grep -q "the warm-up request answered in" "$BATS_TEST_TMPDIR/estimd.log"
	python3 "$BATS_TEST_DIRNAME/estimd_slots.py" --host vm1 --no-power --count 3 --seed 21 >"$BATS_TEST_TMPDIR/b.jsonl"
	run "$WATTBUS" pub --wait 30s "$in" < <(sed -n 1p "$BATS_TEST_TMPDIR/b.jsonl")
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 1 60
	# Its answer came after the slot stopped waiting: read and dropped; the sidecar sent it.
	wb_wait_for 60 counter_at_least "$BATS_TEST_TMPDIR/tap.all" estimator_late 1
	run "$WATTBUS" pub --wait 30s "$in" < <(sed -n 2,3p "$BATS_TEST_TMPDIR/b.jsonl")
	assert_success
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 3 60
	run jq -r .msg.model "$BATS_TEST_TMPDIR/tap.log"
	assert_output "$(printf 'local-SGDRegressorTrainer\nestimator\nestimator')"
	kill -0 "$PID_sidecar"
	run jq -c 'select(.sent or .died)' "$BATS_TEST_TMPDIR/requests.jsonl"
	assert_output "$(printf '{"sent":"slow"}\n{"sent":"slow"}\n{"sent":"answer"}\n{"sent":"answer"}')"
	wb_wait_for 30 counter_at_least "$BATS_TEST_TMPDIR/tap.all" estimator_answered 2
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_timeout)" = 1 ]
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_unreachable)" = 0 ]
}

@test "while an answer is pending, slots use the local model at once; estimd stops with a hung sidecar" {
	local_model
	sock="$BATS_TEST_TMPDIR/estimator.sock"
	wb_spawn sidecar python3 "$BATS_TEST_DIRNAME/kepler_estimator.py" --socket "$sock" \
		--log "$BATS_TEST_TMPDIR/requests.jsonl" --script hang
	wb_wait_for 30 test -S "$sock"
	# The slot's wait (10 s, the most) would hold each slot that long if a slot asked while
	# the warm-up hangs: none does, and the slots come through one after the other.
	start_estimd "$sock" --estimator_timeout 10s --estimator_answer_max 600s
	wb_wait_for 30 grep -q '"step": "hang"' "$BATS_TEST_TMPDIR/requests.jsonl"
	slots_pub "$in" b.jsonl --host vm1 --no-power --count 20 --seed 22
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 20 60
	run jq -r .msg.model "$BATS_TEST_TMPDIR/tap.log"
	assert_output "$(for i in $(seq 20); do echo local-SGDRegressorTrainer; done)"
	wb_wait_for 30 counter_at_least "$BATS_TEST_TMPDIR/tap.all" estimator_busy 20
	[ "$(stat_counter "$BATS_TEST_TMPDIR/tap.all" estimator_timeout)" = 0 ]
	# One request only: the hung one, never a second connection.
	[ "$(grep -c '"step"' "$BATS_TEST_TMPDIR/requests.jsonl")" = 1 ]

	wb_stop estimd
	grep -q "stopping: cancelled the job warm-up of the estimator sidecar $sock" "$BATS_TEST_TMPDIR/estimd.log"
	run grep "still runs" "$BATS_TEST_TMPDIR/estimd.log"
	assert_failure
}

@test "a socket another user could have bound is refused, with the reason, and counted" {
	[ "$(id -u)" = 0 ] || skip "needs root to make a socket of another user"
	local_model
	# Kepler's default: a socket in a world-writable directory, here without the sticky bit.
	dir="$BATS_TEST_TMPDIR/shared"
	mkdir -m 0777 "$dir"
	chmod 0777 "$dir"
	sock="$dir/estimator.sock"
	wb_spawn sidecar python3 "$BATS_TEST_DIRNAME/kepler_estimator.py" --socket "$sock" \
		--log "$BATS_TEST_TMPDIR/requests.jsonl" --script answer
	wb_wait_for 30 test -S "$sock"
	start_estimd "$sock"
	wb_wait_for 30 grep -q "estimator sidecar refused" "$BATS_TEST_TMPDIR/estimd.log"
	run grep "estimator sidecar refused" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "$sock: its directory $dir is writable by all users without the sticky bit"

	# With the sticky bit, a socket of another user (a squatter's) is refused all the same.
	chmod 1777 "$dir"
	chown 65534 "$sock"
	python3 "$BATS_TEST_DIRNAME/estimd_slots.py" --host vm1 --no-power --count 1 --seed 23 >"$BATS_TEST_TMPDIR/b.jsonl"
	# A slot within the last refusal's backoff does not look again: slots until one does.
	pub_until_refused() {
		"$WATTBUS" pub --wait 30s "$in" <"$BATS_TEST_TMPDIR/b.jsonl" >/dev/null &&
			grep -q "owned by uid 65534" "$BATS_TEST_TMPDIR/estimd.log"
	}
	wb_wait_for 60 pub_until_refused
	run grep "estimator sidecar refused" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output --partial "$sock: owned by uid 65534, neither root nor estimd's own user (uid 0)"
	run jq -r .msg.model "$BATS_TEST_TMPDIR/tap.log"
	refute_output --partial "estimator"
	wb_wait_for 30 counter_at_least "$BATS_TEST_TMPDIR/tap.all" estimator_refused 2
	# Never connected to.
	[ ! -s "$BATS_TEST_TMPDIR/requests.jsonl" ]
	kill -0 "$PID_estimd"
}

@test "SIGHUP to a new sidecar: the hung exchange with the old one is cancelled, the new one answers" {
	local_model
	wb_spawn old python3 "$BATS_TEST_DIRNAME/kepler_estimator.py" --socket "$BATS_TEST_TMPDIR/old.sock" \
		--log "$BATS_TEST_TMPDIR/old.jsonl" --script hang
	wb_spawn new python3 "$BATS_TEST_DIRNAME/kepler_estimator.py" --socket "$BATS_TEST_TMPDIR/new.sock" \
		--log "$BATS_TEST_TMPDIR/new.jsonl" --script answer
	wb_wait_for 30 test -S "$BATS_TEST_TMPDIR/old.sock"
	wb_wait_for 30 test -S "$BATS_TEST_TMPDIR/new.sock"
	conf=$BATS_TEST_TMPDIR/wattbus.conf
	printf '[estimd]\nestimator = unix:%s\nestimator_timeout = 5s\n' "$BATS_TEST_TMPDIR/old.sock" >"$conf"
	in=$(wb_ep aligned)
	out=$(wb_ep estimd)
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" -c "$conf" --runtime_dir "$BATS_TEST_TMPDIR" --host vm1 \
		--sub "$in" --pub "$out" --model "$BATS_TEST_TMPDIR/local.json" --stat_interval 200ms
	wb_tap tap "$out" estimate/
	wb_wait_for 30 grep -q '"step": "hang"' "$BATS_TEST_TMPDIR/old.jsonl"
	printf '[estimd]\nestimator = unix:%s\nestimator_timeout = 5s\n' "$BATS_TEST_TMPDIR/new.sock" >"$conf"
	kill -HUP "$PID_estimd"
	wb_wait_for 30 grep -q "an exchange cancelled for the new estimator $BATS_TEST_TMPDIR/new.sock" "$BATS_TEST_TMPDIR/estimd.log"
	slots_pub "$in" b.jsonl --host vm1 --no-power --count 1 --seed 24
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 1 60
	run jq -r .msg.model "$BATS_TEST_TMPDIR/tap.log"
	assert_output "estimator"
	grep -q '{"sent": "answer"}' "$BATS_TEST_TMPDIR/new.jsonl"
}
