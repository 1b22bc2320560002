#!/usr/bin/env python3
"""Ask model servers (wattbus-modeld, Kepler's kepler-model-server) serving the same
pipeline the same ModelRequests and compare what each chose.

  modeld_compare.py MODELD_URL KEPLER_URL PIPELINE_DIR   two live servers, side by side
  modeld_compare.py --record URL PIPELINE_DIR > FILE      one server's answers, one JSON line each
  modeld_compare.py --against FILE URL PIPELINE_DIR       a live server against recorded answers;
                                                           exit 1 on a difference not in DELIBERATE

Kepler's server needs Python packages CI does not install, so its answers are
recorded (tests/data/kepler-model-server/answers.jsonl) and make check compares
modeld with them (tests/bats/modeld_kepler_compat.bats); docs/modeld.md says how
to run Kepler's server and what this found.
"""
import glob
import json
import os
import sys
import urllib.error
import urllib.request

BPF = ["bpf_cpu_time_ms", "bpf_page_cache_hit"]
CNT = ["cache_miss", "cpu_cycles", "cpu_instructions"]
IRQ = ["bpf_block_irq", "bpf_net_rx_irq", "bpf_net_tx_irq"]
SPEC3 = {"processor": "intel_xeon_platinum_8259cl", "cores": 96, "chips": 2, "memory": 755, "frequency": 3500}

REQUESTS = [
    {"metrics": BPF, "output_type": "AbsPower"},
    {"metrics": CNT + BPF, "output_type": "AbsPower"},
    {"metrics": CNT, "output_type": "AbsPower"},
    {"metrics": CNT, "output_type": "AbsPower", "trainer_name": "SGDRegressorTrainer"},
    {"metrics": CNT + BPF + IRQ, "output_type": "AbsPower", "filter": "mape:1"},
    {"metrics": CNT + BPF + IRQ, "output_type": "AbsPower", "filter": "mae:10;mape:20"},
    {"metrics": CNT, "output_type": "AbsPower", "node_type": 4},
    {"metrics": BPF + IRQ, "output_type": "AbsPower", "node_type": 4},
    {"metrics": BPF, "output_type": "AbsPower", "node_type": 3},
    {"metrics": BPF, "output_type": "AbsPower", "node_type": 9},
    {"metrics": BPF, "output_type": "AbsPower", "node_type": 9, "loose_node_type": False},
    {"metrics": CNT, "output_type": "DynPower", "node_type": 4},
    {"metrics": BPF, "output_type": "AbsPower", "machine_spec": SPEC3},
    {"metrics": BPF, "output_type": "AbsPower", "machine_spec": {"processor": "intel_xeon_platinum_8259cl"}},
    {"metrics": CNT, "output_type": "AbsPower", "machine_spec": {"processor": "intel_xeon_platinum_8259cl"}},
    {"metrics": BPF, "output_type": "AbsPower", "machine_spec": {"processor": "intel_xeon_platinum_8488c", "cores": 96, "chips": 1, "memory": 500, "frequency": 3800}},
    {"metrics": CNT, "output_type": "AbsPower", "machine_spec": {"processor": "intel_xeon_e5_2686v4", "cores": 64, "chips": 2, "memory": 480, "frequency": 3000}},
    {"metrics": [], "output_type": "AbsPower"},
    {"metrics": BPF, "output_type": "DynPower"},
    {"metrics": BPF, "output_type": "Watts"},
    {"metrics": BPF, "output_type": "AbsPower", "colour": "red"},
]


def weights_index(pipeline):
    """weight.json content -> 'Group/Model' of every model in the pipeline."""
    idx = {}
    for path in glob.glob(os.path.join(pipeline, "*", "*", "*", "*", "weight.json")):
        parts = path.split(os.sep)
        with open(path) as f:
            idx[json.dumps(json.load(f), sort_keys=True)] = parts[-4] + "/" + parts[-3] + "/" + parts[-2]
    return idx


KEYS = ("model_name", "machine_spec", "mae")


def ask(url, req, idx):
    body = json.dumps(dict(req, weight=True)).encode()
    r = urllib.request.Request(url + "/model", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            ans = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.read()[:60].decode(errors="replace").strip().splitlines()[0] if e.code < 500 else "")
    bare = {k: v for k, v in ans.items() if k not in KEYS}
    name = idx.get(json.dumps(bare, sort_keys=True), "?")
    extra = ",".join(k for k in KEYS if k in ans)
    return "200 %s [%s]" % (name, extra or "bare weight.json")


# Requests wattbus-modeld answers otherwise than Kepler's server, on purpose (docs/modeld.md):
# the filter rows (Kepler's is_valid_model tests hasattr() on a dict: every filter fails) and
# an unknown output_type or key (Kepler: 500). What modeld answers instead, by status.
DELIBERATE = {
    json.dumps({"metrics": CNT + BPF + IRQ, "output_type": "AbsPower", "filter": "mape:1"}, sort_keys=True): "200",
    json.dumps({"metrics": CNT + BPF + IRQ, "output_type": "AbsPower", "filter": "mae:10;mape:20"}, sort_keys=True): "200",
    json.dumps({"metrics": BPF, "output_type": "Watts"}, sort_keys=True): "400",
    json.dumps({"metrics": BPF, "output_type": "AbsPower", "colour": "red"}, sort_keys=True): "400",
}


def same_choice(a, b):
    sa, sb = a.split(" ")[0], b.split(" ")[0]
    return sa == sb and (sa != "200" or a.split(" [")[0] == b.split(" [")[0])


def record(url, pipeline):
    idx = weights_index(pipeline)
    for req in REQUESTS:
        print(json.dumps({"request": req, "answer": ask(url, req, idx)}, sort_keys=True))


def against(path, url, pipeline):
    idx = weights_index(pipeline)
    recorded = {}
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            recorded[json.dumps(j["request"], sort_keys=True)] = j["answer"]
    same = deliberate = bad = 0
    for req in REQUESTS:
        key = json.dumps(req, sort_keys=True)
        if key not in recorded:
            print("no recorded answer to %s" % key)
            bad += 1
            continue
        a, b = ask(url, req, idx), recorded[key]
        if key in DELIBERATE:
            ok = a.split(" ")[0] == DELIBERATE[key] and not same_choice(a, b)
            deliberate += ok
        else:
            ok = same_choice(a, b)
            same += ok
        bad += not ok
        print("%s %s\n    this:     %s\n    recorded: %s" % ("==" if ok else "!=", key, a, b))
    print("%d of %d requests as recorded, %d deliberate differences, %d unexpected" % (same, len(REQUESTS), deliberate, bad))
    return 1 if bad else 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--record":
        return record(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 5 and sys.argv[1] == "--against":
        sys.exit(against(*sys.argv[2:]))
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    modeld, kepler, pipeline = sys.argv[1:]
    idx = weights_index(pipeline)
    same = 0
    for req in REQUESTS:
        a, b = ask(modeld, req, idx), ask(kepler, req, idx)
        ok = same_choice(a, b)
        same += ok
        print("%s %s\n    modeld: %s\n    kepler: %s" % ("==" if ok else "!=", json.dumps(req), a, b))
    print("%d of %d requests: the same status (and the same model when 200)" % (same, len(REQUESTS)))


if __name__ == "__main__":
    main()
