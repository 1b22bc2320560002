#!/usr/bin/env bats
# The systemd unit set as `make install` puts it: systemd-analyze verify is
# clean, the exposure scores stay low, and each unit's ExecStart line (with its
# EnvironmentFile options) starts its daemon, which reports READY=1 and
# WATCHDOG=1 on a stand-in notification socket. (No systemd PID 1 here;
# systemd_boot.bats boots one in namespaces.)

load helper

STAGES=(powerd usaged alignd estimd exportd modeld)
# The stages wattbus.target enables on every host (modeld runs on the one serving models).
TARGET_STAGES=(powerd usaged alignd estimd exportd)

setup_file() {
	export ROOT=$BATS_FILE_TMPDIR/root
	# -o all: install what is built, never rebuild it with another PREFIX.
	env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -C "$WB_ROOT" -o all BUILD="$WB_BUILD" PREFIX=/usr \
		DESTDIR="$ROOT" install >"$BATS_FILE_TMPDIR/install.log" 2>&1 || {
		cat "$BATS_FILE_TMPDIR/install.log" >&3
		return 1
	}
	# What a Debian host has that the units refer to: the targets of the
	# default dependencies, and kill for ExecReload.
	for t in sysinit basic shutdown multi-user; do
		cp "/usr/lib/systemd/system/$t.target" "$ROOT/usr/lib/systemd/system/"
	done
	mkdir -p "$ROOT/usr/bin"
	cp /usr/bin/kill "$ROOT/usr/bin/kill"
	ln -sfn usr/bin "$ROOT/bin"
}

unit() {
	echo "$ROOT/usr/lib/systemd/system/$1"
}

@test "make install puts the units, tmpfiles.d and sysusers.d in place, placeholders substituted" {
	for s in "${STAGES[@]}"; do
		[ -f "$(unit wattbus-$s.service)" ]
		grep -qx "ExecStart=/usr/lib/wattbus/wattbus-$s --runtime_dir /run/wattbus \$WATTBUS_${s^^}_OPTS" \
			"$(unit wattbus-$s.service)"
		grep -qx "EnvironmentFile=-/etc/default/wattbus-$s" "$(unit wattbus-$s.service)"
		[ -x "$ROOT/usr/lib/wattbus/wattbus-$s" ]
	done
	[ -f "$(unit wattbus.target)" ]
	run grep -l '@[A-Z]*@' "$ROOT"/usr/lib/systemd/system/wattbus*
	assert_failure
	assert_output ""
	grep -qx 'd /run/wattbus 0770 root wattbus -' "$ROOT/usr/lib/tmpfiles.d/wattbus.conf"
	grep -qx 'g wattbus -' "$ROOT/usr/lib/sysusers.d/wattbus.conf"
}

@test "systemd-analyze verify is clean on the installed units" {
	# --root: ExecStart binaries are looked up in the installed tree.
	run systemd-analyze verify --root="$ROOT" --man=no "$ROOT"/usr/lib/systemd/system/wattbus*
	assert_success
	assert_output ""
}

@test "systemd-analyze verify catches a broken unit (the check above can fail)" {
	cp "$(unit wattbus-alignd.service)" "$BATS_TEST_TMPDIR/keep"
	rm "$ROOT/usr/lib/wattbus/wattbus-alignd.bak" 2>/dev/null || true
	mv "$ROOT/usr/lib/wattbus/wattbus-alignd" "$ROOT/usr/lib/wattbus/wattbus-alignd.bak"
	echo 'PrivateTmpp=yes' >>"$(unit wattbus-alignd.service)"
	run systemd-analyze verify --root="$ROOT" --man=no "$(unit wattbus-alignd.service)"
	mv "$ROOT/usr/lib/wattbus/wattbus-alignd.bak" "$ROOT/usr/lib/wattbus/wattbus-alignd"
	cp "$BATS_TEST_TMPDIR/keep" "$(unit wattbus-alignd.service)"
	assert_failure
	assert_output --partial "Unknown key 'PrivateTmpp'"
	assert_output --partial "wattbus-alignd is not executable"
}

