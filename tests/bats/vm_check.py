#!/usr/bin/env python3
"""Read the tap logs of vm_guest_netns.bats and answer one question (exit 0 yes, 1 no).

host_total LOG VM ZONE       print the VM's last total_uj in host estimd's estimates
host_stable LOG VM ZONE N    the VM's total_uj unchanged over the last N host estimates
guest_power LOG ZONE [first] print the guest powerd's last (or first) energy_uj of ZONE
guest_total LOG ZONE         print the guest estimd's last total_uj of ZONE
guest_sums LOG               every guest estimate: procs + unattributed == active per zone
"""
import json
import sys


def lines(path, topic):
    out = []
    with open(path) as f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if d.get("topic", "").startswith(topic):
                out.append(d["msg"])
    return out


def vm_totals(path, vm, zone):
    """(total_epoch, the VM's total) after each host estimate; a slot without the VM keeps it."""
    vals = []
    for m in lines(path, "estimate/"):
        names = [z["name"] for z in m.get("zones", [])]
        v = None
        for g in m.get("vms", []):
            if g["id"] == vm and g.get("total_uj") and zone in names:
                v = (m["total_epoch"], g["total_uj"][names.index(zone)])
        if v is None and vals and vals[-1][0] == m["total_epoch"]:
            v = vals[-1]
        if v is not None:
            vals.append(v)
    return vals


def main(a):
    cmd = a[0]
    if cmd == "host_total":
        v = vm_totals(a[1], a[2], a[3])
        if not v:
            return 1
        print(v[-1][1])
    elif cmd == "host_stable":
        v = vm_totals(a[1], a[2], a[3])
        n = int(a[4])
        return 0 if len(v) >= n and len(set(v[-n:])) == 1 else 1
    elif cmd == "host_epochs":
        print(len(set(e for e, _ in vm_totals(a[1], a[2], a[3]))))
    elif cmd == "guest_power":
        v = [z["energy_uj"] for m in lines(a[1], "power/") for z in m["zones"] if z["name"] == a[2]]
        if not v:
            return 1
        print(v[0] if len(a) > 3 and a[3] == "first" else v[-1])
    elif cmd == "guest_total":
        v = [z.get("total_uj", 0) for m in lines(a[1], "estimate/") for z in m["zones"] if z["name"] == a[2]]
        if not v:
            return 1
        print(v[-1])
    elif cmd == "guest_sums":
        ms = lines(a[1], "estimate/")
        if not ms:
            return 1
        for m in ms:
            if m["mode"] != "measured":
                print("not measured:", m["mode"])
                return 1
            for i, z in enumerate(m["zones"]):
                s = sum(p["energy_uj"][i] for p in m.get("procs", [])) + z.get("unattributed_uj", 0)
                if s != z.get("active_uj", 0) or z.get("active_uj", 0) + z.get("idle_uj", 0) != z.get("energy_uj", 0):
                    print("slot", m["t1"], z["name"], "procs + unattributed", s, "active", z.get("active_uj", 0))
                    return 1
        print(len(ms))
    return 0


sys.exit(main(sys.argv[1:]))
