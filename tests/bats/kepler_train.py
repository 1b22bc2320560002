#!/usr/bin/env python3
"""Kepler's real offline trainer (kepler-model-server's TrainRequest.get_model, unmodified) on a
TrainRequest file, with Debian's python3 packages (docs/modeld.md, "Kepler's own trainer").

usage: kepler_train.py KEPLER_SRC REQUEST.json MODEL_DIR
Prints one line per model it trained: "OUTPUT_TYPE/FEATURE_GROUP/TRAINER mae M" (its
metadata.json's held-out mae, W); exits 1 when it trained none.
"""
import glob
import json
import os
import sys

src, req_path, out = sys.argv[1:4]
os.environ.setdefault("MODEL_PATH", out)
sys.path.insert(0, src)
from kepler_model.train.offline_trainer import TrainRequest  # noqa: E402

req = json.load(open(req_path))
if "prome_response" in req:
    req["prom_response"] = req.pop("prome_response")
TrainRequest(**req).get_model()
n = 0
for m in sorted(glob.glob(os.path.join(out, "**", "metadata.json"), recursive=True)):
    md = json.load(open(m))
    if "mae" in md:
        parts = os.path.relpath(os.path.dirname(m), out).split(os.sep)
        print("%s mae %.4f" % ("/".join(parts[-4:-1] + [parts[-1]]), md["mae"]))
        n += 1
sys.exit(0 if n else 1)
