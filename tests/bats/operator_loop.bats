#!/usr/bin/env bats
# wattbus-operator's whole loop against a stand-in API server (apiserver_standin.py:
# list, watch, server-side apply, the status subresource, generation, deletion with
# owner references): create a WattBus, change a setting and see the pods' config hash
# change, walk the DaemonSet through every step of the Available rule, delete it and
# see the children go (not the claim), the server going away and coming back, a stop
# with the server hung.

load helper

setup() {
	OP=$WB_BUILD/wattbus-operator
	[ -x "$OP" ] || skip "$OP is not built"
	command -v jq >/dev/null || skip "jq is not installed"
	S=$BATS_TEST_TMPDIR
	echo "secret-token" >"$S/token"
	start_server
	wb_spawn operator "$OP" --url "http://127.0.0.1:$PORT" --token-file "$S/token" --ca-file "" --timeout 60000
}

teardown() {
	wb_kill_all
}

start_server() {
	rm -f "$S/port"
	wb_spawn standin python3 "$BATS_TEST_DIRNAME/apiserver_standin.py" "$S/port" secret-token ${PORT:-}
	wb_wait_for 30 test -s "$S/port"
	PORT=$(cat "$S/port")
}

# api METHOD PATH [CONTENT_TYPE BODY]: the stand-in's answer on stdout
api() {
	local args=(-s -X "$1" -H "Authorization: Bearer secret-token")
	[ $# -lt 4 ] || args+=(-H "Content-Type: $3" --data-binary "$4")
	curl "${args[@]}" "http://127.0.0.1:$PORT$2"
}

WB=/apis/wattbus.io/v1alpha1/wattbuses/wattbus
DS=/apis/apps/v1/namespaces/wattbus/daemonsets/wattbus
CM=/api/v1/namespaces/wattbus/configmaps/wattbus-config

create() { # create SPEC_JSON, as kubectl apply would
	api PATCH "$WB?fieldManager=kubectl" application/apply-patch+yaml \
		"{\"apiVersion\":\"wattbus.io/v1alpha1\",\"kind\":\"WattBus\",\"metadata\":{\"name\":\"wattbus\"},\"spec\":$1}" >/dev/null
}

# has PATH JQ_FILTER EXPECTED: the object's value is the one expected
has() {
	[ "$(api GET "$1" | jq -r "$2" 2>/dev/null)" = "$3" ]
}

available() { # available STATUS REASON
	has $WB '.status.conditions[]? | select(.type=="Available") | .status + " " + .reason' "$1 $2"
}

ds_status() { # the DaemonSet controller's part: ds_status JSON_OF_COUNTS
	api PATCH "$DS/status" application/merge-patch+json "{\"status\":$1}" >/dev/null
}

@test "a WattBus is applied: every child owned by it, the status written" {
	create '{}'
	wb_wait_for 30 has $WB '.status.conditions[]? | select(.type=="Reconciled") | .reason' ReconcileSuccess
	uid=$(api GET $WB | jq -r .metadata.uid)
	for p in $DS $CM /api/v1/namespaces/wattbus/serviceaccounts/wattbus /apis/rbac.authorization.k8s.io/v1/clusterroles/wattbus \
		/api/v1/namespaces/wattbus/services/wattbus-exportd /apis/monitoring.coreos.com/v1/namespaces/wattbus/servicemonitors/wattbus-exportd; do
		run has "$p" '.metadata.ownerReferences[0].uid' "$uid"
		assert_success
	done
	run has /api/v1/namespaces/wattbus '.metadata.labels["app.kubernetes.io/managed-by"]' wattbus-operator
	assert_success
	# The DaemonSet has no status yet: its controller has not seen it.
	wb_wait_for 30 available Unknown DaemonSetOutOfSync
	run has $WB '.status.observedGeneration' 1
	assert_success
}

@test "a changed setting changes wattbus.conf and the pods' config hash" {
	create '{}'
	wb_wait_for 30 has $DS '.metadata.generation' 1
	h1=$(api GET $DS | jq -r '.spec.template.metadata.annotations["wattbus.io/config-hash"]')
	[[ "$h1" =~ ^[0-9a-f]{16}$ ]]
	api PATCH $WB application/merge-patch+json '{"spec":{"interval":"5s"}}' >/dev/null
	wb_wait_for 30 has $DS '.metadata.generation' 2
	h2=$(api GET $DS | jq -r '.spec.template.metadata.annotations["wattbus.io/config-hash"]')
	[ "$h2" != "$h1" ]
	run bash -c "curl -s -H 'Authorization: Bearer secret-token' http://127.0.0.1:$PORT$CM | jq -r '.data[\"wattbus.conf\"]' | grep '^interval = 5s'"
	assert_success
	wb_wait_for 30 has $WB '.status.configHash' "$h2"
	wb_wait_for 30 has $WB '.status.observedGeneration' 2
}

@test "Available follows the DaemonSet through every step of the rule" {
	create '{}'
	wb_wait_for 30 has $DS '.metadata.generation' 1
	ds_status '{"observedGeneration":1,"desiredNumberScheduled":0,"numberReady":0,"updatedNumberScheduled":0,"numberAvailable":0,"numberUnavailable":0}'
	wb_wait_for 30 available False DaemonSetPodsNotRunning
	ds_status '{"desiredNumberScheduled":3,"numberReady":3,"updatedNumberScheduled":1,"numberAvailable":3}'
	wb_wait_for 30 available Unknown DaemonSetRolloutInProgress
	ds_status '{"updatedNumberScheduled":3,"numberAvailable":2,"numberReady":2,"numberUnavailable":1}'
	wb_wait_for 30 available Unknown DaemonSetPartiallyAvailable
	ds_status '{"numberAvailable":3,"numberReady":3,"numberUnavailable":0}'
	wb_wait_for 30 available True DaemonSetReady
	run has $WB '[.status.desiredNumberScheduled, .status.numberReady] | @csv' "3,3"
	assert_success
	# Pods unready on two nodes.
	ds_status '{"numberAvailable":3,"numberReady":1,"numberUnavailable":2}'
	wb_wait_for 30 available False DaemonSetPartiallyAvailable
	ds_status '{"numberReady":0}'
	wb_wait_for 30 available False DaemonSetPodsNotRunning
	# A spec change the DaemonSet controller has not seen yet.
	ds_status '{"numberReady":3,"numberUnavailable":0}'
	wb_wait_for 30 available True DaemonSetReady
	api PATCH $WB application/merge-patch+json '{"spec":{"exporter":{"port":9200}}}' >/dev/null
	wb_wait_for 30 available Unknown DaemonSetOutOfSync
}

@test "deleting the WattBus removes its children but the Namespace and the model store's claim" {
	create '{"modelServer":{"enabled":true}}'
	wb_wait_for 30 has /apis/apps/v1/namespaces/wattbus/deployments/wattbus-modeld '.metadata.name' wattbus-modeld
	wb_wait_for 30 has /api/v1/namespaces/wattbus/persistentvolumeclaims/wattbus-models '.metadata.name' wattbus-models
	wb_wait_for 30 has $WB '.status.conditions[]? | select(.type=="ModelServerAvailable") | .reason' DeploymentOutOfSync
	api DELETE $WB >/dev/null
	wb_wait_for 30 has $DS '.reason' NotFound
	for p in $CM /apis/apps/v1/namespaces/wattbus/deployments/wattbus-modeld /api/v1/namespaces/wattbus/services/wattbus-exportd \
		/api/v1/namespaces/wattbus/services/wattbus-modeld /apis/rbac.authorization.k8s.io/v1/clusterrolebindings/wattbus; do
		run has "$p" '.reason' NotFound
		assert_success
	done
	run has /api/v1/namespaces/wattbus/persistentvolumeclaims/wattbus-models '.metadata.name' wattbus-models
	assert_success
	run has /api/v1/namespaces/wattbus '.metadata.name' wattbus
	assert_success
}

@test "turning the model server off removes modeld, keeps its claim" {
	create '{"modelServer":{"enabled":true}}'
	wb_wait_for 30 has /apis/apps/v1/namespaces/wattbus/deployments/wattbus-modeld '.metadata.name' wattbus-modeld
	api PATCH $WB application/merge-patch+json '{"spec":{"modelServer":{"enabled":false}}}' >/dev/null
	wb_wait_for 30 has /apis/apps/v1/namespaces/wattbus/deployments/wattbus-modeld '.reason' NotFound
	run has /api/v1/namespaces/wattbus/persistentvolumeclaims/wattbus-models '.metadata.name' wattbus-models
	assert_success
	wb_wait_for 30 has $WB '.status.conditions[]? | select(.type=="ModelServerAvailable") | .reason' ModelServerDisabled
}

@test "external model storage: Reconciled says why, the rest is applied" {
	create '{"modelServer":{"enabled":true,"storage":{"type":"external"}}}'
	wb_wait_for 30 has $WB '.status.conditions[]? | select(.type=="Reconciled") | .status + " " + .reason' "False ExternalStorageUnsupported"
	run has $DS '.metadata.name' wattbus
	assert_success
	run has /apis/apps/v1/namespaces/wattbus/deployments/wattbus-modeld '.reason' NotFound
	assert_success
}

@test "the operator survives the API server going away and coming back" {
	create '{}'
	wb_wait_for 30 has $DS '.metadata.name' wattbus
	kill -KILL -- "-$(sed -n 1p "$S/pids")"
	wb_wait_lines "$S/operator.log" 1 30 "Couldn't connect to server"
	# A new server, empty, on the same port: the operator reads everything again.
	start_server
	wb_wait_lines "$S/operator.log" 1 60 "answers again"
	create '{"interval":"7s"}'
	wb_wait_for 60 has $WB '.status.conditions[]? | select(.type=="Reconciled") | .reason' ReconcileSuccess
	run bash -c "curl -s -H 'Authorization: Bearer secret-token' http://127.0.0.1:$PORT$CM | jq -r '.data[\"wattbus.conf\"]' | grep '^interval = 7s'"
	assert_success
}

@test "a stop ends the loop even while the API server hangs" {
	create '{}'
	wb_wait_for 30 has $DS '.metadata.name' wattbus
	# A hung server: it accepts and never answers (its requests time out after 60 s).
	kill -STOP -- "-$(sed -n 1p "$S/pids")"
	api_pid=$(sed -n 2p "$S/pids")
	kill -TERM "$api_pid"
	# Much less than the 60 s request deadline: the transfers were cancelled.
	wb_wait_for 10 bash -c "! kill -0 $api_pid 2>/dev/null"
	run grep -c "stopped" "$S/operator.log"
	assert_output 1
	kill -CONT -- "-$(sed -n 1p "$S/pids")"
}

@test "a wrong token is refused and said, and the operator keeps trying" {
	echo wrong >"$S/token"
	wb_wait_lines "$S/operator.log" 1 30 "status 401"
	echo secret-token >"$S/token"
	create '{}'
	wb_wait_for 60 has $WB '.status.conditions[]? | select(.type=="Reconciled") | .reason' ReconcileSuccess
}

@test "every request the operator makes is one its ClusterRole grants" {
	create '{"modelServer":{"enabled":true},"config":{"name":"wattbus-env"}}'
	wb_wait_for 30 has /apis/apps/v1/namespaces/wattbus/deployments/wattbus-modeld '.metadata.name' wattbus-modeld
	api PATCH $WB application/merge-patch+json '{"spec":{"modelServer":{"enabled":false}}}' >/dev/null
	wb_wait_for 30 has /apis/apps/v1/namespaces/wattbus/deployments/wattbus-modeld '.reason' NotFound
	wb_wait_for 30 has $WB '.status.conditions[]? | select(.type=="ModelServerAvailable") | .reason' ModelServerDisabled
	run python3 "$BATS_TEST_DIRNAME/operator_rbac.py" "$WB_ROOT/deploy/operator/operator.yaml" "$S/standin.log"
	assert_success
	# The check can fail: a role without delete on deployments is caught.
	sed 's/verbs: \["get", "list", "watch", "create", "patch", "delete"\]/verbs: ["get", "list", "watch", "create", "patch"]/' \
		"$WB_ROOT/deploy/operator/operator.yaml" >"$S/op.yaml"
	run python3 "$BATS_TEST_DIRNAME/operator_rbac.py" "$S/op.yaml" "$S/standin.log"
	assert_failure
	assert_output --partial "not granted: delete deployments (group 'apps')"
}

@test "the operator's own manifests pass the API types and the privilege checks" {
	python3 -c 'import kubernetes' 2>/dev/null || skip "python3-kubernetes is not installed"
	run python3 - "$WB_ROOT/deploy/operator/operator.yaml" <<-'PY'
		import sys, yaml
		from kubernetes import client
		api = client.ApiClient()
		models = {"Namespace": "V1Namespace", "ServiceAccount": "V1ServiceAccount", "ClusterRole": "V1ClusterRole",
		          "ClusterRoleBinding": "V1ClusterRoleBinding", "Deployment": "V1Deployment"}
		for o in yaml.safe_load_all(open(sys.argv[1])):
		    api._ApiClient__deserialize(o, models[o["kind"]])
		    if o["kind"] == "Deployment":
		        pod = o["spec"]["template"]["spec"]
		        c = pod["containers"][0]
		        assert pod["securityContext"]["runAsNonRoot"] and c["securityContext"]["readOnlyRootFilesystem"]
		        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"] and not c["securityContext"]["allowPrivilegeEscalation"]
		        assert pod["serviceAccountName"] == "wattbus-operator"
		        print("deployment ok")
		PY
	assert_success
	assert_output "deployment ok"
}

@test "a change of the variables ConfigMap rolls the pods too" {
	api PATCH "/api/v1/namespaces/wattbus/configmaps/wattbus-env?fieldManager=kubectl" application/apply-patch+yaml \
		'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"wattbus-env","namespace":"wattbus"},"data":{"WATTBUS_ESTIMD_TRAIN":"true"}}' >/dev/null
	create '{"config":{"name":"wattbus-env"}}'
	wb_wait_for 30 has $WB '.status.conditions[]? | select(.type=="Reconciled") | .reason' ReconcileSuccess
	h1=$(api GET $DS | jq -r '.spec.template.metadata.annotations["wattbus.io/config-hash"]')
	run has $DS '.spec.template.spec.containers[0].envFrom[0].configMapRef.name' wattbus-env
	assert_success
	api PATCH /api/v1/namespaces/wattbus/configmaps/wattbus-env application/merge-patch+json '{"data":{"WATTBUS_ESTIMD_TRAIN":"false"}}' >/dev/null
	wb_wait_for 30 bash -c "[ \"\$(curl -s -H 'Authorization: Bearer secret-token' http://127.0.0.1:$PORT$DS | jq -r '.spec.template.metadata.annotations[\"wattbus.io/config-hash\"]')\" != $h1 ]"
	# A ConfigMap that is not there is said in Reconciled.
	api DELETE /api/v1/namespaces/wattbus/configmaps/wattbus-env >/dev/null
	wb_wait_for 30 has $WB '.status.conditions[]? | select(.type=="Reconciled") | .message' "configmap wattbus/wattbus-env named by spec.config: not found"
}

@test "without the Prometheus Operator's CRD the ServiceMonitor is left out, and that is no error" {
	wb_kill_all
	PORT=
	STANDIN_NO_GROUPS=monitoring.coreos.com start_server
	wb_spawn operator "$OP" --url "http://127.0.0.1:$PORT" --token-file "$S/token" --ca-file ""
	create '{}'
	wb_wait_for 30 has $WB '.status.conditions[]? | select(.type=="Reconciled") | .status + " " + .message' \
		"True every object applied; no ServiceMonitor: the Prometheus Operator's CRD is not installed"
	run has $DS '.metadata.name' wattbus
	assert_success
}
