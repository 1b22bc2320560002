#!/usr/bin/env python3
"""A stand-in for Kepler's model server (POST /model, as kepler-model-server's
Flask app answers it), scripted: each request gets the next step of --script.

  kepler_model_server.py --port-file F --log F --script STEP,STEP,...

Steps: 400 (no model: 400 with a text message, as Kepler answers), model:FILE
(200, application/json: the weights file with model_name, machine_spec and mae
added, as Kepler does for weight=true), garbage (200 with a body that is no
JSON), down (close the listening socket and exit: the server is gone). After
the last step the last one repeats. Every request body goes to --log as one
JSON line {"path", "content_type", "body"}.
"""
import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

p = argparse.ArgumentParser()
p.add_argument("--port-file", required=True)
p.add_argument("--log", required=True)
p.add_argument("--script", required=True)
a = p.parse_args()
steps = a.script.split(",")
state = {"i": 0}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, ctype, body):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n).decode("utf-8", "replace")
        with open(a.log, "a") as f:
            f.write(json.dumps({"path": self.path, "content_type": self.headers.get("Content-Type"),
                                "body": body}) + "\n")
        if self.path != "/model":
            self.answer(404, "text/plain", b"not found")
            return
        step = steps[min(state["i"], len(steps) - 1)]
        state["i"] += 1
        if step == "down":
            # Gone before answering: the client sees the connection end.
            threading.Thread(target=self.server.shutdown).start()
            self.close_connection = True
            return
        if step == "400":
            req = json.loads(body)
            self.answer(400, "text/html; charset=utf-8",
                        ("cannot find model for %s at node_type -1" % req.get("metrics")).encode())
        elif step == "garbage":
            self.answer(200, "application/json", b"<html>surprise</html>")
        elif step.startswith("model:"):
            with open(step[6:]) as f:
                w = json.load(f)
            w.setdefault("model_name", os.path.basename(step[6:]).rsplit(".", 1)[0])
            w["machine_spec"] = {"processor": "intel_xeon_platinum_8259cl", "cores": 96, "chips": 2,
                                 "memory": 377, "frequency": 3500}
            w["mae"] = 4.5
            self.answer(200, "application/json", json.dumps(w).encode())
        else:
            self.answer(500, "text/plain", b"bad script step")


srv = HTTPServer(("127.0.0.1", 0), Handler)
with open(a.port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(a.port_file + ".tmp", a.port_file)
srv.serve_forever()
srv.server_close()
sys.exit(0)
