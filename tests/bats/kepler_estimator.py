#!/usr/bin/env python3
"""A stand-in for Kepler's general estimator sidecar (estimate/estimator.py),
speaking its protocol byte for byte: a unix stream socket; the server reads
1024-byte chunks until the text ends with '}', parses one PowerRequest, and
answers one JSON object {"powers": {zone: [watts per row]}, "msg", "core_ratio"}.

  kepler_estimator.py --socket PATH --log F --script STEP,STEP,...

Each connection takes the next step (the last one repeats): answer (package =
100 W + 0.01 W per bpf_cpu_time_ms, dram = 7 W + 0.001 W per bpf_cpu_time_ms,
per row), slow (the same answer after 10 s), garbage (bytes that are no JSON),
error (Kepler's failure answer: empty powers, a msg), hostile, negative, idle_above
(well-formed answers no zone can draw: package [99999, -99999], [-5, -5], [10, 90] W
for the two rows), dead (close the
connection and the listening socket without a word, and exit). Every request
goes to --log as one JSON line {"raw": the text received, "step"}.
"""
import argparse
import json
import os
import socket
import threading
import time

p = argparse.ArgumentParser()
p.add_argument("--socket", required=True)
p.add_argument("--log", required=True)
p.add_argument("--script", required=True)
a = p.parse_args()
steps = a.script.split(",")
lock = threading.Lock()


def powers(req):
    m = req["metrics"]
    i = m.index("bpf_cpu_time_ms")
    rows = req["values"]
    return {"package": [100 + 0.01 * r[i] for r in rows], "dram": [7 + 0.001 * r[i] for r in rows]}


IMPLAUSIBLE = {"hostile": [99999, -99999], "negative": [-5, -5], "idle_above": [10, 90]}


def serve(conn, step):
    data = b""
    while True:  # as Kepler's estimator: 1024-byte chunks until the text ends with '}'
        chunk = conn.recv(1024)
        if not chunk:
            break
        data += chunk
        if data.decode("utf-8", "replace").endswith("}"):
            break
    with lock, open(a.log, "a") as f:
        f.write(json.dumps({"raw": data.decode("utf-8", "replace"), "step": step}) + "\n")
    try:
        if step == "garbage":
            conn.sendall(b"\x00\x01 not json at all")
        elif step in IMPLAUSIBLE:
            conn.sendall(json.dumps({"powers": {"package": IMPLAUSIBLE[step]}, "msg": "", "core_ratio": 1}).encode())
        elif step == "error":
            conn.sendall(json.dumps({"powers": {}, "msg": "no model for the requested features", "core_ratio": 1}).encode())
        else:
            if step == "slow":
                time.sleep(10)
            ans = {"powers": powers(json.loads(data)), "msg": "", "core_ratio": 1.0}
            conn.sendall(json.dumps(ans).encode())
    except OSError:
        pass
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
        with lock, open(a.log, "a") as f:
            f.write(json.dumps({"raw": "", "step": step}) + "\n")
        conn.close()
        srv.close()  # the socket file stays: connecting to it is refused from now on
        break
    threading.Thread(target=serve, args=(conn, step), daemon=True).start()
