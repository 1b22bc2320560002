#!/usr/bin/env python3
"""A stand-in Prometheus for modeld's online trainer: answers /api/v1/query_range with the
series a file holds (query name -> matrix result), whatever the range, and logs each query.

usage: fake_prometheus.py RESULTS.json LOG  (prints "port N" once it listens on 127.0.0.1)
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

results = json.load(open(sys.argv[1]))
log = open(sys.argv[2], "a", buffering=1)


class H(BaseHTTPRequestHandler):
    def do_GET(self):
        u = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        log.write(json.dumps(dict(q, path=u.path)) + "\n")
        if u.path != "/api/v1/query_range" or "query" not in q:
            self.send_response(400)
            self.end_headers()
            return
        body = json.dumps(
            {"status": "success", "data": {"resultType": "matrix", "result": results.get(q["query"], [])}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
print("port %d" % srv.server_address[1], flush=True)
srv.serve_forever()
