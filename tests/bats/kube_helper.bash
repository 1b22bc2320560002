# The kubelet stand-in (kubelet_standin.py) for the suites that name pods through exportd's
# kube source. Load after helper.

# kubelet_start [PORTFILE]: the stand-in serving $K/pods.json over TLS ($K/ca.crt, $K/key.pem)
# to the bearer token $K/token, answering as $K/mode says, its requests in $K/requests.log; its
# port goes to $K/PORTFILE (default port) and $KPORT.
kubelet_start() {
	local pf=$K/${1:-port}
	wb_spawn kubelet python3 "$BATS_TEST_DIRNAME/kubelet_standin.py" --cert "$K/ca.crt" \
		--key "$K/key.pem" --token "$K/token" --pods "$K/pods.json" --mode "$K/mode" \
		--log "$K/requests.log" --port-file "$pf"
	wb_wait_for 30 test -s "$pf"
	KPORT=$(cat "$pf")
}