@test "every Documentation= man page is installed" {
	for u in "$ROOT"/usr/lib/systemd/system/wattbus*; do
		for m in $(sed -n 's/^Documentation=//p' "$u"); do
			[[ $m =~ ^man:([a-z-]+)\(([0-9])\)$ ]] || continue
			page="$ROOT/usr/share/man/man${BASH_REMATCH[2]}/${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
			[ -f "$page" ] || fail "$(basename "$u"): $m is not installed ($page)"
		done
	done
}

@test "target and units: PartOf/WantedBy wattbus.target, and the target enables every stage" {
	for s in "${TARGET_STAGES[@]}"; do
		grep -qx 'PartOf=wattbus.target' "$(unit wattbus-$s.service)"
		grep -qx 'WantedBy=wattbus.target' "$(unit wattbus-$s.service)"
		grep -q "^Also=.*wattbus-$s.service" "$(unit wattbus.target)"
	done
	# `systemctl enable wattbus.target` on the installed tree links every stage.
	run systemctl --root="$ROOT" enable wattbus.target
	assert_success
	for s in "${TARGET_STAGES[@]}"; do
		[ -L "$ROOT/etc/systemd/system/wattbus.target.wants/wattbus-$s.service" ]
	done
	# modeld stops with the target but is enabled on its own, on the host that serves models
	grep -qx 'PartOf=wattbus.target' "$(unit wattbus-modeld.service)"
	grep -qx 'WantedBy=multi-user.target' "$(unit wattbus-modeld.service)"
	grep -qx 'StateDirectory=wattbus/models' "$(unit wattbus-modeld.service)"
	[ ! -e "$ROOT/etc/systemd/system/wattbus.target.wants/wattbus-modeld.service" ]
	[ -L "$ROOT/etc/systemd/system/multi-user.target.wants/wattbus.target" ]
	run systemctl --root="$ROOT" disable wattbus.target
	assert_success
}

