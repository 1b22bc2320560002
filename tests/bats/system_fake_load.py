#!/usr/bin/env python3
"""Drive a fake /proc: a machine of NCPU CPUs whose busy CPUs follow a seeded schedule.

usage: system_fake_load.py PROC_DIR CGROUP2_DIR --ncpu N [--levels 0,1,2] [--hold S] [--seed N]

PROC_DIR gets stat (the machine's "cpu" and "cpuN" lines), self/mountinfo (CGROUP2_DIR as
the cgroup2 mount) and three processes (pids 101-103, "worker") of one docker container, whose
CPU time adds up to the machine's busy time. Every HOLD seconds the number of busy CPUs becomes
one of LEVELS (seeded; each level at least once in every len(LEVELS) holds); the busy ticks
follow the wall clock, so a late wake-up catches up. powerd's fake source reads the machine's
busy time from PROC_DIR/stat (package 10 W + 5 W per busy CPU, ...), usaged the processes':
both see the same busy CPUs. Files are written whole (a rename), never in place. Runs until
killed; prints "ready" once every file is there.
"""
import argparse
import os
import random
import time

ap = argparse.ArgumentParser()
ap.add_argument("proc")
ap.add_argument("cgroup2")
ap.add_argument("--ncpu", type=int, required=True)
ap.add_argument("--levels", default="0,1,2")
ap.add_argument("--hold", type=float, default=2.0)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()

HZ = os.sysconf("SC_CLK_TCK")
CID = "3f1e2d4c5b6a79880716253443526170819203a4b5c6d7e8f90a1b2c3d4e5f60"
PIDS = (101, 102, 103)
levels = [int(x) for x in a.levels.split(",")]
rnd = random.Random(a.seed)


def put(path, text):
    tmp = os.path.join(os.path.dirname(path), ".new." + os.path.basename(path))
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


scope = os.path.join(a.cgroup2, "system.slice", "docker-%s.scope" % CID)
os.makedirs(scope, exist_ok=True)
os.makedirs(os.path.join(a.proc, "self"), exist_ok=True)
put(os.path.join(a.proc, "self", "mountinfo"),
    "30 1 0:26 / %s rw shared:1 - cgroup2 cgroup2 rw\n" % a.cgroup2)

busy = [0] * a.ncpu  # ticks per CPU
idle = [0] * a.ncpu
proc_ticks = {p: 0 for p in PIDS}


def write_all():
    # the processes first: a scan between the two writes sees the processes ahead, never behind
    for p in PIDS:
        d = os.path.join(a.proc, str(p))
        if not os.path.isdir(d):
            new = os.path.join(a.proc, ".new.%d" % p)
            os.makedirs(new, exist_ok=True)
            with open(os.path.join(new, "cgroup"), "w") as f:
                f.write("0::/system.slice/docker-%s.scope\n" % CID)
            with open(os.path.join(new, "stat"), "w") as f:
                f.write(stat_line(p))
            os.rename(new, d)
        else:
            put(os.path.join(d, "stat"), stat_line(p))
    lines = ["cpu  %d 0 0 %d 0 0 0 0 0 0" % (sum(busy), sum(idle))]
    lines += ["cpu%d %d 0 0 %d 0 0 0 0 0 0" % (i, busy[i], idle[i]) for i in range(a.ncpu)]
    lines.append("intr 1")
    put(os.path.join(a.proc, "stat"), "\n".join(lines) + "\n")


def stat_line(p):
    return ("%d (worker) S 1 1 1 0 -1 4194304 0 0 0 0 %d 0 0 0 20 0 1 0 500 1000 10 "
            "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
            % (p, proc_ticks[p]))


write_all()
print("ready", flush=True)
t0 = time.monotonic()
done_ticks = 0  # ticks of wall time accounted so far, per CPU
order = []
level = levels[0]
next_change = 0.0
turn = 0
while True:
    now = time.monotonic() - t0
    if now >= next_change:
        if not order:
            order = levels[:]
            rnd.shuffle(order)
        level = order.pop()
        next_change += a.hold
    due = int(now * HZ)
    for _ in range(due - done_ticks):
        for c in range(a.ncpu):
            if c < level:
                busy[c] += 1
                proc_ticks[PIDS[turn % len(PIDS)]] += 1
                turn += 1
            else:
                idle[c] += 1
    done_ticks = due
    write_all()
    time.sleep(0.05)
