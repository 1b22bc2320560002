#!/usr/bin/env bats
# State files in a runtime directory others may write to (lib/state.c): modes,
# a planted FIFO or symbolic link, a damaged or hostile file, and a checkpoint
# that cannot be written, counted and exported.

load helper
load exportd_helper

setup() {
	RT=$BATS_TEST_TMPDIR/run
}
teardown() { wb_kill_all; }

# stage_start NAME [flags...]: alignd or estimd with its state in $RT, checkpoints every 100 ms.
stage_start() {
	local name=$1
	shift
	[ "$name" = alignd ] || set -- --model "$WB_ROOT/data/models/ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1.json" "$@"
	wb_spawn "$name" "$WB_BUILD/wattbus-$name" --runtime_dir "$RT" --host testhost --stat_interval 100ms \
		--sub "$(wb_ep nothing)" --state_every 100ms "$@"
	wb_wait_for 10 test -S "$RT/$name.sock"
}

# stat_value NAME FIELD: FIELD of the next stat message of stage NAME.
stat_value() {
	"$WATTBUS" tap --count 1 --timeout 10s "ipc://$RT/$1.sock" stat/ | jq -r ".msg.$2"
}

@test "a runtime directory a stage makes is 0750 and its state files 0600" {
	for s in alignd estimd; do
		stage_start $s
		wb_wait_for 10 test -f "$RT/$s.state"
		run stat -c %a "$RT/$s.state"
		assert_output 600
	done
	run stat -c %a "$RT"
	assert_output 750
}

@test "with a socket group, state files are 0640 and the directory 0770, both of that group" {
	group=$(id -gn)
	stage_start alignd --socket_group "$group"
	wb_wait_for 10 test -f "$RT/alignd.state"
	run stat -c '%a %G' "$RT/alignd.state" "$RT"
	assert_line "640 $group"
	assert_line "770 $group"
}

@test "a FIFO at the state file is refused at start; the stage runs and stops on SIGTERM" {
	for s in alignd estimd; do
		mkdir -p "$RT"
		mkfifo "$RT/$s.state"
		stage_start $s --state_every 0
		wb_wait_lines "$BATS_TEST_TMPDIR/$s.log" 1 10 "state $RT/$s.state: a FIFO, not a regular file: ignored, starting clean"
		run stat_value $s stage
		assert_output $s
		kill -TERM "$(eval echo "\$PID_$s")"
		rc=0
		wait "$(eval echo "\$PID_$s")" || rc=$?
		[ "$rc" -eq 0 ]
		[ -f "$RT/$s.state" ] # the save at the stop replaced the FIFO
	done
}

@test "a planted symbolic link is neither read nor written through" {
	mkdir -p "$RT"
	for s in alignd estimd; do
		printf 'precious\n' >"$BATS_TEST_TMPDIR/$s.victim"
		printf 'precious\n' >"$BATS_TEST_TMPDIR/$s.victim2"
		ln -s "$BATS_TEST_TMPDIR/$s.victim" "$RT/$s.state"
		ln -s "$BATS_TEST_TMPDIR/$s.victim2" "$RT/$s.state.tmp" # the old fixed temporary name
		stage_start $s
		wb_wait_lines "$BATS_TEST_TMPDIR/$s.log" 1 10 "state $RT/$s.state: a symbolic link, not a regular file: ignored"
		# The first checkpoint replaces the link with a regular file.
		wb_wait_for 10 bash -c '[ -f "$0" ] && [ ! -L "$0" ]' "$RT/$s.state"
		run cat "$BATS_TEST_TMPDIR/$s.victim" "$BATS_TEST_TMPDIR/$s.victim2"
		assert_output $'precious\nprecious'
	done
}

@test "alignd refuses a state file with a host of no name and starts clean" {
	mkdir -p "$RT"
	now=$(date +%s%N)
	printf '{"version":1,"saved_ns":%s,"power":[{"host":"","epoch":1,"interval_ns":1000000000,"last_t":%s,"zones":[]}],"usage":[]}' \
		"$now" "$now" >"$RT/alignd.state"
	stage_start alignd --state_every 0
	wb_wait_lines "$BATS_TEST_TMPDIR/alignd.log" 1 10 "state $RT/alignd.state: power\[0\].host: needs a string of 1 to 63 bytes"
	grep -q "ignored, starting clean" "$BATS_TEST_TMPDIR/alignd.log"
	# A resumed power host would make it "measured".
	run stat_value alignd mode
	assert_output waiting
}

