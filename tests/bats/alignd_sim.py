#!/usr/bin/env python3
"""Feed wattbus-alignd power and usage streams with a known truth and check its slots.

  alignd_sim.py SCENARIO --in ENDPOINT [--in ENDPOINT2] --out ENDPOINT

alignd must subscribe to the --in endpoints (this script binds them) and
publish on --out with a short stat interval (the script waits for a stat
message to know its subscription is live). Power is piecewise constant with
changes at known instants, so every slot's energy has an exact answer in
integer microjoules; the script checks each slot against it and the sum over
the run against E(last) - E(first). Prints one line per check and "ok", exits 1
with the reason on the first failure.
"""
import argparse
import json
import random
import sys
import time

import msgpack
import zmq

S = 1_000_000_000
MS = 1_000_000
RANGE = 262_143_328_850  # a real RAPL package max_energy_range_uj


class Power:
    """P = watts[i] on [t[i], t[i+1]); energy in uJ, exact for whole microseconds."""

    def __init__(self, *pieces):
        self.pieces = sorted(pieces)

    def e(self, t):
        total = 0
        for i, (t0, w) in enumerate(self.pieces):
            if t0 >= t:
                break
            end = min(t, self.pieces[i + 1][0]) if i + 1 < len(self.pieces) else t
            assert (end - t0) % 1000 == 0, "times must be whole microseconds"
            total += w * (end - t0) // 1000
        return total


class Bus:
    def __init__(self, ins, out, t_base=None):
        self.ctx = zmq.Context()
        self.pubs = []
        for ep in ins:
            s = self.ctx.socket(zmq.XPUB)
            s.setsockopt(zmq.SNDHWM, 100000)
            s.bind(ep)
            self.pubs.append(s)
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.RCVHWM, 100000)
        self.sub.connect(out)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"aligned/")
        self.sub.setsockopt(zmq.SUBSCRIBE, b"stat/")
        self.seq = {}
        self.slots = []
        self.stat = None
        self.t_base = t_base or time.time_ns() // S * S

    def ready(self, timeout=30):
        """alignd subscribed to every --in, and our SUB gets its messages."""
        end = time.time() + timeout
        for s in self.pubs:
            want = {b"\x01power/", b"\x01usage/"}
            while want:
                if not s.poll(max(1, int((end - time.time()) * 1000))):
                    fail("alignd did not subscribe to power/ and usage/ within %d s" % timeout)
                want.discard(s.recv())
        while self.stat is None:
            if time.time() > end:
                fail("no stat message from alignd within %d s" % timeout)
            self.drain(0.05)

    def send(self, kind, host, body, epoch=1, src=None, skip=0, pub=0):
        src = src or ("powerd" if kind == "power" else "usaged")
        key = (kind, host, src, epoch)
        seq = self.seq.get(key, 0) + skip
        self.seq[key] = seq + 1
        msg = {"v": 1, "kind": kind, "host": host, "src": src, "epoch": epoch, "seq": seq}
        msg.update(body)
        self.pubs[pub].send_multipart([("%s/%s" % (kind, host)).encode(), msgpack.packb(msg)])

    def power(self, host, t, interval, zones, epoch=1, skip=0, pub=0):
        """zones: list of (name, energy_uj[, max_energy_range_uj])."""
        zs = []
        for z in zones:
            d = {"name": z[0], "zone": z[0].split("-")[0], "index": 0, "energy_uj": z[1]}
            if len(z) > 2:
                d["max_energy_range_uj"] = z[2]
            zs.append(d)
        self.send("power", host, {"t": t, "interval_ns": interval, "zones": zs}, epoch=epoch, skip=skip, pub=pub)

    def usage(self, host, t, busy_ns=0, procs=None, full=False, cgroups=None, boot_ns=0, epoch=1, skip=0, pub=0,
              interval=S):
        body = {
            "t": t, "interval_ns": interval, "ncpu": 2, "full": full,
            "cpu": {"user_ns": busy_ns, "nice_ns": 0, "system_ns": 0, "idle_ns": max(0, 2 * (t - self.t_base) - busy_ns),
                    "iowait_ns": 0, "irq_ns": 0, "softirq_ns": 0, "steal_ns": 0},
            "procs": procs or [],
        }
        if cgroups:
            body["cgroups"] = cgroups
        if boot_ns:
            body["boot_ns"] = boot_ns
        self.send("usage", host, body, epoch=epoch, skip=skip, pub=pub)

    def raw(self, topic, body, pub=0):
        self.pubs[pub].send_multipart([topic.encode(), body])

    def drain(self, secs):
        end = time.time() + secs
        while True:
            left = end - time.time()
            if left <= 0 or not self.sub.poll(int(left * 1000) + 1):
                return
            topic, body = self.sub.recv_multipart()
            m = msgpack.unpackb(body, raw=False)
            if topic.startswith(b"aligned/"):
                self.slots.append(m)
                print(json.dumps({"t0": m["t0"] - self.t_base, "t1": m["t1"] - self.t_base, "host": m["host"],
                                  "zones": {z["name"]: z["energy_uj"] for z in m.get("zones", [])},
                                  "quality": m["quality"], "procs": len(m.get("procs", []))}))
            elif topic.startswith(b"stat/"):
                self.stat = m

    def wait_slot(self, host, t1, timeout=60):
        """The slot of host ending at t1, once alignd has sent it."""
        end = time.time() + timeout
        while time.time() < end:
            for s in self.slots:
                if s["host"] == host and s["t1"] == t1:
                    return s
            self.drain(0.05)
        fail("no slot of %s ending at %+d ns within %d s" % (host, t1 - self.t_base, timeout))

    def collect(self, n, timeout=60):
        end = time.time() + timeout
        while len(self.slots) < n and time.time() < end:
            self.drain(0.05)
        self.drain(0.3)  # anything beyond n would be a fault too
        if len(self.slots) != n:
            fail("expected %d slots, got %d" % (n, len(self.slots)))
        return self.slots

    def counter(self, name, timeout=30):
        """A stage counter from alignd's next stat message."""
        self.stat = None
        end = time.time() + timeout
        while self.stat is None and time.time() < end:
            self.drain(0.05)
        if self.stat is None:
            fail("no stat message")
        for c in self.stat.get("counters", []):
            if c["name"] == name:
                return c["value"]
        return self.stat.get(name, 0)

    def rejected(self, reason, timeout=3):
        """Frames alignd rejected for reason, from its next stat message."""
        self.counter("slots", timeout)
        return {c["name"]: c["value"] for c in self.stat.get("rejected_by", [])}.get(reason, 0)


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def check(cond, why):
    if not cond:
        fail(why)
    print("ok: " + why)


