#!/usr/bin/python3
"""Meters of known update period and step, for `wattbus probe` and `wattbus compare`.

  probe_fake_meter.py rapl SYSFS_ROOT DIR,NAME,PERIOD_S,STEP_UJ,RANGE_UJ ...
      a powercap tree; each zone's energy_uj advances by STEP_UJ once every
      PERIOD_S seconds (wrapping past RANGE_UJ as the hardware does), written
      by rename as sysfs never shows a half-written value. Runs until killed.
  probe_fake_meter.py exec PERIOD_S STEP_UJ [RANGE_UJ]
      an exec stream meter: every 5 ms a line "meter-0 VALUE uj kind=platform"
      whose VALUE has advanced by STEP_UJ once every PERIOD_S seconds.
A stall of the writer (a loaded machine) skips updates, never bursts them,
so that every change seen is one step.
"""
import os
import sys
import time


def put(path, value):
    with open(path + ".t", "w") as f:
        f.write("%s\n" % value)
    os.rename(path + ".t", path)


def rapl(root, specs):
    zones = []
    for spec in specs:
        d, name, period, step, rng = spec.split(",")
        z = os.path.join(root, "class/powercap", d)
        os.makedirs(z, exist_ok=True)
        put(os.path.join(z, "name"), name)
        put(os.path.join(z, "max_energy_range_uj"), int(rng))
        value = int(rng) - 5 * int(step)  # wraps within the first updates
        put(os.path.join(z, "energy_uj"), value)
        zones.append([z, float(period), int(step), int(rng), value, time.monotonic() + float(period)])
    while True:
        now = time.monotonic()
        for zz in zones:
            z, period, step, rng, value, due = zz
            if now >= due:
                zz[4] = (value + step) % (rng + 1)
                put(os.path.join(z, "energy_uj"), zz[4])
                while due <= now:
                    due += period
                zz[5] = due
        time.sleep(max(0.0, min(zz[5] for zz in zones) - time.monotonic()))


def exec_meter(period, step, rng):
    t0 = time.monotonic()
    while True:
        n = int((time.monotonic() - t0) / period)
        value = 1000 + n * step
        if rng:
            value %= rng + 1
        sys.stdout.write("meter-0 %d uj kind=platform%s\n" % (value, " range=%d" % rng if rng else ""))
        sys.stdout.flush()
        time.sleep(0.005)


if __name__ == "__main__":
    if sys.argv[1] == "rapl":
        rapl(sys.argv[2], sys.argv[3:])
    else:
        exec_meter(float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)
