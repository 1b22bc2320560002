#!/usr/bin/python3
"""Where each stage's memory goes, per mapping: each library (all its
segments), the binary, [heap] (brk), anon (mmap'd blocks, other threads'
arenas and stacks), [stack].

    smaps.py --save DIR powerd=PID usaged=PID ...   (as root, while they run;
                                 `SMAPS_DIR=DIR bench/pipeline.sh overhead N` does it)
    smaps.py DIR [--field F] [--groups]

--save keeps each stage's /proc/PID/smaps and, from /proc/PID/pagemap, the
page frame of every resident page, so that the report can also give "Alone":
the PSS each stage would have were the pipeline's five processes the only ones
on the machine (a page shared by k of the five counts 1/k in each). Pss (what
the budget is on) depends on what else runs: another wattbus on the machine
halves the library pages of both. KiB; --field Rss, Pss, Private (clean +
dirty), Alone (default); --groups: libraries, binary, [heap], anon, [stack]."""
import argparse
import collections
import os
import re
import struct
import sys

HDR = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$")
STAGES = ("powerd", "usaged", "alignd", "estimd", "exportd")


def mapping_name(n):
    n = n.strip()
    if not n:
        return "anon"
    if n.startswith("["):
        return n if n in ("[heap]", "[stack]") else "[kernel]"
    return re.sub(r"\.so[.0-9]*$", ".so", os.path.basename(n))


def save(out, pairs):
    os.makedirs(out, exist_ok=True)
    for pair in pairs:
        stage, pid = pair.split("=")
        with open("/proc/%s/smaps" % pid) as f:
            text = f.read()
        with open(os.path.join(out, stage + ".smaps"), "w") as f:
            f.write(text)
        lines = []
        with open("/proc/%s/pagemap" % pid, "rb") as pm:
            for line in text.splitlines():
                m = HDR.match(line)
                if not m or "[vsyscall]" in line:
                    continue
                lo, hi = int(m.group(1), 16) >> 12, int(m.group(2), 16) >> 12
                pm.seek(lo * 8)
                raw = pm.read((hi - lo) * 8)
                pfns = [e & ((1 << 55) - 1) for (e,) in struct.iter_unpack("<Q", raw) if e >> 63]
                if pfns:
                    lines.append("%s %s" % (mapping_name(m.group(3)), " ".join("%x" % p for p in pfns)))
        with open(os.path.join(out, stage + ".pfn"), "w") as f:
            f.write("\n".join(lines) + "\n")


def load(path, field):
    by = collections.Counter()
    name = None
    with open(path) as f:
        for line in f:
            m = HDR.match(line)
            if m:
                name = mapping_name(m.group(3))
                continue
            key = line.split(":", 1)[0]
            if key == field or (field == "Private" and key in ("Private_Clean", "Private_Dirty")):
                by[name] += int(line.split()[1])
    return by


def load_alone(d, stages):
    pages = {}
    count = collections.Counter()
    for s in stages:
        pages[s] = []
        with open(os.path.join(d, s + ".pfn")) as f:
            for line in f:
                name, *pfns = line.split()
                pages[s].append((name, pfns))
                count.update(pfns)
    data = {}
    for s in stages:
        by = collections.Counter()
        for name, pfns in pages[s]:
            by[name] += sum(4.0 / count[p] for p in pfns)
        data[s] = collections.Counter({k: int(round(v)) for k, v in by.items()})
    return data


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--save":
        return save(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--field", default="Alone")
    ap.add_argument("--groups", action="store_true")
    ap.add_argument("--min", type=int, default=64, help="rows under this many KiB in all are summed as 'other'")
    a = ap.parse_args()
    stages = [s for s in STAGES if os.path.exists(os.path.join(a.dir, s + ".smaps"))]
    if a.field == "Alone":
        data = load_alone(a.dir, stages)
    else:
        data = {s: load(os.path.join(a.dir, s + ".smaps"), a.field) for s in stages}
    if a.groups:
        for s in stages:
            g = collections.Counter()
            for k, v in data[s].items():
                g[k if k in ("[heap]", "anon", "[stack]") else "binary" if k.startswith("wattbus-") else "libraries" if ".so" in k else "other"] += v
            data[s] = g
    total = collections.Counter()
    for s in stages:
        total.update(data[s])
    rows = [k for k, v in total.most_common() if v >= a.min]
    small = [k for k in total if k not in rows]
    print("| %s KiB | %s | all |" % (a.field, " | ".join(stages)))
    print("|" + "---|" * (len(stages) + 2))
    for k in rows + (["other"] if small else []):
        keys = [k] if k != "other" else small
        vals = [sum(data[s][x] for x in keys) for s in stages]
        print("| %s | %s | %d |" % (k, " | ".join(str(v) for v in vals), sum(vals)))
    vals = [sum(data[s].values()) for s in stages]
    print("| total | %s | %d |" % (" | ".join(str(v) for v in vals), sum(vals)))


if __name__ == "__main__":
    sys.exit(main())
