#!/usr/bin/python3
"""One slot of N synthetic processes through the running alignd, estimd and exportd.

  scale.py --power EP --usage EP --alignd EP --estimd EP --metrics URL [--procs N] [--slots K]

Plays powerd and usaged (binds --power and --usage, which alignd subscribes
to), sends K+1 usage messages of N processes each (100 cgroups, 4 zones of
power), and for each slot takes the time it enters and leaves each stage:

  alignd   usage frame sent            -> aligned frame received from alignd
  estimd   aligned frame received      -> estimate frame received from estimd
  exportd  estimate frame received     -> first /metrics scrape that shows it
                                          (wattbus_exportd_estimates_total counts it)

Frames are timed as they arrive and decoded only afterwards (to check they
carry the N processes), so the prober adds little. With --pids, each stage's
CPU time over the slot (all threads, /proc/PID/task/*/schedstat) is printed
too: on a loaded machine the wall times above include waiting for a core,
and the CPU times do not. Slot 1 is the first
(estimd and exportd create every workload); slots 2..K are the steady state.
Prints a line per slot and "BENCH key=value" lines (median of slots 2..K).
"""
import argparse
import http.client
import os
import re
import statistics
import sys
import time
import urllib.parse

import msgpack
import zmq

S = 1_000_000_000
RANGE = 262_143_328_850


def fail(why):
    print("scale.py: " + why, file=sys.stderr)
    sys.exit(1)


class Metrics:
    """Keep-alive scrapes of one estimates_total value."""

    def __init__(self, url, host):
        u = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        self.path = u.path or "/metrics"
        self.re = re.compile(rb'^wattbus_exportd_estimates_total\{host="%s"\} (\d+)' % re.escape(host.encode()),
                             re.M)

    def estimates(self):
        self.conn.request("GET", self.path)
        body = self.conn.getresponse().read()
        m = self.re.search(body)
        return int(m.group(1)) if m else 0


def cpu_ns(pid):
    """ns on CPU of all threads of pid"""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass  # a thread that ended (none of the stages' do in a slot)
    return total


