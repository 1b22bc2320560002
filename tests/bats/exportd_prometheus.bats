#!/usr/bin/env bats
# A real Prometheus (Debian's package), started here on a loopback port with a
# temporary config and storage, scrapes exportd fed by live estimates (1 s slots,
# known power); PromQL over its HTTP API sees Kepler's rates and label sets, and
# no counter reset when the upstream restarts.

load helper
load exportd_helper

setup() {
	command -v prometheus >/dev/null || skip "prometheus is not installed"
	command -v jq >/dev/null || skip "jq is not installed"
}

teardown() {
	# the feeders are process groups (python | wattbus pub)
	for p in ${FEEDERS:-}; do kill -- "-$p" 2>/dev/null || true; done
	wb_kill_all
}

# scrapes N: Prometheus holds at least N scrapes of the node's package counter.
scrapes() {
	[ "$(promval 'count_over_time(kepler_node_cpu_joules_total{zone="package"}[10m])')" -ge "$1" ] 2>/dev/null
}

# per_slot 'EXPR': EXPR's rate over 30 s per estimate exportd applied in those 30 s. Both
# counters move in the same scrapes, so whichever slots fell in the window, this is the
# energy (or CPU time) of one slot, to the rounding: with 1 s slots, the rate in watts.
per_slot() {
	promval "sum(rate($1[30s])) / scalar(rate(wattbus_exportd_estimates_total{host=\"node-a\"}[30s]))"
}

# near VALUE WANT TOLERANCE
near() {
	awk -v v="$1" -v w="$2" -v t="$3" 'BEGIN { exit !(v != "" && v - w <= t && w - v <= t) }' ||
		fail "$1 is not within $3 of $2"
}

