#!/usr/bin/env python3
"""A stand-in BMC for the redfish source's tests: HTTPS with basic auth, serving
ROOT/<path>/index.json for GET <path>, with the readings the test scripts.

Control files in CTL (read at every request):
  watts   "W [W...]": replaces PowerWatts.Reading and PowerControl[i].PowerConsumedWatts
  mode    ok | 500 | garbage | hang (answer only once mode is no longer hang) | slow:SECS
  fail_once PATH: answer 500 to the next GET of PATH (then the file is removed)
Writes CTL/port once listening, and appends to CTL/served one line per reading
served: "<wall ns> <path> <watts...>", and to CTL/requests "<wall ns> <path> <status>".
"""
import argparse
import base64
import json
import os
import ssl
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def ctl(name, default=""):
    try:
        with open(os.path.join(ARGS.ctl, name)) as f:
            return f.read().strip()
    except OSError:
        return default


def log(name, line):
    with open(os.path.join(ARGS.ctl, name), "a") as f:
        f.write(line + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, status, body, ctype="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        log("requests", "%d %s %d" % (time.time_ns(), self.path, status))

    def do_GET(self):
        want = "Basic " + base64.b64encode(("%s:%s" % (ARGS.user, ARGS.password)).encode()).decode()
        if self.headers.get("Authorization") != want:
            self.answer(401, '{"error": "unauthorized"}')
            return
        path = self.path.split("?")[0].rstrip("/")
        if ctl("fail_once") == path:
            os.unlink(os.path.join(ARGS.ctl, "fail_once"))
            self.answer(500, '{"error": "once"}')
            return
        mode = ctl("mode", "ok")
        if mode.startswith("slow:"):
            time.sleep(float(mode[5:]))
        while mode == "hang":
            time.sleep(0.05)
            mode = ctl("mode", "ok")
        if mode == "500":
            self.answer(500, '{"error": {"code": "Base.1.0.InternalError"}}')
            return
        if mode == "garbage":
            self.answer(200, "<html>BMC busy</html>\x00\xff", "text/html")
            return
        f = os.path.normpath(os.path.join(ARGS.root, "." + path, "index.json"))
        if not f.startswith(os.path.abspath(ARGS.root)) or not os.path.isfile(f):
            self.answer(404, '{"error": "not found"}')
            return
        doc = json.load(open(f))
        watts = [float(w) for w in ctl("watts").split()]
        served = []
        if "PowerWatts" in doc:
            if watts:
                doc["PowerWatts"]["Reading"] = watts[0]
            served.append(doc["PowerWatts"]["Reading"])
        for i, pc in enumerate(doc.get("PowerControl", [])):
            if i < len(watts):
                pc["PowerConsumedWatts"] = watts[i]
            served.append(pc.get("PowerConsumedWatts"))
        if served:
            log("served", "%d %s %s" % (time.time_ns(), path, " ".join(map(str, served))))
        self.answer(200, json.dumps(doc))


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--ctl", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--user", default="root")
    p.add_argument("--password", default="calvin")
    ARGS = p.parse_args()
    ARGS.root = os.path.abspath(ARGS.root)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(os.path.join(ARGS.ctl, "port.tmp"), "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(os.path.join(ARGS.ctl, "port.tmp"), os.path.join(ARGS.ctl, "port"))
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
