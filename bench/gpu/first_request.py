#!/usr/bin/env python3
"""Times the first and second request to a freshly started server.

    first_request.py HOST:PORT MODEL WARMUP READY_MS  → one CSV row
"""
import json
import sys
import time

import numpy as np
import requests

url, model, warmup, ready_ms = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32).astype(np.float16)
raw = x.tobytes()
header = json.dumps({"inputs": [{"name": "INPUT__0", "datatype": "FP16", "shape": list(x.shape),
                                 "parameters": {"binary_data_size": len(raw)}}],
                     "outputs": [{"name": "OUTPUT__0", "parameters": {"binary_data": True}}]}).encode()
times = []
for _ in range(2):
    t0 = time.perf_counter()
    r = requests.post("http://%s/v2/models/%s/infer" % (url, model), data=header + raw,
                      headers={"Inference-Header-Content-Length": str(len(header))}, timeout=120)
    r.raise_for_status()
    times.append((time.perf_counter() - t0) * 1e3)
print("%s,%s,%s,%.2f,%.2f" % (model, warmup, ready_ms, times[0], times[1]))
