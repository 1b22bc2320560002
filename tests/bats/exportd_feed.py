#!/usr/bin/python3
"""Estimate messages for exportd's tests and bench, as JSON lines for `wattbus pub`.

Every slot carries the same known power, so a test can predict every counter:
  zone package (/sys/class/powercap/intel-rapl:0): 10 W, of which 6 W active
  zone dram    (/sys/class/powercap/intel-rapl:0:0): 2 W, of which 1 W active
  pid 101 "stress" (no container)        : 1/2 of the active energy, CPU 0.5 s/s
  pid 102 "nginx" in container c0ffee of pod uid pod-1 : 1/4, CPU 0.25 s/s
  pid 103 "qemu" in VM vm-1             : 1/8, CPU 0.125 s/s
  unattributed                           : the rest (1/8)
--procs N adds N filler processes (pid 1000..) that share the "stress" half.
--sockets 2 splits the package zone over two sockets (package-0, package-1, 5 W each).
--all-zones adds core (3 W, 2 W active), uncore (1 W, 0.5 W active) and psys (20 W, 12 W active).
--gpu adds an NVML GPU (GPU-feed-0, index 0): 100 W, 60 W active, all of it nginx's.
--totals-from NS adds estimd's cumulative node totals (total_epoch --total-epoch): each
zone's energy from NS to the slot's end, as if estimd had run since NS.
"""
import argparse
import json
import sys
import time

S = 1_000_000_000


