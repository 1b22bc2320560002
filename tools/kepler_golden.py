#!/usr/bin/env python3
"""Reduce Kepler's estimator golden set (shared/data/kepler-estimator-golden) to what
tests/unit/test_estimd_golden.c needs, for the models that publish a weight.json.

  tools/kepler_golden.py GOLDEN_DIR > tests/data/kepler-estimator-golden/ec2-0.7.11.jsonl

One JSON line per (model, vector): model, trainer, output_type, weight_json (relative to
tests/data/kepler-model-db/ec2-0.7.11/), vector_id, features, kepler (Kepler's estimator's
answer: zone -> [watts at the vector, watts at zero]; a bare Infinity is the string
"Infinity"), and for curve fits the feature each zone is read on by Kepler's estimator
(kepler_feature) and by kepler-model-server's curve-fit trainer (trainer_feature,
main_feature(group, zone) in util/train_types.py), with the zone's power evaluated here on
the trainer's feature, before any clipping (trainer_raw: the same pairs; "Infinity",
"-Infinity" or "NaN" where not finite).

The values evaluated on Kepler's estimator's own feature are checked against its answers
(clipped at 0) before anything is written, so that this script's reading of the weights is
the estimator's.
"""
import json
import math
import os
import sys

# kepler_model/util/train_types.py: FeatureGroups (each sorted), in the enum's order, and
# the trainer's main and dram features per group.
GROUPS = [
    ("CounterOnly", ["cache_miss", "cpu_cycles", "cpu_instructions"]),
    ("BPFOnly", ["bpf_cpu_time_ms", "bpf_page_cache_hit"]),
    ("BPFIRQ", ["bpf_block_irq", "bpf_cpu_time_ms", "bpf_net_rx_irq", "bpf_net_tx_irq", "bpf_page_cache_hit"]),
    ("CounterIRQCombined", ["bpf_block_irq", "bpf_net_rx_irq", "bpf_net_tx_irq", "cache_miss", "cpu_cycles", "cpu_instructions"]),
    ("Basic", ["bpf_cpu_time_ms", "bpf_page_cache_hit", "cache_miss", "cpu_cycles", "cpu_instructions"]),
]
MAIN = {"CounterOnly": "cpu_instructions", "BPFOnly": "bpf_cpu_time_ms", "BPFIRQ": "bpf_cpu_time_ms",
        "CounterIRQCombined": "cpu_instructions", "Basic": "cpu_instructions"}
DRAM = {"CounterOnly": "cache_miss", "BPFOnly": "bpf_page_cache_hit", "BPFIRQ": "bpf_page_cache_hit",
        "CounterIRQCombined": "cache_miss", "Basic": "cache_miss"}
ORDER = {name: feats for name, feats in GROUPS}


def main_feature(group, zone):
    """Index of the feature main_feature(group, zone) picks, in group's list."""
    return ORDER[group].index(DRAM[group] if zone == "dram" else MAIN[group])


def valid_group(features):
    """get_valid_feature_groups(features)[0]: the first group whose features are all present."""
    for name, feats in GROUPS:
        if all(f in features for f in feats):
            return name
    raise ValueError(features)


def curve(trainer, c, u):
    try:
        if "Logarithmic" in trainer:
            arg = c[1] * u + 1
            return c[0] * math.log(arg) + c[2] if arg > 0 else float("nan")
        return c[0] * math.exp(c[1] * u) + c[2]
    except OverflowError:
        return math.copysign(float("inf"), c[0])


def text(v):
    return v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))


def main():
    golden = sys.argv[1]
    models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "kepler-model-db", "ec2-0.7.11")
    out = []
    for line in open(os.path.join(golden, "ec2-0.7.11.jsonl")):
        r = json.loads(line)
        if not r["weight_json"]:
            continue
        w = json.load(open(os.path.join(models, r["weight_json"])))
        rec = {k: r[k] for k in ("model", "trainer", "output_type", "weight_json", "vector_id", "features")}
        rec["kepler"] = r["answer"]["powers"]
        if r["model_class"] == "curvefit":
            group = r["feature_group"]
            kf, tf, raw = {}, {}, {}
            for zone, ans in r["answer"]["powers"].items():
                aw = w[zone]["All_Weights"]
                names = list(aw["Numerical_Variables"])
                assert names == ORDER[group], (r["model"], names)
                ki = main_feature(valid_group(names), zone)  # the estimator's index, into names
                ti = main_feature(group, zone)
                kf[zone], tf[zone] = names[ki], names[ti]
                pair = []
                for row in (r["features"], {n: 0.0 for n in names}):
                    def at(i):
                        return curve(r["trainer"], aw["CurveFit_Weights"], row[names[i]] / aw["Numerical_Variables"][names[i]]["scale"])
                    kv = at(ki)
                    pair.append(at(ti))
                    want = ans[len(pair) - 1]
                    got = max(kv, 0.0) if not math.isnan(kv) else kv
                    if isinstance(want, str):
                        assert not math.isfinite(got), (r["model"], zone, want, got)
                    else:
                        assert abs(got - want) <= 1e-9 * max(1.0, abs(want)), (r["model"], zone, want, got)
                raw[zone] = [text(v) for v in pair]
            rec["kepler_feature"], rec["trainer_feature"], rec["trainer_raw"] = kf, tf, raw
        out.append(rec)
    for rec in out:
        print(json.dumps(rec, separators=(",", ":")))
    print(f"{len(out)} vectors of {len({r['model'] for r in out})} models", file=sys.stderr)


if __name__ == "__main__":
    main()