def slot(slots, host, t1):
    for s in slots:
        if s["host"] == host and s["t1"] == t1:
            return s
    fail("no slot of %s ending at %+d ns" % (host, t1))


def zone(s, name):
    for z in s.get("zones", []):
        if z["name"] == name:
            return z["energy_uj"]
    fail("slot [%d, %d] has no zone %s" % (s["t0"], s["t1"], name))


def exact_slots(bus, slots, host, name, power, times):
    """Each slot [times[i-1], times[i]] holds exactly E(t1) - E(t0); the run sums to E(last) - E(first)."""
    total = 0
    for t0, t1 in zip(times, times[1:]):
        s = slot(slots, host, t1)
        if s["t0"] != t0:
            fail("slot ending at %d starts at %d, expected %d" % (t1 - bus.t_base, s["t0"] - bus.t_base, t0 - bus.t_base))
        want = power.e(t1) - power.e(t0)
        if zone(s, name) != want:
            fail("%s slot [%+.3f, %+.3f] s: %d uJ, analytic %d uJ" % (host, (t0 - bus.t_base) / S,
                                                                     (t1 - bus.t_base) / S, zone(s, name), want))
        total += zone(s, name)
    check(len(times) - 1 > 0, "%s %s: %d slots each equal to the analytic energy" % (host, name, len(times) - 1))
    check(total == power.e(times[-1]) - power.e(times[0]),
          "%s %s: exact sum %d uJ == E(last) - E(first)" % (host, name, total))


# ---- scenarios ----

