#!/usr/bin/env bats
# Subscribers that fall behind: alignd, estimd and exportd run with
# [global] hwm = 2 and a flood of slots (1,000 processes each) goes through
# them while estimd, then exportd, are stopped (SIGSTOP) for a while. ZeroMQ
# drops what does not fit at the high-water marks. Checked: the drops are
# counted losses in the wattbus_* metrics, and the node energy exported is
# still exactly the energy of the run, since estimd recovers lost aligned
# slots from alignd's totals and exportd follows estimd's totals
# (schemas/README.md). Workload energy of the lost slots is not recovered: the
# processes' joules add up to less than the node's active energy. About 15 s.

load helper

setup() {
	RT=$BATS_TEST_TMPDIR/run
	mkdir -p "$RT"
	COMMON=(--runtime_dir "$RT" --host flood --stat_interval 200ms --hwm 2)
}

teardown() { wb_kill_all; }

metric() {
	curl -sS --max-time 5 "$URL/metrics" | grep -v '^#' | grep -F -- "$1" | head -n 1 | awk '{print $NF}'
}

# positive 'metric{labels': the metric is there and above 0.
positive() {
	local v
	v=$(metric "$1")
	[ -n "$v" ] && [ "$v" -gt 0 ]
}

uj() { python3 -c 'import sys; from decimal import Decimal; print(int(Decimal(sys.argv[1]) * 1000000))' "$1"; }

@test "high-water-mark drops are counted losses and node energy is still exact" {
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" "${COMMON[@]}" --sub "$(wb_ep flood)" --max_skew 0
	wb_spawn estimd "$WB_BUILD/wattbus-estimd" "${COMMON[@]}" --train false --model ""
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" "${COMMON[@]}" --listen 127.0.0.1:0 \
		--sub "ipc://$RT/estimd.sock,ipc://$RT/alignd.sock,ipc://$RT/exportd.sock"
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 10 'port [0-9]'
	URL=http://127.0.0.1:$(grep -o 'port [0-9]*' "$BATS_TEST_TMPDIR/exportd.log" | head -n 1 | cut -d' ' -f2)
	# exportd gets the stat messages of alignd and estimd: its subscriptions are live
	wb_wait_for 30 positive 'wattbus_stage_up{host="flood",stage="alignd"'
	wb_wait_for 30 positive 'wattbus_stage_up{host="flood",stage="estimd"'
	run python3 "$BATS_TEST_DIRNAME/system_flood.py" --in "$(wb_ep flood)" --slots 600 --procs 1000 \
		--estimd "$PID_estimd" --exportd "$PID_exportd" --metrics "$URL/metrics"
	echo "$output"
	assert_success
	want_pkg=$(awk '$2 == "package-0" { print $3 }' <<<"$output")
	want_dram=$(awk '$2 == "dram-0" { print $3 }' <<<"$output")

	node() { uj "$(metric "kepler_node_cpu_joules_total{node_name=\"flood\",zone=\"$1\"")"; }
	exact() {
		got_pkg=$(node package) got_dram=$(node dram)
		[ "$got_pkg" = "$want_pkg" ] && [ "$got_dram" = "$want_dram" ]
	}
	wb_wait_for 30 exact || true
	echo "node energy: package $got_pkg uJ (run: $want_pkg), dram $got_dram uJ (run: $want_dram)"

	# Losses were counted: aligned slots that estimd missed, estimates that exportd missed
	# (in the stat messages after the flood).
	wb_wait_for 30 positive 'wattbus_stage_messages_lost_total{host="flood",stage="estimd"'
	wb_wait_for 30 positive 'wattbus_stage_messages_lost_total{host="flood",stage="exportd"'
	lost_estimd=$(metric 'wattbus_stage_messages_lost_total{host="flood",stage="estimd"')
	lost_exportd=$(metric 'wattbus_stage_messages_lost_total{host="flood",stage="exportd"')
	rec_estimd=$(metric 'wattbus_stage_events_total{host="flood",stage="estimd",src="estimd",name="slots_recovered"}')
	rec_exportd=$(metric 'wattbus_exportd_slots_recovered_total')
	applied=$(metric 'wattbus_exportd_estimates_total{host="flood"}')
	echo "lost: estimd $lost_estimd, exportd $lost_exportd; recovered slots: estimd $rec_estimd, exportd $rec_exportd; applied $applied of 599"
	[ "$lost_estimd" -gt 0 ]
	[ "$lost_exportd" -gt 0 ]
	[ "$rec_estimd" -gt 0 ]
	[ "$rec_exportd" -gt 0 ]
	[ "$applied" -lt 599 ]
	# ... and the node energy holds every microjoule of the run anyway.
	[ "$got_pkg" = "$want_pkg" ] || fail "package: exported $got_pkg uJ, the run had $want_pkg uJ"
	[ "$got_dram" = "$want_dram" ] || fail "dram: exported $got_dram uJ, the run had $want_dram uJ"
	# Active + idle still add up to the node energy.
	act=$(uj "$(metric 'kepler_node_cpu_active_joules_total{node_name="flood",zone="package"')")
	idle=$(uj "$(metric 'kepler_node_cpu_idle_joules_total{node_name="flood",zone="package"')")
	[ $((act + idle)) -eq "$got_pkg" ]
	# The processes ran all the busy time, so without losses they would have all of the active
	# energy; they got the slots that arrived only.
	procs=$(curl -sS "$URL/metrics" | awk '/^kepler_process_cpu_joules_total\{.*zone="package"/ { s += $NF } END { printf "%d\n", s * 1000000 }')
	echo "processes: $procs uJ of $act uJ active"
	[ "$procs" -lt "$act" ]
}
