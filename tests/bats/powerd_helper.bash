# Shared by the powerd_*.bats suites: fake sysfs/msr trees in the test's temp
# dir, powerd started on them with a short interval, and the bus read with
# `wattbus tap`. Counters are advanced one step at a time, each step waited
# for on the bus, so that the totals can be checked exactly.
load helper

PD=$WB_BUILD/wattbus-powerd
PDR=$BATS_TEST_TMPDIR/fake # the fake root: $PDR/sys, $PDR/dev/cpu
PDEP=ipc://$BATS_TEST_TMPDIR/powerd.sock
TAPLOG=$BATS_TEST_TMPDIR/tap.log

# pd_rapl_zone DIR NAME ENERGY_UJ MAX_RANGE_UJ
pd_rapl_zone() {
	local d=$PDR/sys/class/powercap/$1
	wb_put "$d/name" "$2"
	wb_put "$d/max_energy_range_uj" "$4"
	wb_put "$d/energy_uj" "$3"
}

pd_rapl_set() {
	wb_put "$PDR/sys/class/powercap/$1/energy_uj" "$2"
}

# Start powerd on the fake root (extra flags appended) and a tap on its endpoint.
pd_start() {
	mkdir -p "$BATS_TEST_TMPDIR/run"
	wb_spawn tap "$WATTBUS" tap --check "$PDEP"
	wb_spawn powerd "$PD" --sysfs_root "$PDR/sys" --msr_root "$PDR/dev/cpu" --pub "$PDEP" \
		--runtime_dir "$BATS_TEST_TMPDIR/run" --interval 100ms --stat_interval 200ms --host testhost "$@"
}

# The complete lines of the tap log so far (the last one may still be written).
pd_tap_lines() {
	[ -f "$TAPLOG" ] || return 0
	head -n "$(wc -l <"$TAPLOG")" "$TAPLOG"
}

# pd_power_rows ZONE: "t seq epoch energy_uj interval_ns" per power message with ZONE (ZONE "-" for
# every message, energy 0). Python, since jq 1.6 reads numbers as doubles and t (~1.8e18 ns) would
# lose its last digits.
pd_power_rows() {
	pd_tap_lines | python3 -c '
import json, sys
zone = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m["topic"] != "power/testhost":
        continue
    msg = m["msg"]
    e = [z["energy_uj"] for z in msg["zones"] if z["name"] == zone]
    if zone == "-" or e:
        print(msg["t"], msg["seq"], msg["epoch"], e[0] if e else 0, msg["interval_ns"])
' "$1"
}

# pd_power_values ZONE: every published energy_uj of ZONE, one per line, in order.
pd_power_values() {
	pd_tap_lines | jq -r --arg z "$1" 'select(.topic == "power/testhost") | .msg.zones[] | select(.name == $z) | .energy_uj'
}

pd_has_energy() {
	pd_power_values "$1" | grep -qx -- "$2"
}

# pd_wait_energy ZONE VALUE [SECS]: wait until ZONE was published with energy_uj VALUE.
pd_wait_energy() {
	if ! wb_wait_for "${3:-10}" pd_has_energy "$1" "$2"; then
		echo "zone $1 never published energy_uj $2; published: $(pd_power_values "$1" | tail -5 | tr '\n' ' ')" >&2
		echo "--- powerd log:" >&2
		tail -20 "$BATS_TEST_TMPDIR/powerd.log" >&2
		return 1
	fi
}

# pd_wait_power N: wait for N power messages.
pd_wait_power() {
	wb_wait_for "${2:-10}" bash -c '[ "$(grep -c "\"topic\":\"power/testhost\"" "$0" 2>/dev/null)" -ge "$1" ]' "$TAPLOG" "$1"
}

# pd_stat_counter NAME: the value of a stage counter in the latest stat message.
pd_stat_counter() {
	pd_tap_lines | jq -r --arg n "$1" 'select(.topic == "stat/testhost") | .msg.counters[]? | select(.name == $n) | .value' | tail -1
}

pd_stat_mode() {
	pd_tap_lines | jq -r 'select(.topic == "stat/testhost") | .msg.mode' | tail -1
}

# pd_wait_stat NAME MIN: wait until counter NAME reaches at least MIN.
pd_wait_stat() {
	wb_wait_for "${3:-10}" bash -c 'v=$(pd_stat_counter "$0"); [ -n "$v" ] && [ "$v" -ge "$1" ]' "$1" "$2"
}
export -f pd_stat_counter pd_stat_mode pd_tap_lines pd_power_values pd_power_rows

# pd_watts_ok FILE WATTS: FILE holds "t energy_uj ..." rows of one zone; the energy between the first
# and the last row is WATTS times the time between their t. Within 1 % (rounding), widened by what
# the sampling lateness powerd measured allows: a sample read late next to one read on time is
# integrated over the monotonic step (counter.c), which moves energy by at most WATTS times the
# two latenesses; twice the sum of all latenesses bounds it. Reads a stat newer than the rows.
pd_watts_ok() {
	local f=$1 w=$2 n
	n=$(pd_stat_counter samples)
	pd_wait_stat samples $((${n:-0} + 1)) || return 1
	python3 - "$f" "$w" "$(pd_stat_counter lateness_sum_ns)" <<-'PY'
		import sys
		rows = [tuple(map(int, l.split()[:2])) for l in open(sys.argv[1]) if l.strip()]
		w, late_ns = float(sys.argv[2]), int(sys.argv[3])
		(t0, e0), (t1, e1) = rows[0], rows[-1]
		want = (t1 - t0) / 1000 * w
		got = e1 - e0
		tol = want / 100 + 2 * w * late_ns / 1000
		print("%d uJ over %d ms, %g W gives %d uJ; allowed %d uJ off (lateness sum %d us)"
		      % (got, (t1 - t0) // 10**6, w, want, tol, late_ns // 1000))
		sys.exit(0 if want > 0 and abs(got - want) <= tol else 1)
	PY
}
export TAPLOG

# pd_values_ok ZONE EXPECTED...: every published value of ZONE is one of the expected totals, in order.
pd_values_ok() {
	local z=$1
	shift
	local allowed=" $* "
	local prev=0 v
	for v in $(pd_power_values "$z"); do
		if [[ $allowed != *" $v "* ]]; then
			echo "zone $z published $v, not one of the expected totals: $*" >&2
			return 1
		fi
		if [ "$v" -lt "$prev" ]; then
			echo "zone $z went back from $prev to $v" >&2
			return 1
		fi
		prev=$v
	done
}

# pd_step ZONE DIR RANGE INC...: advance a powercap counter by each increment
# (wrapping at RANGE + 1), waiting for each new total on the bus. Prints the
# totals. Starts from the current file value and the total it was published as.
pd_rapl_steps() {
	local zone=$1 dir=$2 range=$3 total=$4
	shift 4
	local raw
	raw=$(cat "$PDR/sys/class/powercap/$dir/energy_uj")
	for inc in "$@"; do
		raw=$(((raw + inc) % (range + 1)))
		total=$((total + inc))
		pd_rapl_set "$dir" "$raw"
		pd_wait_energy "$zone" "$total" || return 1
		echo "$total"
	done
}
