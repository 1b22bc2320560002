#!/bin/bash
# `make run`: start the five stages from the build tree with the built-in
# defaults, sockets under build/run/, and say what this machine runs on (meter
# or model mode, eBPF or /proc) and where the metrics are. Ctrl-C (or SIGINT or
# SIGTERM) stops every stage cleanly, at any time, and exits 0; a stage that
# dies on its own is reported with its exit status, and the exit is 1. One that
# dies before the banner (exportd that cannot have its port, say) stops them all:
# no banner announces what does not run.
#
# Environment: WB_BUILD (build dir), WATTBUS_LISTEN (default :9102),
# WATTBUS_RUNTIME_DIR (where the sockets go; default build/run),
# WATTBUS_SYSFS_ROOT (powerd reads meters there instead of /sys: a fake meter
# for a demo), WATTBUS_SOURCE (powerd's `source`: fake for a simulated meter on a
# machine without one), WATTBUS_RUN_FOR (stop by itself after this many seconds; for tests).
set -u

# A requested stop must reach the trap below. Bash cannot trap a signal that
# was ignored when it started, as SIGINT is in a background job of a script, so
# the signals go back to their defaults first. And under make in a terminal,
# Ctrl-C would reach make too, which then reports "Interrupt" and exits 130
# whatever this script does: so the script takes the terminal's foreground in a
# process group of its own, and gives it back at exit. Perl (essential on
# Debian) has the POSIX calls for both.
if [ -z "${WB_RUN_SIGNALS_SET:-}" ]; then
	export WB_RUN_SIGNALS_SET=1
	exec perl -MPOSIX -e '
		$SIG{$_} = "DEFAULT" for qw(INT TERM HUP);
		if (open(my $tty, "+<", "/dev/tty")) {
			my $fg = tcgetpgrp(fileno($tty));
			if ($fg > 0 && $fg == getpgrp() && setpgid(0, 0)) {
				$SIG{TTOU} = "IGNORE";
				$ENV{WB_RUN_TTY_PGRP} = $fg if tcsetpgrp(fileno($tty), $$);
				$SIG{TTOU} = "DEFAULT";
			}
		}
		exec { $ARGV[0] } @ARGV or die "run.sh: cannot exec $ARGV[0]: $!\n";
	' "$0" "$@"
fi
unset WB_RUN_SIGNALS_SET

