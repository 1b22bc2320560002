#!/usr/bin/python3
"""Check deploy/kubernetes without a cluster:

    k8s_manifests.py MANIFEST_DIR BUILD_DIR

- every object against the Kubernetes API types of Debian's python3-kubernetes
  (its models' openapi_types and attribute_map: unknown fields, wrong types,
  required fields missing); the ServiceMonitor, a CRD it lacks, by hand;
- cross-references: volumes and mounts, ConfigMap keys, the ServiceAccount and
  RBAC, Service selectors and target ports, the claim, the pod labels;
- the privilege policy: powerd and usaged as uid 0 with every capability
  dropped (usaged adding exactly BPF, PERFMON and SYS_PTRACE), the others
  non-root on a
  read-only root, nothing privileged, no privilege escalation;
- wattbus.conf from the ConfigMap, with each container's environment, accepted
  by that container's own binary (`wattbus-<stage> -n -c`), and exportd's
  effective listen port the one its container and Service expose.
Prints one line per failed check and exits 1 if any failed.
"""
import os
import re
import subprocess
import sys
import tempfile

import yaml
from kubernetes import client

mdir, build = sys.argv[1], sys.argv[2]
problems = []


def fail(what):
    problems.append(what)


def load_objects():
    with open(os.path.join(mdir, "kustomization.yaml")) as f:
        kust = yaml.safe_load(f)
    objs = []
    for res in kust["resources"]:
        path = os.path.join(mdir, res)
        if not os.path.isfile(path):
            fail(f"kustomization.yaml: resource {res} does not exist")
            continue
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    objs.append((res, doc))
    return kust, objs


# ---- schema: the API types python3-kubernetes was generated from ----
MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Service"): "V1Service",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
}
PRIMITIVE = {"str": str, "int": int, "bool": bool, "float": (int, float)}


def check_type(where, value, typ):
    if typ == "object":
        return  # IntOrString and friends
    if typ in PRIMITIVE:
        if not isinstance(value, PRIMITIVE[typ]) or (typ == "int" and isinstance(value, bool)):
            fail(f"{where}: {value!r} is not {typ}")
        return
    if typ == "datetime":
        return
    m = re.fullmatch(r"list\[(.+)\]", typ)
    if m:
        if not isinstance(value, list):
            fail(f"{where}: not a list")
            return
        for i, v in enumerate(value):
            check_type(f"{where}[{i}]", v, m.group(1))
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", typ)
    if m:
        if not isinstance(value, dict):
            fail(f"{where}: not a map")
            return
        for k, v in value.items():
            check_type(f"{where}.{k}", v, m.group(1))
        return
    model = getattr(client, typ)
    if not isinstance(value, dict):
        fail(f"{where}: not an object ({typ})")
        return
    by_json = {j: a for a, j in model.attribute_map.items()}
    for k, v in value.items():
        if k not in by_json:
            fail(f"{where}: unknown field {k!r} in {typ}")
            continue
        check_type(f"{where}.{k}", v, model.openapi_types[by_json[k]])


api = client.ApiClient()


def check_schema(res, obj):
    where = f"{res}: {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    for k in ("apiVersion", "kind", "metadata"):
        if k not in obj:
            fail(f"{where}: no {k}")
            return
    if not obj["metadata"].get("name"):
        fail(f"{where}: no metadata.name")
    name = MODELS.get((obj["apiVersion"], obj["kind"]))
    if obj["kind"] == "ServiceMonitor":
        if obj["apiVersion"] != "monitoring.coreos.com/v1":
            fail(f"{where}: apiVersion {obj['apiVersion']}")
        spec = obj.get("spec", {})
        if not spec.get("selector", {}).get("matchLabels") or not spec.get("endpoints"):
            fail(f"{where}: a ServiceMonitor needs spec.selector.matchLabels and spec.endpoints")
        return
    if not name:
        fail(f"{where}: {obj['apiVersion']} {obj['kind']} is not a type this check knows")
        return
    check_type(where, obj, name)
    try:
        api._ApiClient__deserialize(obj, name)  # required fields
    except ValueError as e:
        fail(f"{where}: {e}")


# ---- the objects together ----
def by_kind(objs, kind):
    return [o for _, o in objs if o["kind"] == kind]


def one(objs, kind, name):
    found = [o for o in by_kind(objs, kind) if o["metadata"]["name"] == name]
    return found[0] if found else None


