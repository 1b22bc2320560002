#!/usr/bin/python3
"""bench/run.sh's table: figures (key=value lines) -> markdown on stdout.

  report.py FIGURES STATUS

FIGURES holds the BENCH lines of every benchmark (without "BENCH "); STATUS
holds "name exit_status seconds" per benchmark run; usaged.sh prints no BENCH
lines, so its log (logs/usaged.log next to FIGURES) is read for its figures.
Exits 1 when a benchmark could not run at all or left a figure out.
"""
import os
import re
import sys

fig_path, status_path = sys.argv[1:3]
F = {}
for line in open(fig_path):
    if "=" in line:
        k, v = line.rstrip("\n").split("=", 1)
        F[k] = v
status = {}
for line in open(status_path):
    name, rc, secs = line.split()
    status[name] = (int(rc), int(secs))

# usaged.sh's human output (owned by usaged; read, not changed)
ulog = os.path.join(os.path.dirname(fig_path), "logs", "usaged.log")
if os.path.exists(ulog):
    for line in open(ulog):
        m = re.match(r"(empty program )?slowdown: (-?[\d.]+) %", line)
        if m:
            F["usaged.empty_slowdown_pct" if m.group(1) else "usaged.slowdown_pct"] = m.group(2)
        m = re.match(r"(without|with) usaged:.*median ([\d.]+) us", line)
        if m:
            F["usaged.switch_%s_us" % m.group(1)] = m.group(2)
        m = re.match(r"(bpf|procfs)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)(?:\s+([\d.]+))?\s*$", line)
        if m:
            F["usaged.%s.%s.cpu_pct" % (m.group(1), m.group(2))] = m.group(4)
            F["usaged.%s.%s.rss_mib" % (m.group(1), m.group(2))] = m.group(5)
            if m.group(6):
                F["usaged.%s.%s.peak_mib" % (m.group(1), m.group(2))] = m.group(6)
        m = re.match(r"(on_switch|empty_switch): (\d+) calls, ([\d.]+) ns per call", line)
        if m:
            F["usaged.%s_ns" % m.group(1)] = m.group(3)
        if line.startswith("note: not root or no BTF"):
            F["usaged.note"] = "not root or no BTF: bpf figures skipped"

missing = []


def num(key):
    v = F.get(key)
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def fmt(key, unit="", digits=1, scale=1.0, what=None):
    """The figure, or "not measured" (counted as missing when it is a main row's, named by what)."""
    v = num(key)
    if v is None:
        if what:
            missing.append(what)
        return "not measured"
    return "%.*f%s" % (digits, v * scale, unit)


def within(key, limit, scale=1.0):
    v = num(key)
    if v is None:
        return "-"
    return "yes" if v * scale < limit else "**no**"


def ratio(peer_key, ours_key):
    p, o = num(peer_key), num(ours_key)
    if p is None or o is None or o <= 0 or p < 0:  # a cost below 0 (a noisy difference) has no ratio
        return "-"
    return "%.1fx" % (p / o)


KIB = 1 / 1024
n_small, n_big = "1000", F.get("machine.big_procs", "10000")
n_exp = F.get("machine.exportd_procs", "10000")
quick = F.get("machine.quick") == "1"


def label_of(n):
    return "{:,}".format(int(n))


def vs(key, budget, scale=1.0):
    """figure / budget, e.g. "0.52x": below 1 is within."""
    v = num(key)
    return "-" if v is None else "%.2fx" % (v * scale / budget)
dur = F.get("machine.duration", "?")
out = []
w = out.append
w("# wattbus benchmarks")
w("")
w("%s CPUs (%s), kernel %s, root: %s; load average %s at the start, %s at the end; %s s in all; %s, revision %s."
  % (F.get("machine.cpus", "?"), F.get("machine.cpu", "?"), F.get("machine.kernel", "?"), F.get("machine.root", "?"),
     F.get("machine.load_start", "?"), F.get("machine.load_end", "?"), F.get("machine.seconds", "?"),
     F.get("machine.date", "?"), F.get("machine.revision", "?")))
w("")
try:
    load, cpus = float(F.get("machine.load_start", "0").split()[0]), int(F.get("machine.cpus", "1"))
except ValueError:
    load, cpus = 0.0, 1
if quick:
    w("**Quick run (BENCH_QUICK=1): small sizes and short windows, to check that every benchmark runs; "
      "the figures say nothing about the budgets.**")
    w("")
