#!/usr/bin/env python3
"""bench/gpu/spin_report.py RAW_DIR — bench/gpu/spin_ab.sh's CSVs as a
markdown table (RAW_DIR/results.md, also printed): per protocol and
concurrency, the median over the rounds of ptperf's throughput, p50 and
the server's CPU per request with the timed wait's small-batch spin on
(the default) and off, the ratio, and the ratio within each round (the two
servers ran back to back)."""
import os
import statistics
import sys

from wait_report import publish, read_meta, rows


def main(raw):
    meta = read_meta(raw)
    rounds = int(meta.get("rounds", "0"))
    ip = {r["label"]: r for r in rows(os.path.join(raw, "inproc.csv"))}
    cells = {}  # (proto, c) -> mode -> [row per round]
    for rnd in range(1, rounds + 1):
        for mode in ("spin", "nospin"):
            for proto in ("http", "grpc"):
                for r in rows(os.path.join(raw, "%s-r%d-%s.csv" % (mode, rnd, proto))):
                    cells.setdefault((proto, int(r["concurrency"])), {}).setdefault(mode, []).append(r)

    def med(rs, key):
        return statistics.median(float(r[key]) for r in rs) if rs else float("nan")

    def inproc(mode, key):
        v = [float(ip[l][key]) for l in ip if l.startswith(mode + "-r")]
        return statistics.median(v) if v else float("nan")

    md = ["# The timed wait's spin on small batches: on and off\n",
          "`ROUNDS=%d bench/gpu/spin_ab.sh` on %s, %s cores, torch %s, %s: the 64 → 256 → 8 MLP "
          "on one GPU instance, batches of one, served with the default timed wait (spin: a "
          "batch the device finished in under 200 µs last time is polled without sleeping) and "
          "with `PTSERVE_CUDA_SPIN_BELOW_US=0` (nospin: the timed wait before, which polls with "
          "10 µs sleeps); a fresh server each, alternating which goes first; ptperf, %s ms "
          "windows. Each cell is the median over the rounds.\n" % (
              rounds, meta.get("gpu"), meta.get("cores"), meta.get("torch"), meta.get("date"),
              meta.get("interval_ms")),
          "In process (`bench_inproc`, the same bridge and wait, forward() back to back on one "
          "thread), median over the rounds: spin %.0f/s at p50 %.1f µs and %.1f µs CPU per call; "
          "nospin %.0f/s at p50 %.1f µs and %.1f µs CPU.\n" % (
              inproc("spin", "per_sec"), inproc("spin", "p50_us"), inproc("spin", "cpu_us"),
              inproc("nospin", "per_sec"), inproc("nospin", "p50_us"), inproc("nospin", "cpu_us")),
          "| protocol | c | infer/s nospin | spin | × | p50 µs nospin | spin | × | "
          "compute_input µs nospin | spin | server CPU µs/req nospin | spin | × | "
          "× infer/s per round |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for (proto, c) in sorted(cells, key=lambda k: (k[0] != "http", k[1])):
        a, b = cells[(proto, c)].get("nospin", []), cells[(proto, c)].get("spin", [])
        per_round = ", ".join("%.2f" % (float(y["infer_per_sec"]) / float(x["infer_per_sec"]))
                              for x, y in zip(a, b))
        ta, tb = med(a, "infer_per_sec"), med(b, "infer_per_sec")
        pa, pb = med(a, "p50_us"), med(b, "p50_us")
        ca, cb = med(a, "server_cpu_us"), med(b, "server_cpu_us")
        md.append("| %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f | %.0f | %.0f "
                  "| %.2f | %s |" % (
                      "HTTP" if proto == "http" else "gRPC", c, ta, tb, tb / ta, pa, pb, pb / pa,
                      med(a, "server_compute_input_us"), med(b, "server_compute_input_us"),
                      ca, cb, cb / ca, per_round))
    md.append("\ncompute_input is the statistics endpoint's: on a CUDA instance it is the batch's "
              "host time less the device's forward() and output copies (scheduler.c, "
              "apply_device_times): the gather, the launch, the input copy and how late the "
              "wait saw the end.")
    publish(raw, md)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
