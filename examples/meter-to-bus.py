#!/usr/bin/env python3
"""Stand in for powerd during hardware bring-up: print one `power` message per
interval as a JSON line, for `wattbus pub` to put on the bus.

    ./meter-to-bus.py --zone platform --energy-file /path/to/counter_uj \
        | wattbus pub --src meter-to-bus ipc:///run/wattbus/powerd.sock

The meter here is a file holding a cumulative microjoule counter (what a BMC
poller or a lab power analyser script can keep up to date), or a constant
--watts for a dry run. Replace read_energy_uj() with whatever your hardware
offers; everything downstream (alignd, estimd, exportd) works unchanged.
Only the standard library is used.
"""
import argparse
import json
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default=socket.gethostname(), help="host the energy belongs to")
    ap.add_argument("--zone", default="platform", help="zone kind: platform, package, dram, gpu, ...")
    ap.add_argument("--name", help="zone name (default: ZONE-0)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--energy-file", help="file holding a cumulative counter in microjoules")
    src.add_argument("--watts", type=float, help="constant power, for a dry run")
    ap.add_argument("--count", type=int, default=0, help="stop after this many samples (0: never)")
    args = ap.parse_args()

    interval_ns = int(args.interval * 1e9)
    start_ns = time.time_ns()

    def read_energy_uj(now_ns):
        if args.energy_file:
            with open(args.energy_file) as f:
                return int(f.read().strip())
        return int(args.watts * (now_ns - start_ns) / 1000)

    sent = 0
    while args.count == 0 or sent < args.count:
        # Sample on the wall-clock grid, as powerd does, so slots line up across hosts.
        now = time.time_ns()
        t = (now // interval_ns + 1) * interval_ns
        time.sleep((t - now) / 1e9)
        try:
            energy_uj = read_energy_uj(t)
        except (OSError, ValueError) as e:
            print(f"meter-to-bus: cannot read the meter: {e}", file=sys.stderr)
            continue
        msg = {"kind": "power", "host": args.host, "t": t, "interval_ns": interval_ns,
               "zones": [{"name": args.name or f"{args.zone}-0", "zone": args.zone,
                          "source": "exec", "path": args.energy_file or "constant",
                          "energy_uj": energy_uj}]}
        print(json.dumps(msg), flush=True)
        sent += 1


if __name__ == "__main__":
    main()
