#!/usr/bin/python3
"""A foreign publisher against one stage's SUB socket: 100,000 random and
mutated frames on one endpoint, and valid traffic for another host on a
second, interleaved. The stage must subscribe to both (this script binds
them) and publish its stat messages on --out.

    system_foreign.py alignd|estimd|exportd --valid EP --foreign EP --out EP [--url URL] [--count N]

Each garbage frame is built to be invalid for a known reason (truncated:
malformed; bytes after the map: trailing; not a map; an unknown kind; an
unknown v; a required key removed: missing; a wrong type; a value out of
bounds; a key twice: duplicate; a topic that is not KIND/HOST of the map, or
not two frames: topic), or is random bytes (invalid, for some reason).
Checks, from the stage's own stat message once it has received everything:
the stage is alive, rejected equals the garbage sent, the rejections by
reason add up to it, each reason counts at least the frames built for it and
the random frames account for the rest exactly; and the valid traffic gave
exactly the numbers it gives without garbage. Prints one line per check and
"ok"; exits 1 on the first failure.
"""
import argparse
import json
import random
import struct
import sys
import time
import urllib.request

import msgpack
import zmq

S = 1_000_000_000
ap = argparse.ArgumentParser()
ap.add_argument("stage", choices=["alignd", "estimd", "exportd"])
ap.add_argument("--valid", required=True)
ap.add_argument("--foreign", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--url")
ap.add_argument("--count", type=int, default=100_000)
args = ap.parse_args()
rnd = random.Random(20261121)


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def ok(msg):
    print("ok:", msg, flush=True)


ctx = zmq.Context()


def xpub(ep, prefixes):
    s = ctx.socket(zmq.XPUB)
    s.setsockopt(zmq.SNDHWM, 0)  # never drop: every frame must reach the stage
    s.bind(ep)
    want = {b"\x01" + p.encode() for p in prefixes}
    end = time.time() + 60
    while want:
        if not s.poll(max(1, int((end - time.time()) * 1000))):
            fail(f"{args.stage} did not subscribe to {ep} within 60 s")
        want.discard(s.recv())
    return s


prefixes = {"alignd": ["power/", "usage/"], "estimd": ["aligned/"],
            "exportd": ["estimate/", "stat/"]}[args.stage]
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.RCVHWM, 0)
sub.connect(args.out)
sub.setsockopt(zmq.SUBSCRIBE, b"stat/")
out_kind = {"alignd": "aligned", "estimd": "estimate", "exportd": None}[args.stage]
if out_kind:
    sub.setsockopt(zmq.SUBSCRIBE, out_kind.encode() + b"/victim")
valid = xpub(args.valid, prefixes)
foreign = xpub(args.foreign, prefixes)

t_base = (time.time_ns() // S - 3600) * S
CPU = {"user_ns": 0, "nice_ns": 0, "system_ns": 0, "idle_ns": 0, "iowait_ns": 0,
       "irq_ns": 0, "softirq_ns": 0, "steal_ns": 0}


def env(kind, host, src, seq):
    return {"v": 1, "kind": kind, "host": host, "src": src, "epoch": 7, "seq": seq}


# ---- templates of valid messages, one per kind the stage reads ----
def template(kind, host="intruder", seq=0):
    m = env(kind, host, "foreign", seq)
    t = t_base + seq * S
    if kind == "power":
        m.update(t=t, interval_ns=S, zones=[{"name": "package-0", "zone": "package", "index": 0,
                                             "energy_uj": 5 * seq}])
    elif kind == "usage":
        m.update(t=t, interval_ns=S, ncpu=2, cpu=dict(CPU, user_ns=seq, idle_ns=seq),
                 procs=[{"pid": 7, "comm": "x", "cpu_ns": seq}])
    elif kind == "aligned":
        m.update(t0=t, t1=t + S, ncpu=2, cpu=dict(CPU, user_ns=1, idle_ns=1),
                 zones=[{"name": "package-0", "zone": "package", "energy_uj": 9}],
                 procs=[{"pid": 7, "comm": "x", "cpu_ns": 1}], quality={"coverage": 1.0})
    elif kind == "estimate":
        m.update(t0=t, t1=t + S, mode="measured", ncpu=2, cpu_usage_ratio=0.5,
                 zones=[{"name": "package-0", "zone": "package", "energy_uj": 9, "active_uj": 4,
                         "idle_uj": 5}], procs=[])
    elif kind == "stat":
        m.update(t=t, stage="foreignd", version="1", frames_in=1, frames_out=1, lost=0, rejected=0)
    return m


# A required key of each kind besides v and kind (whose absence gives other reasons) ...
REQUIRED = {"power": ["host", "src", "epoch", "seq", "t", "interval_ns", "zones"],
            "usage": ["host", "src", "epoch", "seq", "t", "ncpu", "cpu", "procs"],
            "aligned": ["host", "src", "epoch", "seq", "t0", "t1", "ncpu", "cpu", "zones", "procs", "quality"],
            "estimate": ["host", "src", "epoch", "seq", "t0", "t1", "mode", "ncpu", "cpu_usage_ratio", "zones",
                         "procs"],
            "stat": ["host", "src", "epoch", "seq", "t", "stage", "version", "frames_in", "frames_out", "lost",
                     "rejected"]}


def wrong_type(v):
    if isinstance(v, bool) or isinstance(v, (int, float)):
        return "not a number"
    if isinstance(v, str):
        return 12345
    return "not a container"


def pack_dup(m, key):
    """A map with key twice (msgpack-python cannot build one from a dict)."""
    items = list(m.items()) + [(key, m[key])]
    n = len(items)
    head = bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)
    return head + b"".join(msgpack.packb(k) + msgpack.packb(v) for k, v in items)