def power1s_usage3s(bus):
    b = bus.t_base
    p = Power(*[(b + k * S, 50 + (k * 37) % 90) for k in range(31)])
    times = []
    for k in range(31):
        bus.power("h", b + k * S, S, [("package-0", 10**9 + p.e(b + k * S))])
        if k % 3 == 0:
            bus.usage("h", b + k * S, busy_ns=k * S // 2)
            times.append(b + k * S)
    slots = bus.collect(10)
    exact_slots(bus, slots, "h", "package-0", p, times)
    check(all(s["quality"].get("interpolated") and s["quality"]["coverage"] == 1.0 for s in slots),
          "every slot interpolated with coverage 1")
    check(all(s["cpu"]["user_ns"] == 3 * S // 2 for s in slots), "node CPU deltas from /proc/stat totals")


def power5s_usage1s(bus):
    b = bus.t_base
    p = Power(*[(b + 5 * m * S, 40 + 30 * m) for m in range(7)])
    times = []
    for t in range(31):
        if t % 5 == 0:
            bus.power("h", b + t * S, 5 * S, [("package-0", p.e(b + t * S))])
        bus.usage("h", b + t * S)
        times.append(b + t * S)
    slots = bus.collect(30)
    exact_slots(bus, slots, "h", "package-0", p, times)
    check(all(s["quality"].get("interpolated") for s in slots), "power sparser than usage: all interpolated")


def jitter(bus):
    b = bus.t_base
    rng = random.Random(7)
    pt = [b + 10 * S + k * 500 * MS + rng.randrange(200000) * 1000 - 100 * MS for k in range(61)]
    p = Power(*[(t, 20 + rng.randrange(200)) for t in pt])
    ut = [b + 10 * S + 500 * MS + m * 1400 * MS + rng.randrange(600000) * 1000 - 300 * MS for m in range(21)]
    # Slot ends within snap (5 ms) after a power sample would be extrapolated over that span.
    gap = min(u - max(t for t in pt if t <= u) for u in ut)
    check(gap > 5 * MS, "every usage time is more than snap after the power sample before it (%d us)" % (gap // 1000))
    events = [(t, 0, "power") for t in pt] + [(t, 1, "usage") for t in ut]
    for t, _, kind in sorted(events):
        if kind == "power":
            bus.power("h", t, 500 * MS, [("package-0", 7 + p.e(t))])
        else:
            bus.usage("h", t)
    slots = bus.collect(20)
    exact_slots(bus, slots, "h", "package-0", p, ut)


def lost_power_interpolated(bus):
    """Power messages 5..7 lost (seq gaps) but power is back before max_lag: interpolated across."""
    b = bus.t_base
    p = Power((b, 120))
    skip = 0
    times = []
    for t in range(13):
        if 5 <= t <= 7:
            skip += 1
        else:
            bus.power("h", b + t * S, S, [("package-0", p.e(b + t * S))], skip=skip)
            skip = 0
        bus.usage("h", b + t * S)
        times.append(b + t * S)
    slots = bus.collect(12)
    exact_slots(bus, slots, "h", "package-0", p, times)
    check(bus.counter("slots_extrapolated") == 0, "nothing extrapolated")
    check(bus.stat["lost"] >= 3, "the 3 lost power messages are counted (stat lost = %d)" % bus.stat["lost"])


def lost_power_extrapolated(bus):
    """100 W, then 200 W from 4 s; samples 5..7 s lost past max_lag (300 ms): extrapolated, then corrected."""
    b = bus.t_base
    p = Power((b, 100), (b + 4 * S, 200))
    skip = 0
    for t in range(11):
        if 5 <= t <= 7:
            skip += 1
        else:
            bus.power("h", b + t * S, S, [("package-0", 5 * 10**6 + p.e(b + t * S))], skip=skip)
            skip = 0
        bus.usage("h", b + t * S)
        if 5 <= t <= 7:
            bus.wait_slot("h", b + t * S)  # power never comes in time: out after max_lag, extrapolated
    slots = bus.collect(10)
    for t in (5, 6, 7):
        s = slot(slots, "h", b + t * S)
        check(s["quality"].get("extrapolated") and zone(s, "package-0") == 100 * 10**6,
              "slot ending at %d s extrapolated at the last rate: 100 J (truth 200 J)" % t)
        check(s["quality"]["lag_ns"] >= 300 * MS, "slot ending at %d s waited max_lag (lag %d ms)"
              % (t, s["quality"]["lag_ns"] // MS))
    s8 = slot(slots, "h", b + 8 * S)
    # E(8) - E(4) = 800 J measured; 300 J went out extrapolated: the slot ending at 8 s gets 500 J.
    check(zone(s8, "package-0") == 500 * 10**6 and not s8["quality"].get("extrapolated"),
          "the slot where power is back corrects the extrapolation: 500 J")
    total = sum(zone(s, "package-0") for s in slots)
    check(total == p.e(b + 10 * S), "exact sum over the run: %d uJ" % total)
    check(bus.counter("slots_extrapolated") == 3, "stat counter slots_extrapolated = 3")


def grid_stamps(bus):
    """powerd stamps the grid instant, usaged the moment it read (60 us .. 1 ms later)."""
    b = bus.t_base
    p = Power(*[(b + k * S, 100 + 10 * k) for k in range(8)])
    tu = [b + t * S + 60000 + t * 150000 for t in range(8)]
    for t in range(8):
        bus.power("h", b + t * S, S, [("package-0", p.e(b + t * S))])
        bus.usage("h", tu[t])
        if t:
            # The next power sample is sent only once this slot is out: a slot waiting for it
            # goes out after max_lag, extrapolated.
            bus.wait_slot("h", tu[t])
    slots = bus.collect(7)
    check(True, "every slot out before the next power sample was sent")
    check(not any(s["quality"].get("extrapolated") for s in slots), "none marked extrapolated")
    for s in slots:
        # A snapped end takes the value of the sample on the grid; the first start is interpolated.
        t0 = s["t0"] if s["t0"] == tu[0] else s["t0"] // S * S
        want = p.e(s["t1"] // S * S) - p.e(t0)
        if zone(s, "package-0") != want:
            fail("slot [%d, %d]: %d uJ, analytic %d" % (s["t0"] - b, s["t1"] - b, zone(s, "package-0"), want))
    check(True, "each slot holds the energy up to the power sample it snapped to")
    total = sum(zone(s, "package-0") for s in slots)
    # Never ahead of the meter: the last end is 1.11 ms past its sample and takes its value.
    check(total == p.e(b + 7 * S) - p.e(tu[0]), "exact sum over the run: %d uJ" % total)


def restart_bridged(bus):
    """powerd restarts at 10 s: package had wrapped (value = hardware + R + 1, as powerd counts a
    counter that runs 0..R), dram had not; 11 s lost."""
    b = bus.t_base
    pk = Power((b, 150), (b + 7 * S, 90))
    dr = Power((b, 12))
    hw0 = RANGE - 10**9
    times = []
    for t in range(21):
        epoch = 1 if t <= 10 else 2
        pkg = hw0 + pk.e(b + t * S)
        if epoch == 2:
            pkg %= RANGE + 1
        if t != 11:
            bus.power("h", b + t * S, S, [("package-0", pkg, RANGE), ("dram-0", 777 + dr.e(b + t * S), RANGE)],
                      epoch=epoch)
        bus.usage("h", b + t * S)
        times.append(b + t * S)
    slots = bus.collect(20)
    exact_slots(bus, slots, "h", "package-0", pk, times)
    exact_slots(bus, slots, "h", "dram-0", dr, times)
    check(not any(s["quality"].get("gap") for s in slots), "no slot flagged gap")
    check(bus.counter("power_bridged") == 2, "both zones bridged (stat power_bridged = 2)")


def restart_gap(bus):
    """powerd comes back at 6 s with a counter from 0: a discontinuity, flagged, never guessed."""
    b = bus.t_base
    p = Power((b, 100))
    for t in range(11):
        e = 900 * 10**6 + p.e(b + t * S) if t <= 4 else p.e(b + t * S) - p.e(b + 6 * S)
        if t != 5:
            bus.power("h", b + t * S, S, [("package-0", e)], epoch=1 if t <= 4 else 2)
        bus.usage("h", b + t * S)
    slots = bus.collect(10)
    for t in (5, 6):
        s = slot(slots, "h", b + t * S)
        check(s["quality"].get("gap") and zone(s, "package-0") == 0 and s["quality"]["coverage"] == 0,
              "slot ending at %d s lies in the gap: flagged, 0 uJ, coverage 0" % t)
    check(not slot(slots, "h", b + 7 * S)["quality"].get("gap"), "the slot after the gap is clean")
    total = sum(zone(s, "package-0") for s in slots)
    check(total == 800 * 10**6, "the run holds what was measured: 4 s before, 4 s after (%d uJ)" % total)
    check(bus.counter("power_discontinuities") == 1, "stat counter power_discontinuities = 1")


def no_power(bus):
    b = bus.t_base
    for t in range(6):
        bus.usage("lonely", b + t * S, busy_ns=t * S // 4,
                  procs=[{"pid": 10, "comm": "app", "cpu_ns": t * S // 4}])
    slots = bus.collect(5)
    check(all(not s.get("zones") and not s.get("power_host") and s["quality"]["coverage"] == 0 for s in slots),
          "no zones, no power_host, coverage 0")
    check(all(s["cpu"]["user_ns"] == S // 4 and s["procs"][0]["cpu_ns"] == S // 4 for s in slots),
          "usage deltas pass on")
    bus.counter("slots")
    check(bus.stat["mode"] == "usage-only", "stat mode usage-only")


def two_hosts(bus):
    """node0 metered on the first endpoint; node1 metered as bmc-node1 on the second (host_map)."""
    b = bus.t_base
    pa = Power((b, 111), (b + 5 * S, 222))
    pb = Power((b, 333), (b + 3 * S + 500 * MS, 44))
    t0s, t1s = [], []
    for t in range(11):
        bus.power("node0", b + t * S, S, [("package-0", pa.e(b + t * S))], pub=0)
        bus.power("bmc-node1", b + t * S, S, [("package-0", 5 + pb.e(b + t * S))], pub=1)
        if t % 2 == 0:
            bus.usage("node1", b + t * S, pub=1)
            t1s.append(b + t * S)
        bus.usage("node0", b + t * S, pub=0)
        t0s.append(b + t * S)
    slots = bus.collect(15)
    exact_slots(bus, slots, "node0", "package-0", pa, t0s)
    exact_slots(bus, slots, "node1", "package-0", pb, t1s)
    check(all(s["power_host"] == ("bmc-node1" if s["host"] == "node1" else "node0") for s in slots),
          "power_host names the meter's host")


def usage_deltas(bus):
    """Cumulative usage with losses: deltas per (pid, start_ns), new processes, exits, cgroups."""
    b = bus.t_base
    boot = b - 1000 * S
    cg = [{"id": 100, "path": "system.slice/a.service", "service": "a.service"},
          {"id": 200, "path": "kubepods/podx/c1", "runtime": "containerd", "container_id": "c1", "pod_uid": "x"}]

    def proc(pid, start_s, cpu_ns, cgid, exited=False):
        d = {"pid": pid, "comm": "p%d" % pid, "start_ns": int(start_s * S), "cgroup_id": cgid, "cpu_ns": cpu_ns}
        if exited:
            d["exited"] = True
        return d

    p = Power((b, 100))
    for t in range(7):
        bus.power("h", b + t * S, S, [("package-0", p.e(b + t * S))])
    # 0: full; A (pid 1) runs 0.5 s/s; B (pid 2) idle.
    bus.usage("h", b, full=True, cgroups=cg, boot_ns=boot,
              procs=[proc(1, 10, 0, 100), proc(2, 20, 7 * S, 200)])
    bus.usage("h", b + 1 * S, boot_ns=boot, procs=[proc(1, 10, S // 2, 100)])
    # 2 and 3 lost; B ran 1 s in [2, 3]; at 4 (full) both are listed with their totals.
    bus.usage("h", b + 4 * S, full=True, cgroups=cg, boot_ns=boot, skip=2,
              procs=[proc(1, 10, 2 * S, 100), proc(2, 20, 8 * S, 200)])
    # 5: pid 2 exits; C (pid 3) started at 4.5 s (after t0) and is counted in full.
    bus.usage("h", b + 5 * S, boot_ns=boot,
              procs=[proc(1, 10, 5 * S // 2, 100), proc(2, 20, 8 * S + 10, 200, exited=True),
                     proc(3, 1004.5, S // 10, 100)])
    # 6: pid 3 is gone; pid 2 is reused by a new process D that started at 5.5 s.
    bus.usage("h", b + 6 * S, boot_ns=boot, procs=[proc(1, 10, 3 * S, 100), proc(2, 1005.5, S // 4, 100)])
    slots = bus.collect(4)

    def procs_of(s):
        return {(q["pid"], q["start_ns"] // S): q for q in s.get("procs", [])}

    s1 = procs_of(slot(slots, "h", b + S))
    check(s1[(1, 10)]["cpu_ns"] == S // 2 and (2, 20) not in s1, "[0, 1]: A ran 0.5 s, B did not run")
    s4 = slot(slots, "h", b + 4 * S)
    check(s4["quality"]["usage_lost"] == 2, "[1, 4] knows 2 usage messages were lost")
    p4 = procs_of(s4)
    check(p4[(1, 10)]["cpu_ns"] == 3 * S // 2 and p4[(2, 20)]["cpu_ns"] == S,
          "[1, 4]: deltas against the last value seen span the loss (A 1.5 s, B 1 s)")
    check(sorted(c["id"] for c in s4["cgroups"]) == [100, 200] and
          [c for c in s4["cgroups"] if c["id"] == 200][0]["container_id"] == "c1",
          "[1, 4]: the cgroups of its processes, with their identity")
    p5 = procs_of(slot(slots, "h", b + 5 * S))
    check(p5[(2, 20)].get("exited") and p5[(2, 20)]["cpu_ns"] == 10, "[4, 5]: B exited, its last 10 ns counted")
    check(p5[(3, 1004)]["cpu_ns"] == S // 10, "[4, 5]: C started in the slot: counted in full")
    p6 = procs_of(slot(slots, "h", b + 6 * S))
    check(p6[(2, 1005)]["cpu_ns"] == S // 4 and (2, 20) not in p6, "[5, 6]: reused pid 2 is a new process")
    exact_slots(bus, slots, "h", "package-0", p, [b, b + S, b + 4 * S, b + 5 * S, b + 6 * S])
    check(bus.counter("procs_new") == 2, "stat counter procs_new = 2")


def host_timeout(bus):
    """Usage stops for longer than host_timeout (3 s); power goes on; usage comes back."""
    b = bus.t_base
    p = Power((b, 100), (b + 6 * S, 50))
    for t in range(4):
        bus.power("h", b + t * S, S, [("package-0", p.e(b + t * S))])
        bus.usage("h", b + t * S)
    # Power every 100 ms of its time, one sample per stat message of alignd (so the power
    # host is never silent: stat messages come at most every 100 ms, so the 60 samples take
    # 6 s at least), until the silent usage host is dropped; then the rest to 10 s. The
    # count is taken then: once the test goes quiet, host_timeout drops both hosts again.
    t = b + 4 * S
    while (dropped := bus.counter("hosts_dropped")) < 1:
        if t >= b + 10 * S:
            fail("the usage host silent for 6 s of power samples was not dropped")
        bus.power("h", t, 100 * MS, [("package-0", p.e(t))])
        t += 100 * MS
    while t < b + 10 * S:
        bus.power("h", t, 100 * MS, [("package-0", p.e(t))])
        t += 100 * MS
    for t in range(10, 13):
        bus.power("h", b + t * S, S, [("package-0", p.e(b + t * S))])
        bus.usage("h", b + t * S)
    slots = bus.collect(6)
    s = slot(slots, "h", b + 10 * S)
    check(s["t0"] == b + 3 * S, "the slot after the silence spans it: [3, 10] s")
    exact_slots(bus, slots, "h", "package-0", p, [b, b + S, b + 2 * S, b + 3 * S, b + 10 * S, b + 11 * S, b + 12 * S])
    check(dropped == 1, "stat counter hosts_dropped = 1: the usage host, not the power host that kept sending")


def skew(bus):
    """Messages stamped 30 s away from their arrival are logged and counted, and still aligned."""
    b = time.time_ns() - 30 * S
    p = Power((b, 70))
    for t in range(4):
        bus.power("h", b + t * S, S, [("package-0", p.e(b + t * S))])
        bus.usage("h", b + t * S)
    slots = bus.collect(3)
    exact_slots(bus, slots, "h", "package-0", p, [b + t * S for t in range(4)])
    check(bus.counter("clock_skew") == 8, "stat counter clock_skew = 8")


def bad_frames(bus):
    """Garbage between good messages: rejected and counted; no slot lost or changed."""
    b = bus.t_base
    p = Power((b, 123))
    times = []
    for t in range(6):
        bus.power("h", b + t * S, S, [("package-0", p.e(b + t * S))])
        bus.raw("power/h", b"\xc1garbage")
        bus.raw("usage/h", msgpack.packb({"v": 1, "kind": "usage", "host": "h"}))
        bus.usage("h", b + t * S)
        times.append(b + t * S)
    slots = bus.collect(5)
    exact_slots(bus, slots, "h", "package-0", p, times)
    bus.counter("slots")
    check(bus.stat["rejected"] == 12, "12 bad frames rejected (stat rejected = %d)" % bus.stat["rejected"])


RESTART_POWER = ((0, 100), (5 * S + 500 * MS, 300))


def poisoned_time(bus):
    """One usage frame at t = 2^63-1 (valid for the schema): refused on receipt (implausible_time);
    a host that starts counting afterwards still gets its slots, with encodable total epochs."""
    b = bus.t_base
    cpu = {k: 0 for k in ("user_ns", "nice_ns", "system_ns", "idle_ns", "iowait_ns", "irq_ns", "softirq_ns", "steal_ns")}
    bus.send("usage", "evil", {"t": 2**63 - 1, "interval_ns": S, "ncpu": 2, "full": False, "cpu": cpu, "procs": []})
    p = Power((b, 80))
    times = []
    for t in range(5):
        bus.power("h", b + t * S, S, [("package-0", p.e(b + t * S))])
        bus.usage("h", b + t * S)
        times.append(b + t * S)
    slots = bus.collect(4)
    exact_slots(bus, slots, "h", "package-0", p, times)
    check(all(0 < s["total_epoch"] < 2**63 - 1 - 10**6 for s in slots), "total epochs near the clock, not near 2^63")
    check(bus.rejected("implausible_time") == 1, "stat rejected_by implausible_time = 1")


def duplicate_powerd(bus):
    """Two powerds under one host name (cloned VMs), epochs alternating, meters 5 MJ apart: the
    first switch is no bridge (more than a zone can draw), the one that comes back is refused
    (duplicate_producer), and the slots follow one meter."""
    b = bus.t_base
    a = Power((b, 100))
    c = Power((b, 50))
    n = 12
    for t in range(n):
        bus.power("h", b + t * S, S, [("package-0", 10 * 10**12 + a.e(b + t * S))], epoch=1)
        bus.power("h", b + t * S + S // 2, S, [("package-0", 15 * 10**12 + c.e(b + t * S + S // 2))], epoch=2)
        bus.usage("h", b + t * S)
    slots = bus.collect(n - 1)
    check(all(zone(s, "package-0") <= 50 * 10**6 for s in slots), "no slot holds more than the second meter's 50 J")
    check(all(zone(s, "package-0") == 50 * 10**6 for s in slots[1:]), "after the first, every slot is the second meter's 50 J")
    check(bus.rejected("duplicate_producer") == n - 1, "stat rejected_by duplicate_producer = %d" % (n - 1))


def stage_restart_1(bus, state):
    """Before alignd is restarted: 0..5 s, all slots out; what came out is kept for the second half."""
    b = bus.t_base
    p = Power(*[(b + t, w) for t, w in RESTART_POWER])
    for t in range(6):
        bus.power("h", b + t * S, S, [("package-0", 42 + p.e(b + t * S))])
        bus.usage("h", b + t * S, busy_ns=t * (S // 3))
    slots = bus.collect(5)
    json.dump({"t_base": b, "slots": slots}, open(state, "w"))


def stage_restart_2(bus, state):
    """After the restart: the next slot starts where the last one ended, and the run sums exactly."""
    b = bus.t_base
    p = Power(*[(b + t, w) for t, w in RESTART_POWER])
    before = json.load(open(state))["slots"]
    for t in range(6, 11):
        bus.power("h", b + t * S, S, [("package-0", 42 + p.e(b + t * S))])
        bus.usage("h", b + t * S, busy_ns=t * (S // 3))
    slots = bus.collect(5)
    s6 = slot(slots, "h", b + 6 * S)
    check(s6["t0"] == b + 5 * S, "the first slot after the restart starts where the last one ended")
    check(s6["cpu"]["user_ns"] == S // 3, "its node CPU delta continues from the saved totals")
    exact_slots(bus, before + slots, "h", "package-0", p, [b + t * S for t in range(11)])


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    fail("no VmRSS for pid %d" % pid)


def budget_flood(bus, pid, budget_mib):
    """A legitimate host, then 30 forged host names each with one usage message of 131,072
    processes (about 14 MiB of process table each, 440 MiB for all): alignd holds no more than
    its budget, refuses and counts the hosts beyond it, and the legitimate host keeps its slots."""
    b = bus.t_base
    p = Power((b, 100))
    good = [{"pid": 100 + i, "comm": "w", "start_ns": 1, "cpu_ns": 0} for i in range(200)]

    def good_slot(t):
        for q in good:
            q["cpu_ns"] += 1000
        bus.power("good", b + t * S, S, [("package-0", p.e(b + t * S))])
        bus.usage("good", b + t * S, procs=good, full=True)

    for t in range(3):
        good_slot(t)
    bus.collect(2)
    before = rss_kib(pid)
    # The processes are packed once; each frame is a map whose last value is that array.
    n = 131072
    procs = msgpack.packb([{"pid": 10 + i, "comm": "x", "start_ns": 1, "cpu_ns": i} for i in range(n)])
    for h in range(30):
        host = "forged%d" % h
        head = {"v": 1, "kind": "usage", "host": host, "src": "usaged", "epoch": 1, "seq": 0,
                "t": b + 2 * S + 10 * MS, "interval_ns": S, "ncpu": 2, "full": True,
                "cpu": {"user_ns": 0, "nice_ns": 0, "system_ns": 0, "idle_ns": 0, "iowait_ns": 0, "irq_ns": 0,
                        "softirq_ns": 0, "steal_ns": 0}}
        packed = msgpack.packb(head)
        frame = bytes([0x80 | (len(head) + 1)]) + packed[1:] + msgpack.packb("procs") + procs
        bus.raw("usage/" + host, frame)
    # Every frame has been read once the counters say so.
    end = time.time() + 120
    refused = kept = 0
    while refused + kept - 1 < 30 and time.time() < end:
        bus.stat = None
        bus.drain(0.2)  # alignd sends no stat while it reads a frame
        if bus.stat:
            refused = {c["name"]: c["value"] for c in bus.stat.get("rejected_by", [])}.get("budget", 0)
            kept = {c["name"]: c["value"] for c in bus.stat.get("counters", [])}.get("usage_baselines", 0)
    after = rss_kib(pid)
    print("alignd RSS: %d KiB before the flood, %d KiB after; %d forged hosts refused (budget), %d kept"
          % (before, after, refused, kept - 1))
    check(refused + kept - 1 == 30, "every forged frame read: %d refused, %d kept" % (refused, kept - 1))
    check(refused >= 30 - budget_mib // 14, "the forged hosts beyond the budget are refused and counted (%d)" % refused)
    check(after - before < (budget_mib + 96) * 1024,
          "RSS grew by %d MiB: no more than the budget (%d MiB) and the decoding of a frame (freed, kept by malloc)"
          % ((after - before) // 1024, budget_mib))
    for t in range(3, 6):
        good_slot(t)
    slots = bus.collect(5)
    for t in range(3, 6):
        s = slot(slots, "good", b + t * S)
        check(zone(s, "package-0") == p.e(b + t * S) - p.e(b + (t - 1) * S) and len(s["procs"]) == 200,
              "the legitimate host's slot ending at %d s: all its energy and its 200 processes" % t)


SCENARIOS = {f.__name__: f for f in (grid_stamps, power1s_usage3s, power5s_usage1s, jitter, lost_power_interpolated,
                                      lost_power_extrapolated, restart_bridged, restart_gap, no_power, two_hosts,
                                      usage_deltas, host_timeout, skew, bad_frames, poisoned_time, duplicate_powerd,
                                      stage_restart_1, stage_restart_2, budget_flood)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--in", dest="ins", action="append", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--state", help="file the two halves of a stage restart share")
    ap.add_argument("--pid", type=int, help="alignd's pid (budget_flood reads its RSS)")
    ap.add_argument("--budget-mib", type=int, default=64, help="alignd's budget_mib (budget_flood)")
    a = ap.parse_args()
    t_base = None
    if a.scenario == "stage_restart_2":
        t_base = json.load(open(a.state))["t_base"]
    bus = Bus(a.ins, a.out, t_base)
    bus.ready()
    if a.scenario.startswith("stage_restart"):
        SCENARIOS[a.scenario](bus, a.state)
    elif a.scenario == "budget_flood":
        SCENARIOS[a.scenario](bus, a.pid, a.budget_mib)
    else:
        SCENARIOS[a.scenario](bus)
    print("ok")


if __name__ == "__main__":
    main()
