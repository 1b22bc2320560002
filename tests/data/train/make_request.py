#!/usr/bin/env python3
"""Write a Kepler TrainRequest whose Prometheus results follow a known law.

usage: make_request.py [--idle] [--seed N] [--noise W] [--points N] [--step S]
  package = 20 W + 30 W per busy CPU (+ uniform noise of +-W), dram = 5 W + 2 W per
  busy CPU, split over two sockets and the modes dynamic/idle as exportd's 0.9
  profile serves them; the busy CPUs are spread over three containers' CPU time
  (kepler_container_bpf_cpu_time_ms_total, ms per second = 1000 per busy CPU).
  --idle: the response of an idle machine (no busy CPU), as idle_prom_response.
  --prom-only: the workload's response alone (what tests/data/train/fake_prometheus.py serves).
  --kepler-full: also core and uncore (0 W), platform (package + dram + 10 W) and
  kepler_container_bpf_page_cache_hit_total (0): Kepler's own trainer trains nothing without
  every component of the source and both BPFOnly features.
The request (stdout) asks for SGDRegressorTrainer (and PolynomialRegressionTrainer,
which wattbus does not train) for AbsPower and DynPower.
"""
import argparse
import json
import random

ap = argparse.ArgumentParser()
ap.add_argument("--idle", action="store_true")
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--noise", type=float, default=0.5)
ap.add_argument("--points", type=int, default=101)
ap.add_argument("--step", type=float, default=3.0)
ap.add_argument("--name", default="law")
ap.add_argument("--spelling", default="prom_response")
ap.add_argument("--prom-only", action="store_true", help="print the workload's results only")
ap.add_argument("--kepler-full", action="store_true")
a = ap.parse_args()
rnd = random.Random(a.seed)


def response(idle):
    t0 = 1700000000.0
    containers = ["web", "db", "batch"]
    cpu = {c: 0.0 for c in containers}
    pkg = {(s, m): 0.0 for s in "01" for m in ("dynamic", "idle")}
    dram = dict(pkg)
    series_cpu = {c: [] for c in containers}
    series_pkg = {k: [] for k in pkg}
    series_dram = {k: [] for k in pkg}
    for i in range(a.points):
        t = t0 + i * a.step
        if i:
            busy = {c: 0.0 if idle else rnd.uniform(0, 2.5) for c in containers}
            nbusy = sum(busy.values())
            for c in containers:
                cpu[c] += busy[c] * 1000 * a.step
            p = 20 + 30 * nbusy + rnd.uniform(-a.noise, a.noise)
            d = 5 + 2 * nbusy
            idle_part = 20 if p > 20 else p
            # two sockets, each half; the mode split is exportd's (dynamic + idle = all)
            for s in "01":
                pkg[(s, "idle")] += idle_part / 2 * a.step
                pkg[(s, "dynamic")] += (p - idle_part) / 2 * a.step
                dram[(s, "idle")] += 5 / 2 * a.step
                dram[(s, "dynamic")] += (d - 5) / 2 * a.step
        for c in containers:
            series_cpu[c].append([t, "%.3f" % cpu[c]])
        for k in pkg:
            series_pkg[k].append([t, "%.6f" % pkg[k]])
            series_dram[k].append([t, "%.6f" % dram[k]])
    common = {"instance": "10.0.0.1:9102", "job": "wattbus", "node_name": "meter-1"}

    def node(name, vals):
        return [
            {
                "metric": dict(common, __name__=name, package=s, mode=m, source="rapl-sysfs"),
                "values": v,
            }
            for (s, m), v in vals.items()
        ]

    out = {
        "kepler_container_bpf_cpu_time_ms_total": [
            {
                "metric": dict(
                    common,
                    __name__="kepler_container_bpf_cpu_time_ms_total",
                    container_id=c + "-id",
                    container_name=c,
                    pod_name=c + "-pod",
                    container_namespace="default",
                    source="bpf",
                ),
                "values": v,
            }
            for c, v in series_cpu.items()
        ],
        "kepler_node_package_joules_total": node("kepler_node_package_joules_total", series_pkg),
        "kepler_node_dram_joules_total": node("kepler_node_dram_joules_total", series_dram),
        "kepler_node_node_info": [
            {
                "metric": {
                    "__name__": "kepler_node_node_info",
                    "instance": "10.0.0.1:9102",
                    "processor": "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz",
                    "cores": "8",
                    "chips": "2",
                    "vendor": "intel",
                },
                "values": [[1700000000.0 + i * a.step, "0"] for i in range(a.points)],
            }
        ],
    }
    if a.kepler_full:
        zero = {k: [[t, "0"] for t, _ in v] for k, v in series_pkg.items()}
        out["kepler_node_core_joules_total"] = node("kepler_node_core_joules_total", zero)
        out["kepler_node_uncore_joules_total"] = node("kepler_node_uncore_joules_total", zero)
        plat = [
            [t, "%.6f" % (sum(float(series_pkg[k][i][1]) + float(series_dram[k][i][1]) for k in pkg) + 10 * (t - t0))]
            for i, (t, _) in enumerate(series_pkg[("0", "idle")])
        ]
        out["kepler_node_platform_joules_total"] = [
            {"metric": dict(common, __name__="kepler_node_platform_joules_total", mode="dynamic", source="acpi"), "values": plat}
        ]
        out["kepler_container_bpf_page_cache_hit_total"] = [
            dict(c, metric=dict(c["metric"], __name__="kepler_container_bpf_page_cache_hit_total"), values=[[t, "0"] for t, _ in c["values"]])
            for c in out["kepler_container_bpf_cpu_time_ms_total"]
        ]
    return out


if a.idle:
    print(json.dumps(response(True)))
elif a.prom_only:
    print(json.dumps(response(False)))
else:
    req = {
        "name": a.name,
        "energy_source": "rapl-sysfs",
        "trainer": {
            "abs_trainers": ["SGDRegressorTrainer", "PolynomialRegressionTrainer"],
            "dyn_trainers": ["SGDRegressorTrainer", "PolynomialRegressionTrainer"],
            "idle_prom_response": response(True),
            "isolator": "MinIdleIsolator",
            "isolator_args": {},
        },
        a.spelling: response(False),
    }
    print(json.dumps(req))
