#!/usr/bin/env python3
"""The references of bench/aoti: PyTorch itself, in this process, running
what ptserve serves, as a team's own script would. Not ptserve's code.

    .venv/bin/python bench/aoti/torch_ref.py NAME BATCH --device cpu|cuda --csv FILE
                                             [--file MODEL_FILE]

Without --file: eager PyTorch, the module behind the model
(gen_models.build), row NAME/eager/b<BATCH>. With --file: the very file the
server serves, loaded as PyTorch's docs show: a .pt with torch.jit.load
(row NAME/ts/b<BATCH>), a .pt2 with torch._inductor.aoti_load_package (row
NAME/aoti/b<BATCH>; bench/aoti_package.py says why LibTorch's libraries
are made global first).

Each call is timed from the host batch to the result on the host (on CUDA:
.to(device), then .cpu(), as a server must), under inference mode, one
intra-op thread on the CPU (the server's INTRA_OP_THREAD_COUNT 1), after
--warmup calls (TorchScript's profiling executor optimizes the graph in its
first calls). Appends label,calls,per_sec,mean_us,p50_us,p99_us
(bench_inproc's columns but its last, cpu_us).
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_models import build  # noqa: E402
# bench/aoti_package.py by its path: bench/ itself on sys.path would make
# its scenario folders packages (bench/triton shadows the triton module).
_spec = importlib.util.spec_from_file_location(
    "aoti_package", os.path.join(os.path.dirname(HERE), "aoti_package.py"))
aoti_package = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(aoti_package)


def load(path, device):
    """(variant, callable) for the file, as PyTorch loads it."""
    if path.endswith(".pt2"):
        return "aoti", aoti_package.load_package(path)
    module = torch.jit.load(path, map_location=device)
    module.eval()
    return "ts", module


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("batch", type=int)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--file", help="the served model file (.pt or .pt2); none: eager")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    if a.device == "cpu":
        torch.set_num_threads(1)
    module, dtype, dims = build(a.name, a.device)
    variant = "eager"
    if a.file:
        variant, module = load(a.file, a.device)
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
    label = "%s/%s/b%d" % (a.name, variant, a.batch)
    with open(a.csv, "a") as f:
        f.write("%s,%d,%.1f,%.2f,%.2f,%.2f\n" % (label, len(lat), len(lat) / elapsed,
                                                 statistics.fmean(lat), p(0.5), p(0.99)))
    print("%s: %d calls, p50 %.1f us" % (label, len(lat), p(0.5)))


if __name__ == "__main__":
    main()