@test "Prometheus scrapes exportd: rates, watts and Kepler's label sets via PromQL" {
	ex_start
	feeder feed1
	prom_start
	# at least 17 scrapes holding applied slots (2 s apart): a 30 s window is full
	wb_wait_for 120 scrapes 17

	near "$(promval 'kepler_node_cpu_watts{zone="package"}')" 10 0.000001
	near "$(promval 'kepler_node_cpu_active_watts{zone="dram"}')" 1 0.000001
	# Rates as a dashboard takes them, in J/s. On a loaded machine late slots or scrapes move
	# 10 J steps in or out of the window, and a missed scrape at its edge cuts the
	# extrapolation: 25 % either way (a counter counted twice, in the wrong unit or not
	# moving is far outside).
	near "$(promval 'rate(kepler_node_cpu_joules_total{zone="package"}[30s])')" 10 2.5
	near "$(promval 'sum(rate(kepler_process_cpu_joules_total{comm="stress"}[30s]))')" 3.5 0.875
	# Per applied slot (1 s), exact whatever the timing.
	near "$(per_slot 'kepler_node_cpu_joules_total{zone="package"}')" 10 0.0001
	near "$(per_slot 'kepler_node_cpu_idle_joules_total{zone="package"}')" 4 0.0001
	near "$(per_slot 'kepler_process_cpu_joules_total{comm="stress"}')" 3.5 0.0001
	near "$(per_slot 'kepler_process_cpu_joules_total{comm="nginx",zone="package"}')" 1.5 0.0001
	near "$(per_slot 'kepler_container_cpu_joules_total{container_id="c0ffee",zone="package"}')" 1.5 0.0001
	near "$(per_slot 'kepler_pod_cpu_joules_total{pod_id="pod-1",zone="dram"}')" 0.25 0.0001
	near "$(per_slot 'kepler_vm_cpu_joules_total{vm_id="vm-1",zone="package"}')" 0.75 0.0001
	near "$(per_slot 'kepler_process_cpu_seconds_total{comm="stress"}')" 0.5 0.0001
	near "$(per_slot 'kepler_container_cpu_seconds_total')" 0.25 0.0001
	# 7/8 of the active energy goes to processes (the rest is unattributed)
	near "$(promval 'sum(rate(kepler_process_cpu_joules_total[30s])) / sum(rate(kepler_node_cpu_active_joules_total[30s]))')" 0.875 0.0001
	near "$(promval 'kepler_node_cpu_usage_ratio')" 0.375 0.000001
	[ "$(promval 'count(kepler_node_cpu_joules_total)')" = 2 ]
	[ "$(promval 'count(kepler_process_cpu_watts)')" = 6 ]
	[ "$(promval 'up{job="wattbus"}')" = 1 ]

	# label names as Kepler documents them (Prometheus drops labels whose value is empty)
	labels() { promql "$1" | jq -r '.metric | keys | join(",")' | sort -u; }
	run labels 'kepler_node_cpu_joules_total'
	assert_output '__name__,instance,job,node_name,path,zone'
	run labels 'kepler_node_cpu_usage_ratio'
	assert_output '__name__,instance,job,node_name'
	run labels 'kepler_process_cpu_joules_total{comm="nginx"}'
	assert_output '__name__,comm,container_id,instance,job,node_name,pid,state,type,zone'
	run labels 'kepler_process_cpu_watts{comm="qemu"}'
	assert_output '__name__,comm,instance,job,node_name,pid,state,type,vm_id,zone'
	run labels 'kepler_process_cpu_seconds_total{comm="nginx"}'
	assert_output '__name__,comm,container_id,instance,job,node_name,pid,type'
	run labels 'kepler_container_cpu_joules_total'
	assert_output '__name__,container_id,container_name,instance,job,node_name,pod_id,runtime,state,zone'
	run labels 'kepler_container_cpu_seconds_total'
	assert_output '__name__,container_id,container_name,instance,job,node_name,pod_id,runtime,state'
	run labels 'kepler_pod_cpu_watts'
	assert_output '__name__,instance,job,node_name,pod_id,pod_name,state,zone'
	run labels 'kepler_vm_cpu_joules_total'
	assert_output '__name__,hypervisor,instance,job,node_name,state,vm_id,vm_name,zone'
	run labels 'kepler_build_info'
	assert_output '__name__,arch,goversion,instance,job,version'
	run promql 'kepler_process_cpu_joules_total{comm="nginx",zone="dram"}'
	assert_output --partial '"container_id":"c0ffee"'
	assert_output --partial '"node_name":"node-a"'
	assert_output --partial '"state":"running"'
	assert_output --partial '"type":"container"'
	# every query of Kepler's own Grafana dashboard (compose/default/grafana/dashboards/latest in
	# Kepler's repository), its variables set as "All" would set them: each finds data
	while IFS= read -r q; do
		[ -n "$(promql "$q")" ] || fail "Kepler dashboard query found nothing: $q"
	done <<-'EOF'
		sum by (zone) (kepler_node_cpu_watts{job="wattbus", zone=~".*"})
		sum by (zone) (kepler_node_cpu_active_watts{job="wattbus", zone=~".*"})
		sum by (zone) (kepler_node_cpu_idle_watts{job="wattbus", zone=~".*"})
		count by (instance, model_name)(kepler_node_cpu_info{job="wattbus"})
		group by (node_name,zone)(kepler_node_cpu_watts{job="wattbus"})
		kepler_node_cpu_watts{job="wattbus", instance=~".*", zone=~".*"}
		kepler_node_cpu_active_watts{job="wattbus", instance=~".*", zone=~".*"}
		kepler_node_cpu_idle_watts{job="wattbus", instance=~".*", zone=~".*"}
		topk(10,sum by (comm,zone)(kepler_process_cpu_watts{job="wattbus", zone=~".*"}))
		sum by (zone) (kepler_process_cpu_watts{job="wattbus", zone=~".*"})
		kepler_process_cpu_watts{job="wattbus", zone=~".*",pid="101"}
		topk(10,sum by (container_name,zone)(kepler_container_cpu_watts{job="wattbus", zone=~".*"}))
		sum by (zone) (kepler_container_cpu_watts{job="wattbus", zone=~".*"})
		kepler_container_cpu_watts{job="wattbus", zone=~".*",container_name=~".*"}
		topk(10,sum by (pod_namespace,zone)(kepler_pod_cpu_watts{job="wattbus", zone=~".*"}))
		sum by (zone) (kepler_pod_cpu_watts{job="wattbus", zone=~".*", pod_namespace=~".*"})
		kepler_pod_cpu_watts{job="wattbus",pod_namespace=~".*", zone=~".*",pod_name=~".*"}
		topk(10,sum by (vm_name,zone)(kepler_vm_cpu_watts{job="wattbus", zone=~".*"}))
		sum by (zone) (kepler_vm_cpu_watts{job="wattbus", zone=~".*"})
		kepler_vm_cpu_watts{job="wattbus", zone=~".*",vm_name=~".*"}
		label_join(count by (pid, comm) (kepler_process_cpu_watts{job="wattbus"}), "process", " | ", "comm", "pid")
	EOF
	near "$(promval 'sum by (zone) (kepler_node_cpu_watts{job="wattbus", zone=~"package"})')" 10 0.000001
	run promql 'topk(10,sum by (container_name,zone)(kepler_container_cpu_watts{job="wattbus", zone=~"package"}))'
	assert_output --partial '"container_name":"web"'
	run promql 'topk(10,sum by (vm_name,zone)(kepler_vm_cpu_watts{job="wattbus", zone=~"package"}))'
	assert_output --partial '"vm_name":"guest"'
	run promql 'label_join(count by (pid, comm) (kepler_process_cpu_watts{job="wattbus"}), "process", " | ", "comm", "pid")'
	assert_output --partial '"process":"stress | 101"'
	# pipeline health scraped too
	[ "$(promval 'wattbus_stage_up{stage="exportd"}')" = 1 ]
}

