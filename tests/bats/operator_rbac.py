#!/usr/bin/python3
"""Every request a stand-in API server logged is one deploy/operator/operator.yaml's ClusterRole grants:

    operator_rbac.py OPERATOR_YAML STANDIN_LOG

The log lines are http.server's ("METHOD PATH HTTP/1.1" STATUS - agent=AGENT); only the
operator's (agent wattbus-operator/...) count, not the test's own. GET of an object is get,
of a collection list (watch with ?watch=1), PATCH is patch (and create when it answered
201: server-side apply of a new object), DELETE delete. Prints each request not granted
and exits 1 if any; also fails when the log holds no request (nothing checked).
"""
import re
import sys
from urllib.parse import parse_qs, urlparse

import yaml

role = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] == "ClusterRole"][0]
granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
line_re = re.compile(r'"(GET|PATCH|DELETE|PUT|POST) (\S+) HTTP/1\.1" (\d+)')
seen, missing = set(), []
for line in open(sys.argv[2]):
    m = line_re.search(line)
    if not m or "agent=wattbus-operator/" not in line:
        continue
    method, url, code = m.group(1), urlparse(m.group(2)), int(m.group(3))
    segs = [s for s in url.path.split("/") if s]
    if segs[:2] == ["api", "v1"]:
        group, rest = "", segs[2:]
    else:
        group, rest = segs[1], segs[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = rest[0] + ("/" + rest[2] if len(rest) > 2 else "")
    if method == "GET":
        verbs = ["get"] if len(rest) > 1 else ["watch" if parse_qs(url.query).get("watch") else "list"]
    elif method == "PATCH":
        verbs = ["patch"] + (["create"] if code == 201 else [])
    else:
        verbs = [method.lower()]
    for v in verbs:
        need = (group, resource, v)
        if need not in seen:
            seen.add(need)
            if need not in granted:
                missing.append(f"{v} {resource} (group '{group}'): {method} {m.group(2)}")
for line in missing:
    print("not granted: " + line)
print(f"# {len(seen)} kinds of request, {len(missing)} not granted")
sys.exit(1 if missing or not seen else 0)
