#!/usr/bin/env python3
"""Aligned slots as JSON lines for `wattbus pub`, from a known power truth.

  estimd_slots.py [--host H] [--count N] [--start S] [--ncpu C] [--no-power] [--seed X]
                  [--logistic A,X0,K,C] [--exponential A,B,C]

Each 1 s slot has two processes in a container and one outside, /proc/stat
deltas that match them, and (unless --no-power) package and dram energy from
package = 15 W + 0.006 W per CPU-ms/s and dram = 3 W + 0.0008 W per CPU-ms/s.
With --logistic, package = A / (1 + exp(-K * (cpu_ms - X0))) + C instead; with
--exponential, package = A * exp(B * cpu_ms) + C.
"""
import argparse
import json
import math
import random

p = argparse.ArgumentParser()
p.add_argument("--host", default="metal1")
p.add_argument("--count", type=int, default=10)
p.add_argument("--start", type=int, default=1700000000)
p.add_argument("--ncpu", type=int, default=4)
p.add_argument("--no-power", action="store_true")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--logistic", help="A,X0,K,C: package power as a logistic curve of CPU-ms/s")
p.add_argument("--exponential", help="A,B,C: package power as an exponential curve of CPU-ms/s")
a = p.parse_args()
rng = random.Random(a.seed)
NS = 1000000000
for i in range(a.count):
    t0 = (a.start + i) * NS
    cpu = [rng.randrange(0, a.ncpu * NS // 3) for _ in range(3)]
    busy = sum(cpu)
    cpu_ms = busy / 1e6  # per second: slots are 1 s
    zones = []
    pkg_w = 15 + 0.006 * cpu_ms
    if a.logistic:
        A, X0, K, C = (float(v) for v in a.logistic.split(","))
        pkg_w = A / (1 + math.exp(-K * (cpu_ms - X0))) + C
    if a.exponential:
        A, B, C = (float(v) for v in a.exponential.split(","))
        pkg_w = A * math.exp(B * cpu_ms) + C
    if not a.no_power:
        zones = [
            {"name": "package-0", "zone": "package", "index": 0, "path": "/sys/class/powercap/intel-rapl:0",
             "energy_uj": round(pkg_w * 1e6)},
            {"name": "dram-0", "zone": "dram", "index": 0, "path": "/sys/class/powercap/intel-rapl:0:0",
             "energy_uj": round((3 + 0.0008 * cpu_ms) * 1e6)},
        ]
    msg = {
        "kind": "aligned", "host": a.host, "t0": t0, "t1": t0 + NS, "ncpu": a.ncpu,
        "quality": {"coverage": 1.0, "interpolated": True},
        "cpu": {"user_ns": busy, "nice_ns": 0, "system_ns": 0, "idle_ns": a.ncpu * NS - busy, "iowait_ns": 0,
                "irq_ns": 0, "softirq_ns": 0, "steal_ns": 0},
        "zones": zones,
        "procs": [
            {"pid": 101, "comm": "web", "cgroup_id": 7, "cpu_ns": cpu[0]},
            {"pid": 102, "comm": "worker", "cgroup_id": 7, "cpu_ns": cpu[1]},
            {"pid": 200, "comm": "sshd", "cgroup_id": 1, "cpu_ns": cpu[2]},
        ],
        "cgroups": [
            {"id": 7, "path": "/kubepods.slice/kubepods-pod1234.slice/cri-containerd-abc.scope",
             "runtime": "containerd", "container_id": "abc", "pod_uid": "1234"},
            {"id": 1, "path": "/system.slice/ssh.service", "service": "ssh.service"},
        ],
    }
    print(json.dumps({"topic": "aligned/" + a.host, "msg": msg}))
