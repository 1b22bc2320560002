#!/usr/bin/env bats
# wattbus-operator --render: the objects a WattBus makes. Its default objects are
# deploy/kubernetes's own (embedded at build time, one copy); each spec's objects
# pass k8s_manifests.py (API types, cross-references, privileges, wattbus.conf
# accepted by each stage's binary) and carry the settings the spec gives.

load helper

setup() {
	/usr/bin/python3 -c 'import kubernetes, yaml' 2>/dev/null || skip "python3-kubernetes and python3-yaml are not installed (scripts/deps.sh test)"
	OP=$WB_BUILD/wattbus-operator
	[ -x "$OP" ] || skip "$OP is not built"
	PY="/usr/bin/python3 $BATS_TEST_DIRNAME/operator_render.py"
	D=$WB_ROOT/tests/data/operator
}

# spec NAME: tests/data/operator/NAME.yaml as JSON in $BATS_TEST_TMPDIR/NAME.json
spec() {
	/usr/bin/python3 -c 'import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)' "$D/$1.yaml" >"$BATS_TEST_TMPDIR/$1.json"
}

# render NAME [--env FILE]: the objects of spec NAME in $BATS_TEST_TMPDIR/NAME.out
render() {
	local name=$1
	shift
	spec "$name"
	"$OP" --render --spec "$BATS_TEST_TMPDIR/$name.json" "$@" >"$BATS_TEST_TMPDIR/$name.out"
}

q() {
	$PY eval "$BATS_TEST_TMPDIR/$1.out" "$2"
}

@test "the resource that asks for what kustomize deploys renders deploy/kubernetes, object for object" {
	render wattbus-kustomize
	run $PY compare "$WB_ROOT/deploy/kubernetes" "$BATS_TEST_TMPDIR/wattbus-kustomize.out"
	assert_success
	assert_output "# 11 objects, 0 differences"
}

@test "a deploy/kubernetes that drifted from the render is caught" {
	render wattbus-kustomize
	cp -r "$WB_ROOT/deploy/kubernetes" "$BATS_TEST_TMPDIR/k8s"
	sed -i 's/interval = 3s/interval = 4s/' "$BATS_TEST_TMPDIR/k8s/configmap.yaml"
	sed -i 's/maxUnavailable: 1/maxUnavailable: 2/' "$BATS_TEST_TMPDIR/k8s/daemonset.yaml"
	run $PY compare "$BATS_TEST_TMPDIR/k8s" "$BATS_TEST_TMPDIR/wattbus-kustomize.out"
	assert_failure
	assert_output --partial "DaemonSet/wattbus.spec.updateStrategy.rollingUpdate.maxUnavailable: deploy/kubernetes has 2, the render 1"
	assert_output --partial "ConfigMap/wattbus-config.data.wattbus.conf: deploy/kubernetes has"
}

@test "every spec's objects pass the manifest checks" {
	for s in wattbus-default wattbus-kustomize wattbus-full wattbus-hostpath; do
		render $s
		$PY dir "$BATS_TEST_TMPDIR/$s.out" "$BATS_TEST_TMPDIR/$s.d"
		run /usr/bin/python3 "$BATS_TEST_DIRNAME/k8s_manifests.py" "$BATS_TEST_TMPDIR/$s.d" "$WB_BUILD"
		echo "# $s: $output"
		assert_success
	done
}

@test "the default spec: no model server, estimd not pointed at one, every object owned but the Namespace" {
	render wattbus-default
	run q wattbus-default '[o["kind"] for o in objs]'
	assert_output "['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'DaemonSet', 'Service', 'ServiceMonitor']"
	run q wattbus-default 'conf("estimd", "model_server")'
	assert_output ""
	run q wattbus-default '[o["metadata"].get("ownerReferences", [{}])[0].get("uid") for o in objs]'
	assert_output "[None, '6b3f2c1e-0000-4000-8000-000000000002', '6b3f2c1e-0000-4000-8000-000000000002', '6b3f2c1e-0000-4000-8000-000000000002', '6b3f2c1e-0000-4000-8000-000000000002', '6b3f2c1e-0000-4000-8000-000000000002', '6b3f2c1e-0000-4000-8000-000000000002', '6b3f2c1e-0000-4000-8000-000000000002']"
	run q wattbus-default 'one("DaemonSet", "wattbus")["metadata"]["ownerReferences"][0]'
	assert_output "{'apiVersion': 'wattbus.io/v1alpha1', 'kind': 'WattBus', 'name': 'wattbus', 'uid': '6b3f2c1e-0000-4000-8000-000000000002', 'controller': True, 'blockOwnerDeletion': True}"
}

