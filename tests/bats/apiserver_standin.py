#!/usr/bin/python3
"""A stand-in Kubernetes API server for operator_loop.bats (no real one can be had here):

    apiserver_standin.py PORT_FILE TOKEN [PORT]

Plain HTTP on 127.0.0.1:PORT (default: one the kernel picks), written to PORT_FILE once it
listens; bearer TOKEN required. Its objects live in memory: a restart starts empty. What the operator uses, as the API
server does it: GET of an object or a list (with metadata.resourceVersion), ?watch=1 from a
resourceVersion (newline-separated events, chunked; ended at timeoutSeconds), PATCH with
application/apply-patch+yaml (server-side apply: fieldManager required; creates, or replaces
the fields applied; an apply that changes nothing changes nothing, not even the
resourceVersion), PATCH application/merge-patch+json on /status (the status subresource:
only status changes) and on an object (the test's own edits), metadata.generation bumped when
spec changes, DELETE with the garbage collector: every object whose ownerReferences name a
deleted uid goes too. One resourceVersion counter for everything, as etcd's.
"""
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

port_file, token = sys.argv[1], sys.argv[2]
port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
lock = threading.Condition()
store = {}  # (prefix, ns, plural, name) -> object
events = []  # (rv, (prefix, ns, plural), type, object)
rv = [100]


def split(path):
    """(prefix, ns, plural, name, sub) of an API path, or None."""
    segs = [s for s in path.split("/") if s]
    if segs[:2] == ["api", "v1"]:
        prefix, rest = "/api/v1", segs[2:]
    elif segs[:1] == ["apis"] and len(segs) >= 3:
        prefix, rest = "/" + "/".join(segs[:3]), segs[3:]
    else:
        return None
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    return prefix, ns, rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None


def bump(key, typ, obj):
    rv[0] += 1
    obj["metadata"]["resourceVersion"] = str(rv[0])
    events.append((rv[0], key[:3], typ, json.loads(json.dumps(obj))))
    lock.notify_all()


def delete(key):
    obj = store.pop(key)
    bump(key, "DELETED", obj)
    uid = obj["metadata"]["uid"]
    for k, o in list(store.items()):
        if k in store and any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences", [])):
            delete(k)


def merge(a, b):
    """RFC 7386 merge patch."""
    if not isinstance(b, dict):
        return b
    a = dict(a) if isinstance(a, dict) else {}
    for k, v in b.items():
        if v is None:
            a.pop(k, None)
        else:
            a[k] = merge(a.get(k), v)
    return a


SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp")


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("standin: " + (fmt % args) + f" agent={self.headers.get('User-Agent')}\n")

    def answer(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def status(self, code, reason, msg):
        self.answer(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": reason, "message": msg, "code": code})

    def parse(self):
        if self.headers.get("Authorization") != f"Bearer {token}":
            self.status(401, "Unauthorized", "Unauthorized")
            return None
        u = urlparse(self.path)
        p = split(u.path)
        # STANDIN_NO_GROUPS: API groups this server does not serve (a CRD not installed).
        if not p or any(p[0] == "/apis/" + g + "/v1" for g in os.environ.get("STANDIN_NO_GROUPS", "").split(",") if g):
            self.status(404, "NotFound", f"the server could not find the requested resource {u.path}")
            return None
        return p, {k: v[-1] for k, v in parse_qs(u.query).items()}

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        return json.loads(self.rfile.read(n) or b"null")

    def do_GET(self):
        r = self.parse()
        if not r:
            return
        (prefix, ns, plural, name, sub), q = r
        with lock:
            if name:
                o = store.get((prefix, ns, plural, name))
                return self.answer(200, o) if o else self.status(404, "NotFound", f'{plural} "{name}" not found')
            if q.get("watch") in ("1", "true"):
                return self.watch((prefix, ns, plural), int(q.get("resourceVersion") or 0),
                                  float(q.get("timeoutSeconds", "300")))
            items = [o for k, o in sorted(store.items(), key=lambda kv: str(kv[0])) if k[:3] == (prefix, ns, plural)]
            self.answer(200, {"kind": "List", "apiVersion": "v1",
                              "metadata": {"resourceVersion": str(rv[0])}, "items": items})

    def watch(self, coll, since, timeout):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        end = time.monotonic() + timeout
        try:
            while True:
                for erv, ecoll, typ, obj in events:
                    if erv > since and ecoll == coll:
                        line = (json.dumps({"type": typ, "object": obj}) + "\n").encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                        self.wfile.flush()
                        since = erv
                left = end - time.monotonic()
                if left <= 0:
                    break
                lock.wait(min(left, 0.5))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_PATCH(self):
        r = self.parse()
        if not r:
            return
        (prefix, ns, plural, name, sub), q = r
        ctype = self.headers.get("Content-Type", "")
        patch = self.body()
        key = (prefix, ns, plural, name)
        with lock:
            old = store.get(key)
            if ctype == "application/apply-patch+yaml":
                if not q.get("fieldManager"):
                    return self.status(400, "BadRequest", "fieldManager is required for apply")
                if patch.get("metadata", {}).get("name") != name:
                    return self.status(400, "BadRequest", "the name in the body is not the name in the path")
                new = json.loads(json.dumps(patch))
                if old:
                    for k in SERVER_META:
                        if k in old["metadata"]:
                            new["metadata"][k] = old["metadata"][k]
                    if "status" in old:
                        new["status"] = old["status"]
                    if new == old:
                        return self.answer(200, old)
                    if new.get("spec") != old.get("spec"):
                        new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
                else:
                    new["metadata"].update(uid=str(uuid.uuid4()), generation=1,
                                           creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                store[key] = new
                bump(key, "MODIFIED" if old else "ADDED", new)
                return self.answer(200 if old else 201, new)
            if ctype == "application/merge-patch+json":
                if not old:
                    return self.status(404, "NotFound", f'{plural} "{name}" not found')
                if sub == "status":
                    new = dict(old)
                    new["status"] = merge(old.get("status"), patch.get("status"))
                else:
                    new = merge(old, {k: v for k, v in patch.items() if k != "status"})
                    if new.get("spec") != old.get("spec"):
                        new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
                if new != old:
                    store[key] = new
                    bump(key, "MODIFIED", new)
                return self.answer(200, new)
            self.status(415, "UnsupportedMediaType", f"content type {ctype}")

    def do_DELETE(self):
        r = self.parse()
        if not r:
            return
        (prefix, ns, plural, name, sub), q = r
        with lock:
            key = (prefix, ns, plural, name)
            if key not in store:
                return self.status(404, "NotFound", f'{plural} "{name}" not found')
            obj = store[key]
            delete(key)
            self.answer(200, obj)


class S(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = S(("127.0.0.1", port), H)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.replace(port_file + ".tmp", port_file)
srv.serve_forever()