def labels_match(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def check_pod(objs, owner, pod):
    where = f"{owner['kind']}/{owner['metadata']['name']}"
    spec = pod["spec"]
    sel = owner["spec"]["selector"]["matchLabels"]
    if not labels_match(sel, pod["metadata"]["labels"]):
        fail(f"{where}: selector {sel} does not match the pod's labels")
    sa = spec.get("serviceAccountName")
    if sa and not one(objs, "ServiceAccount", sa):
        fail(f"{where}: ServiceAccount {sa} is not defined")
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    for v in vols.values():
        if "configMap" in v:
            cm = one(objs, "ConfigMap", v["configMap"]["name"])
            if not cm:
                fail(f"{where}: volume {v['name']}: ConfigMap {v['configMap']['name']} is not defined")
                continue
            for item in v["configMap"].get("items", []):
                if item["key"] not in cm.get("data", {}):
                    fail(f"{where}: volume {v['name']}: ConfigMap has no key {item['key']}")
        if "persistentVolumeClaim" in v and not one(objs, "PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"]):
            fail(f"{where}: claim {v['persistentVolumeClaim']['claimName']} is not defined")
    for c in spec["containers"]:
        for m in c.get("volumeMounts", []):
            if m["name"] not in vols:
                fail(f"{where}: container {c['name']} mounts {m['name']}, which is no volume")
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            fail(f"{where}: container {c['name']} is privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            fail(f"{where}: container {c['name']}: allowPrivilegeEscalation is not false")
        if sc.get("readOnlyRootFilesystem") is not True:
            fail(f"{where}: container {c['name']}: root file system is not read-only")
        caps = sc.get("capabilities", {})
        if caps.get("drop") != ["ALL"]:
            fail(f"{where}: container {c['name']} does not drop ALL capabilities")
        want_add = {"usaged": ["BPF", "PERFMON", "SYS_PTRACE"]}.get(c["name"], [])
        if sorted(caps.get("add", [])) != want_add:
            fail(f"{where}: container {c['name']} adds {caps.get('add', [])}, expected {want_add}")
        root = c["name"] in ("powerd", "usaged")
        uid = sc.get("runAsUser", spec.get("securityContext", {}).get("runAsUser"))
        nonroot = sc.get("runAsNonRoot", spec.get("securityContext", {}).get("runAsNonRoot"))
        if root and uid != 0:
            fail(f"{where}: container {c['name']} must run as uid 0 (runAsUser {uid})")
        if not root and (nonroot is not True or not uid):
            fail(f"{where}: container {c['name']} must run as a non-root uid (runAsUser {uid}, runAsNonRoot {nonroot})")


def pods(objs):
    for o in by_kind(objs, "DaemonSet") + by_kind(objs, "Deployment"):
        yield o, o["spec"]["template"]


def check_services(objs):
    for svc in by_kind(objs, "Service"):
        where = f"Service/{svc['metadata']['name']}"
        matched = [(o, p) for o, p in pods(objs) if labels_match(svc["spec"]["selector"], p["metadata"]["labels"])]
        if not matched:
            fail(f"{where}: selects no pod")
        for port in svc["spec"]["ports"]:
            tp = port.get("targetPort", port["port"])
            found = [cp for _, p in matched for c in p["spec"]["containers"] for cp in c.get("ports", [])
                     if cp.get("name") == tp or cp["containerPort"] == tp]
            if not found:
                fail(f"{where}: targetPort {tp} is no port of the pods it selects")
            elif found[0]["containerPort"] != port["port"]:
                fail(f"{where}: port {port['port']} goes to container port {found[0]['containerPort']}")
    for sm in by_kind(objs, "ServiceMonitor"):
        sel = sm["spec"]["selector"]["matchLabels"]
        svcs = [s for s in by_kind(objs, "Service") if labels_match(sel, s["metadata"].get("labels", {}))]
        if not svcs:
            fail(f"ServiceMonitor/{sm['metadata']['name']}: selects no Service")
        names = {p.get("name") for s in svcs for p in s["spec"]["ports"]}
        for ep in sm["spec"]["endpoints"]:
            if ep.get("port") not in names:
                fail(f"ServiceMonitor/{sm['metadata']['name']}: port {ep.get('port')} is no port of {[s['metadata']['name'] for s in svcs]}")


def check_rbac(objs):
    for b in by_kind(objs, "ClusterRoleBinding"):
        if not one(objs, "ClusterRole", b["roleRef"]["name"]):
            fail(f"ClusterRoleBinding/{b['metadata']['name']}: ClusterRole {b['roleRef']['name']} is not defined")
        for s in b["subjects"]:
            if s["kind"] == "ServiceAccount" and not one(objs, "ServiceAccount", s["name"]):
                fail(f"ClusterRoleBinding/{b['metadata']['name']}: ServiceAccount {s['name']} is not defined")
    rules = [r for role in by_kind(objs, "ClusterRole") for r in role["rules"]]
    allowed = {(res, verb) for r in rules for res in r["resources"] for verb in r["verbs"]}
    for need in (("nodes/proxy", "get"), ("pods", "list")):
        if need not in allowed:
            fail(f"RBAC: {need[1]} on {need[0]} is not granted")


# ---- wattbus.conf as each container sees it ----
def check_config(objs):
    for owner, pod in pods(objs):
        spec = pod["spec"]
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            where = f"{owner['kind']}/{owner['metadata']['name']} container {c['name']}"
            if c["name"] == "estimator" and "command" not in c:
                print(f"# {where}: the estimator sidecar (Kepler's image) reads no wattbus.conf")
                continue
            binary = os.path.basename(c["command"][0])
            if binary != f"wattbus-{c['name']}":
                fail(f"{where}: runs {binary}")
            local = os.path.join(build, binary)
            if not os.access(local, os.X_OK):
                print(f"# {where}: {local} is not built here; its config is not checked")
                continue
            conf_path = c["command"][c["command"].index("-c") + 1]
            mount = [m for m in c.get("volumeMounts", []) if conf_path.startswith(m["mountPath"] + "/")]
            if not mount or "configMap" not in vols.get(mount[0]["name"], {}):
                fail(f"{where}: {conf_path} is not from a ConfigMap")
                continue
            vol = vols[mount[0]["name"]]["configMap"]
            cm = one(objs, "ConfigMap", vol["name"])
            rel = conf_path[len(mount[0]["mountPath"]) + 1:]
            key = {i["path"]: i["key"] for i in vol.get("items", [])}.get(rel, rel)
            env = {k: v for k, v in os.environ.items() if not k.startswith("WATTBUS_")}
            for e in c.get("env", []):
                env[e["name"]] = e.get("value", "node-1")  # fieldRef: any node name
            with tempfile.TemporaryDirectory() as tmp:
                conf = os.path.join(tmp, "wattbus.conf")
                with open(conf, "w") as f:
                    f.write(cm["data"][key])
                r = subprocess.run([local, "-n", "-c", conf] + c["command"][3:], env=env,
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    fail(f"{where}: {binary} refuses its config: {r.stderr.strip()}")
                    continue
                if c["name"] == "exportd":
                    listen = listen_of(cm["data"][key], env)
                    port = int(listen.rsplit(":", 1)[1])
                    if port not in [p["containerPort"] for p in c.get("ports", [])]:
                        fail(f"{where}: exportd listens on {listen}, which the container does not expose")
                # The runtime dir is the volume every container shares.
                rt = conf_value(cm["data"][key], env, "global", "runtime_dir")
                mounted = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
                if rt not in mounted or "emptyDir" not in vols.get(mounted[rt], {}):
                    if owner["kind"] == "DaemonSet":
                        fail(f"{where}: runtime_dir {rt} is not the pod's shared emptyDir")


def conf_value(text, env, section, key):
    var = f"WATTBUS_{section.upper()}_{key.upper()}"
    if var in env:
        return env[var]
    cur = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            cur = line.strip("[]")
        elif cur == section and "=" in line and not line.startswith(";"):
            k, v = (s.strip() for s in line.split("=", 1))
            if k == key:
                return v
    return None


def listen_of(text, env):
    return conf_value(text, env, "exportd", "listen") or ":9102"


kust, objs = load_objects()
for res, obj in objs:
    check_schema(res, obj)
ns = kust.get("namespace")
for res, obj in objs:
    md = obj.get("metadata", {})
    if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding") and md.get("namespace") not in (None, ns):
        fail(f"{res}: {obj['kind']}/{md.get('name')} is in namespace {md.get('namespace')}, not {ns}")
if not problems:
    for owner, pod in pods(objs):
        check_pod(objs, owner, pod)
    check_services(objs)
    check_rbac(objs)
    check_config(objs)
for p in problems:
    print(p)
print(f"# {len(objs)} objects, {len(problems)} problems")
sys.exit(1 if problems else 0)
