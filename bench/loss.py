#!/usr/bin/python3
"""Energy lost across counter wraps and stage restarts, measured end to end.

  loss.py BUILD_DIR [--seconds S]

powerd (200 ms) reads a fake powercap tree whose two zones wrap every ~2 s
(max_energy_range_uj 49,999,999): this script adds 2.5 to 7.5 J per zone
100 ms after every 200 ms grid time, plays usaged (a usage message for every
grid time, 60 ms after it) and reads alignd's slots. Midway powerd is stopped
and started again 1 s later (a new epoch, the counter read afresh and bridged
by alignd), later alignd itself is stopped and started again 1 s later (its
state file carries the run on). While powerd is down the counters do not
wrap: a wrap then cannot be told from a counter reset, and alignd reports
such a slot as a gap by design (docs/alignd.md, "powerd restarts").

Truth: the increments written between the first slot's start and the last
slot's end (the writes fall half-way between samples, so each lies in exactly
one slot). Figure: truth - the sum of alignd's slot energies, per zone, which
is what estimd splits into idle + active (node level). Prints it and
"BENCH key=value" lines; exits 1 only when the run itself failed.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import msgpack
import zmq

MS = 1_000_000
IVAL = 200 * MS
RANGE = 49_999_999
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=12)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="wb-loss-bench.")
    procs = {}

    def start(name, argv):
        procs[name] = subprocess.Popen(argv, stdout=open(os.path.join(tmp, name + ".log"), "a"),
                                       stderr=subprocess.STDOUT)

    def stop(name):
        p = procs.pop(name)
        p.send_signal(signal.SIGTERM)
        p.wait(10)

    common = ["--runtime_dir", tmp, "--host", "loss", "--stat_interval", "1s"]
    powerd = [os.path.join(a.build, "wattbus-powerd"), "--sysfs_root", tmp + "/sys", "--msr_root", tmp + "/none",
              "--source", "rapl", "--interval", "200ms"] + common
    alignd = [os.path.join(a.build, "wattbus-alignd"), "--sub", "ipc://%s/powerd.sock,ipc://%s/usage.sock" % (tmp, tmp),
              "--max_skew", "0"] + common
    subprocess.run([sys.executable, os.path.join(HERE, "fake_rapl.py"), tmp + "/sys", "--zones", "2",
                    "--range", str(RANGE), "--once"], check=True)
    raw = {"intel-rapl:0": 1000, "intel-rapl:0:0": 2000}  # fake_rapl.py's first values
    writes = []  # (t_ns, zone dir, increment)
    rng = random.Random(7)
    wraps = 0

    def advance(now, no_wrap):
        nonlocal wraps
        for d in raw:
            inc = int(5_000_000 * (0.5 + rng.random()))
            if no_wrap and raw[d] + inc >= RANGE:
                inc = max(0, RANGE - 1 - raw[d])
            wraps += raw[d] + inc > RANGE
            raw[d] = (raw[d] + inc) % (RANGE + 1)
            path = "%s/sys/class/powercap/%s/energy_uj" % (tmp, d)
            with open(path + ".t", "w") as f:
                f.write("%d\n" % raw[d])
            os.rename(path + ".t", path)
            writes.append((now, d, inc))

    try:
        start("powerd", powerd)
        start("alignd", alignd)
        ctx = zmq.Context()
        pub = ctx.socket(zmq.XPUB)
        pub.bind("ipc://%s/usage.sock" % tmp)
        sub = ctx.socket(zmq.SUB)
        sub.connect("ipc://%s/alignd.sock" % tmp)
        sub.setsockopt(zmq.SUBSCRIBE, b"aligned/")
        if not pub.poll(10000):
            sys.exit("loss.py: alignd did not subscribe to usage/")
        pub.recv()
        slots = {}
        seq, epoch = 0, int(time.time())
        start_g = (time.time_ns() // IVAL + 2) * IVAL
        end_g = start_g + int(a.seconds * 1e9) // IVAL * IVAL
        plan = {int(0.25 * a.seconds * 5): ("stop", "powerd"), int(0.25 * a.seconds * 5) + 5: ("start", "powerd"),
                int(0.6 * a.seconds * 5): ("stop", "alignd"), int(0.6 * a.seconds * 5) + 5: ("start", "alignd")}
        k_down = min(k for k, v in plan.items() if v == ("stop", "powerd"))

        def drain_until(t_ns):
            while time.time_ns() < t_ns:
                if sub.poll(5):
                    m = msgpack.unpackb(sub.recv_multipart()[1], raw=False)
                    slots[m["t1"]] = m

        g = start_g
        while g <= end_g:
            # usage for grid time g, 60 ms after it (power for g is out by then)
            drain_until(g + 60 * MS)
            k = (g - start_g) // IVAL
            if k in plan:
                what, name = plan[k]
                if what == "stop":
                    stop(name)
                else:
                    start(name, powerd if name == "powerd" else alignd)
            body = {"v": 1, "kind": "usage", "host": "loss", "src": "usaged/bench", "epoch": epoch, "seq": seq,
                    "t": g, "interval_ns": IVAL, "ncpu": 2,
                    "cpu": {"user_ns": seq * IVAL // 2, "nice_ns": 0, "system_ns": 0, "idle_ns": seq * IVAL * 3 // 2,
                            "iowait_ns": 0, "irq_ns": 0, "softirq_ns": 0, "steal_ns": 0},
                    "procs": [{"pid": 4242, "comm": "app", "start_ns": 1, "cpu_ns": seq * IVAL // 2}]}
            pub.send_multipart([b"usage/loss", msgpack.packb(body)])
            seq += 1
            # the counters move half-way between two samples
            drain_until(g + 100 * MS)
            advance(time.time_ns(), k_down <= k <= k_down + 10)
            g += IVAL
        t_end = time.time() + 1.5
        while time.time() < t_end:
            if sub.poll(50):
                m = msgpack.unpackb(sub.recv_multipart()[1], raw=False)
                slots[m["t1"]] = m
        for name in ("powerd", "alignd", "writer"):
            if name in procs:
                stop(name)
    finally:
        for p in procs.values():
            p.kill()

    if not slots:
        sys.exit("loss.py: no slots from alignd; logs in " + tmp)
    order = sorted(slots.values(), key=lambda m: m["t1"])
    gaps = sum(1 for x, y in zip(order, order[1:]) if y["t0"] != x["t1"])
    flagged = sum(1 for m in order if m.get("quality", {}).get("gap"))
    t_first, t_last = order[0]["t0"], order[-1]["t1"]
    zones = sorted({z["name"] for m in order for z in m.get("zones", [])})
    aligned = {z: sum(x["energy_uj"] for m in order for x in m.get("zones", []) if x["name"] == z) for z in zones}
    truth = {}
    name_of = {"intel-rapl:0": "package-0", "intel-rapl:0:0": "core-0"}
    for t, d, inc in writes:
        if t_first < t <= t_last:
            truth[name_of[d]] = truth.get(name_of[d], 0) + inc
    logs = {n: open(os.path.join(tmp, n + ".log")).read() for n in ("powerd", "alignd")}
    bridged = logs["alignd"].count("powerd restarted and the counter continues")
    resumed = logs["alignd"].count("resumed")
    late = [float(x.split()[0]) for x in logs["powerd"].split("lateness mean ")[1:]]
    print("loss: %d slots over %.1f s (%d not contiguous, %d flagged gap); powerd restarted (bridged %d zones), "
          "alignd restarted (state resumed: %s); %d counter wraps"
          % (len(order), (t_last - t_first) / 1e9, gaps, flagged, bridged, "yes" if resumed else "no", wraps))
    lost_all = 0
    for z in sorted(truth):
        lost = truth[z] - aligned.get(z, 0)
        lost_all += abs(lost)
        print("  %-10s written %12d uJ, in alignd's slots %12d uJ: lost %d uJ" % (z, truth[z], aligned.get(z, 0), lost))
        print("BENCH loss.%s.lost_uj=%d" % (z, lost))
    print("BENCH loss.lost_uj=%d" % lost_all)
    print("BENCH loss.slots=%d" % len(order))
    print("BENCH loss.noncontiguous=%d" % gaps)
    print("BENCH loss.wraps=%d" % wraps)
    print("BENCH loss.bridged=%d" % bridged)
    print("BENCH loss.resumed=%d" % (1 if resumed else 0))
    if late:
        print("(powerd's lateness means: %s us; writes fall 100 ms after the grid)" % ", ".join("%.0f" % x for x in late))
    if os.environ.get("KEEP") != "1":
        subprocess.run(["rm", "-rf", tmp])
    else:
        print("kept " + tmp)


if __name__ == "__main__":
    main()
