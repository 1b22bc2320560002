#!/usr/bin/python3
"""Flood alignd with power and usage slots of one host (simulated time, 1 s
slots, PROCS processes each) so that the subscribers behind it fall behind:
estimd and exportd are stopped with SIGSTOP for a while in the middle, and
the high-water marks (set low by the test) drop what does not fit.

    system_flood.py --in ENDPOINT --slots N --procs P --estimd PID --exportd PID --metrics URL

The first five slots go slowly, the rest as fast as alignd takes them but for
the last five: they wait until the pipeline is idle (exportd's count of
applied estimates, from URL, stands still), then each goes once the one before
it was applied, so that none of them is dropped however slow the machine is
(the last one carries the run's final energy). Power is piecewise constant with changes on
the slot boundaries, so the node energy of the run is exact in microjoules;
prints "expect ZONE UJ" for each zone: E(last slot end) - E(first slot start).
"""
import argparse
import os
import re
import signal
import time
import urllib.request

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
ap.add_argument("--metrics", required=True, help="exportd's /metrics URL")
args = ap.parse_args()
applied_re = re.compile(r'^wattbus_exportd_estimates_total\{[^}]*host="%s"[^}]*\} (\S+)$' % re.escape(args.host),
                        re.M)


def applied():
    """Estimates of the host that exportd applied so far."""
    body = urllib.request.urlopen(args.metrics, timeout=30).read().decode()
    m = applied_re.search(body)
    return int(float(m.group(1))) if m else 0


def wait_applied(more_than, timeout=30):
    """Until exportd applied more estimates (a slot still dropped is recovered by the next)."""
    end = time.time() + timeout
    while time.time() < end and applied() <= more_than:
        time.sleep(0.05)

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
    if k < 5:
        time.sleep(0.2)
    if k == n // 5:
        os.kill(args.estimd, signal.SIGSTOP)
    elif k == 2 * n // 5:
        os.kill(args.estimd, signal.SIGCONT)
    elif k == 3 * n // 5:
        os.kill(args.exportd, signal.SIGSTOP)
    elif k == 4 * n // 5:
        os.kill(args.exportd, signal.SIGCONT)
    if k == n - 5:  # let the stopped ones catch up: the count stands still for a second
        last, still = applied(), 0
        while still < 10:
            time.sleep(0.1)
            now = applied()
            still = still + 1 if now == last else 0
            last = now
    if k >= n - 5:
        before = applied()
        slot(k)
        wait_applied(before)
        continue
    slot(k)
# energy now holds E at the last slot end plus the watts of a slot never sent
for name in energy:
    energy[name] -= watts(n - 1)[name] * 1_000_000
    print("expect", name, energy[name] - first[name], flush=True)
time.sleep(0.5)