def main():
    ap = argparse.ArgumentParser()
    for k in ("power", "usage", "alignd", "estimd", "metrics"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--procs", type=int, default=100000)
    ap.add_argument("--slots", type=int, default=5)
    ap.add_argument("--host", default="scale")
    ap.add_argument("--pids", default="", help="alignd=PID,estimd=PID,exportd=PID: CPU time per slot")
    a = ap.parse_args()
    n, host = a.procs, a.host
    pids = {k: int(v) for k, v in (kv.split("=") for kv in a.pids.split(",") if kv)}

    ctx = zmq.Context()
    pubs = {}
    for kind in ("power", "usage"):
        s = ctx.socket(zmq.XPUB)
        s.setsockopt(zmq.SNDHWM, 1000)
        s.bind(getattr(a, kind))
        pubs[kind] = s
    subs = {}
    for stage, prefix in (("alignd", b"aligned/"), ("estimd", b"estimate/")):
        s = ctx.socket(zmq.SUB)
        s.setsockopt(zmq.RCVHWM, 1000)
        s.connect(getattr(a, stage))
        s.setsockopt(zmq.SUBSCRIBE, prefix)
        s.setsockopt(zmq.SUBSCRIBE, b"stat/")
        subs[stage] = s

    # Live: alignd subscribed to both feeds, and a stat message came back from each stage.
    end = time.time() + 20
    for kind, s in pubs.items():
        want = b"\x01" + kind.encode() + b"/"
        while True:
            if not s.poll(max(1, int((end - time.time()) * 1000))):
                fail("alignd did not subscribe to %s/ within 20 s" % kind)
            if s.recv() == want:
                break
    for stage, s in subs.items():
        while True:
            if not s.poll(max(1, int((end - time.time()) * 1000))):
                fail("no stat message from %s within 20 s" % stage)
            if s.recv_multipart()[0].startswith(b"stat/"):
                break
        s.setsockopt(zmq.UNSUBSCRIBE, b"stat/")
    metrics = Metrics(a.metrics, host)
    base = metrics.estimates()

    # The processes: every one runs in every slot, 100 to 700 us; 100 cgroups.
    cgroups = [{"id": 5000 + c, "path": "kubepods.slice/pod%d/cri-containerd-%064x.scope" % (c, c),
                "runtime": "containerd", "container_id": "%064x" % c, "pod_uid": "pod-%d" % c} for c in range(100)]
    per_slot = [(i % 7 + 1) * 100_000 for i in range(n)]
    busy = sum(per_slot)
    ncpu = 128
    seq = {"power": 0, "usage": 0}

    def send(kind, body):
        msg = {"v": 1, "kind": kind, "host": host, "src": "bench", "epoch": 1, "seq": seq[kind]}
        seq[kind] += 1
        msg.update(body)
        frame = msgpack.packb(msg)
        t = time.time_ns()
        pubs[kind].send_multipart([("%s/%s" % (kind, host)).encode(), frame])
        return t, len(frame)

    first_t = None
    rows = []
    poller = zmq.Poller()
    for s in subs.values():
        poller.register(s, zmq.POLLIN)
    for k in range(a.slots + 1):
        t = time.time_ns() // 1_000_000 * 1_000_000
        first_t = first_t or t
        el = t - first_t
        procs = [{"pid": 100 + i, "comm": "proc%d" % i, "start_ns": i * 1000, "cgroup_id": 5000 + i % 100,
                  "cpu_ns": k * per_slot[i]} for i in range(n)]
        send("power", {"t": t, "interval_ns": S, "zones": [
            {"name": "package-%d" % s, "zone": "package", "index": s, "energy_uj": 10**9 + el * 150 // 1000,
             "max_energy_range_uj": RANGE} for s in (0, 1)] + [
            {"name": "dram-%d" % s, "zone": "dram", "index": s, "energy_uj": 10**8 + el * 20 // 1000,
             "max_energy_range_uj": RANGE} for s in (0, 1)]})
        user = k * (busy + busy // 10)
        c0 = {s: cpu_ns(p) for s, p in pids.items()}
        t_in, usage_bytes = send("usage", {
            "t": t, "interval_ns": S, "ncpu": ncpu, "full": k == 0,
            "cpu": {"user_ns": user, "nice_ns": 0, "system_ns": 0, "idle_ns": max(0, ncpu * el - user),
                    "iowait_ns": 0, "irq_ns": 0, "softirq_ns": 0, "steal_ns": 0},
            "procs": procs, "cgroups": cgroups})
        if k == 0:
            time.sleep(1)  # the first usage message opens the host; no slot yet
            continue
        got = {}
        deadline = time.time() + 30
        while len(got) < 2:
            if time.time() > deadline:
                fail("slot %d: no %s within 30 s" % (k, " or ".join(x for x in subs if x not in got)))
            for s, _ in poller.poll(100):
                frames = s.recv_multipart(copy=False)
                now = time.time_ns()
                stage = next(x for x, y in subs.items() if y is s)
                got[stage] = (now, frames[1])
        t_est = got["estimd"][0]
        while True:
            c = metrics.estimates()
            if c >= base + k:
                t_out = time.time_ns()
                break
            if time.time() > deadline:
                fail("slot %d: exportd shows %d estimates, expected %d" % (k, c, base + k))
        cpu = {s: (cpu_ns(p) - c0[s]) / 1e6 for s, p in pids.items()}
        al = msgpack.unpackb(got["alignd"][1].bytes, raw=False)
        es = msgpack.unpackb(got["estimd"][1].bytes, raw=False)
        if al["t1"] != t or es["t1"] != t or len(al.get("procs", [])) != n or len(es.get("procs", [])) != n:
            fail("slot %d: aligned t1 %d with %d procs, estimate t1 %d with %d procs; expected t1 %d, %d procs"
                 % (k, al["t1"], len(al.get("procs", [])), es["t1"], len(es.get("procs", [])), t, n))
        r = {"alignd": (got["alignd"][0] - t_in) / 1e6, "estimd": (t_est - got["alignd"][0]) / 1e6,
             "exportd": (t_out - t_est) / 1e6, "total": (t_out - t_in) / 1e6}
        for st, ms in cpu.items():
            r[st + "_cpu"] = ms
        rows.append(r)
        print("slot %d (%d processes, %d zones; usage %.1f MB, aligned %.1f MB, estimate %.1f MB): "
              "alignd %.1f ms, estimd %.1f ms, exportd %.1f ms, total %.1f ms%s"
              % (k, n, len(al.get("zones", [])), usage_bytes / 1e6, len(got["alignd"][1].bytes) / 1e6,
                 len(got["estimd"][1].bytes) / 1e6, r["alignd"], r["estimd"], r["exportd"], r["total"],
                 " (first slot: every workload is new)" if k == 1 else ""))
        if cpu:
            r["total_cpu"] = sum(cpu.values())
            print("  CPU: " + ", ".join("%s %.1f ms" % (st, r[st + "_cpu"]) for st in list(cpu) + ["total"]))
        time.sleep(0.5)
    steady = rows[1:] or rows
    print("BENCH scale.procs=%d" % n)
    print("BENCH scale.slots=%d" % len(steady))
    for key in ("alignd", "estimd", "exportd", "total"):
        print("BENCH scale.%s_ms=%.1f" % (key, statistics.median(r[key] for r in steady)))
        print("BENCH scale.%s_max_ms=%.1f" % (key, max(r[key] for r in steady)))
        if key + "_cpu" in steady[0]:
            print("BENCH scale.%s_cpu_ms=%.1f" % (key, statistics.median(r[key + "_cpu"] for r in steady)))
    print("BENCH scale.first_total_ms=%.1f" % rows[0]["total"])


if __name__ == "__main__":
    main()
