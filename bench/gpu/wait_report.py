#!/usr/bin/env python3
"""bench/gpu/wait_report.py RAW_DIR — bench/gpu/wait_ab.sh's CSVs as a
markdown table (RAW_DIR/results.md, also printed): per wait mode and path,
ptperf's throughput, p50/p99, where the server's time went and its CPU per
request, beside the in-process CUDA graph at batch 1 of the same run."""
import csv
import os
import sys

MODES = ("block", "spin", "timed", "timed-nospin")
CELLS = (("graph-http", "CUDA graph, HTTP binary"), ("graph-shm", "CUDA graph, system shm"),
         ("graph-cudashm", "CUDA graph, CUDA shm"), ("fp16-http", "eager FP16, HTTP binary"),
         ("mlp-http", "MLP batch 1, HTTP binary"), ("mlp-grpc", "MLP batch 1, gRPC"))


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_meta(raw):
    """RAW_DIR/meta.txt's key=value lines (bench/gpu/lib.sh gpu_meta)."""
    with open(os.path.join(raw, "meta.txt")) as f:
        return dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)


def publish(raw, md):
    """Writes the report's lines to RAW_DIR/results.md and prints them."""
    text = "\n".join(md) + "\n"
    with open(os.path.join(raw, "results.md"), "w") as f:
        f.write(text)
    print(text)


def main(raw):
    meta = read_meta(raw)
    ip = {r["label"]: r for r in rows(os.path.join(raw, "inproc.csv"))}
    md = ["# How the instance thread waits for the GPU: block, spin, timed\n",
          "One run of `bench/gpu/wait_ab.sh` on %s, %s cores, torch %s, %s; a fresh server per "
          "mode (`PTSERVE_CUDA_WAIT`; timed-nospin is timed with "
          "`PTSERVE_CUDA_SPIN_BELOW_US=0`, the timed wait as it was before it spun on small "
          "batches), ptperf over HTTP (the MLP over gRPC too), %s ms windows. References in "
          "the same run, in process: the FP16 ResNet-50 replayed as a CUDA graph at batch 1 "
          "(`bench_inproc --graph`), p50 %s µs; the MLP's forward() at batch 1 "
          "(`bench_inproc`), p50 %s µs, %s/s on one thread.\n" % (
              meta.get("gpu"), meta.get("cores"), meta.get("torch"), meta.get("date"),
              meta.get("interval_ms"), ip.get("graph_b1", {}).get("p50_us", "–"),
              ip.get("mlp_b1", {}).get("p50_us", "–"), ip.get("mlp_b1", {}).get("per_sec", "–")),
          "| path | mode | concurrency | infer/s | p50 µs | p99 µs | compute_input µs | "
          "compute_infer µs | HTTP and client µs | server CPU µs/req |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cell, how in CELLS:
        for mode in MODES:
            for r in rows(os.path.join(raw, "%s-%s.csv" % (mode, cell))):
                md.append("| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |" % (
                    how, mode, r["concurrency"], float(r["infer_per_sec"]), float(r["p50_us"]),
                    float(r["p99_us"]), float(r["server_compute_input_us"]),
                    float(r["server_compute_infer_us"]), float(r["client_overhead_us"]),
                    float(r["server_cpu_us"])))
    publish(raw, md)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
