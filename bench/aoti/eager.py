#!/usr/bin/env python3
"""Eager PyTorch in process: the module behind a bench/aoti model, called
back to back from Python under inference mode, one thread on the CPU.

    .venv/bin/python bench/aoti/eager.py NAME BATCH --device cpu|cuda --csv FILE

Appends label,calls,per_sec,mean_us,p50_us,p99_us (bench_inproc's columns but its last, cpu_us):
the time from the call to the result on the host (on CUDA: .cpu(), as a
server must), inputs staged from the host as a server's are.
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_models import build  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("batch", type=int)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    if a.device == "cpu":
        torch.set_num_threads(1)
    module, dtype, dims = build(a.name, a.device)
    x = torch.randn([a.batch] + dims).to(dtype)
    lat = []
    with torch.inference_mode():
        for _ in range(a.warmup):
            module(x.to(a.device)).cpu()
        start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            module(x.to(a.device)).cpu()
            t1 = time.perf_counter()
            lat.append((t1 - t0) * 1e6)
            if t1 - start >= a.seconds:
                break
    elapsed = time.perf_counter() - start
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
    label = "%s/eager/b%d" % (a.name, a.batch)
    with open(a.csv, "a") as f:
        f.write("%s,%d,%.1f,%.2f,%.2f,%.2f\n" % (label, len(lat), len(lat) / elapsed,
                                                 statistics.fmean(lat), p(0.5), p(0.99)))
    print("%s: %d calls, p50 %.1f us" % (label, len(lat), p(0.5)))


if __name__ == "__main__":
    main()
