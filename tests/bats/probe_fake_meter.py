#!/usr/bin/python3
"""Meters of known update period and step, for `wattbus probe` and `wattbus compare`.

  probe_fake_meter.py rapl SYSFS_ROOT DIR,NAME,PERIOD_S,STEP_UJ,RANGE_UJ ...
      a powercap tree; each zone's energy_uj advances by STEP_UJ once every
      PERIOD_S seconds (wrapping past RANGE_UJ as the hardware does), written
      by rename as sysfs never shows a half-written value. Runs until killed.
      With --follow-cpu first, each step is scaled by 0.3 + 0.7 * this machine's
      CPU utilisation since the previous update (/proc/stat): a meter that
      follows the load, for demonstrations (docs/BRINGUP.md).
  probe_fake_meter.py exec PERIOD_S STEP_UJ [RANGE_UJ]
      an exec stream meter: every 5 ms a line "meter-0 VALUE uj kind=platform"
      whose VALUE has advanced by STEP_UJ once every PERIOD_S seconds.
  probe_fake_meter.py hwmon FILE PERIOD_S LOW_UW HIGH_UW
      a power reading (an ACPI meter's power1_average) that alternates between
      LOW_UW and HIGH_UW once every PERIOD_S.
  probe_fake_meter.py board ENERGY_FILE GAIN OFFSET_W PERIOD_S
      a board meter that reads another meter's energy_uj every PERIOD_S and
      prints "board VALUE uj kind=platform" with VALUE growing by GAIN times
      that meter's energy plus OFFSET_W watts.
A stall of the writer (a loaded machine) skips updates, never bursts them,
so that every change seen is one step.
With PROBE_FAKE_LOG set to a file, each update is appended to it as a line
"NAME WALL_TIME_S ENERGY_UJ" (the energy unwrapped; hwmon: the reading in uW):
what really happened, for a test to hold probe's figures to, as a loaded
machine delays the writer and its real period is then not the nominal one.
"""
import os
import sys
import time

LOG = os.environ.get("PROBE_FAKE_LOG")


def log(name, value):
    if LOG:
        with open(LOG, "a") as f:
            f.write("%s %.6f %d\n" % (name, time.time(), value))


def put(path, value):
    with open(path + ".t", "w") as f:
        f.write("%s\n" % value)
    os.rename(path + ".t", path)


def cpu_busy_total():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def rapl(root, specs):
    follow = specs and specs[0] == "--follow-cpu"
    if follow:
        specs = specs[1:]
    last = cpu_busy_total()
    zones = []
    for spec in specs:
        d, name, period, step, rng = spec.split(",")
        z = os.path.join(root, "class/powercap", d)
        os.makedirs(z, exist_ok=True)
        put(os.path.join(z, "name"), name)
        put(os.path.join(z, "max_energy_range_uj"), int(rng))
        value = int(rng) - 5 * int(step)  # wraps within the first updates
        put(os.path.join(z, "energy_uj"), value)
        zones.append([z, float(period), int(step), int(rng), value, time.monotonic() + float(period), last, name, value])
        log(name, value)
    while True:
        now = time.monotonic()
        for zz in zones:
            z, period, step, rng, value, due, last = zz[:7]
            if now >= due:
                if follow:
                    cur = cpu_busy_total()
                    if cur[1] > last[1]:  # /proc/stat moves in ticks: wait for one
                        zz[6] = cur
                        util = (cur[0] - last[0]) / (cur[1] - last[1])
                        step = int(step * (0.3 + 0.7 * util))
                    else:
                        zz[5] = now + period
                        continue
                zz[4] = (value + step) % (rng + 1)
                put(os.path.join(z, "energy_uj"), zz[4])
                zz[8] += step
                log(zz[7], zz[8])
                while due <= now:
                    due += period
                zz[5] = due
        time.sleep(max(0.0, min(zz[5] for zz in zones) - time.monotonic()))


def exec_meter(period, step, rng):
    t0, last = time.monotonic(), None
    while True:
        n = int((time.monotonic() - t0) / period)
        value = 1000 + n * step
        if rng:
            value %= rng + 1
        sys.stdout.write("meter-0 %d uj kind=platform%s\n" % (value, " range=%d" % rng if rng else ""))
        sys.stdout.flush()
        if n != last:  # the line that shows a new value: when the reader can see it
            log("meter-0", 1000 + n * step)
            last = n
        time.sleep(0.005)


def hwmon(path, period, low, high):
    due, n = time.monotonic(), 0
    while True:
        put(path, high if n % 2 else low)
        log("hwmon", high if n % 2 else low)
        n += 1
        due += period
        while due <= time.monotonic():
            due += period
        time.sleep(max(0.0, due - time.monotonic()))


def board(path, gain, offset_w, period):
    def read():
        with open(path) as f:
            return int(f.read())
    prev, t_prev, value = read(), time.monotonic(), 1000
    while True:
        time.sleep(period)
        cur, now = read(), time.monotonic()
        value += int(gain * (cur - prev) + offset_w * (now - t_prev) * 1e6)
        prev, t_prev = cur, now
        sys.stdout.write("board %d uj kind=platform\n" % value)
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1] == "rapl":
        rapl(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "hwmon":
        hwmon(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "board":
        board(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    else:
        exec_meter(float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)