if load > cpus:
    w("**The machine was busy when the run started (load average %.1f on %d CPUs): latencies and CPU shares "
      "are pessimistic; rerun on a quiet machine to compare.**" % (load, cpus))
    w("")
w("Peer figures are measured in the same run on the same machine; ratio = peer / wattbus (above 1: wattbus is "
  "cheaper). Nothing here is asserted; see bench/README.md for how each figure is taken.")
w("")
w("| what | wattbus | budget (docs/ARCHITECTURE.md) | within (figure / budget) | peer | peer's figure | ratio |")
w("|------|---------|-------------------------------|--------------------------|------|---------------|-------|")
KEPLER = "Kepler | not packaged in Debian: not measured (bench/README.md) | -"
PEAK_BUDGET = 1.5
# DESIGN.md's figures, and the budgets docs/ARCHITECTURE.md holds instead where a floor measured
# in the same run (the bus alone, an empty program on usaged's hook) is at or above them: a
# multiple of, or a margin over, what the floor costs on the machine at hand.
CPU_DESIGN, PSS_DESIGN_MIB, SWITCH_DESIGN, E2E_DESIGN_MS = 0.25, 10, 3, 50
CPU_X_FLOOR, PSS_OVER_FLOOR_MIB, SWITCH_OVER_EMPTY, E2E_X_CPU = 3, 8, 1, 1.2


def floor_budget(floor_key, design, rule, rule_name, unit, digits, scale=1.0):
    """(limit, cell): DESIGN.md's figure, or rule over the floor measured in this run where that
    is higher (a floor of a noisy run can come out below 0: taken as 0)."""
    f = num(floor_key)
    if f is None:
        return design, "< %g%s (DESIGN.md; no floor measured)" % (design, unit)
    limit = rule(max(f * scale, 0.0))
    if limit <= design:
        return design, "< %g%s (DESIGN.md; %s: < %.*f here)" % (design, unit, rule_name, digits, limit)
    return limit, "< %.*f%s here (%s; DESIGN.md: < %g%s)" % (digits, limit, unit, rule_name, design, unit)


def with_wakeups(pre, what=None):
    """A run's total CPU, with its wake-ups a second when it was measured."""
    v = fmt(pre + "total.cpu_pct", " %", 3, what=what)
    if num(pre + "total.cpu_pct") is None:
        return v
    return "%s (%s wake-ups/s)" % (v, fmt(pre + "total.wakeups_per_s", "", 1))


CPU_BUDGET, cpu_cell = floor_budget("pipeline.floor.total.cpu_pct", CPU_DESIGN, lambda f: CPU_X_FLOOR * f,
                                    "%dx the bus alone" % CPU_X_FLOOR, " % of one core", 3)
PSS_BUDGET_MIB, pss_cell = floor_budget("pipeline.floor.total.pss_kib", PSS_DESIGN_MIB,
                                        lambda f: f + PSS_OVER_FLOOR_MIB,
                                        "the bus alone + %d MiB" % PSS_OVER_FLOOR_MIB, " MiB in total", 1, KIB)
SWITCH_BUDGET, switch_cell = floor_budget("usaged.empty_slowdown_pct", SWITCH_DESIGN,
                                          lambda f: f + SWITCH_OVER_EMPTY,
                                          "an empty program on the hook + %d point" % SWITCH_OVER_EMPTY, " %", 2)
