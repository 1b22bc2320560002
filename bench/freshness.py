#!/usr/bin/python3
"""Freshness of the running pipeline: slot end -> the slot's value on /metrics.

  freshness.py --estimd EP --metrics URL [--host H] [--slots K]

For each of K slots: when an estimate leaves estimd (this script subscribes
too), /metrics is scraped over one keep-alive connection until
wattbus_exportd_estimates_total{host} counts it; the slot's freshness is the
time that scrape returned minus the slot's end t1 (the usage message's t,
which the estimate carries). The estimate is decoded only after the scrapes, so
the prober adds little; each figure is an upper bound within one scrape.
Prints the median, p99 and max, and "BENCH key=value" lines.
"""
import argparse
import http.client
import math
import re
import sys
import time
import urllib.parse

import msgpack
import zmq


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--estimd", required=True)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--host", default="bench")
    ap.add_argument("--slots", type=int, default=100)
    a = ap.parse_args()
    u = urllib.parse.urlsplit(a.metrics)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    pat = re.compile(rb'^wattbus_exportd_estimates_total\{host="%s"\} (\d+)' % re.escape(a.host.encode()), re.M)

    def estimates():
        conn.request("GET", u.path or "/metrics")
        m = pat.search(conn.getresponse().read())
        return int(m.group(1)) if m else 0

    sub = zmq.Context().socket(zmq.SUB)
    sub.connect(a.estimd)
    sub.setsockopt(zmq.SUBSCRIBE, b"estimate/" + a.host.encode())
    # The subscription is live once one estimate came through; exportd has applied
    # that one well before the next slot ends: count from there.
    if not sub.poll(30000):
        sys.exit("freshness.py: no estimate from %s within 30 s" % a.estimd)
    sub.recv_multipart()
    time.sleep(0.05)
    base = estimates()
    fresh_ms, scrapes, split = [], 0, []
    deadline = time.time() + 60 + a.slots * 10
    while len(fresh_ms) < a.slots:
        if time.time() > deadline or not sub.poll(30000):
            sys.exit("freshness.py: only %d slots in time" % len(fresh_ms))
        frame = sub.recv_multipart(copy=False)[1]
        t_arrive = time.time_ns()
        want = base + len(fresh_ms) + 1
        while True:
            scrapes += 1
            if estimates() >= want:
                break
            if time.time() > deadline:
                sys.exit("freshness.py: exportd never showed estimate %d" % want)
            time.sleep(0.0005)
        t_seen = time.time_ns()
        est = msgpack.unpackb(frame.bytes, raw=False)
        t1 = est["t1"]
        fresh_ms.append((t_seen - t1) / 1e6)
        # where the time went: before the estimate left estimd, and in exportd
        split.append(((t_seen - t1) / 1e6, (t_arrive - t1) / 1e6, (t_seen - t_arrive) / 1e6, est.get("quality", {})))
    fresh_ms.sort()
    med = fresh_ms[len(fresh_ms) // 2]
    p99 = fresh_ms[math.ceil(0.99 * len(fresh_ms)) - 1]  # nearest rank: the 99th of 100
    print("freshness over %d slots (slot end -> on /metrics): median %.1f ms, p99 %.1f ms, min %.1f ms, max %.1f ms "
          "(%.1f scrapes per slot)" % (len(fresh_ms), med, p99, fresh_ms[0], fresh_ms[-1], scrapes / len(fresh_ms)))
    up = sorted(x[1] for x in split)
    worst = max(split, key=lambda x: x[0])
    print("  up to estimd's estimate: median %.1f ms; in exportd and the scrape: median %.1f ms"
          % (up[len(up) // 2], sorted(x[2] for x in split)[len(split) // 2]))
    print("  slowest slot: %.1f ms to estimd's estimate, %.1f ms more to /metrics; quality %s"
          % (worst[1], worst[2], worst[3]))
    print("BENCH freshness.upstream_median_ms=%.1f" % up[len(up) // 2])
    print("BENCH freshness.worst_upstream_ms=%.1f" % worst[1])
    print("BENCH freshness.worst_exportd_ms=%.1f" % worst[2])
    print("BENCH freshness.worst_lag_ms=%.1f" % (worst[3].get("lag_ns", 0) / 1e6))
    print("BENCH freshness.slots=%d" % len(fresh_ms))
    print("BENCH freshness.median_ms=%.1f" % med)
    print("BENCH freshness.p99_ms=%.1f" % p99)
    print("BENCH freshness.max_ms=%.1f" % fresh_ms[-1])


if __name__ == "__main__":
    main()
