#!/usr/bin/env python3
"""A stand-in for Kepler's general estimator sidecar (estimate/estimator.py),
speaking its protocol byte for byte: a unix stream socket; the server reads
1024-byte chunks until the text ends with '}', parses one PowerRequest, and
answers one JSON object {"powers": {zone: [watts per row]}, "msg", "core_ratio"}.

  kepler_estimator.py --socket PATH --log F --script STEP,STEP,...

As Kepler's estimator, it serves one connection at a time, and an answer it cannot
send (the client closed the connection: a broken pipe) ends it with status 1: one
late answer that the client did not wait for kills Kepler's estimator for good.

Each connection takes the next step (the last one repeats): answer (package =
100 W + 0.01 W per bpf_cpu_time_ms, dram = 7 W + 0.001 W per bpf_cpu_time_ms,
per row), slow (the same answer after --slow seconds, 10 by default: a first
model load), hang (read the request and never answer, until the client goes),
garbage (bytes that are no JSON), error (Kepler's failure answer: empty powers,
a msg), hostile, negative, idle_above (well-formed answers no zone can draw:
package [99999, -99999], [-5, -5], [10, 90] W for the two rows), dead (close the connection and the listening socket without a word, and
exit). Every request goes to --log as one JSON line {"raw": the text received,
"step"}, and every answer sent as {"sent": step}.
"""
import argparse
import json
import os
import socket
import time

p = argparse.ArgumentParser()
p.add_argument("--socket", required=True)
p.add_argument("--log", required=True)
p.add_argument("--script", required=True)
p.add_argument("--slow", type=float, default=10.0)
a = p.parse_args()
steps = a.script.split(",")


def powers(req):
    m = req["metrics"]
    i = m.index("bpf_cpu_time_ms")
    rows = req["values"]
    return {"package": [100 + 0.01 * r[i] for r in rows], "dram": [7 + 0.001 * r[i] for r in rows]}


IMPLAUSIBLE = {"hostile": [99999, -99999], "negative": [-5, -5], "idle_above": [10, 90]}


def log(obj):
    with open(a.log, "a") as f:
        f.write(json.dumps(obj) + "\n")


def serve(conn, step):
    data = b""
    while True:  # as Kepler's estimator: 1024-byte chunks until the text ends with '}'
        chunk = conn.recv(1024)
        if not chunk:
            break
        data += chunk
        if data.decode("utf-8", "replace").endswith("}"):
            break
    log({"raw": data.decode("utf-8", "replace"), "step": step})
    if step == "hang":
        while conn.recv(1024):
            pass
        conn.close()
        return
    if step == "garbage":
        ans = b"\x00\x01 not json at all"
    elif step in IMPLAUSIBLE:
        ans = json.dumps({"powers": {"package": IMPLAUSIBLE[step]}, "msg": "", "core_ratio": 1}).encode()
    elif step == "error":
        ans = json.dumps({"powers": {}, "msg": "no model for the requested features", "core_ratio": 1}).encode()
    else:
        if step == "slow":
            time.sleep(a.slow)
        ans = json.dumps({"powers": powers(json.loads(data)), "msg": "", "core_ratio": 1.0}).encode()
    try:
        conn.sendall(ans)
    except BrokenPipeError:
        log({"died": step})
        os._exit(1)  # as Kepler's estimator: the exception ends the process
    log({"sent": step})
    conn.close()


if os.path.exists(a.socket):
    os.unlink(a.socket)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(a.socket)
srv.listen(16)
i = 0
while True:
    conn, _ = srv.accept()
    step = steps[min(i, len(steps) - 1)]
    i += 1
    if step == "dead":
        log({"raw": "", "step": step})
        conn.close()
        srv.close()  # the socket file stays: connecting to it is refused from now on
        break
    serve(conn, step)