for n in (n_small, n_big):
    p = "pipeline.%s." % n
    label = "%s live processes" % label_of(n)
    small = n == n_small
    w("| whole pipeline CPU (user+sys), 1 s slots, %s, %s s | %s | %s | %s | %s |"
      % (label, F.get(p + "seconds", dur), fmt(p + "total.cpu_pct", " % of one core", 3, what="pipeline CPU at " + n),
         cpu_cell if small else "(set at 1,000)",
         "%s (%s)" % (within(p + "total.cpu_pct", CPU_BUDGET), vs(p + "total.cpu_pct", CPU_BUDGET)) if small else "-",
         KEPLER))
    w("| whole pipeline PSS (sum of the five, /proc/PID/smaps_rollup, at the end), %s | %s (RSS %s, peak RSS %s) | %s | %s | %s |"
      % (label, fmt(p + "total.pss_kib", " MiB", 1, KIB, what="pipeline PSS at " + n),
         fmt(p + "total.rss_kib", " MiB", 1, KIB), fmt(p + "total.hwm_kib", " MiB", 1, KIB),
         pss_cell if small else "(set at 1,000)",
         "%s (%s)" % (within(p + "total.pss_kib", PSS_BUDGET_MIB, KIB), vs(p + "total.pss_kib", PSS_BUDGET_MIB, KIB))
         if small else "-", KEPLER))
    if small:
        # The floor: the same messages through five bare czmq processes (pipeline.sh floor)
        w("| whole pipeline CPU against the bus alone, %s | %s | - | - | the bus alone: five bare czmq processes carrying the same messages, same load (bench/bus_floor.c) | %s | %s |"
          % (label, with_wakeups(p), with_wakeups("pipeline.floor.", what="bus floor CPU"),
             ratio("pipeline.floor.total.cpu_pct", p + "total.cpu_pct")))
        w("| whole pipeline PSS against the bus alone, %s | %s | - | - | the bus alone, as above | %s | %s |"
          % (label, fmt(p + "total.pss_kib", " MiB", 1, KIB), fmt("pipeline.floor.total.pss_kib", " MiB", 1, KIB, what="bus floor PSS"),
             ratio("pipeline.floor.total.pss_kib", p + "total.pss_kib")))
        worst, worst_r = None, None
        for st in ("powerd", "usaged", "alignd", "estimd", "exportd"):
            h, r = num(p + st + ".hwm_kib"), num(p + st + ".rss_kib")
            if h is not None and r:
                if worst_r is None or h / r > worst_r:
                    worst, worst_r = st, h / r
        F[p + "worst_peak_ratio"] = "%.3f" % worst_r if worst_r is not None else ""
        w("| highest stage peak (VmHWM) / steady RSS (VmRSS at the end), %s | %s | < %gx | %s | - | - | - |"
          % (label, "%.2fx (%s)" % (worst_r, worst) if worst_r is not None else "not measured", PEAK_BUDGET,
             "%s (%s)" % (within(p + "worst_peak_ratio", PEAK_BUDGET), vs(p + "worst_peak_ratio", PEAK_BUDGET))))
sp = "{:,}".format(int(F.get("scale.procs", "100000")))
spk = F.get("scale.procs", "100000")
for st in ("alignd", "estimd", "exportd"):
    w("| one slot of %s processes: %s, message in -> out (median of %s; max) | %s (max %s) | (the three < 100 ms) | - | - | - | - |"
      % (sp, st, F.get("scale.slots", "?"), fmt("scale.%s_ms" % st, " ms"), fmt("scale.%s_max_ms" % st, " ms")))
# End to end, the stages run one after the other: the budget is on what the sockets and the
# waits add to their CPU (measured beside it), the CPU's own on the instructions (callgrind).
cpu_ms = num("scale.total_cpu_ms")
E2E_BUDGET = E2E_X_CPU * cpu_ms if cpu_ms else E2E_DESIGN_MS
w("| one slot of %s processes: alignd + estimd + exportd, usage sent -> on /metrics | %s (first slot %s) | %s | %s (%s) | - | - | - |"
  % (sp, fmt("scale.total_ms", " ms", what="scale"), fmt("scale.first_total_ms", " ms"),
     "< %.1f ms here (%gx the three stages' CPU, below; DESIGN.md: < %d ms on a quiet machine)"
     % (E2E_BUDGET, E2E_X_CPU, E2E_DESIGN_MS) if cpu_ms else "< %d ms" % E2E_DESIGN_MS,
     within("scale.total_ms", E2E_BUDGET), vs("scale.total_ms", E2E_BUDGET)))
w("| one slot of %s processes: CPU time of alignd + estimd + exportd (all threads, schedstat; median) | %s (alignd %s, estimd %s, exportd %s) | - | - | - | - | - |"
  % (sp, fmt("scale.total_cpu_ms", " ms"), fmt("scale.alignd_cpu_ms", " ms"), fmt("scale.estimd_cpu_ms", " ms"),
     fmt("scale.exportd_cpu_ms", " ms")))
