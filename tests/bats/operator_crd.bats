#!/usr/bin/env bats
# deploy/operator/crd.yaml checked without an API server (operator_crd.py): the
# schema with its defaults through python3-jsonschema, and the CEL validation
# rules (the singleton's name among them) evaluated on good and bad resources.

load helper

setup() {
	/usr/bin/python3 -c 'import jsonschema, yaml' 2>/dev/null || skip "python3-jsonschema and python3-yaml are not installed (scripts/deps.sh test)"
	CRD=$WB_ROOT/deploy/operator/crd.yaml
	CHECK="python3 $BATS_TEST_DIRNAME/operator_crd.py $CRD"
	D=$WB_ROOT/tests/data/operator
}

# one 'YAML of a WattBus' -> runs the check on it
one() {
	printf '%s\n' "$1" >"$BATS_TEST_TMPDIR/r.yaml"
	run $CHECK "$BATS_TEST_TMPDIR/r.yaml"
	assert_success
}

# one_wattbus NAME SPEC -> one on the WattBus of that name and spec (flow-style YAML)
one_wattbus() {
	one "apiVersion: wattbus.io/v1alpha1
kind: WattBus
metadata: {name: $1}
spec: $2"
}

@test "the default resource and one with every field set are accepted" {
	run $CHECK "$D/wattbus-default.yaml" "$D/wattbus-full.yaml"
	assert_success
	assert_output "OK wattbus
OK wattbus"
}

@test "a WattBus not named wattbus is refused by the name rule" {
	one_wattbus kepler '{}'
	assert_output "REFUSED kepler: (root): only one WattBus is reconciled, and it is named wattbus"
}

@test "the rule reads the name: the same resource renamed wattbus passes" {
	one_wattbus wattbus '{exporter: {port: 9102}}'
	assert_output "OK wattbus"
}

@test "the schema refuses a port out of range, an unknown level, a misspelt field, a bad duration" {
	one_wattbus wattbus '{exporter: {port: 70000}}'
	assert_output --partial "REFUSED wattbus: spec.exporter.port: 70000 is greater than the maximum of 65535"
	one_wattbus wattbus '{exporter: {levels: [node, namespace]}}'
	assert_output --partial "spec.exporter.levels.1: 'namespace' is not one of"
	one_wattbus wattbus '{exporter: {prot: 9102}}'
	assert_output --partial "spec.exporter: Additional properties are not allowed ('prot' was unexpected)"
	one_wattbus wattbus '{interval: 3 s}'
	assert_output --partial "spec.interval: '3 s' does not match"
}

@test "an enabled sidecar without an image and storage without its path are refused by their rules" {
	one_wattbus wattbus '{estimatorSidecar: {enabled: true}}'
	assert_output "REFUSED wattbus: (root).spec.estimatorSidecar: an enabled estimator sidecar needs an image"
	one_wattbus wattbus '{modelServer: {enabled: true, storage: {type: hostPath}}}'
	assert_output "REFUSED wattbus: (root).spec.modelServer.storage: storage type hostPath needs a path"
	one_wattbus wattbus '{modelServer: {enabled: true, storage: {type: nfs, path: /x}}}'
	assert_output "REFUSED wattbus: (root).spec.modelServer.storage: storage type nfs needs a server and a path"
}

@test "external storage passes the schema: the operator refuses it with a condition" {
	one_wattbus wattbus '{modelServer: {enabled: true, storage: {type: external}}}'
	assert_output "OK wattbus"
}

@test "a rule outside the CEL subset the checker reads fails the check, not passes" {
	sed "s/self.metadata.name == 'wattbus'/self.metadata.name.startsWith('wattbus')/" "$WB_ROOT/deploy/operator/crd.yaml" >"$BATS_TEST_TMPDIR/crd.yaml"
	run python3 "$BATS_TEST_DIRNAME/operator_crd.py" "$BATS_TEST_TMPDIR/crd.yaml" "$D/wattbus-default.yaml"
	assert_failure
	assert_output --partial "ERROR wattbus: "
}
