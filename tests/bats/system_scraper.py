#!/usr/bin/python3
"""Scrape exportd instances every 100 ms until OUTDIR/stop exists and check
that no counter (a *_total series) ever goes down between two scrapes of the
same exportd instance, and that no series appears twice in one scrape (a
scraper keeps one of them: the other's value reads as the counter going
down, or up). An instance is its URL: URL arguments starting with @
name a file holding the URL, re-read at every round, so that a restarted
exportd (on a new port) starts a new baseline.

    system_scraper.py OUTDIR NAME=URL|NAME=@FILE ...

Writes OUTDIR/NAME.violations (one line per counter that went down and per
series repeated within a scrape, empty when none), OUTDIR/NAME.scrapes (successful scrapes per instance) and
OUTDIR/NAME.first (per instance: "URL" then every series value of its first
successful scrape, as "series value" lines).
"""
import os
import sys
import time
import urllib.request

out = sys.argv[1]
targets = [a.split("=", 1) for a in sys.argv[2:]]
state = {name: {"url": None, "last": {}, "scrapes": 0, "dups": set()} for name, _ in targets}
files = {name: {k: open(os.path.join(out, f"{name}.{k}"), "w")
                for k in ("violations", "scrapes", "first")} for name, _ in targets}


def counters(text):
    vals, seen, dups = {}, set(), []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        series, _, value = line.rpartition(" ")
        if series in seen:
            dups.append(series)
        seen.add(series)
        name = series.split("{", 1)[0]
        if name.endswith("_total"):
            vals[series] = float(value)
    return vals, dups


while not os.path.exists(os.path.join(out, "stop")):
    for name, spec in targets:
        st, f = state[name], files[name]
        url = spec
        if spec.startswith("@"):
            try:
                with open(spec[1:]) as uf:
                    url = uf.read().strip()
            except OSError:
                continue
            if not url:
                continue  # read between the file's truncation and its new URL
        if url != st["url"]:
            if st["url"] is not None:
                f["scrapes"].write(f"{st['url']} {st['scrapes']}\n")
            st.update(url=url, last={}, scrapes=0, dups=set())
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=2) as r:
                vals, dups = counters(r.read().decode())
        except OSError:
            continue
        for k in set(dups) - st["dups"]:
            f["violations"].write(f"{url} {k}: twice in one scrape\n")
        st["dups"].update(dups)
        if st["scrapes"] == 0:
            f["first"].write(f"{url}\n")
            for k, v in sorted(vals.items()):
                f["first"].write(f"{k} {v}\n")
        for k, v in vals.items():
            old = st["last"].get(k)
            if old is not None and v < old:
                f["violations"].write(f"{url} {k}: {old} -> {v}\n")
        st["last"].update(vals)
        st["scrapes"] += 1
    for f in files.values():
        for h in f.values():
            h.flush()
    time.sleep(0.1)
for name, _ in targets:
    st = state[name]
    if st["url"] is not None:
        files[name]["scrapes"].write(f"{st['url']} {st['scrapes']}\n")
    for h in files[name].values():
        h.close()