cp = "{:,}".format(int(F.get("callgrind.procs", "100000")))
w("| one slot of %s processes: alignd + estimd + exportd, instructions (callgrind, in-process: decode + work + encode) | %s G (alignd %s, estimd %s, exportd %s) | < 0.5 G | %s (%s) | - | - | - |"
  % (cp, fmt("callgrind.total_ir", "", 3, 1e-9, what="callgrind"), fmt("callgrind.alignd_ir", " G", 3, 1e-9),
     fmt("callgrind.estimd_ir", " G", 3, 1e-9), fmt("callgrind.exportd_ir", " G", 3, 1e-9),
     within("callgrind.total_ir", 0.5, 1e-9), vs("callgrind.total_ir", 0.5, 1e-9)))
fi = F.get("freshness.interval", "200ms")
w("| freshness: slot end -> value on /metrics, median over %s slots (%s slots) | %s | < 100 ms locally | %s | - | - | - |"
  % (F.get("freshness.slots", "100"), fi, fmt("freshness.median_ms", " ms", what="freshness"), within("freshness.median_ms", 100)))
w("| freshness: p99 (max %s) | %s | < 100 ms locally | %s | - | - | - |"
  % (fmt("freshness.max_ms", " ms"), fmt("freshness.p99_ms", " ms"), within("freshness.p99_ms", 100)))
w("| context-switch microbenchmark slowdown with usaged's eBPF attached | %s | %s | %s (%s) | a program on the same hook that does nothing (bench/switch_floor.bpf.c), the same rounds | %s | %s |"
  % (fmt("usaged.slowdown_pct", " %", 2, what="context-switch slowdown"), switch_cell,
     within("usaged.slowdown_pct", SWITCH_BUDGET), vs("usaged.slowdown_pct", SWITCH_BUDGET),
     fmt("usaged.empty_slowdown_pct", " %", 2),
     ratio("usaged.empty_slowdown_pct", "usaged.slowdown_pct")))
w("| usaged CPU at %s live processes, 1 s interval, bpf mode | %s | - | - | usaged procfs mode (/proc/PID/stat, Kepler >= 0.10's method) | %s | %s |"
  % (label_of(n_big), fmt("usaged.bpf.%s.cpu_pct" % n_big, " % of one core", 3, what="usaged bpf CPU"),
     fmt("usaged.procfs.%s.cpu_pct" % n_big, " % of one core", 3, what="usaged procfs CPU"),
     ratio("usaged.procfs.%s.cpu_pct" % n_big, "usaged.bpf.%s.cpu_pct" % n_big)))
pr = num("peer.node_exporter.us_per_scrape"), num("powerd.1s.us_per_sample")
pr = pr[0] / pr[1] if None not in pr and pr[1] else None
w("| powerd CPU per reading of 8 RAPL zones (1 s interval, stat messages included) | %s | 10x cheaper than the peer | %s | prometheus-node-exporter, rapl collector only, same fake tree, CPU per scrape | %s | %s |"
  % (fmt("powerd.1s.us_per_sample", " us", what="powerd CPU"), "-" if pr is None else "yes" if pr >= 10 else "**no**",
     fmt("peer.node_exporter.us_per_scrape", " us", 0, what="node-exporter CPU"),
     ratio("peer.node_exporter.us_per_scrape", "powerd.1s.us_per_sample")))
w("| powerd CPU per reading against the bus alone (node-exporter / the bus alone: %s, the most a reader on this bus could reach) | %s | - | - | the bus alone: a 1 s timer sending a message of the same size, nothing read (bench/bus_floor.c), same window | %s | %s |"
  % (ratio("peer.node_exporter.us_per_scrape", "powerd.floor.us_per_tick"), fmt("powerd.1s.us_per_sample", " us"),
     fmt("powerd.floor.us_per_tick", " us", what="bus floor per message"),
     ratio("powerd.floor.us_per_tick", "powerd.1s.us_per_sample")))
w("| powerd RSS | %s | - | - | prometheus-node-exporter RSS | %s | %s |"
  % (fmt("powerd.1s.rss_kib", " MiB", 1, KIB), fmt("peer.node_exporter.rss_kib", " MiB", 1, KIB),
     ratio("peer.node_exporter.rss_kib", "powerd.1s.rss_kib")))
for key, what in (("render", "plain"), ("render_gzip1", "+ gzip level 1 (the default)"),
                  ("render_gzip6", "+ gzip level 6")):
    pre = "exportd.p%s.z1." % n_exp
    w("| exportd /metrics render, %s processes x 1 zone (%s samples), %s | %s (%s bytes) | < 50 ms | %s | - | - | - |"
      % (label_of(n_exp), F.get(pre + "samples", "?"), what, fmt(pre + key + "_ms", " ms", 2, what="exportd " + key), F.get(pre + key + "_bytes", "?"),
         within(pre + key + "_ms", 50)))
