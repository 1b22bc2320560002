#!/usr/bin/env bats
# Faults: while the five stages run on a fake meter (40 W package, 8 W dram,
# slots of 500 ms), each stage in turn is killed with SIGKILL, left down for
# 0.4 s (powerd until estimd has modelled a slot: past 4 power intervals alignd
# sends slots without zones, which estimd models, zones without path) and
# started again. A second exportd (the witness) runs through all of it. Checked:
# - no counter of either exportd ever goes down (the killed exportd comes back
#   on a new port, its node counters resumed from its state file), and no
#   series comes twice in one scrape (a modelled slot's zones have no path:
#   processes still have one series per zone);
# - the node energy over the whole run of the witness, and of the killed and
#   restarted exportd, equals what the meter advanced, to the microjoule (a
#   slot end snapped to the last power sample takes its value, so nothing is
#   counted past a meter that stops);
# - after each restart a slot ending after it reaches the estimates (for
#   powerd: one measured, not extrapolated) before the next stage is killed,
#   and the restarted exportd serves values.
# (How soon each stage is back is measured in bench/: on a loaded machine it
# depends on the scheduler.)
# No energy is lost because powerd's counter continues (alignd bridges it),
# usaged's next slot spans its outage, alignd and estimd resume from the
# state they checkpoint every second (state_every), and estimd and exportd
# follow the cumulative totals (exportd's node counters resume from its own
# checkpoint) (docs/alignd.md, docs/estimd.md). Runs in about
# 15 s without root (usaged in procfs mode).

load helper

