# Shared by the exportd_*.bats suites: start exportd on a free loopback port in
# the test's temp dir, feed it estimates with exportd_feed.py | wattbus pub, read
# values back from /metrics; a real Prometheus scraping it (prom_start, promql).

EX_FEED=$BATS_TEST_DIRNAME/exportd_feed.py

# ex_start [exportd flags...]: EX_PORT and EX_URL are set once it serves.
ex_start() {
	EX_RT=$BATS_TEST_TMPDIR/run
	mkdir -p "$EX_RT"
	wb_spawn exportd "$WB_BUILD/wattbus-exportd" --runtime_dir "$EX_RT" --listen 127.0.0.1:0 \
		--stat_interval 1s --sub "$(wb_ep estimd)" --sub "$(wb_ep stats)" --sub "ipc://$EX_RT/exportd.sock" "$@"
	wb_wait_lines "$BATS_TEST_TMPDIR/exportd.log" 1 10 'port [0-9]' || {
		cat "$BATS_TEST_TMPDIR/exportd.log"
		return 1
	}
	EX_PORT=$(grep -o 'port [0-9]*' "$BATS_TEST_TMPDIR/exportd.log" | head -n 1 | cut -d' ' -f2)
	EX_SCHEME=${EX_SCHEME:-http}
	EX_URL=$EX_SCHEME://127.0.0.1:$EX_PORT
}

# ex_feed [exportd_feed.py flags...]: publish estimates on the estimd endpoint, once
# exportd has subscribed (it reconnects to a new publisher after up to 2 s, later on a
# loaded machine).
ex_feed() {
	python3 "$EX_FEED" "$@" | "$WATTBUS" pub --wait 60s "$(wb_ep estimd)"
}

ex_metrics() {
	curl -sS --max-time 10 "$EX_URL/metrics"
}

# ex_value 'name{labels}' or 'name{partial labels': the value of the first matching sample.
ex_value() {
	ex_metrics | grep -F -- "$1" | head -n 1 | awk '{print $NF}'
}

# Wait until exportd has applied N estimates of host (default node-a).
ex_wait_estimates() {
	local n=$1 host=${2:-node-a}
	wb_wait_for 15 bash -c '[ "$(curl -sS --max-time 5 "$0/metrics" | grep -F "wattbus_exportd_estimates_total{host=\"$2\"}" | awk "{print \$NF}")" = "$1" ]' \
		"$EX_URL" "$n" "$host"
}

# feeder NAME [exportd_feed.py flags]: live slots until killed, in its own process group.
feeder() {
	local name=$1
	shift
	wb_spawn "$name" bash -c 'f=$0 w=$1 ep=$2; shift 2; python3 "$f" --realtime --slots 0 "$@" | "$w" pub --wait 60s "$ep"' \
		"$EX_FEED" "$WATTBUS" "$(wb_ep estimd)" "$@"
	local v=PID_$name
	FEEDERS="${FEEDERS:-} ${!v}"
}

# prom_start [JOB...]: a Prometheus on a free loopback port with one scrape job per name
# (default wattbus), each on exportd, and the rule files in $PROM_RULES (space-separated).
# Scrapes every $PROM_SCRAPE (2s), each given as long (a scrape that times out marks every
# series stale, and Prometheus wants scrape_timeout <= scrape_interval): rates are taken over
# 30 s windows.
prom_start() {
	PROM_PORT=$(wb_free_port)
	local job f
	{
		printf 'global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: 2s\n' \
			"${PROM_SCRAPE:-2s}" "${PROM_SCRAPE:-2s}"
		[ -z "${PROM_RULES:-}" ] || printf 'rule_files:\n'
		for f in ${PROM_RULES:-}; do printf '  - %s\n' "$f"; done
		printf 'scrape_configs:\n'
		for job in "${@:-wattbus}"; do
			printf "  - job_name: %s\n    static_configs:\n      - targets: ['127.0.0.1:%s']\n" "$job" "$EX_PORT"
		done
	} >"$BATS_TEST_TMPDIR/prometheus.yml"
	wb_spawn prometheus prometheus --config.file="$BATS_TEST_TMPDIR/prometheus.yml" \
		--storage.tsdb.path="$BATS_TEST_TMPDIR/tsdb" --web.listen-address="127.0.0.1:$PROM_PORT" \
		--log.level=warn
	PROM=http://127.0.0.1:$PROM_PORT
	wb_wait_for 30 curl -sf "$PROM/-/ready" -o /dev/null || {
		cat "$BATS_TEST_TMPDIR/prometheus.log"
		return 1
	}
}

# promql EXPR: the result vector as JSON lines {"metric":{...},"value":[t,"v"]}.
promql() {
	curl -sS --get --data-urlencode "query=$1" "$PROM/api/v1/query" | jq -c '.data.result[]'
}

# promval EXPR: the value of a one-element result.
promval() {
	promql "$1" | jq -r '.value[1]'
}