CATEGORIES = ["random", "malformed", "trailing", "not_map", "kind", "version", "missing", "type",
              "bound", "duplicate", "topic", "frames"]


def garbage(i):
    """(category, frames) for garbage frame i."""
    kind = prefixes[i % len(prefixes)].rstrip("/")
    topic = f"{kind}/intruder".encode()
    cat = CATEGORIES[rnd.randrange(len(CATEGORIES))]
    m = template(kind, seq=i)
    body = msgpack.packb(m)
    if cat == "random":
        return cat, [topic, rnd.randbytes(rnd.randrange(1, 300))]
    if cat == "malformed":
        return cat, [topic, body[:rnd.randrange(1, len(body))]]
    if cat == "trailing":
        return cat, [topic, body + rnd.randbytes(rnd.randrange(1, 10))]
    if cat == "not_map":
        return cat, [topic, msgpack.packb(rnd.choice([[1, 2], 42, "map?", None, True, 1.5, [m]]))]
    if cat == "kind":
        m["kind"] = rnd.choice(["bogus", "Power", "", 7])
        return cat, [topic, msgpack.packb(m)]
    if cat == "version":
        m["v"] = rnd.choice([0, 2, 3, 1000, 2 ** 40, -1, "1"])
        return cat, [topic, msgpack.packb(m)]
    if cat == "missing":
        del m[rnd.choice(REQUIRED[kind])]
        return "missing", [topic, msgpack.packb(m)]
    if cat == "type":
        k = rnd.choice(REQUIRED[kind])
        m[k] = wrong_type(m[k])
        return cat, [topic, msgpack.packb(m)]
    if cat == "bound":
        choice = rnd.randrange(3)
        if choice == 0:
            m["host"] = "h" * 64  # at most 63
        elif choice == 1:
            m["seq"] = -rnd.randrange(1, 2 ** 40)  # minimum 0
        else:
            m["epoch"] = 2 ** 63 + rnd.randrange(2 ** 62)  # beyond int64
        return cat, [topic, msgpack.packb(m)]
    if cat == "duplicate":
        return cat, [topic, pack_dup(m, rnd.choice(["seq", "src", "host"]))]
    if cat == "topic":
        return cat, [f"{kind}/someone-else".encode(), body]
    # frames: one frame, or three
    return "topic", rnd.choice([[topic], [topic, body, b"extra"]])