def slot(args, t0, t1):
    secs = (t1 - t0) / S
    zones = []
    if args.sockets == 2:
        zones.append(dict(name="package-0", zone="package", index=0, path="/sys/class/powercap/intel-rapl:0",
                          watts=5.0, active=3.0))
        zones.append(dict(name="package-1", zone="package", index=1, path="/sys/class/powercap/intel-rapl:1",
                          watts=5.0, active=3.0))
    else:
        zones.append(dict(name="package-0", zone="package", index=0, path="/sys/class/powercap/intel-rapl:0",
                          watts=10.0, active=6.0))
    zones.append(dict(name="dram", zone="dram", index=0, path="/sys/class/powercap/intel-rapl:0:0",
                      watts=2.0, active=1.0))
    if args.all_zones:
        zones.append(dict(name="core", zone="core", index=0, path="/sys/class/powercap/intel-rapl:0:1",
                          watts=3.0, active=2.0))
        zones.append(dict(name="uncore", zone="uncore", index=0, path="/sys/class/powercap/intel-rapl:0:2",
                          watts=1.0, active=0.5))
        zones.append(dict(name="psys", zone="psys", index=0, path="/sys/class/powercap/intel-rapl:1",
                          watts=20.0, active=12.0))
    if args.gpu:
        zones.append(dict(name="gpu-0", zone="gpu", index=0, path="nvml:GPU-feed-0", watts=100.0, active=60.0,
                          uuid="GPU-feed-0", model="FakeGPU", vendor="nvidia", idle_w=40.0))
    out_zones = []
    act = []
    for z in zones:
        e = int(round(z["watts"] * 1e6 * secs))
        a = int(round(z["active"] * 1e6 * secs))
        act.append(a)
        out_zones.append(dict(name=z["name"], zone=z["zone"], index=z["index"], path=z["path"],
                              energy_uj=e, active_uj=a, idle_uj=e - a))
        for k in ("uuid", "model", "vendor", "idle_w"):
            if k in z:
                out_zones[-1][k] = z[k]

    gpus = [i for i, z in enumerate(zones) if z["zone"] == "gpu"]

    def share(frac):
        return [0 if i in gpus else int(a * frac) for i, a in enumerate(act)]

    stress_comm = args.comm if args.comm is not None else "stress"
    procs = []
    half = share(0.5)
    if args.procs:
        each = [h // (args.procs + 1) for h in half]
        stress_e = [h - e * args.procs for h, e in zip(half, each)]
    else:
        stress_e = half
    procs.append(dict(pid=101, comm=stress_comm, start_ns=1111, cpu_ns=int(0.5 * secs * S), energy_uj=stress_e))
    nginx = share(0.25)
    for i in gpus:
        nginx[i] = act[i]
    procs.append(dict(pid=102, comm="nginx", start_ns=2222, cpu_ns=int(0.25 * secs * S), container_id="c0ffee",
                      energy_uj=nginx))
    qemu = share(0.125)
    procs.append(dict(pid=103, comm="qemu", start_ns=3333, cpu_ns=int(0.125 * secs * S), vm="vm-1",
                      energy_uj=qemu))
    for i in range(args.procs):
        procs.append(dict(pid=1000 + i, comm="filler%d" % (i % 1000), start_ns=4444 + i, cpu_ns=1000,
                          energy_uj=each))
    for z, a in enumerate(act):
        out_zones[z]["unattributed_uj"] = a - sum(p["energy_uj"][z] for p in procs)
    msg = dict(kind="estimate", host=args.host, t0=t0, t1=t1, mode="measured", ncpu=4,
               cpu_usage_ratio=0.375, zones=out_zones, procs=procs,
               containers=[dict(id="c0ffee", name="web", runtime="containerd", pod_uid="pod-1",
                                cpu_ns=int(0.25 * secs * S), energy_uj=nginx)],
               pods=[dict(id="pod-1", cpu_ns=int(0.25 * secs * S), energy_uj=nginx)],
               vms=[dict(id="vm-1", name="guest", runtime="libvirt", cpu_ns=int(0.125 * secs * S),
                         energy_uj=qemu)])
    if args.epoch is not None:
        msg["epoch"] = args.epoch
    if args.totals_from is not None:
        since = (t1 - args.totals_from) / S
        msg["total_epoch"] = args.total_epoch
        for z, oz in zip(zones, out_zones):
            oz["total_uj"] = int(round(z["watts"] * 1e6 * since))
            oz["active_total_uj"] = int(round(z["active"] * 1e6 * since))
            oz["idle_total_uj"] = oz["total_uj"] - oz["active_total_uj"]
    return msg


def spoil(msg, how):
    """Break one semantic rule of the estimate schema (the codec accepts it)."""
    if how == "array_length":
        msg["procs"][0]["energy_uj"] = msg["procs"][0]["energy_uj"][:1]
    elif how == "zone_sum":
        msg["zones"][0]["idle_uj"] += 1
    elif how == "over_attributed":
        msg["procs"][0]["energy_uj"][0] = msg["zones"][0]["active_uj"] + 1
    elif how == "slot":
        msg["t1"] = msg["t0"]
    return msg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="node-a")
    ap.add_argument("--start", type=int, help="t0 of the first slot, ns (default: now, on the grid)")
    ap.add_argument("--len", type=float, default=1.0, help="slot length, s")
    ap.add_argument("--slots", type=int, default=1, help="slots to emit (0: forever)")
    ap.add_argument("--realtime", action="store_true", help="emit each slot when the clock reaches its end")
    ap.add_argument("--procs", type=int, default=0)
    ap.add_argument("--sockets", type=int, default=1)
    ap.add_argument("--comm")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--all-zones", action="store_true")
    ap.add_argument("--epoch", type=int)
    ap.add_argument("--totals-from", type=int, help="add cumulative node totals counted from this time, ns")
    ap.add_argument("--total-epoch", type=int, default=7)
    ap.add_argument("--bad", help="spoil every slot: array_length, zone_sum, over_attributed, slot")
    args = ap.parse_args()
    step = int(args.len * S)
    t0 = args.start if args.start is not None else (time.time_ns() // step) * step
    n = 0
    while args.slots == 0 or n < args.slots:
        t1 = t0 + step
        if args.realtime:
            wait = (t1 - time.time_ns()) / S
            if wait > 0:
                time.sleep(wait)
        msg = slot(args, t0, t1)
        if args.bad:
            msg = spoil(msg, args.bad)
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()
        t0 = t1
        n += 1


if __name__ == "__main__":
    main()
