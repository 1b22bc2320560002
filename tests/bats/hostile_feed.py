#!/usr/bin/python3
"""A victim host's powerd and usaged, and a hostile second publisher under its name, as JSON
lines for `wattbus pub` (docs/SECURITY.md, "Plausibility"; issue 31).

    hostile_feed.py new_zone|same_zone|usage|overflow|extra_meter [--steps N]

The victim publishes, every second of message time from two minutes ago, package-0 at
100 W (src powerd) and one process, pid 4242 "victimjob", busy half a second per second
on a 2-CPU node (src usaged/bpf). Through alignd, estimd and exportd that is N slots of
100 J each: node package energy N x 100 J, the process a quarter of it (its CPU share of
the node's time), N x 25 J. Each scenario adds, after every victim sample (half a second
later in message time, so that its samples interleave with the victim's):

  new_zone    src "evil" publishes power for the victim with a new zone evil-0 whose
              counter goes from 0 to 8.7e18 uJ (8.7e12 J): refused, duplicate_producer
  same_zone   src "evil" publishes the victim's package-0 at a counter of 0: refused
  usage       src "evil-usaged" publishes the victim's usage without any process: refused
  overflow    the victim's own powerd, between two samples, a frame of 2^63-1 uJ: refused,
              implausible_power (the next sample counts from the last accepted one)
  extra_meter src "bmc" (alignd's --extra_power_src) adds platform-0 at 300 W: accepted,
              N x 300 J; its frames that also carry package-0 are refused
  greedy      the victim's own powerd adds zones g0..g9 at 4,900 W each (49,100 W with
              package-0: under max_host_w, N x 49,100 J), and between two samples a frame
              with each g zone at 4,999 W (50,090 W: each zone under max_zone_w, the host
              over max_host_w): refused, implausible_power

All lines go through one socket, so alignd reads them in this order whatever the load.
"""
import argparse
import json
import time

S = 1_000_000_000
ap = argparse.ArgumentParser()
ap.add_argument("scenario", choices=["new_zone", "same_zone", "usage", "overflow", "extra_meter", "greedy"])
ap.add_argument("--steps", type=int, default=10)
args = ap.parse_args()
base = (time.time_ns() // S - 120) * S
seqs = {}


def out(kind, src, epoch, body):
    seq = seqs.get((kind, src), 0)
    seqs[(kind, src)] = seq + 1
    msg = dict(kind=kind, host="victim", src=src, epoch=epoch, seq=seq, **body)
    print(json.dumps({"topic": kind + "/victim", "msg": msg}))


def power(src, epoch, t, zones):
    out("power", src, epoch, {"t": t, "interval_ns": S, "zones": [
        {"name": n, "zone": n.split("-")[0], "index": 0, "energy_uj": e} for n, e in zones]})


def usage(src, epoch, t, procs, busy_ns, full):
    out("usage", src, epoch, {
        "t": t, "interval_ns": S, "ncpu": 2, "full": full,
        "cpu": {"user_ns": busy_ns, "nice_ns": 0, "system_ns": 0, "idle_ns": 2 * (t - base) - busy_ns,
                "iowait_ns": 0, "irq_ns": 0, "softirq_ns": 0, "steal_ns": 0},
        "procs": procs})


for k in range(args.steps + 1):
    t = base + k * S
    pkg = 10**9 + k * 100 * 10**6
    if args.scenario == "overflow" and k == args.steps // 2:
        power("powerd", 11, t - S // 2, [("package-0", 2**63 - 1)])
    if args.scenario == "greedy":
        if k == args.steps // 2:
            power("powerd", 11, t - S // 2, [("package-0", pkg - 50 * 10**6)] +
                  [("g%d" % i, (k - 1) * 4900 * 10**6 + 4999 * 10**6 // 2) for i in range(10)])
        power("powerd", 11, t, [("package-0", pkg)] + [("g%d" % i, k * 4900 * 10**6) for i in range(10)])
    else:
        power("powerd", 11, t, [("package-0", pkg)])
    if args.scenario == "new_zone":
        power("evil", 99, t + S // 2, [("evil-0", 0 if k == 0 else 87 * 10**17)])
    elif args.scenario == "same_zone":
        power("evil", 99, t + S // 2, [("package-0", 0)])
    elif args.scenario == "extra_meter":
        power("bmc", 5, t, [("platform-0", 7 * 10**9 + k * 300 * 10**6)])
        power("bmc", 5, t, [("platform-0", 7 * 10**9 + k * 300 * 10**6), ("package-0", 0)])
    busy = k * S // 2
    usage("usaged/bpf", 12, t, [{"pid": 4242, "comm": "victimjob", "start_ns": 1, "cpu_ns": busy}], busy, True)
    if args.scenario == "usage":
        usage("evil-usaged", 98, t + S // 2, [], busy, True)
