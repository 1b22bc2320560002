#!/usr/bin/python3
"""The DaemonSet's pod as `podman kube play` takes it: the ConfigMap and a Pod
whose spec is the DaemonSet's pod template, with what a test changes:

    k8s_pod.py MANIFEST_DIR NAME POWERCAP_DIR RUN_DIR LISTEN NODE >play.yaml

POWERCAP_DIR replaces the host's /sys/class/powercap (a fake meter), RUN_DIR
the emptyDir of the sockets, LISTEN is exportd's address
(WATTBUS_EXPORTD_LISTEN), NODE the node name (podman has no spec.nodeName to
give). Everything else is the manifest as written.
"""
import os
import sys

import yaml

mdir, name, powercap, rundir, listen, node = sys.argv[1:7]


def load(fname):
    with open(os.path.join(mdir, fname)) as f:
        return list(yaml.safe_load_all(f))


cm = [d for d in load("configmap.yaml") if d["kind"] == "ConfigMap"][0]
ds = [d for d in load("daemonset.yaml") if d["kind"] == "DaemonSet"][0]
spec = ds["spec"]["template"]["spec"]
for v in spec["volumes"]:
    if v.get("hostPath", {}).get("path") == "/sys/class/powercap":
        v["hostPath"]["path"] = powercap
    if v["name"] == "run":
        # podman's emptyDir is root's 0755 and it has no fsGroup: a directory
        # of the test's, 1777, shared by the five containers as the emptyDir is.
        del v["emptyDir"]
        v["hostPath"] = {"path": rundir, "type": "Directory"}
for c in spec["containers"]:
    if c["name"] == "powerd":
        # This VM has no /sys/class/powercap to mount the fake meter over
        # (runc cannot make one in the read-only sysfs): beside it instead.
        for m in c["volumeMounts"]:
            if m["mountPath"] == "/sys/class/powercap":
                m["mountPath"] = "/fake-sys/class/powercap"
        c["env"].append({"name": "WATTBUS_POWERD_SYSFS_ROOT", "value": "/fake-sys"})
    for e in c.get("env", []):
        if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            del e["valueFrom"]
            e["value"] = node
    if c["name"] == "exportd":
        c["env"].append({"name": "WATTBUS_EXPORTD_LISTEN", "value": listen})
# podman 4.3 reads a container's seccomp profile from the annotation Kubernetes
# had before securityContext.seccompProfile, not from the field.
notes = {}
for c in spec["containers"]:
    prof = c.get("securityContext", {}).get("seccompProfile", {}).get("type")
    if prof == "Unconfined":
        notes["container.seccomp.security.alpha.kubernetes.io/" + c["name"]] = "unconfined"
pod = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": name, "labels": ds["spec"]["template"]["metadata"]["labels"], "annotations": notes},
    "spec": spec,
}
yaml.safe_dump_all([cm, pod], sys.stdout, sort_keys=False)
