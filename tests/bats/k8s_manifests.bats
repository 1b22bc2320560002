#!/usr/bin/env bats
# deploy/kubernetes checked without a cluster (k8s_manifests.py): the API types
# of Debian's python3-kubernetes, the cross-references, the privilege policy,
# and wattbus.conf with each container's environment accepted by its binary.
# Each broken copy must be caught, with the reason.

load helper

setup() {
	/usr/bin/python3 -c 'import kubernetes, yaml' 2>/dev/null || skip "python3-kubernetes and python3-yaml are not installed (scripts/deps.sh test)"
	CHECK="python3 $BATS_TEST_DIRNAME/k8s_manifests.py"
	M=$BATS_TEST_TMPDIR/k8s
	cp -r "$WB_ROOT/deploy/kubernetes" "$M"
}

# mutate 'python statements on objs (a list of the file's documents)' FILE
mutate() {
	python3 - "$M/$2" "$1" <<-'PY'
		import sys, yaml
		path, code = sys.argv[1], sys.argv[2]
		objs = list(yaml.safe_load_all(open(path)))
		def container(name):
		    for o in objs:
		        if o["kind"] in ("DaemonSet", "Deployment"):
		            for c in o["spec"]["template"]["spec"]["containers"]:
		                if c["name"] == name:
		                    return c
		exec(code)
		yaml.safe_dump_all(objs, open(path, "w"), sort_keys=False)
	PY
}

@test "the manifests pass every check" {
	run $CHECK "$M" "$WB_BUILD"
	assert_success
	assert_output --partial "# 11 objects, 0 problems"
}

@test "kubectl kustomize renders them into the wattbus namespace" {
	command -v kubectl >/dev/null || skip "kubectl is not installed"
	run kubectl kustomize "$M"
	assert_success
	echo "$output" >"$BATS_TEST_TMPDIR/rendered.yaml"
	run python3 -c '
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
cluster = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
print(len(objs), sorted({o["metadata"].get("namespace", "-") for o in objs if o["kind"] not in cluster}),
      sorted({c["image"] for o in objs if o["kind"] in ("DaemonSet", "Deployment") for c in o["spec"]["template"]["spec"]["containers"]}))
' "$BATS_TEST_TMPDIR/rendered.yaml"
	assert_output "11 ['wattbus'] ['localhost/wattbus:0.1.0']"
}

@test "a privileged container, an added capability or a root one is caught" {
	mutate 'container("alignd")["securityContext"]["privileged"] = True' daemonset.yaml
	mutate 'container("usaged")["securityContext"]["capabilities"]["add"].append("SYS_ADMIN")' daemonset.yaml
	mutate 'container("exportd")["securityContext"]["runAsUser"] = 0' daemonset.yaml
	run $CHECK "$M" "$WB_BUILD"
	assert_failure
	assert_output --partial "container alignd is privileged"
	assert_output --partial "container usaged adds ['BPF', 'PERFMON', 'SYS_PTRACE', 'SYS_ADMIN'], expected ['BPF', 'PERFMON', 'SYS_PTRACE']"
	assert_output --partial "container exportd must run as a non-root uid"
}

@test "unknown fields, wrong types and missing required fields are caught" {
	mutate 'objs[0]["spec"]["template"]["spec"]["hostPid"] = True' daemonset.yaml
	mutate 'container("powerd")["resources"]["limits"]["memory"] = ["64Mi"]' daemonset.yaml
	mutate 'del objs[0]["spec"]["ports"][0]["port"]' service.yaml
	run $CHECK "$M" "$WB_BUILD"
	assert_failure
	assert_output --partial "unknown field 'hostPid' in V1PodSpec"
	assert_output --partial "resources.limits.memory: ['64Mi'] is not str"
	assert_output --partial "Invalid value for \`port\`, must not be \`None\`"
}

@test "broken references are caught" {
	mutate 'container("estimd")["volumeMounts"][0]["name"] = "sockets"' daemonset.yaml
	mutate 'objs[0]["spec"]["ports"][0]["targetPort"] = "metrics"' service.yaml
	mutate 'objs[0]["spec"]["endpoints"][0]["port"] = "web"' servicemonitor.yaml
	mutate 'objs[2]["subjects"][0]["name"] = "kepler"' rbac.yaml
	run $CHECK "$M" "$WB_BUILD"
	assert_failure
	assert_output --partial "container estimd mounts sockets, which is no volume"
	assert_output --partial "Service/wattbus-exportd: targetPort metrics is no port of the pods it selects"
	assert_output --partial "ServiceMonitor/wattbus-exportd: port web is no port"
	assert_output --partial "ServiceAccount kepler is not defined"
}

@test "a wattbus.conf a stage refuses, or a port nobody exposes, is caught" {
	mutate 'objs[0]["data"]["wattbus.conf"] = objs[0]["data"]["wattbus.conf"].replace("interval = 3s", "interval = 3 s")' configmap.yaml
	mutate 'container("exportd")["env"].append({"name": "WATTBUS_EXPORTD_LISTEN", "value": ":9999"})' daemonset.yaml
	run $CHECK "$M" "$WB_BUILD"
	assert_failure
	assert_output --partial "container usaged: wattbus-usaged refuses its config"
	assert_output --partial "[usaged] interval: '3 s' is not a duration"
	assert_output --partial "exportd listens on :9999, which the container does not expose"
}
