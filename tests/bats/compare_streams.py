#!/usr/bin/python3
"""Two power streams of known relation, as a `wattbus record` file (docs/RECORDING.md).

  compare_streams.py FILE [--gain G] [--offset W] [--lag S] [--noise W] [--drop N] [--gain2 G2]
                     [--seconds S] [--seed N] [--second-zone]

Host "ref", zone "platform": a reference meter sampled every 0.25 s whose
power is a pseudo-random staircase (a new level in 40..160 W every 1-4 s).
Host "dut", zone "meter-0": the meter under test, sampled every 0.5 s at
another phase (0.1 s after the reference's grid), that reads
G * P(t - LAG) + OFFSET plus white noise of NOISE W (standard deviation)
per sample interval. Both are cumulative uJ counters, as powerd publishes them.
--drop N leaves out every Nth dut message (its seq still advances: a loss).
--gain2 G2: the meter under test drifts to gain G2 for the second half.
--second-zone: the reference's messages also carry zone "dram-0", read at the same instants (true
lag 0): 0.25 * P(t) + 4 W plus a staircase of its own (0..5 W, a new level every 0.2-2 s) and the
white noise of --noise.
"""
import argparse
import random

import msgpack

T0 = 1_800_000_000 * 10**9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--gain", type=float, default=1.0)
    ap.add_argument("--offset", type=float, default=0.0)
    ap.add_argument("--lag", type=float, default=0.0)
    ap.add_argument("--noise", type=float, default=0.0)
    ap.add_argument("--drop", type=int, default=0)
    ap.add_argument("--gain2", type=float)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--second-zone", action="store_true")
    ap.add_argument("--host-b", default="dut", help="B's host name (cli_names.bats: hostile names)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    # The staircase: (start_s, watts), from well before 0 to past the end.
    steps, t = [], -10.0
    while t < a.seconds + 10:
        steps.append((t, rng.uniform(40, 160)))
        t += rng.uniform(1, 4)

    own, t = [], -10.0
    while t < a.seconds + 10:
        own.append((t, rng.uniform(0, 5)))
        t += rng.uniform(0.2, 2)

    def energy_j(t, steps=steps):
        """Energy of a staircase from -10 s to t (its exact integral)."""
        e = 0.0
        for i, (s, w) in enumerate(steps):
            end = steps[i + 1][0] if i + 1 < len(steps) else float("inf")
            if t <= s:
                break
            e += w * (min(t, end) - s)
        return e

    records = []

    def msg(host, src, seq, t_s, interval_ns, zone, kind, uj, more=()):
        t_ns = T0 + int(round(t_s * 1e9))
        body = {"v": 1, "kind": "power", "host": host, "src": src, "epoch": 7, "seq": seq, "t": t_ns,
                "interval_ns": interval_ns,
                "zones": [{"name": zone, "zone": kind, "source": "exec", "energy_uj": uj}] +
                [{"name": z, "zone": k, "source": "exec", "energy_uj": e} for z, k, e in more]}
        records.append([t_ns + 2_000_000, "power/" + host, msgpack.packb(body, use_bin_type=True)])

    base = energy_j(0)
    n = int(a.seconds / 0.25)
    dram_e = 3 * 10**8
    for i in range(n + 1):
        t = i * 0.25
        more = ()
        if a.second_zone:
            if i:
                e = 0.25 * (energy_j(t) - energy_j(t - 0.25)) + 4 * 0.25
                e += energy_j(t, own) - energy_j(t - 0.25, own) + rng.gauss(0, a.noise) * 0.25
                dram_e += max(0, int(e * 1e6))
            more = (("dram-0", "dram", dram_e),)
        msg("ref", "powerd", i + 1, t, 250_000_000, "platform", "platform",
            10**9 + int((energy_j(t) - base) * 1e6), more)
    dut_e, prev_t = 5 * 10**8, None
    for i in range(int(a.seconds / 0.5)):
        t = 0.1 + i * 0.5
        if prev_t is not None:
            dt = t - prev_t
            g = a.gain2 if a.gain2 is not None and t > a.seconds / 2 else a.gain
            e = g * (energy_j(t - a.lag) - energy_j(prev_t - a.lag)) + a.offset * dt
            e += rng.gauss(0, a.noise) * dt
            dut_e += max(0, int(e * 1e6))
        prev_t = t
        if a.drop and i % a.drop == a.drop - 1:
            continue
        msg(a.host_b, "meter.sh", i + 1, t, 500_000_000, "meter-0", "platform", dut_e)
    records.sort(key=lambda r: r[0])
    with open(a.file, "wb") as f:
        f.write(msgpack.packb({"format": "wattbus-record", "version": 1, "endpoint": "synthetic",
                               "start_ns": T0}, use_bin_type=True))
        for r in records:
            f.write(msgpack.packb(r, use_bin_type=True))


if __name__ == "__main__":
    main()