setup() {
	RT=$BATS_TEST_TMPDIR/run
	SYS=$BATS_TEST_TMPDIR/sys
	CTL=$BATS_TEST_TMPDIR/meter.on
	OUT=$BATS_TEST_TMPDIR/scrapes
	mkdir -p "$RT" "$OUT"
	MODEL=$(ls "$WB_ROOT"/data/models/*.json | head -n 1)
	COMMON=(--runtime_dir "$RT" --host faults --stat_interval 200ms)
	PKG=$SYS/class/powercap/intel-rapl:0/energy_uj
	DRAM=$SYS/class/powercap/intel-rapl:0:0/energy_uj
}

teardown() {
	touch "$OUT/stop"
	wb_kill_all
}

# start STAGE [LOGNAME]: start one stage (again); its pid goes to $PID_OF_<STAGE>.
start() {
	local s=$1 log=${2:-$1}
	case $s in
	powerd) wb_spawn "$log" "$WB_BUILD/wattbus-powerd" "${COMMON[@]}" --sysfs_root "$SYS" \
		--msr_root "$BATS_TEST_TMPDIR/none" --source rapl --interval 250ms ;;
	usaged) wb_spawn "$log" "$WB_BUILD/wattbus-usaged" "${COMMON[@]}" --mode procfs --interval 500ms ;;
	alignd) wb_spawn "$log" "$WB_BUILD/wattbus-alignd" "${COMMON[@]}" ;;
	estimd) wb_spawn "$log" "$WB_BUILD/wattbus-estimd" "${COMMON[@]}" --model "$MODEL" ;;
	exportd) wb_spawn "$log" "$WB_BUILD/wattbus-exportd" "${COMMON[@]}" --listen 127.0.0.1:0 ;;
	# The witness tries to reach a restarted estimd every 100 ms, the tap backing off
	# (reconnect_max, 2 s): it is back first and applies every estimate the tap saw.
	witness) wb_spawn "$log" "$WB_BUILD/wattbus-exportd" "${COMMON[@]}" --listen 127.0.0.1:0 \
		--pub "ipc://$RT/witness.sock" --sub "ipc://$RT/estimd.sock" --state_file "$RT/witness.state" \
		--reconnect_max 100ms ;;
	esac
	eval "PID_OF_$s=$!"
}

# url_of LOGNAME: the http URL an exportd logged, once it serves.
url_of() {
	wb_wait_lines "$BATS_TEST_TMPDIR/$1.log" 1 10 'port [0-9]' || return 1
	echo "http://127.0.0.1:$(grep -o 'port [0-9]*' "$BATS_TEST_TMPDIR/$1.log" | head -n 1 | cut -d' ' -f2)"
}

# value URL 'metric{partial labels': the first matching sample, or nothing.
value() {
	curl -sS --max-time 2 "$1/metrics" 2>/dev/null | grep -F -- "$2" | head -n 1 | awk '{print $NF}'
}

applied() {
	local v
	v=$(value "$1" 'wattbus_exportd_estimates_total{host="faults"}')
	[ -n "$v" ] && [ "$v" -ge "$2" ]
}

# Microjoules from a joules value printed with six decimals.
uj() { python3 -c 'import sys; from decimal import Decimal; print(int(Decimal(sys.argv[1]) * 1000000))' "$1"; }

now_ns() { date +%s%N; }

# checkpointed_after NS: every stage's state file (alignd, estimd, both exportds) was written
# after NS: what a stage killed next resumes from covers the last restart.
checkpointed_after() {
	python3 - "$RT" "$1" <<-'EOF'
		import glob, os, sys
		files = glob.glob(os.path.join(sys.argv[1], "*.state"))
		sys.exit(0 if len(files) >= 4 and all(os.stat(f).st_mtime_ns > int(sys.argv[2]) for f in files) else 1)
	EOF
}

# modelled_since N: the tap has more than N modelled estimates.
modelled_since() {
	[ "$(grep -c '"mode":"model"' "$BATS_TEST_TMPDIR/tap.log")" -gt "$1" ]
}

# back_after NS [STAGE]: an estimate of a slot ending after NS has arrived (after powerd's
# restart: one measured, not extrapolated).
back_after() {
	python3 - "$BATS_TEST_TMPDIR/tap.log" "$1" "${2:-}" <<-'EOF'
		import json, sys
		after, stage = int(sys.argv[2]), sys.argv[3]
		for l in open(sys.argv[1]):
		    try:
		        e = json.loads(l)["msg"]
		    except ValueError:
		        continue  # the line being written
		    if e["t1"] > after and (stage != "powerd" or not e.get("quality", {}).get("extrapolated")):
		        sys.exit(0)
		sys.exit(1)
	EOF
}

@test "each stage killed with SIGKILL and restarted: counters monotonic, node energy conserved, back after each restart" {
	wb_spawn meter python3 "$BATS_TEST_DIRNAME/system_fake_meter.py" "$SYS" "$CTL" 40 8
	wb_wait_for 10 test -s "$DRAM"
	for s in powerd usaged alignd estimd exportd witness; do start "$s"; done
	A=$(url_of exportd)
	W=$(url_of witness)
	echo "$A" >"$OUT/a.url"
	wb_spawn tap "$WATTBUS" tap "ipc://$RT/estimd.sock" estimate/
	wb_wait_for 20 applied "$W" 3
	wb_wait_for 10 applied "$A" 3
	# The meter stands still so far: what the witness has is the baseline.
	e0_pkg=$(cat "$PKG") e0_dram=$(cat "$DRAM")
	w0_pkg=$(value "$W" 'kepler_node_cpu_joules_total{node_name="faults",zone="package"')
	w0_dram=$(value "$W" 'kepler_node_cpu_joules_total{node_name="faults",zone="dram"')
	a0_pkg=$(value "$A" 'kepler_node_cpu_joules_total{node_name="faults",zone="package"')
	wb_spawn scraper python3 "$BATS_TEST_DIRNAME/system_scraper.py" "$OUT" "exportd=@$OUT/a.url" "witness=$W"
	on=$(now_ns)
	touch "$CTL"
	# two slots with the meter on
	wb_wait_for 30 back_after $((on + 1000000000))

	for s in powerd usaged alignd estimd exportd; do
		pid_var=PID_OF_$s
		n_model=$(grep -c '"mode":"model"' "$BATS_TEST_TMPDIR/tap.log" || true)
		kill -KILL "${!pid_var}"
		wb_wait_for 5 bash -c "! kill -0 ${!pid_var} 2>/dev/null"
		# the outage: powerd's lasts until estimd has modelled a slot without it
		if [ "$s" = powerd ]; then
			wb_wait_for 60 modelled_since "$n_model" || fail "no modelled slot while powerd was down"
		else
			sleep 0.4
		fi
		r=$(now_ns)
		start "$s" "$s-2"
		echo "$s $r" >>"$BATS_TEST_TMPDIR/restarts"
		if [ "$s" = exportd ]; then
			A=$(url_of exportd-2)
			echo "$A" >"$OUT/a.url.new" && mv "$OUT/a.url.new" "$OUT/a.url" # whole, for the scraper
			wb_wait_for 30 applied "$A" 1 || fail "the restarted exportd serves no value"
		fi
		# back before the next fault: a slot ending after the restart reached the estimates,
		# and every stage has checkpointed (state_every) since
		wb_wait_for 60 back_after "$r" "$s" || fail "no slot ending after $s restarted reached the estimates"
		wb_wait_for 30 checkpointed_after "$(now_ns)" || fail "no checkpoint of every stage after $s restarted: $(ls -l --time-style=+%T.%N "$RT"/*.state)"
	done
	rm "$CTL"
	f=$(now_ns)
	# Drained: slots ending 1.5 s after the meter stopped have reached the estimates ...
	wb_wait_for 30 back_after $((f + 1500000000))
	# ... and the witness: it applied as many estimates as the tap saw
	n_est=$(wc -l <"$BATS_TEST_TMPDIR/tap.log")
	wb_wait_for 30 applied "$W" "$n_est"
	e1_pkg=$(cat "$PKG") e1_dram=$(cat "$DRAM")
	w1_pkg=$(value "$W" 'kepler_node_cpu_joules_total{node_name="faults",zone="package"')
	w1_dram=$(value "$W" 'kepler_node_cpu_joules_total{node_name="faults",zone="dram"')
	# ... and the restarted exportd (checked below): wait until it has the last of them too
	a_whole_run() {
		a1_pkg=$(value "$A" 'kepler_node_cpu_joules_total{node_name="faults",zone="package"')
		local d=$(($(uj "${a1_pkg:-0}") - $(uj "$a0_pkg"))) m=$((e1_pkg - e0_pkg))
		[ "$d" -eq "$m" ]
	}
	wb_wait_for 30 a_whole_run || true
	touch "$OUT/stop"
	wb_wait_for 30 bash -c "! kill -0 $PID_scraper 2>/dev/null" # it writes its counts as it stops

	# Every stage is running again.
	for s in powerd usaged alignd estimd exportd witness; do
		pid_var=PID_OF_$s
		kill -0 "${!pid_var}" || fail "$s is not running"
	done
	# estimd modelled the slots powerd missed ...
	grep -q '"mode":"model"' "$BATS_TEST_TMPDIR/tap.log" || fail "no modelled slot while powerd was down"
	# ... and counters never went down, no series came twice (the killed exportd is two instances on two ports).
	cat "$OUT"/*.scrapes
	[ ! -s "$OUT/witness.violations" ] || fail "witness counters went down or came twice: $(head -5 "$OUT/witness.violations")"
	[ ! -s "$OUT/exportd.violations" ] || fail "exportd counters went down or came twice: $(head -5 "$OUT/exportd.violations")"
	[ "$(wc -l <"$OUT/exportd.scrapes")" -eq 2 ]
	awk '$2 < 2 { exit 1 }' "$OUT/exportd.scrapes" "$OUT/witness.scrapes" # each compared at least once

	# Node energy over the whole run: what the meter advanced.
	d_pkg=$(($(uj "$w1_pkg") - $(uj "$w0_pkg"))) m_pkg=$((e1_pkg - e0_pkg))
	d_dram=$(($(uj "$w1_dram") - $(uj "$w0_dram"))) m_dram=$((e1_dram - e0_dram))
	echo "package: exported $d_pkg uJ, meter $m_pkg uJ; dram: exported $d_dram uJ, meter $m_dram uJ"
	[ "$m_pkg" -gt 100000000 ] # 40 W for more than 2.5 s
	[ "$d_pkg" -eq "$m_pkg" ] || fail "package: exported $d_pkg uJ, the meter advanced $m_pkg uJ"
	[ "$d_dram" -eq "$m_dram" ] || fail "dram: exported $d_dram uJ, the meter advanced $m_dram uJ"
	# The killed exportd's node counter went on from its checkpoint: the whole run, as exactly.
	d_a=$(($(uj "$a1_pkg") - $(uj "$a0_pkg")))
	echo "killed and restarted exportd: package $d_a uJ"
	[ "$d_a" -eq "$m_pkg" ] || fail "restarted exportd: exported $d_a uJ, the meter advanced $m_pkg uJ"
	grep -q "node counters of 1 hosts resumed" "$BATS_TEST_TMPDIR/exportd-2.log"

	# What each restart did, as the logs tell it.
	grep -q "counter continues" "$BATS_TEST_TMPDIR/alignd.log" "$BATS_TEST_TMPDIR/alignd-2.log"
	grep -q "new usage epoch" "$BATS_TEST_TMPDIR/alignd.log"
	grep -q "resumed 1 power hosts and 1 usage hosts" "$BATS_TEST_TMPDIR/alignd-2.log"
	grep -q "node totals of 1 hosts resumed" "$BATS_TEST_TMPDIR/estimd-2.log"
}