@test "every field of the spec lands where docs/KUBERNETES.md maps it" {
	render wattbus-full
	ds='one("DaemonSet", "wattbus")'
	run q wattbus-full "[conf('usaged', 'interval'), conf('powerd', 'interval'), conf('exportd', 'listen'), conf('exportd', 'levels'), conf('exportd', 'metrics_allow'), conf('usaged', 'counters'), conf('exportd', 'kube_source'), conf('powerd', 'source'), conf('estimd', 'estimator'), conf('estimd', 'model_server'), conf('estimd', 'model_refresh')]"
	assert_output "['5s', '500ms', ':9200', 'node,pod', 'kepler_node_*, kepler_pod_*', 'false', 'kubelet', 'rapl,nvml', 'unix:/run/wattbus/estimator.sock', 'http://wattbus-modeld.wattbus:8100', '30m']"
	run q wattbus-full "[container($ds, 'exportd')['ports'][0]['containerPort'], one('Service', 'wattbus-exportd')['spec']['ports'][0]['port']]"
	assert_output "[9200, 9200]"
	run q wattbus-full "sorted({c['image'] for o in objs if o['kind'] in ('DaemonSet', 'Deployment') for c in o['spec']['template']['spec']['containers']})"
	assert_output "['quay.io/sustainable_computing_io/kepler-estimator:latest', 'registry.example/wattbus:0.1.0']"
	run q wattbus-full "[$ds['spec']['template']['spec']['nodeSelector'], $ds['spec']['template']['spec']['tolerations']]"
	assert_output "[{'kubernetes.io/os': 'linux'}, [{'key': 'node-role.kubernetes.io/control-plane', 'operator': 'Exists', 'effect': 'NoSchedule'}]]"
	run q wattbus-full "[container($ds, 'exportd')['resources'], container($ds, 'powerd')['resources']]"
	assert_output "[{'requests': {'cpu': '20m', 'memory': '32Mi'}, 'limits': {'memory': '512Mi'}}, {'limits': {'memory': '64Mi'}, 'requests': {'cpu': '5m', 'memory': '8Mi'}}]"
	run q wattbus-full "sorted({str(c.get('envFrom')) for o in objs if o['kind'] in ('DaemonSet', 'Deployment') for c in o['spec']['template']['spec']['containers'] if c['name'] != 'estimator'})"
	assert_output "[\"[{'configMapRef': {'name': 'wattbus-env'}}]\"]"
	run q wattbus-full "[container($ds, 'estimator')['volumeMounts'], one('PersistentVolumeClaim', 'wattbus-models'), one('Deployment', 'wattbus-modeld')['spec']['template']['spec']['volumes'][0]]"
	assert_output "[[{'name': 'run', 'mountPath': '/tmp'}], None, {'name': 'models', 'nfs': {'server': 'nfs.example', 'path': '/exports/models'}}]"
}

@test "hostPath storage: the node's directory, no claim" {
	render wattbus-hostpath
	run q wattbus-hostpath "[one('PersistentVolumeClaim', 'wattbus-models'), one('Deployment', 'wattbus-modeld')['spec']['template']['spec']['volumes'][0]]"
	assert_output "[None, {'name': 'models', 'hostPath': {'path': '/var/lib/wattbus-models', 'type': 'DirectoryOrCreate'}}]"
}

@test "local storage: the claim carries no owner, so deleting the WattBus keeps the models" {
	render wattbus-kustomize
	run q wattbus-kustomize "[one('PersistentVolumeClaim', 'wattbus-models')['metadata'].get('ownerReferences'), len(one('Deployment', 'wattbus-modeld')['metadata']['ownerReferences'])]"
	assert_output "[None, 1]"
}

@test "external storage: everything else rendered, modeld not, and the reason said" {
	printf '{"apiVersion":"wattbus.io/v1alpha1","kind":"WattBus","metadata":{"name":"wattbus"},"spec":{"modelServer":{"enabled":true,"storage":{"type":"external"}}}}' >"$BATS_TEST_TMPDIR/ext.json"
	run --separate-stderr "$OP" --render --spec "$BATS_TEST_TMPDIR/ext.json"
	assert_success
	[[ "$stderr" == *"ExternalStorageUnsupported: spec.modelServer.storage.type external is not supported"* ]]
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/ext.out"
	run q ext '[o["kind"] for o in objs if "modeld" in o["metadata"]["name"]]'
	assert_output "[]"
}

@test "the config hash on the pod template follows wattbus.conf and the variables ConfigMap" {
	render wattbus-full
	printf '{"WATTBUS_ESTIMD_TRAIN": "false"}' >"$BATS_TEST_TMPDIR/env1.json"
	printf '{"WATTBUS_ESTIMD_TRAIN": "true"}' >"$BATS_TEST_TMPDIR/env2.json"
	"$OP" --render --spec "$BATS_TEST_TMPDIR/wattbus-full.json" --env "$BATS_TEST_TMPDIR/env1.json" >"$BATS_TEST_TMPDIR/e1.out"
	"$OP" --render --spec "$BATS_TEST_TMPDIR/wattbus-full.json" --env "$BATS_TEST_TMPDIR/env2.json" >"$BATS_TEST_TMPDIR/e2.out"
	h='one("DaemonSet", "wattbus")["spec"]["template"]["metadata"]["annotations"]["wattbus.io/config-hash"]'
	h0=$(q wattbus-full "$h")
	h1=$(q e1 "$h")
	h2=$(q e2 "$h")
	[[ "$h0" =~ ^[0-9a-f]{16}$ ]]
	[ "$h0" != "$h1" ] && [ "$h1" != "$h2" ]
	render wattbus-default
	render wattbus-kustomize
	[ "$(q wattbus-default "$h")" != "$(q wattbus-kustomize "$h")" ]  # model_server differs
}

@test "a spec of the wrong type is refused with the field named, and nothing is printed" {
	printf '{"metadata":{"name":"wattbus"},"spec":{"exporter":{"port":"9102"}}}' >"$BATS_TEST_TMPDIR/bad.json"
	run --separate-stderr "$OP" --render --spec "$BATS_TEST_TMPDIR/bad.json"
	assert_failure 2
	assert_output ""
	[[ "$stderr" == *"spec.exporter.port: wrong type, not an integer"* ]]
	printf '{"spec": ' >"$BATS_TEST_TMPDIR/bad.json"
	run --separate-stderr "$OP" --render --spec "$BATS_TEST_TMPDIR/bad.json"
	assert_failure 2
	[[ "$stderr" == *"--spec $BATS_TEST_TMPDIR/bad.json: line 1"* ]]
}
