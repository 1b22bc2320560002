#!/usr/bin/env python3
"""Questions about a `wattbus tap` capture of usaged's messages, for the usaged bats suites.

usage: usaged_tap.py FILE cpu PID          last cpu_ns published for PID
       usaged_tap.py FILE field PID KEY    last value of KEY (cycles, ...) for PID
       usaged_tap.py FILE cgroup PID       the identity of PID's last cgroup, as JSON
       usaged_tap.py FILE exe PID          "COMM PATH" of PID's last listing: its executable's path
                                           from the exes of the capture ("-" unknown), "none" unlisted
       usaged_tap.py FILE noexe            pids listed without an exe (exe_id 0), one a line
       usaged_tap.py FILE exited COMM      how many processes named COMM were published as exited
       usaged_tap.py FILE pids [--started-before NS] PID...
                                           "L E": how many of the PIDs were listed, and listed as exited
                                           (only processes started before NS, ns since boot: not a later
                                           process that reuses one of the pids)
       A PID of cpu, field and pids may be PID@TICKS, TICKS the process's start time in clock
       ticks since boot (/proc/PID/stat field 22): only that process, not another one given the
       same pid before or after it (pids wrap in seconds on a busy host with pid_max 32768).
       usaged_tap.py FILE stat NAME        last value of usaged's stat counter NAME
       usaged_tap.py FILE src              the src of the usage messages
       usaged_tap.py FILE check            consistency: seq +1, cpu_ns never down, full every N
Python's json keeps 64-bit integers exact (jq 1.6 does not).
"""
import json
import os
import sys

TICK_NS = 1000000000 // os.sysconf("SC_CLK_TCK")


def proc_spec(arg):
    """PID or PID@TICKS: (pid, start tick or None)."""
    pid, _, ticks = arg.partition("@")
    return int(pid), int(ticks) if ticks else None


def is_proc(p, spec):
    # /proc shows the start time rounded down to the tick: one tick either way allows for a
    # start_ns taken by other rounding.
    pid, ticks = spec
    return p["pid"] == pid and (ticks is None or abs(p.get("start_ns", 0) // TICK_NS - ticks) <= 1)


def messages(path, kind):
    # The tap may be writing its last line as we read: one without its newline that does not
    # parse yet is skipped (the next read has it). Any other line that does not parse is an error.
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if not line.startswith("{"):
                continue  # the tap's own messages on stderr
            try:
                m = json.loads(line)["msg"]
            except ValueError:
                if raw.endswith("\n"):
                    raise
                continue
            if m["kind"] == kind:
                yield m


def last_proc(path, spec):
    found = None
    for m in messages(path, "usage"):
        for p in m.get("procs", []):
            if is_proc(p, spec):
                found = p
    return found


def main():
    path, cmd = sys.argv[1], sys.argv[2]
    if cmd in ("cpu", "field"):
        p = last_proc(path, proc_spec(sys.argv[3]))
        key = "cpu_ns" if cmd == "cpu" else sys.argv[4]
        print(p.get(key, 0) if p else "none")
    elif cmd == "cgroup":
        pid = int(sys.argv[3])
        ids = {}
        p = None
        for m in messages(path, "usage"):
            for c in m.get("cgroups", []):
                ids[c["id"]] = c
            for q in m.get("procs", []):
                if q["pid"] == pid:
                    p = q
        if not p:
            print("none")
        else:
            print(json.dumps(ids.get(p.get("cgroup_id", 0), {"id": p.get("cgroup_id", 0)}), sort_keys=True))
    elif cmd == "exe":
        pid = int(sys.argv[3])
        paths = {}
        p = None
        for m in messages(path, "usage"):
            for x in m.get("exes", []):
                paths[x["id"]] = x["path"]
            for q in m.get("procs", []):
                if q["pid"] == pid:
                    p = q
        if not p:
            print("none")
        else:
            print(p["comm"], paths.get(p.get("exe_id", 0), "-"))
    elif cmd == "noexe":
        pids = set()
        for m in messages(path, "usage"):
            for q in m.get("procs", []):
                if not q.get("exe_id", 0):
                    pids.add(q["pid"])
        for pid in sorted(pids):
            print(pid)
    elif cmd == "exited":
        seen = set()
        for m in messages(path, "usage"):
            for p in m.get("procs", []):
                if p.get("exited") and p["comm"] == sys.argv[3]:
                    seen.add((p["pid"], p.get("start_ns", 0)))
        print(len(seen))
    elif cmd == "pids":
        args = sys.argv[3:]
        before = None
        if args[:1] == ["--started-before"]:
            before, args = int(args[1]), args[2:]
        want = [proc_spec(a) for a in args]
        listed, exited = set(), set()
        for m in messages(path, "usage"):
            for p in m.get("procs", []):
                for w in want:
                    if is_proc(p, w) and (before is None or p.get("start_ns", 0) < before):
                        listed.add(w)
                        if p.get("exited"):
                            exited.add(w)
        print(len(listed), len(exited))
    elif cmd == "stat":
        v = "none"
        for m in messages(path, "stat"):
            for c in m.get("counters", []):
                if c["name"] == sys.argv[3]:
                    v = c["value"]
        print(v)
    elif cmd == "src":
        print(" ".join(sorted({m["src"] for m in messages(path, "usage")})))
    elif cmd == "check":
        prev_seq, last, n, fulls = None, {}, 0, []
        for m in messages(path, "usage"):
            if prev_seq is not None and m["seq"] != prev_seq + 1:
                sys.exit("seq %d after %d" % (m["seq"], prev_seq))
            prev_seq = m["seq"]
            if m.get("full"):
                fulls.append(m["seq"])
                # A full message names the path of every executable its processes run.
                have = {x["id"] for x in m.get("exes", [])}
                for p in m.get("procs", []):
                    if p.get("exe_id", 0) and p["exe_id"] not in have:
                        sys.exit("full message %d: pid %d's exe_id %d has no path" % (m["seq"], p["pid"], p["exe_id"]))
            for p in m.get("procs", []):
                k = (p["pid"], p.get("start_ns", 0))
                if p["cpu_ns"] < last.get(k, 0):
                    sys.exit("pid %d cpu_ns went down: %d < %d" % (p["pid"], p["cpu_ns"], last[k]))
                last[k] = p["cpu_ns"]
            n += 1
        print(n, " ".join(str(s) for s in fulls))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
