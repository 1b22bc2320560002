#!/usr/bin/python3
"""A fake RAPL meter for the fault suites: a powercap tree (package-0 and its
dram subzone) whose energy_uj advance at fixed watts while the control file
exists, and stand still while it does not, written atomically every 20 ms.

    system_fake_meter.py SYSFS_ROOT CONTROL_FILE PACKAGE_W DRAM_W

The tree is created at start with both counters at a fixed non-zero value.
The test reads the files themselves for the energy the meter advanced.
"""
import os
import sys
import time

root, ctl = sys.argv[1], sys.argv[2]
watts = [float(sys.argv[3]), float(sys.argv[4])]
zones = [os.path.join(root, "class/powercap/intel-rapl:0"),
         os.path.join(root, "class/powercap/intel-rapl:0:0")]
names = ["package-0", "dram"]
energy = [1_000_000_000.0, 500_000_000.0]  # uJ; floats, written floored


def put(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{value}\n")
    os.replace(tmp, path)


for z, n in zip(zones, names):
    os.makedirs(z, exist_ok=True)
    put(os.path.join(z, "name"), n)
    put(os.path.join(z, "max_energy_range_uj"), 262143328850)
for z, e in zip(zones, energy):
    put(os.path.join(z, "energy_uj"), int(e))

last = time.monotonic()
while True:
    time.sleep(0.02)
    now = time.monotonic()
    if os.path.exists(ctl):
        for i in range(2):
            energy[i] += watts[i] * (now - last) * 1e6
        for z, e in zip(zones, energy):
            put(os.path.join(z, "energy_uj"), int(e))
    last = now
