#!/usr/bin/python3
"""A fake two-socket Intel powercap tree for the benchmarks, and a cheap writer.

  fake_rapl.py SYSFS_ROOT [--watts W] [--period S] [--phase S] [--range UJ]
               [--zones N] [--log FILE] [--seed N] [--once]

Creates SYSFS_ROOT/class/powercap/intel-rapl:S[:K] (package, core, uncore and
dram per socket: 8 zones, or the first N) and then, unless --once, adds
W * period microjoules (times a pseudo-random factor in [0.5, 1.5) with --seed)
to every zone once per period, at PHASE seconds after each wall-clock multiple
of the period, wrapping at --range as the hardware does. Files are replaced by
rename, as sysfs never shows a half-written value. One wake-up per period: the
writer costs next to nothing, so it does not blur the pipeline's own figures.
--log appends "t_ns zone increment_uj" per write (bench/loss.py's truth).
"""
import argparse
import os
import random
import signal
import sys
import time

ZONES = [("intel-rapl:0", "package-0"), ("intel-rapl:0:0", "core"), ("intel-rapl:0:1", "uncore"),
         ("intel-rapl:0:2", "dram"), ("intel-rapl:1", "package-1"), ("intel-rapl:1:0", "core"),
         ("intel-rapl:1:1", "uncore"), ("intel-rapl:1:2", "dram")]


def put(path, value):
    with open(path + ".t", "w") as f:
        f.write("%s\n" % value)
    os.rename(path + ".t", path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--watts", type=float, default=40.0)
    ap.add_argument("--period", type=float, default=1.0)
    ap.add_argument("--phase", type=float, default=0.5)
    ap.add_argument("--range", type=int, default=262143328850)
    ap.add_argument("--zones", type=int, default=8)
    ap.add_argument("--log")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--once", action="store_true")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    rng = random.Random(a.seed) if a.seed is not None else None
    value = {}
    for i, (d, name) in enumerate(ZONES[:a.zones]):
        z = os.path.join(a.root, "class/powercap", d)
        os.makedirs(z, exist_ok=True)
        put(os.path.join(z, "name"), name)
        put(os.path.join(z, "max_energy_range_uj"), a.range)
        value[z] = (i + 1) * 1000
        put(os.path.join(z, "energy_uj"), value[z])
    if a.once:
        return
    log = open(a.log, "a", buffering=1) if a.log else None
    period_ns = int(a.period * 1e9)
    step = int(a.watts * a.period * 1e6)
    nxt = (time.time_ns() // period_ns + 1) * period_ns + int(a.phase * 1e9)
    while True:
        time.sleep(max(0, nxt - time.time_ns()) / 1e9)
        now = time.time_ns()
        for z in value:
            inc = int(step * (0.5 + rng.random())) if rng else step
            value[z] = (value[z] + inc) % (a.range + 1)
            put(os.path.join(z, "energy_uj"), value[z])
            if log:
                log.write("%d %s %d\n" % (now, os.path.basename(z), inc))
        nxt += period_ns
        while nxt < time.time_ns():  # a stall (loaded machine): skip, never burst
            nxt += period_ns


if __name__ == "__main__":
    main()
