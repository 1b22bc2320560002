#!/bin/bash
# How long each stage takes to stop with a peer that accepts and never answers
# (tests/bats/hung_peer.py; for estimd's sidecar, kepler_estimator.py's hang
# step; for powerd's exec source, a command that never ends), each request's own
# deadline at its maximum; and how many slots a
# second estimd estimates across hosts while its sidecar hangs. Reports, asserts
# nothing (tests/bats/daemon_stop_hung_peer.bats, powerd_exec_hung.bats and
# estimd_sidecar_peer.bats check the behaviour). WB_BUILD: the build to measure (default build/).
#
#   WB_BUILD=$PWD/build bench/stop_hung_peer.sh
#
# STOPS=0 measures the sidecar only.
# Output: BENCH stop_ms_STAGE=N (SIGTERM to exit, ms) and
# BENCH sidecar_hung_slots_per_s=N lines.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
B=${WB_BUILD:-$root/build}
T=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT

python3 "$root/tests/bats/hung_peer.py" --port-file "$T/port" --log "$T/requests.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
PEER=http://127.0.0.1:$(cat "$T/port")
(umask 077 && echo root:calvin >"$T/cred")

# measure NAME REQUEST CMD...: start CMD, wait for REQUEST at the peer, SIGTERM, time the exit.
measure() {
	local name=$1 request=$2
	shift 2
	"$@" >"$T/$name.log" 2>&1 &
	local pid=$!
	for _ in $(seq 300); do grep -q "$request" "$T/requests.log" 2>/dev/null && break; sleep 0.1; done
	local t0 t1
	t0=$(date +%s%N)
	kill -TERM "$pid"
	wait "$pid"
	t1=$(date +%s%N)
	echo "BENCH stop_ms_$name=$(((t1 - t0) / 1000000))"
}

# STOPS=0: the sidecar's figures only (an older build waits out each request's deadline).
if [ "${STOPS:-1}" = 1 ]; then
measure powerd_redfish "GET /redfish/v1/Chassis" "$B/wattbus-powerd" --pub "ipc://$T/p.sock" \
	--runtime_dir "$T" --host h --source redfish --redfish_url "$PEER" --redfish_insecure true \
	--redfish_credentials "$T/cred" --redfish_timeout 60s
measure exportd_kubelet "GET /pods" "$B/wattbus-exportd" --runtime_dir "$T" --listen 127.0.0.1:0 \
	--sub "ipc://$T/e.sock" --pub "ipc://$T/x.sock" --kube_source kubelet --kube_url "$PEER" \
	--kube_token_file "" --kube_ca_file "" --kube_timeout 600s
measure estimd_model_server "POST /model" "$B/wattbus-estimd" --runtime_dir "$T" --host h \
	--sub "ipc://$T/a.sock" --pub "ipc://$T/s.sock" --model "" --model_server "$PEER" \
	--model_server_timeout 600s
# exec: a command that never ends (its start-up run and every sample's): it notes itself as the
# peers do, then hangs.
measure powerd_exec "EXEC" "$B/wattbus-powerd" --pub "ipc://$T/pe.sock" --runtime_dir "$T" \
	--host h --source exec --exec "echo EXEC >>$T/requests.log; exec sleep 600" \
	--exec_timeout 20s --interval 1s
measure modeld_prometheus "GET /api/v1/query_range" "$B/wattbus-modeld" --runtime_dir "$T" \
	--listen 127.0.0.1:0 --sub "" --store "$T/store" --prometheus "$PEER" --prometheus_timeout 600s
fi

# The sidecar: hung at its first request; slots of 20 hosts through it.
python3 "$root/tests/bats/kepler_estimator.py" --socket "$T/est.sock" --log "$T/est.jsonl" \
	--script hang &
pids+=($!)
for _ in $(seq 100); do [ -S "$T/est.sock" ] && break; sleep 0.1; done
cat >"$T/local.json" <<'JSON'
{"model_name": "local-SGDRegressorTrainer",
 "package": {"All_Weights": {"Bias_Weight": 20.0, "Categorical_Variables": {},
   "Numerical_Variables": {"bpf_cpu_time_ms": {"scale": 1000.0, "weight": 1.0}}}}}
JSON
"$B/wattbus-estimd" --runtime_dir "$T" --host h --sub "ipc://$T/al.sock" --pub "ipc://$T/es.sock" \
	--model "$T/local.json" --estimator "unix:$T/est.sock" --mode model >"$T/estimd.log" 2>&1 &
epid=$!
N=100
for h in $(seq 20); do
	python3 "$root/tests/bats/estimd_slots.py" --host "vm$h" --no-power --count $((N / 20)) --seed "$h"
done >"$T/slots.jsonl"
"$B/wattbus" tap --count $N --timeout 600s "ipc://$T/es.sock" estimate/ >"$T/tap.log" 2>/dev/null &
tpid=$!
sleep 1
t0=$(date +%s%N)
"$B/wattbus" pub --wait 30s "ipc://$T/al.sock" <"$T/slots.jsonl" >/dev/null
wait "$tpid"
t1=$(date +%s%N)
echo "BENCH sidecar_hung_slots_per_s=$(python3 -c "print(round($N / (($t1 - $t0) / 1e9), 1))") ($(wc -l <"$T/tap.log") slots)"
grep -c "stopping on" "$T/estimd.log" >/dev/null
t0=$(date +%s%N)
kill -TERM "$epid"
wait "$epid"
t1=$(date +%s%N)
echo "BENCH stop_ms_estimd_sidecar=$(((t1 - t0) / 1000000))"
