"""bench/cpu/torch_ref.py — the reference of the CPU benchmark: PyTorch
itself running the very file ptserve serves, in this process, as a team's
ten-line script would. Not ptserve's code: torch.jit.load, eval mode,
torch.inference_mode(), LibTorch's default intra-op threads, forward()
called back to back on one thread.

    .venv/bin/python bench/cpu/torch_ref.py MODEL_FILE LABEL CSV INPUT [INPUT...]

INPUT is bench_inproc's form, DTYPE:D1,D2 (FP32:1,16). Random inputs, made
once; 500 calls to warm up, then calls for --seconds (2). Appends one row
to CSV (label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us; per_sec counts
calls, which are batch 1 unless the INPUT says otherwise) and prints the
torch version on the last line, as "(PyTorch X)".
"""
import argparse
import statistics
import time

import torch

DTYPES = {"FP32": torch.float32, "FP64": torch.float64, "FP16": torch.float16,
          "INT64": torch.int64, "INT32": torch.int32}


def make_input(spec):
    name, dims = spec.split(":", 1)
    shape = [int(d) for d in dims.split(",")]
    dtype = DTYPES[name]
    if dtype.is_floating_point:
        return torch.rand(shape, dtype=dtype)
    return torch.randint(0, 8, shape, dtype=dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("label")
    ap.add_argument("csv")
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--warmup", type=int, default=500)
    a = ap.parse_args()
    model = torch.jit.load(a.model).eval()
    inputs = [make_input(s) for s in a.inputs]
    times = []
    with torch.inference_mode():
        for _ in range(a.warmup):
            model(*inputs)
        cpu0, start = time.process_time(), time.perf_counter()
        end = start + a.seconds
        t = start
        while t < end:
            model(*inputs)
            now = time.perf_counter()
            times.append(now - t)
            t = now
        wall, cpu = t - start, time.process_time() - cpu0
    times.sort()
    n = len(times)
    row = [a.label, n, n / wall, wall / n * 1e6, statistics.median(times) * 1e6,
           times[min(n - 1, int(n * 0.99))] * 1e6, cpu / n * 1e6]
    with open(a.csv, "a") as f:
        f.write(",".join(str(v) if i < 2 else "%.3f" % v for i, v in enumerate(row)) + "\n")
    print("%s: %d calls, %.0f/s, p50 %.1f us (PyTorch %s)" % (
        a.label, n, row[2], row[4], torch.__version__))


if __name__ == "__main__":
    main()
