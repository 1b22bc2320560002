#!/usr/bin/env bats
# Kepler 0.9's Grafana dashboards on exportd with metrics = kepler-0.9: every recorded query
# (tests/data/kepler09-dashboards.txt: v0.9.0's Kepler-Exporter, its PromRules and compose dev
# dashboards, HEAD's dev power-source comparison, the recording rules) that asks for a Kepler
# metric finds its series with the labels it filters and groups by, in a scrape and through a
# real Prometheus; those marked "expect: none" (what wattbus does not serve) find nothing.

load helper
load exportd_helper

QUERIES=$BATS_TEST_DIRNAME/../data/kepler09-dashboards.txt
CHECK=$BATS_TEST_DIRNAME/promql_check.py

teardown() {
	for p in ${FEEDERS:-}; do kill -- "-$p" 2>/dev/null || true; done
	wb_kill_all
}

@test "Kepler 0.9 dashboards: each query's series and labels in a scrape of the 0.9 profile" {
	ex_start --metrics kepler-0.9
	ex_feed --slots 2 --all-zones --gpu --start 1000000000000000000
	ex_wait_estimates 2
	ex_metrics >"$BATS_TEST_TMPDIR/scrape.txt"
	run python3 "$CHECK" "$QUERIES" "$BATS_TEST_TMPDIR/scrape.txt"
	assert_success
	# every query is checked: all but the 12 without a Kepler metric (scaphandre, node_rapl)
	total=$(python3 "$CHECK" --list "$QUERIES" | wc -l)
	assert_line "$((total - 12)) ok, 0 failed, 12 without a Kepler metric"
}

@test "the check can fail: Kepler >= 0.10's names answer none of these dashboards" {
	ex_start --metrics kepler
	ex_feed --slots 2 --all-zones --gpu --start 1000000000000000000
	ex_wait_estimates 2
	ex_metrics >"$BATS_TEST_TMPDIR/scrape10.txt"
	run python3 "$CHECK" "$QUERIES" "$BATS_TEST_TMPDIR/scrape10.txt"
	assert_failure
	assert_line --partial 'FAIL (data)'
	refute_line --regexp '^[0-9]+ ok, 0 failed'
}

# has_data EXPR: Prometheus answers EXPR with at least one sample.
has_data() { [ -n "$(promql "$1")" ]; }

@test "Kepler 0.9 dashboards through a real Prometheus: every Kepler query has data" {
	command -v prometheus >/dev/null || skip "prometheus is not installed"
	command -v jq >/dev/null || skip "jq is not installed"
	ex_start --metrics kepler-0.9
	feeder feed1 --all-zones --gpu
	# the dev dashboard compares a "dev" and a "latest" exporter: exportd is both
	prom_start dev latest
	wb_wait_for 60 has_data 'kepler_node_package_joules_total{job="dev"}'
	local n=0 with=0 q kind
	while IFS=$'\t' read -r kind q; do
		case $kind in
		data)
			n=$((n + 1))
			# [24h:1m] subqueries need samples at two whole minutes: up to 2 min of scrapes
			wb_wait_for 180 has_data "$q" || fail "no data: $q"
			with=$((with + 1))
			;;
		none)
			n=$((n + 1))
			! has_data "$q" || fail "marked expect: none, but has data: $q"
			;;
		esac
	done < <(python3 "$CHECK" --list "$QUERIES")
	echo "$with of $n queries asking for a Kepler metric have data (the rest are marked none)"
	[ "$with" -gt 0 ]
}