@test "systemd-analyze security: exposure under 2.0 for every unit, 2.5 for usaged" {
	for s in "${STAGES[@]}"; do
		run systemd-analyze security --offline=yes --root="$ROOT" "$(unit wattbus-$s.service)"
		assert_success
		score=$(echo "$output" | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
		echo "# wattbus-$s.service exposure $score" >&3
		[ -n "$score" ] || fail "no score in: $output"
		# usaged's CAP_SYS_PTRACE (reading /proc/PID/exe, docs/systemd.md) weighs 0.3.
		max=2.0
		[ "$s" = usaged ] && max=2.5
		awk -v s="$score" -v m="$max" 'BEGIN { exit !(s < m) }' || fail "wattbus-$s.service exposure $score >= $max"
	done
	# The unprivileged stages have no capability, no ambient set and a private user namespace.
	for s in alignd estimd exportd modeld; do
		grep -qx 'DynamicUser=yes' "$(unit wattbus-$s.service)"
		grep -qx 'CapabilityBoundingSet=' "$(unit wattbus-$s.service)"
		grep -qx 'ProtectSystem=strict' "$(unit wattbus-$s.service)"
		grep -qx 'SystemCallFilter=@system-service' "$(unit wattbus-$s.service)"
	done
	grep -qx 'CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYS_PTRACE' "$(unit wattbus-usaged.service)"
	grep -qx 'CapabilityBoundingSet=' "$(unit wattbus-powerd.service)"
}

# The argv systemd builds from a unit's ExecStart: $VAR splits into words, %i is
# $INSTANCE (a template's), the bus directory moves into the test's temp dir and
# /etc/wattbus into the installed tree.
unit_argv() {
	local line w var
	line=$(sed -n 's/^ExecStart=//p' "$1")
	line=${line//\/run\/wattbus/$RT}
	line=${line//%i/${INSTANCE:-}}
	line=${line//\/etc\/wattbus/$ROOT\/etc\/wattbus}
	ARGV=()
	for w in $line; do
		if [[ $w =~ ^\$([A-Z_]+)$ ]]; then
			var=${BASH_REMATCH[1]}
			# shellcheck disable=SC2206 # word splitting is what systemd does with $VAR
			ARGV+=(${!var})
		else
			ARGV+=("$w")
		fi
	done
}

exec_argv() {
	unit_argv "$(unit wattbus-$1.service)"
}

# The EnvironmentFile a test host would have: flags that keep each stage off
# the real machine (fake RAPL tree, loopback port, the repository's model).
write_env_files() {
	local fake=$BATS_TEST_TMPDIR/sys/class/powercap/intel-rapl:0
	mkdir -p "$fake"
	echo package-0 >"$fake/name"
	echo 262143328850 >"$fake/max_energy_range_uj"
	echo 123456789 >"$fake/energy_uj"
	local model
	model=$(ls "$WB_ROOT"/data/models/*.json | head -n 1)
	mkdir -p "$ROOT/etc/default"
	cat >"$ROOT/etc/default/wattbus-powerd" <<-EOF
		WATTBUS_POWERD_OPTS="--sysfs_root $BATS_TEST_TMPDIR/sys --interval 200ms --stat_interval 200ms"
	EOF
	echo "WATTBUS_USAGED_OPTS=\"--interval 200ms --stat_interval 200ms\"" >"$ROOT/etc/default/wattbus-usaged"
	echo "WATTBUS_ALIGND_OPTS=\"--stat_interval 200ms\"" >"$ROOT/etc/default/wattbus-alignd"
	echo "WATTBUS_ESTIMD_OPTS=\"--model $model --stat_interval 200ms\"" >"$ROOT/etc/default/wattbus-estimd"
	echo "WATTBUS_EXPORTD_OPTS=\"--listen 127.0.0.1:0 --stat_interval 200ms\"" >"$ROOT/etc/default/wattbus-exportd"
	echo "WATTBUS_MODELD_OPTS=\"--listen 127.0.0.1:0 --stat_interval 200ms --store $BATS_TEST_TMPDIR/models\"" >"$ROOT/etc/default/wattbus-modeld"
}

load_env_file() {
	local f
	f=$(sed -n 's/^EnvironmentFile=-//p' "$(unit wattbus-$1.service)")
	set -a
	# shellcheck disable=SC1090
	. "$ROOT$f"
	set +a
}

@test "each unit's ExecStart, with its EnvironmentFile options, passes the config check (-n)" {
	RT=$BATS_TEST_TMPDIR/run
	write_env_files
	for s in "${STAGES[@]}"; do
		load_env_file "$s"
		exec_argv "$s"
		ARGV[0]=$ROOT${ARGV[0]}
		run "${ARGV[@]}" -n
		assert_success
		assert_output --regexp ': ok$'
	done
	# The options really arrive: a bad value in the file is a usage error (exit 2,
	# which RestartPreventExitStatus=2 keeps from restarting).
	echo 'WATTBUS_ALIGND_OPTS="--stat_interval soon"' >"$ROOT/etc/default/wattbus-alignd"
	load_env_file alignd
	exec_argv alignd
	ARGV[0]=$ROOT${ARGV[0]}
	run "${ARGV[@]}" -n
	assert_failure 2
	grep -qx 'RestartPreventExitStatus=2' "$(unit wattbus-alignd.service)"
}

@test "each unit's ExecStart starts its daemon: READY=1, WATCHDOG=1, a 0660 socket, clean stop" {
	RT=$BATS_TEST_TMPDIR/run
	mkdir -p "$RT"
	write_env_files
	for s in "${STAGES[@]}"; do
		sock=$BATS_TEST_TMPDIR/notify-$s
		log=$BATS_TEST_TMPDIR/notify-$s.log
		wb_spawn "notify_$s" python3 "$BATS_TEST_DIRNAME/systemd_notify.py" "$sock" "$log"
		wb_wait_lines "$log" 1 10 listening
		load_env_file "$s"
		exec_argv "$s"
		ARGV[0]=$ROOT${ARGV[0]}
		# WatchdogSec=30s in the unit; a short one here so that a ping shows up quickly.
		NOTIFY_SOCKET=$sock WATCHDOG_USEC=400000 wb_spawn "$s" "${ARGV[@]}"
		wb_wait_lines "$log" 1 10 'READY=1' || fail "$s: no READY=1; log: $(cat "$BATS_TEST_TMPDIR/$s.log")"
		wb_wait_lines "$log" 1 10 'WATCHDOG=1' || fail "$s: no WATCHDOG=1; notify: $(cat "$log")"
		grep -q 'STATUS=mode ' "$log"
		[ -S "$RT/$s.sock" ]
		[ "$(stat -c %a "$RT/$s.sock")" = 660 ]
		pid_var=PID_$s
		kill -TERM "${!pid_var}"
		wb_wait_for 10 bash -c "! kill -0 ${!pid_var} 2>/dev/null" || fail "$s did not stop on SIGTERM"
		wait "${!pid_var}" || fail "$s exited with $? on SIGTERM"
		wb_wait_lines "$log" 1 5 'STOPPING=1'
	done
	# powerd read the fake RAPL tree named in its EnvironmentFile.
	grep -q 'STATUS=mode rapl' "$BATS_TEST_TMPDIR/notify-powerd.log"
}

@test "wattbus-vmpub@'s ExecStart starts vmpub like a stage: READY=1, WATCHDOG=1, its stat socket, clean stop" {
	RT=$BATS_TEST_TMPDIR/run
	mkdir -p "$RT" "$ROOT/etc/wattbus/keys" "$ROOT/etc/wattbus/vm/vm1"
	"$WATTBUS" keygen "$ROOT/etc/wattbus/keys/hv" >/dev/null
	"$WATTBUS" keygen "$BATS_TEST_TMPDIR/vm1" >/dev/null
	cp "$BATS_TEST_TMPDIR/vm1" "$ROOT/etc/wattbus/vm/vm1/"
	u=$(unit wattbus-vmpub@.service)
	grep -qx 'Type=notify' "$u"
	grep -qx 'WatchdogSec=30s' "$u"
	grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$u"
	# The instance vm1 with its EnvironmentFile, as systemd would expand it.
	echo "ENDPOINT=ipc://$RT/vm1-guest.sock" >"$ROOT/etc/wattbus/vm/vm1.env"
	set -a
	# shellcheck disable=SC1091 # written just above
	. "$ROOT/etc/wattbus/vm/vm1.env"
	set +a
	INSTANCE=vm1 unit_argv "$u"
	ARGV[0]=$ROOT${ARGV[0]}
	run "${ARGV[@]}" -n
	assert_success
	assert_output --regexp ': ok$'
	sock=$BATS_TEST_TMPDIR/notify-vmpub
	log=$BATS_TEST_TMPDIR/notify-vmpub.log
	wb_spawn notify_vmpub python3 "$BATS_TEST_DIRNAME/systemd_notify.py" "$sock" "$log"
	wb_wait_lines "$log" 1 10 listening
	NOTIFY_SOCKET=$sock WATCHDOG_USEC=400000 wb_spawn vmpub "${ARGV[@]}" --stat_interval 200ms
	wb_wait_lines "$log" 1 10 'READY=1' || fail "vmpub: no READY=1; log: $(cat "$BATS_TEST_TMPDIR/vmpub.log")"
	wb_wait_lines "$log" 1 10 'WATCHDOG=1' || fail "vmpub: no WATCHDOG=1; notify: $(cat "$log")"
	grep -q 'STATUS=mode vm' "$log"
	# Its stat messages on its own socket, with its counters; the guest's endpoint is another.
	[ -S "$RT/vmpub-vm1.sock" ]
	[ -S "$RT/vm1-guest.sock" ]
	run "$WATTBUS" tap --count 1 --timeout 10s "ipc://$RT/vmpub-vm1.sock" stat/
	assert_success
	assert_output --partial '"stage":"vmpub"'
	assert_output --partial '"name":"vmpub_sent"'
	# SIGHUP reloads (the log level) and it goes on: ready again.
	kill -HUP "$PID_vmpub"
	wb_wait_lines "$log" 1 10 'RELOADING=1' || fail "vmpub: no RELOADING=1; notify: $(cat "$log")"
	wb_wait_lines "$log" 2 10 'READY=1' || fail "vmpub: not ready again after SIGHUP; notify: $(cat "$log")"
	kill -0 "$PID_vmpub"
	kill -TERM "$PID_vmpub"
	wb_wait_for 10 bash -c "! kill -0 $PID_vmpub 2>/dev/null" || fail "vmpub did not stop on SIGTERM"
	wait "$PID_vmpub" || fail "vmpub exited with $? on SIGTERM"
	wb_wait_lines "$log" 1 5 'STOPPING=1'
}

teardown() {
	wb_kill_all
}