for enc in ("identity", "gzip"):
    pre = "exportd.daemon.scrape_%s_" % enc
    w("| exportd daemon, one curl scrape over loopback, %s processes x 2 zones, %s | %s (%s bytes) | < 50 ms | %s | - | - | - |"
      % (label_of(n_exp), enc, fmt(pre + "ms", " ms", what="exportd scrape " + enc), F.get(pre + "bytes", "?"), within(pre + "ms", 50)))
if "exportd.daemon.rss_growth_40_scrapes_kib" in F:
    w("| exportd daemon, RSS growth over 40 more scrapes (20 plain, 20 gzip), %s processes x 2 zones | %s KiB (peak %s KiB) | no growth | %s | - | - | - |"
      % (label_of(n_exp), F["exportd.daemon.rss_growth_40_scrapes_kib"], F.get("exportd.daemon.hwm_kib", "?"),
         "yes" if num("exportd.daemon.rss_growth_40_scrapes_kib") is not None and num("exportd.daemon.rss_growth_40_scrapes_kib") <= 0 else "**no**"))
w("| energy lost across %s counter wraps, a powerd restart and an alignd restart (node level: alignd's slots vs the increments written) | %s | 0 uJ | %s | - | - | - |"
  % (F.get("loss.wraps", "?"), fmt("loss.lost_uj", " uJ", 0, what="energy lost"), "yes" if num("loss.lost_uj") == 0 else
     ("**no**" if num("loss.lost_uj") is not None else "-")))
w("")

w("## Pipeline overhead per stage")
w("")
w("1 s slots, %s s windows; %s and %s processes on the machine in all (sleepers, 3 busy ones at 10 %% load, "
  "everything else running). Modes: %s. CPU in %% of one core; RSS (VmRSS) and PSS at the end and peak RSS "
  "(VmHWM), in MiB; wake-ups: context switches per second; writes: write() calls per second."
  % (F.get("pipeline.1000.seconds", dur), F.get("pipeline.1000.machine_procs", "?"),
     F.get("pipeline.%s.machine_procs" % n_big, "?"), F.get("pipeline.1000.modes", "?").replace(",", ", ")))
w("")
for n in (n_small, "floor", n_big):
    w("%s:" % ("The bus alone (bench/bus_floor.c: the 1,000-process run's messages through five bare czmq "
                "processes doing nothing else, same load)" if n == "floor" else "%s processes" % label_of(n)))
    w("")
    w("| stage | CPU | RSS | peak RSS | peak / RSS | PSS | wake-ups/s | writes/s |")
    w("|-------|-----|-----|----------|------------|-----|------------|----------|")
    for st in ("powerd", "usaged", "alignd", "estimd", "exportd", "total"):
        p = "pipeline.%s.%s." % (n, st)
        h, r = num(p + "hwm_kib"), num(p + "rss_kib")
        pr = "%.2fx" % (h / r) if h is not None and r and st != "total" else "-"
        w("| %s | %s | %s | %s | %s | %s | %s | %s |"
          % (st, fmt(p + "cpu_pct", " %", 3), fmt(p + "rss_kib", "", 1, KIB), fmt(p + "hwm_kib", "", 1, KIB), pr,
             fmt(p + "pss_kib", "", 1, KIB), fmt(p + "wakeups_per_s", "", 1), fmt(p + "writes_per_s", "", 1)))
    w("")
w("Process series on /metrics at the end: %s (1,000 run), %s (%s run)."
  % (F.get("pipeline.1000.process_series", "?"), F.get("pipeline.%s.process_series" % n_big, "?"), label_of(n_big)))
w("")