@test "no counter reset in Prometheus when the upstream restarts and replays" {
	ex_start
	feeder feed1
	prom_start
	wb_wait_for 60 scrapes 4
	# estimd restarts: the new one starts 5 s back, so it replays slots exportd already has
	kill -- "-$PID_feed1"
	wb_wait_for 30 bash -c "! kill -0 -- -$PID_feed1 2>/dev/null" # gone, its endpoint free
	feeder feed2 --start $(( ($(date +%s) - 5) * 1000000000 ))
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 10 'restarted (epoch'
	# 20 more scrapes (2 s apart): a 30 s window ending now starts after the restart and the
	# slots the new run caught up on
	n0=$(promval 'count_over_time(kepler_node_cpu_joules_total{zone="package"}[10m])')
	wb_wait_for 120 scrapes $((n0 + 20))
	# over the whole run, the restart included
	[ "$(promval 'resets(kepler_node_cpu_joules_total{zone="package"}[10m])')" = 0 ]
	[ "$(promval 'sum(resets(kepler_process_cpu_joules_total[10m]))')" = 0 ]
	[ "$(promval 'sum(resets(kepler_container_cpu_seconds_total[10m]))')" = 0 ]
	[ "$(promval 'wattbus_exportd_estimates_rejected_total{reason="stale"}')" -ge 2 ]
	near "$(per_slot 'kepler_node_cpu_joules_total{zone="package"}')" 10 0.0001
	near "$(promval 'rate(kepler_node_cpu_joules_total{zone="package"}[30s])')" 10 2.5
	# no slot lost or counted twice: the total is exactly 10 J per applied slot (one scrape)
	ex_metrics >"$BATS_TEST_TMPDIR/m.txt"
	applied=$(grep -F 'wattbus_exportd_estimates_total{host="node-a"}' "$BATS_TEST_TMPDIR/m.txt" | awk '{print $NF}')
	total=$(grep -F 'kepler_node_cpu_joules_total{node_name="node-a",zone="package"' "$BATS_TEST_TMPDIR/m.txt" | awk '{print $NF}')
	[ "$total" = "$((applied * 10)).000000" ] || fail "total $total J for $applied slots"
}
