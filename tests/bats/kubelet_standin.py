#!/usr/bin/python3
"""A kubelet (and API server) stand-in for exportd's name tests, over TLS.

GET /pods, and GET /api/v1/pods?fieldSelector=spec.nodeName=NODE (the items of
that node only), answer the PodList in --pods, read again at every request so
that a test can change it (a pod deleted). A request without
"Authorization: Bearer <the --token file's content>" gets 401 and a Status,
as a kubelet does. The file --mode, read at every request, can turn the
answers bad: "ok" (or absent), "garbage" (200, not JSON), "huge" (200, a valid
PodList of --huge-mb MB), "401" (every request refused), "down" (the
connection is closed without an answer). Each request is logged as one line
"N PATH STATUS MODE" to --log; the port goes to --port-file.
"""
import argparse
import http.server
import json
import ssl
import urllib.parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--token", required=True, help="file holding the expected token")
    ap.add_argument("--pods", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--huge-mb", type=float, default=10.5)
    args = ap.parse_args()
    count = [0]

    def read(path, default=""):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return default

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def answer(self, status, body, mode):
            count[0] += 1
            with open(args.log, "a") as f:
                f.write("%d %s %d %s\n" % (count[0], self.path, status, mode))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            mode = read(args.mode, "ok") or "ok"
            if mode == "down":
                count[0] += 1
                with open(args.log, "a") as f:
                    f.write("%d %s 0 down\n" % (count[0], self.path))
                self.close_connection = True
                self.connection.close()
                return
            want = "Bearer " + read(args.token)
            if mode == "401" or self.headers.get("Authorization") != want:
                status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
                return self.answer(401, json.dumps(status).encode(), mode)
            url = urllib.parse.urlsplit(self.path)
            with open(args.pods) as f:
                podlist = json.load(f)
            if url.path == "/api/v1/pods":
                q = urllib.parse.parse_qs(url.query)
                sel = q.get("fieldSelector", [""])[0]
                if not sel.startswith("spec.nodeName="):
                    return self.answer(400, b'{"kind":"Status","code":400}', mode)
                node = sel.split("=", 1)[1]
                podlist["items"] = [p for p in podlist["items"] if p["spec"].get("nodeName") == node]
            elif url.path != "/pods":
                return self.answer(404, b"404 page not found\n", mode)
            if mode == "garbage":
                return self.answer(200, b"<html><body>502 Bad Gateway</body></html>\n" * 3, mode)
            if mode == "huge":
                pad = "x" * int(args.huge_mb * 1024 * 1024)
                podlist["items"][0]["metadata"].setdefault("annotations", {})["pad"] = pad
            return self.answer(200, json.dumps(podlist).encode(), mode)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
