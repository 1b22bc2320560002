#!/bin/bash
# `make run`: start the five stages from the build tree with the built-in
# defaults, sockets under build/run/, and say what this machine runs on (meter
# or model mode, eBPF or /proc) and where the metrics are. Ctrl-C stops every
# stage cleanly; a stage that dies on its own is reported with its exit status.
#
# Environment: WB_BUILD (build dir), WATTBUS_LISTEN (default :9102),
# WATTBUS_RUN_FOR (stop by itself after this many seconds; for tests).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
B=${WB_BUILD:-$here/build}
RT=$B/run
LISTEN=${WATTBUS_LISTEN:-:9102}
PORT=${LISTEN##*:}
STAGES=(powerd usaged alignd estimd exportd)
mkdir -p "$RT"

model=""
for f in "$here"/data/models/*.json; do [ -e "$f" ] && model=$f && break; done

declare -A pid_of name_of
stopping=0

stage_args() {
	case $1 in
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

stop_all() {
	stopping=1
	echo "wattbus: stopping every stage" >&2
	for s in "${STAGES[@]}"; do
		[ -n "${pid_of[$s]:-}" ] && kill -TERM "${pid_of[$s]}" 2>/dev/null
	done
}
trap stop_all INT TERM

for s in "${STAGES[@]}"; do
	if [ ! -x "$B/wattbus-$s" ]; then
		echo "wattbus: $B/wattbus-$s is missing; run make first" >&2
		exit 1
	fi
	start_stage "$s"
done

# What each stage runs on, from its first stat message (mode).
all_eps=$(printf "ipc://$RT/%s.sock," "${STAGES[@]}")
modes=$("$B/wattbus" tap --timeout 6s --count 10 "${all_eps%,}" stat/ 2>/dev/null |
	jq -r '.msg | "\(.stage) \(.mode)"' 2>/dev/null | sort -u)
mode_of() { awk -v s="$1" '$1 == s { print $2; exit }' <<<"$modes"; }
pm=$(mode_of powerd)
um=$(mode_of usaged)
# estimd decides measured or model mode on its first slot.
em=$("$B/wattbus" tap --timeout 10s --count 1 "ipc://$RT/estimd.sock" estimate/ 2>/dev/null | jq -r .msg.mode 2>/dev/null)
echo
echo "wattbus is running (sockets in $RT):"
case $pm in
none | "") echo "  meter:   none found (see: $B/wattbus doctor); estimd uses a power model" ;;
*) echo "  meter:   $pm" ;;
esac
echo "  usage:   ${um:-unknown} (bpf needs root and BTF; otherwise /proc)"
echo "  energy:  ${em:-unknown}${model:+ (model $(basename "$model"))}"
echo "  metrics: http://localhost:$PORT/metrics"
echo "  watch:   $B/wattbus top ipc://$RT/estimd.sock"
echo "  Ctrl-C stops everything."
echo

if [ -n "${WATTBUS_RUN_FOR:-}" ]; then
	(sleep "$WATTBUS_RUN_FOR" && kill -TERM $$) &
fi

failed=0
while :; do
	done_pid=""
	wait -n -p done_pid
	rc=$?
	if [ -z "${done_pid:-}" ]; then
		[ "$rc" -eq 127 ] && break # no children left
		continue                   # a trapped signal interrupted the wait
	fi
	s=${name_of[$done_pid]:-}
	[ -z "$s" ] && continue # the timer, or a log pipe
	unset "pid_of[$s]"
	if [ "$stopping" -eq 0 ]; then
		echo "wattbus: wattbus-$s exited on its own with status $rc; the other stages keep running" >&2
		failed=1
	elif [ "$rc" -ne 0 ]; then
		echo "wattbus: wattbus-$s stopped with status $rc" >&2
		failed=1
	fi
	[ ${#pid_of[@]} -eq 0 ] && break
done
echo "wattbus: stopped" >&2
exit $failed