here=$(cd "$(dirname "$0")/.." && pwd)
B=${WB_BUILD:-$here/build}
RT=${WATTBUS_RUNTIME_DIR:-$B/run}
LISTEN=${WATTBUS_LISTEN:-:9102}
PORT=${LISTEN##*:}
SYSFS=${WATTBUS_SYSFS_ROOT:-}
SOURCE=${WATTBUS_SOURCE:-}
STAGES=(powerd usaged alignd estimd exportd)
mkdir -p "$RT"
tmp=$(mktemp -d)

# shellcheck disable=SC2317 # run by the EXIT trap
give_back_terminal() {
	rm -rf "$tmp"
	[ -n "${WB_RUN_TTY_PGRP:-}" ] || return 0
	perl -MPOSIX -e '$SIG{TTOU} = "IGNORE"; open(my $t, "+<", "/dev/tty") and tcsetpgrp(fileno($t), $ARGV[0])' "$WB_RUN_TTY_PGRP"
}
trap give_back_terminal EXIT

if [ -n "$SYSFS" ] && [ ! -d "$SYSFS" ]; then
	echo "wattbus: WATTBUS_SYSFS_ROOT=$SYSFS is not a directory" >&2
	exit 2
fi

model=""
for f in "$here"/data/models/*.json; do [ -e "$f" ] && model=$f && break; done

declare -A pid_of name_of
stopping=0
started=0
failed=0
probe_pid=""

stage_args() {
	case $1 in
	powerd) echo "${SYSFS:+--sysfs_root $SYSFS} ${SOURCE:+--source $SOURCE}" ;;
	estimd) [ -n "$model" ] && echo "--model $model" ;;
	exportd) echo "--listen $LISTEN" ;;
	esac
}

start_stage() {
	local s=$1
	# shellcheck disable=SC2046
	"$B/wattbus-$s" --runtime_dir "$RT" --stat_interval 2s $(stage_args "$s") \
		2> >(trap "" INT TERM; sed -u "s/^/[$s] /" >&2) &
	pid_of[$s]=$!
	name_of[$!]=$s
}

# shellcheck disable=SC2317 # run by the INT, TERM and HUP traps
stop_all() {
	[ "$stopping" -eq 1 ] || echo "wattbus: stopping every stage" >&2
	stopping=1
	[ -n "$probe_pid" ] && kill -TERM "$probe_pid" 2>/dev/null
	for s in "${STAGES[@]}"; do
		[ -n "${pid_of[$s]:-}" ] && kill -TERM "${pid_of[$s]}" 2>/dev/null
	done
}
trap stop_all INT TERM HUP

# stage_ended STAGE STATUS: STAGE's process is gone; say so unless it was asked
# to stop and stopped cleanly. Before the banner, a stage gone on its own stops
# the others (its own message, just above, says why).
stage_ended() {
	local s=$1 rc=$2
	unset "pid_of[$s]"
	if [ "$stopping" -eq 0 ] && [ "$started" -eq 0 ]; then
		echo "wattbus: wattbus-$s failed at start-up with status $rc (its message is above); stopping every stage" >&2
		failed=1
		stopping=1 # said just now: stop_all need not say it again
		stop_all
	elif [ "$stopping" -eq 0 ]; then
		echo "wattbus: wattbus-$s exited on its own with status $rc; the other stages keep running" >&2
		failed=1
	elif [ "$rc" -ne 0 ]; then
		echo "wattbus: wattbus-$s stopped with status $rc" >&2
		failed=1
	fi
}

# A start-up probe runs in the background: bash runs a trap only once the
# foreground command is done, while `wait` returns at once, so a stop asked for
# during the probe is not held up by it; a stage that ends meanwhile is seen at
# once. Usage: probe OUT cmd...
probe() {
	local out=$1
	shift
	[ "$stopping" -eq 0 ] || return 0
	"$@" >"$out" 2>/dev/null &
	probe_pid=$!
	local done_pid rc
	while :; do
		done_pid=""
		wait -n -p done_pid "$probe_pid" "${pid_of[@]}"
		rc=$?
		if [ -z "${done_pid:-}" ]; then
			[ "$rc" -eq 127 ] && break # nothing left to wait for
			continue                   # a trapped signal interrupted the wait
		fi
		[ "$done_pid" = "$probe_pid" ] && break
		stage_ended "${name_of[$done_pid]}" "$rc"
	done
	probe_pid=""
}

for s in "${STAGES[@]}"; do
	if [ ! -x "$B/wattbus-$s" ]; then
		echo "wattbus: $B/wattbus-$s is missing; run make first" >&2
		exit 1
	fi
done
for s in "${STAGES[@]}"; do
	[ "$stopping" -eq 0 ] && start_stage "$s"
done

# What each stage runs on, from its first stat message (mode).
all_eps=$(printf "ipc://$RT/%s.sock," "${STAGES[@]}")
probe "$tmp/stat" "$B/wattbus" tap --timeout 6s --count 10 "${all_eps%,}" stat/
modes=$(jq -r '.msg | "\(.stage) \(.mode)"' "$tmp/stat" 2>/dev/null | sort -u)
mode_of() { awk -v s="$1" '$1 == s { print $2; exit }' <<<"$modes"; }
pm=$(mode_of powerd)
um=$(mode_of usaged)
# estimd decides measured or model mode on its first slot.
probe "$tmp/estimate" "$B/wattbus" tap --timeout 10s --count 1 "ipc://$RT/estimd.sock" estimate/
em=$(jq -r .msg.mode "$tmp/estimate" 2>/dev/null)
if [ "$stopping" -eq 0 ]; then
	echo
	echo "wattbus is running (sockets in $RT):"
	case $pm in
	none | "") echo "  meter:   none found (see: $B/wattbus doctor); estimd uses a power model" ;;
	*fake*) echo "  meter:   $pm: SIMULATED from the CPU load, not measured (for a demo only)" ;;
	*) echo "  meter:   $pm${SYSFS:+ (sysfs at $SYSFS)}" ;;
	esac
	echo "  usage:   ${um:-unknown} (bpf needs root and BTF; otherwise /proc)"
	case $em in
	model*) echo "  energy:  $em${model:+ (model $(basename "$model"))}" ;;
	*) echo "  energy:  ${em:-unknown}" ;;
	esac
	echo "  metrics: http://localhost:$PORT/metrics"
	if [ -n "${WATTBUS_RUNTIME_DIR:-}" ]; then
		echo "  watch:   WATTBUS_RUNTIME_DIR=$RT $B/wattbus top"
	else
		echo "  watch:   $B/wattbus top"
	fi
	echo "  Ctrl-C stops everything."
	echo
fi

started=1

if [ -n "${WATTBUS_RUN_FOR:-}" ]; then
	(sleep "$WATTBUS_RUN_FOR" && kill -TERM $$) &
fi

while [ ${#pid_of[@]} -gt 0 ]; do
	done_pid=""
	wait -n -p done_pid
	rc=$?
	if [ -z "${done_pid:-}" ]; then
		[ "$rc" -eq 127 ] && break # no children left
		continue                   # a trapped signal interrupted the wait
	fi
	s=${name_of[$done_pid]:-}
	[ -z "$s" ] && continue # the timer, a probe, or a log pipe
	stage_ended "$s" "$rc"
done
echo "wattbus: stopped" >&2
exit $failed