@test "estimd refuses a state file with a negative total as a whole" {
	mkdir -p "$RT"
	printf '{"version":1,"saved_ns":1,"last_epoch":3,"hosts":[{"host":"a","epoch":3,"zones":[{"name":"package-0","total_uj":5}]},{"host":"b","epoch":3,"zones":[{"name":"package-0","total_uj":-5}]}]}' \
		>"$RT/estimd.state"
	stage_start estimd --state_every 0
	wb_wait_lines "$BATS_TEST_TMPDIR/estimd.log" 1 10 "state $RT/estimd.state: hosts\[1\].zones\[0\].total_uj: needs a non-negative integer: ignored, starting clean"
	run grep -c "resumed" "$BATS_TEST_TMPDIR/estimd.log"
	assert_output 0
}

@test "a checkpoint that cannot be written is counted in stat and exported" {
	printf 'not a directory\n' >"$BATS_TEST_TMPDIR/file"
	for s in alignd estimd; do
		stage_start $s --state_file "$BATS_TEST_TMPDIR/file/$s.state"
		wb_wait_for 10 bash -c '[ "$("$0" tap --count 1 --timeout 10s "$1" stat/ | jq -r ".msg.checkpoint_failures")" -ge 2 ]' \
			"$WATTBUS" "ipc://$RT/$s.sock"
		grep -q "state $BATS_TEST_TMPDIR/file/$s.state: cannot write" "$BATS_TEST_TMPDIR/$s.log"
	done
	ex_start --sub "ipc://$RT/alignd.sock" --sub "ipc://$RT/estimd.sock"
	for s in alignd estimd; do
		wb_wait_for 10 bash -c 'curl -sS "$0/metrics" | grep -Eq "^wattbus_stage_checkpoint_failures_total\{host=\"testhost\",stage=\"$1\",src=\"$1\"\} [1-9][0-9]*$"' "$EX_URL" $s
	done
}

@test "a runtime directory planted by another user, or a link to one, is refused at start" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to make a directory owned by another user"
	mkdir -p "$BATS_TEST_TMPDIR/theirs"
	chown nobody "$BATS_TEST_TMPDIR/theirs"
	run timeout 10 "$WB_BUILD/wattbus-alignd" --runtime_dir "$BATS_TEST_TMPDIR/theirs" --sub "$(wb_ep nothing)"
	assert_failure 1
	assert_output --partial "runtime dir $BATS_TEST_TMPDIR/theirs: owned by uid $(id -u nobody), neither this user nor root: refused"
	ln -s "$BATS_TEST_TMPDIR/theirs" "$BATS_TEST_TMPDIR/link"
	run timeout 10 "$WB_BUILD/wattbus-alignd" --runtime_dir "$BATS_TEST_TMPDIR/link" --sub "$(wb_ep nothing)"
	assert_failure 1
	assert_output --partial "runtime dir $BATS_TEST_TMPDIR/link: not a directory (a symbolic link): refused"
	[ -z "$(ls -A "$BATS_TEST_TMPDIR/theirs")" ] # nothing made there
}

@test "wattbus record creates its file 0600, and makes an existing one 0600" {
	umask 022
	# a stage to record from (recording a missing socket is an error)
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$BATS_TEST_TMPDIR/rt" --sub "$(wb_ep nothing)" --stat_interval 100ms
	wb_wait_for 30 test -S "$BATS_TEST_TMPDIR/rt/alignd.sock"
	run "$WATTBUS" record --count 1 --duration 60s "ipc://$BATS_TEST_TMPDIR/rt/alignd.sock" "$BATS_TEST_TMPDIR/new.rec"
	assert_success
	run stat -c %a "$BATS_TEST_TMPDIR/new.rec"
	assert_output 600
	install -m 0644 /dev/null "$BATS_TEST_TMPDIR/old.rec"
	run "$WATTBUS" record --count 1 --duration 60s "ipc://$BATS_TEST_TMPDIR/rt/alignd.sock" "$BATS_TEST_TMPDIR/old.rec"
	assert_success
	run stat -c %a "$BATS_TEST_TMPDIR/old.rec"
	assert_output 600
}