# ---- valid traffic of host "victim", with the exact answer it must give ----
class Valid:
    def __init__(self):
        self.seq = {}
        self.k = 0
        self.sent = 0
        self.energy = 10 ** 9  # power: cumulative uJ
        self.total = 0

    def send(self, kind, body):
        key = kind
        seq = self.seq.get(key, 0)
        self.seq[key] = seq + 1
        m = env(kind, "victim", "valid-" + kind, seq)
        m.update(body)
        valid.send_multipart([f"{kind}/victim".encode(), msgpack.packb(m)])
        self.sent += 1

    def watts(self, k):
        return 30 + k % 11

    def step(self):
        """One slot of valid traffic."""
        k, t = self.k, t_base + self.k * S
        if args.stage == "alignd":
            self.send("power", {"t": t, "interval_ns": S, "zones": [
                {"name": "package-0", "zone": "package", "index": 0, "energy_uj": self.energy}]})
            self.send("usage", {"t": t, "interval_ns": S, "ncpu": 2, "cpu": dict(CPU, user_ns=k * S // 2,
                                                                                    idle_ns=k * S * 3 // 2),
                                "procs": [{"pid": 42, "comm": "victim", "start_ns": 1, "cpu_ns": k * S // 2}]})
            self.energy += self.watts(k) * 1_000_000
        elif args.stage == "estimd":
            e = self.watts(k) * 1_000_000
            self.total += e
            self.send("aligned", {"t0": t, "t1": t + S, "ncpu": 2, "total_epoch": 99,
                                  "cpu": dict(CPU, user_ns=S // 2, idle_ns=S * 3 // 2),
                                  "zones": [{"name": "package-0", "zone": "package", "energy_uj": e,
                                             "total_uj": self.total}],
                                  "procs": [{"pid": 42, "comm": "victim", "cpu_ns": S // 2}],
                                  "quality": {"coverage": 1.0, "interpolated": True}})
        else:
            e = self.watts(k) * 1_000_000
            self.total += e
            self.send("estimate", {"t0": t, "t1": t + S, "mode": "measured", "ncpu": 2,
                                   "cpu_usage_ratio": 0.25, "total_epoch": 5,
                                   "zones": [{"name": "package-0", "zone": "package", "energy_uj": e,
                                              "active_uj": e // 4, "idle_uj": e - e // 4,
                                              "total_uj": self.total, "active_total_uj": self.total // 4,
                                              "idle_total_uj": self.total - self.total // 4}],
                                   "procs": [{"pid": 42, "comm": "victim", "cpu_ns": S // 2,
                                              "energy_uj": [e // 4]}]})
        self.k += 1


# ---- send ----
v = Valid()
frames, expect = [], {}
t_gen = time.time()
for i in range(args.count):
    cat, fr = garbage(i)
    frames.append(fr)
    expect[cat] = expect.get(cat, 0) + 1
t_gen = time.time() - t_gen
every = args.count // 50
t_send = time.time()
for i, fr in enumerate(frames):
    if i % every == 0:
        v.step()
    foreign.send_multipart(fr)
v.step()
v.step()
t_send = time.time() - t_send
print(f"# built {args.count} frames in {t_gen:.1f} s, sent them with {v.sent} valid ones in {t_send:.1f} s",
      flush=True)

# ---- what the stage says ----
outputs, stat = [], None
end = time.time() + 90  # a deadline only: the loop ends once the stat counts every frame
while time.time() < end:
    if not sub.poll(500):
        continue
    topic, body = sub.recv_multipart()
    m = msgpack.unpackb(body, raw=False, strict_map_key=False)
    if m["kind"] == "stat":
        stat = m
        if m["frames_in"] >= args.count + v.sent:
            break
    else:
        outputs.append(m)
if stat is None:
    fail(f"no stat message from {args.stage}")
print(f"# stat: frames_in {stat['frames_in']} rejected {stat['rejected']} by reason "
      f"{json.dumps({c['name']: c['value'] for c in stat.get('rejected_by', [])})}", flush=True)
if stat["frames_in"] != args.count + v.sent:
    fail(f"frames_in {stat['frames_in']}, sent {args.count + v.sent}")
ok(f"{args.stage} received all {args.count} foreign frames and {v.sent} valid ones")
if stat["rejected"] != args.count:
    fail(f"rejected {stat['rejected']}, garbage sent {args.count}")
by = {c["name"]: c["value"] for c in stat.get("rejected_by", [])}
if sum(by.values()) != stat["rejected"]:
    fail(f"rejections by reason add up to {sum(by.values())}, not {stat['rejected']}")
rest = 0
for reason in set(by) | set(expect):
    if reason == "random":
        continue
    extra = by.get(reason, 0) - expect.get(reason, 0)
    if extra < 0:
        fail(f"reason {reason}: {by.get(reason, 0)} counted, {expect.get(reason, 0)} built for it")
    rest += extra
if rest != expect.get("random", 0):
    fail(f"random frames: {expect.get('random', 0)} sent, {rest} counted beyond the built reasons")
ok(f"every foreign frame rejected and counted by reason ({len(by)} reasons)")

# ---- the valid traffic's numbers ----
if args.stage == "alignd":
    slots = [m for m in outputs if m["host"] == "victim"]
    want = [v.watts(k) * 1_000_000 for k in range(v.k - 1)]
    got = [m["zones"][0]["energy_uj"] if m.get("zones") else None for m in slots]
    if got != want:
        fail(f"victim slots {got[:5]}... differ from the analytic {want[:5]}...")
    ok(f"{len(slots)} victim slots with their exact energy")
elif args.stage == "estimd":
    ests = [m for m in outputs if m["host"] == "victim"]
    if len(ests) != v.k:
        fail(f"{len(ests)} victim estimates for {v.k} slots")
    for k, m in enumerate(ests):
        z = m["zones"][0]
        e = v.watts(k) * 1_000_000
        if (z["energy_uj"], z["active_uj"], z["idle_uj"]) != (e, e // 4, e - e // 4) or \
                m["procs"][0]["energy_uj"] != [e // 4] or z.get("total_uj") != sum(
                    v.watts(j) for j in range(k + 1)) * 1_000_000:
            fail(f"victim estimate {k}: {z}")
    ok(f"{len(ests)} victim estimates with their exact split and totals")
else:
    with urllib.request.urlopen(args.url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    node = [l for l in text.splitlines()
            if l.startswith('kepler_node_cpu_joules_total{node_name="victim",zone="package"')]
    want = f"{v.total // 1_000_000}.{v.total % 1_000_000:06d}"
    if not node or node[0].split()[-1] != want:
        fail(f"victim node energy {node}, want {want} J")
    if "intruder" in text or "someone-else" in text:
        fail("a foreign host made it into /metrics")
    ok(f"victim node energy {want} J; no foreign host in /metrics")
print("ok", flush=True)
