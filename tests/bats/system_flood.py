#!/usr/bin/python3
"""Flood alignd with power and usage slots of one host (simulated time, 1 s
slots, PROCS processes each) so that the subscribers behind it fall behind:
estimd and exportd are stopped with SIGSTOP for a while in the middle, and
the high-water marks (set low by the test) drop what does not fit.

    system_flood.py --in ENDPOINT --slots N --procs P --estimd PID --exportd PID

The first and the last five slots go slowly (nothing is dropped there), the
rest as fast as alignd takes them. Power is piecewise constant with changes on
the slot boundaries, so the node energy of the run is exact in microjoules;
prints "expect ZONE UJ" for each zone: E(last slot end) - E(first slot start).
"""
import argparse
import os
import signal
import time

import msgpack
import zmq

S = 1_000_000_000

ap = argparse.ArgumentParser()
ap.add_argument("--in", dest="ep", required=True)
ap.add_argument("--slots", type=int, default=600)
ap.add_argument("--procs", type=int, default=1000)
ap.add_argument("--estimd", type=int, required=True)
ap.add_argument("--exportd", type=int, required=True)
ap.add_argument("--host", default="flood")
args = ap.parse_args()

ctx = zmq.Context()
pub = ctx.socket(zmq.XPUB)
pub.setsockopt(zmq.SNDHWM, 0)  # this side never drops: alignd gets everything
pub.bind(args.ep)
want = {b"\x01power/", b"\x01usage/"}
end = time.time() + 60
while want:
    if not pub.poll(max(1, int((end - time.time()) * 1000))):
        raise SystemExit("alignd did not subscribe within 60 s")
    want.discard(pub.recv())

seq = {"power": 0, "usage": 0}


def send(kind, body):
    msg = {"v": 1, "kind": kind, "host": args.host, "src": "flood-" + kind, "epoch": 1,
           "seq": seq[kind]}
    seq[kind] += 1
    msg.update(body)
    pub.send_multipart([f"{kind}/{args.host}".encode(), msgpack.packb(msg)])


def watts(k):
    return {"package-0": 40 + k % 13, "dram-0": 6 + k % 3}


t_base = (time.time_ns() // S - 2 * args.slots) * S
energy = {"package-0": 10 ** 9, "dram-0": 10 ** 8}
first = dict(energy)
busy = 0
cpu = [0] * args.procs


def slot(k):
    """Power at t_k, then the usage sample that closes slot [t_(k-1), t_k]."""
    global busy
    t = t_base + k * S
    send("power", {"t": t, "interval_ns": S, "zones": [
        {"name": n, "zone": n.split("-")[0], "index": 0, "energy_uj": e} for n, e in energy.items()]})
    for i in range(args.procs):
        cpu[i] += 1000 + (i * 7 + k) % 5000
    busy += sum(1000 + (i * 7 + k) % 5000 for i in range(args.procs))  # all of it in the listed processes
    send("usage", {
        "t": t, "interval_ns": S, "ncpu": 4, "full": True,
        "cpu": {"user_ns": busy, "nice_ns": 0, "system_ns": 0, "idle_ns": 4 * (k + 1) * S - busy,
                "iowait_ns": 0, "irq_ns": 0, "softirq_ns": 0, "steal_ns": 0},
        "procs": [{"pid": 1000 + i, "comm": f"w{i % 50}", "start_ns": 1000 + i, "cpu_ns": cpu[i]}
                  for i in range(args.procs)]})
    for n, w in watts(k).items():
        energy[n] += w * 1_000_000  # slot k + 1 runs at watts(k)


n = args.slots
for k in range(n):
    if k < 5 or k >= n - 5:
        time.sleep(0.2)
    if k == n // 5:
        os.kill(args.estimd, signal.SIGSTOP)
    elif k == 2 * n // 5:
        os.kill(args.estimd, signal.SIGCONT)
    elif k == 3 * n // 5:
        os.kill(args.exportd, signal.SIGSTOP)
    elif k == 4 * n // 5:
        os.kill(args.exportd, signal.SIGCONT)
    if k == n - 5:
        time.sleep(1)  # let the stopped ones catch up before the slow tail
    slot(k)
# energy now holds E at the last slot end plus the watts of a slot never sent
for name in energy:
    energy[name] -= watts(n - 1)[name] * 1_000_000
    print("expect", name, energy[name] - first[name], flush=True)
time.sleep(0.5)