w("## One slot of %s processes, in-process (no sockets), for where the time goes" % sp)
w("")
w("| stage | step | median |")
w("|-------|------|--------|")
w("| alignd | align alone (usage structs already decoded) | %s |" % fmt("alignd_engine_ms", " ms", 1))
w("| alignd | decode usage + align + encode aligned | %s |" % fmt("alignd_path_ms", " ms", 1))
w("| estimd | attribute (estimator_slot) | %s |" % fmt("estimd_attrib_ms", " ms", 1))
w("| estimd | encode the estimate | %s |" % fmt("estimd_encode_ms", " ms", 1))
pre = "exportd.p%s.z1." % spk
w("| exportd | apply one estimate slot | %s |" % fmt(pre + "apply_ms", " ms", 1))
w("| exportd | render /metrics, plain (%s samples) | %s |" % (F.get(pre + "samples", "?"), fmt(pre + "render_ms", " ms", 1)))
w("| exportd | render /metrics + gzip level 1 | %s |" % fmt(pre + "render_gzip1_ms", " ms", 1))
w("")
w("Peak RSS during the daemon run: alignd %s MiB, estimd %s MiB, exportd %s MiB."
  % (fmt("scale.alignd.hwm_kib", "", 1, KIB), fmt("scale.estimd.hwm_kib", "", 1, KIB),
     fmt("scale.exportd.hwm_kib", "", 1, KIB)))
w("")

w("## Details")
w("")
w("- powerd at 10 ms: %s per sample; subscriber sees a 1 s sample %s after its grid time (median; p99 %s)."
  % (fmt("powerd.10ms.us_per_sample", " us"), fmt("powerd.1s.tap_p50_us", " us", 0), fmt("powerd.1s.tap_p99_us", " us", 0)))
w("- Context switches (perf bench sched pipe or stress-ng --switch, one CPU): %s per round trip without usaged, "
  "%s with it (medians)%s."
  % (fmt("usaged.switch_without_us", " us", 3), fmt("usaged.switch_with_us", " us", 3),
     ("; the switch program's own time %s ns per call (kernel.bpf_stats)" % F["usaged.on_switch_ns"]
      if "usaged.on_switch_ns" in F else "")
     + ("; an empty program on the same hook: %s ns per call, %s %% slower than without"
        % (F["usaged.empty_switch_ns"], F.get("usaged.empty_slowdown_pct", "?"))
        if "usaged.empty_switch_ns" in F else "")))
w("- usaged RSS at %s processes (peak, VmHWM, in brackets): bpf %s (%s) MiB, procfs %s (%s) MiB."
  % (label_of(n_big), F.get("usaged.bpf.%s.rss_mib" % n_big, "?"), F.get("usaged.bpf.%s.peak_mib" % n_big, "?"),
     F.get("usaged.procfs.%s.rss_mib" % n_big, "?"), F.get("usaged.procfs.%s.peak_mib" % n_big, "?")))
w("- Energy: %s slots, %s not contiguous, %s powerd zones bridged, alignd state resumed: %s. A wrap while powerd "
  "is down cannot be told from a counter reset and is flagged as a gap by design (docs/alignd.md); the tests "
  "that check the same: tests/bats/powerd_rapl_intel.bats (wraps), tests/bats/alignd_restart.bats (powerd and "
  "alignd restarts), tests/bats/exportd_restart.bats (counters across upstream restarts)."
  % (F.get("loss.slots", "?"), F.get("loss.noncontiguous", "?"), F.get("loss.bridged", "?"),
     "yes" if F.get("loss.resumed") == "1" else "no"))
if "freshness.worst_upstream_ms" in F:
    w("- Freshness, slowest slot: %s ms until estimd's estimate left (alignd waited %s ms for a power sample at or "
      "after the slot's end: quality.lag_ns), %s ms more until /metrics showed it. Median until the estimate "
      "left: %s ms."
      % (F["freshness.worst_upstream_ms"], F.get("freshness.worst_lag_ms", "?"), F.get("freshness.worst_exportd_ms", "?"),
         F.get("freshness.upstream_median_ms", "?")))
if "usaged.note" in F:
    w("- usaged: " + F["usaged.note"])
w("")
failed = [n for n, (rc, _) in status.items() if rc != 0]
w("## Runs")
w("")
w(", ".join("%s %d s%s" % (n, s, "" if rc == 0 else " (**exit %d: could not run, see logs/%s.log**)" % (rc, n))
            for n, (rc, s) in status.items()) + ".")
if missing:
    w("")
    w("**Not measured:** %s." % ", ".join(sorted(set(missing))))
print("\n".join(out))
# a partial run (BENCH_ONLY) leaves figures out on purpose
sys.exit(1 if failed or (missing and os.environ.get("BENCH_PARTIAL") != "1") else 0)
