#!/usr/bin/python3
"""Helpers for operator_render.bats, on the output of `wattbus-operator --render`:

    operator_render.py compare MANIFEST_DIR RENDER   deploy/kubernetes (as kubectl apply -k
        makes it: the kustomization's namespace and labels) against a render, less what
        only the operator adds (owner references, the managed-by label, the config hash);
        prints each difference, exits 1 if any
    operator_render.py dir RENDER OUT_DIR            the render as a directory k8s_manifests.py checks
    operator_render.py eval RENDER EXPR              prints EXPR, evaluated with objs (the objects),
        one(kind, name), container(owner, name) and conf(key) (wattbus.conf's [section] key)
"""
import json
import os
import sys

import yaml


def load_render(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def kustomized(mdir):
    with open(os.path.join(mdir, "kustomization.yaml")) as f:
        kust = yaml.safe_load(f)
    labels = {}
    for e in kust.get("labels", []):
        labels.update(e.get("pairs", {}))
    objs = []
    for res in kust["resources"]:
        with open(os.path.join(mdir, res)) as f:
            for d in yaml.safe_load_all(f):
                if d:
                    d.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
                    objs.append(d)
    return objs


def operator_only(o):
    o = json.loads(json.dumps(o))
    md = o["metadata"]
    md.pop("ownerReferences", None)
    md.get("labels", {}).pop("app.kubernetes.io/managed-by", None)
    tmpl = o.get("spec", {}).get("template", {}).get("metadata", {})
    tmpl.get("annotations", {}).pop("wattbus.io/config-hash", None)
    if tmpl.get("annotations") == {}:
        del tmpl["annotations"]
    return o


def diff(a, b, where, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{where}.{k}: only in the render")
            elif k not in b:
                out.append(f"{where}.{k}: only in deploy/kubernetes")
            else:
                diff(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append(f"{where}: deploy/kubernetes has {a!r}, the render {b!r}")


def compare(mdir, render):
    want = kustomized(mdir)
    got = [operator_only(o) for o in load_render(render)]
    key = lambda o: (o["kind"], o["metadata"]["name"])
    out = []
    w, g = {key(o): o for o in want}, {key(o): o for o in got}
    for k in sorted(set(w) | set(g)):
        if k not in g:
            out.append(f"{k[0]}/{k[1]}: in deploy/kubernetes, not rendered")
        elif k not in w:
            out.append(f"{k[0]}/{k[1]}: rendered, not in deploy/kubernetes")
        else:
            diff(w[k], g[k], f"{k[0]}/{k[1]}", out)
    if [key(o) for o in want] != [key(o) for o in got] and not out:
        out.append("the objects come in another order than kustomization.yaml's")
    for line in out:
        print(line)
    print(f"# {len(want)} objects, {len(out)} differences")
    return 1 if out else 0


def to_dir(render, out):
    os.makedirs(out, exist_ok=True)
    objs = load_render(render)
    with open(os.path.join(out, "objects.yaml"), "w") as f:
        yaml.safe_dump_all(objs, f, sort_keys=False)
    with open(os.path.join(out, "kustomization.yaml"), "w") as f:
        yaml.safe_dump({"namespace": "wattbus", "resources": ["objects.yaml"]}, f)
    return 0


def evaluate(render, expr):
    objs = load_render(render)

    def one(kind, name):
        found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
        return found[0] if found else None

    def container(owner, name):
        for c in owner["spec"]["template"]["spec"]["containers"]:
            if c["name"] == name:
                return c
        return None

    def conf(section, key):
        cur = None
        for line in one("ConfigMap", "wattbus-config")["data"]["wattbus.conf"].splitlines():
            line = line.strip()
            if line.startswith("["):
                cur = line.strip("[]")
            elif cur == section and "=" in line and not line.startswith(";"):
                k, v = (s.strip() for s in line.split("=", 1))
                if k == key:
                    return v
        return None

    print(eval(expr, {"objs": objs, "one": one, "container": container, "conf": conf}))
    return 0


cmd = sys.argv[1]
if cmd == "compare":
    sys.exit(compare(sys.argv[2], sys.argv[3]))
elif cmd == "dir":
    sys.exit(to_dir(sys.argv[2], sys.argv[3]))
elif cmd == "eval":
    sys.exit(evaluate(sys.argv[2], sys.argv[3]))
sys.exit(f"unknown command {cmd}")
