#!/usr/bin/env python3
"""bench/gpu/env_report.py RAW_DIR — bench/gpu/env_ab.sh's CSVs as a
markdown table (RAW_DIR/results.md, also printed): per protocol and
concurrency, the median over the rounds of ptperf's throughput, p50 and
the server's CPU per request under setting A (the baseline) and B, the
ratio B ÷ A, and that ratio within each round (the two servers ran back to
back)."""
import os
import statistics
import sys

from wait_report import publish, read_meta, rows


def main(raw):
    meta = read_meta(raw)
    rounds = int(meta.get("rounds", "0"))
    a_name, *a_env = meta["a"].split()
    b_name, *b_env = meta["b"].split()
    ip = {r["label"]: r for r in rows(os.path.join(raw, "inproc.csv"))}
    cells = {}  # (proto, c) -> name -> [row per round]
    for rnd in range(1, rounds + 1):
        for name in (a_name, b_name):
            for proto in ("http", "grpc"):
                for r in rows(os.path.join(raw, "%s-r%d-%s.csv" % (name, rnd, proto))):
                    cells.setdefault((proto, int(r["concurrency"])), {}).setdefault(name, []).append(r)

    def med(rs, key):
        return statistics.median(float(r[key]) for r in rs) if rs else float("nan")

    def inproc(name, key):
        v = [float(ip[l][key]) for l in ip if l.startswith(name + "-r")]
        return statistics.median(v) if v else float("nan")

    md = ["# %s against %s\n" % (b_name, a_name),
          "`ROUNDS=%d bench/gpu/%s` on %s, %s cores, torch %s, %s: %s; %s. %s: `%s`; %s: `%s`. "
          "A fresh server each, alternating which goes first; ptperf, %s ms windows%s. Each "
          "cell is the median over the rounds.\n" % (
              rounds, meta.get("command", "env_ab.sh"), meta.get("gpu"), meta.get("cores"),
              meta.get("torch"), meta.get("date"),
              meta.get("model_what", "the 64 → 256 → 8 MLP on one GPU instance, batches of one"),
              meta.get("what", ""), a_name, " ".join(a_env), b_name, " ".join(b_env),
              meta.get("interval_ms"),
              ", gRPC calls on %s channels" % meta["grpc_channels"]
              if meta.get("grpc_channels", "1") != "1" else ""),
          "In process (`bench_inproc`, the same bridge, forward() back to back on one thread), "
          "median over the rounds: %s %.0f/s at p50 %.1f µs and %.1f µs CPU per call; %s %.0f/s "
          "at p50 %.1f µs and %.1f µs CPU.\n" % (
              a_name, inproc(a_name, "per_sec"), inproc(a_name, "p50_us"),
              inproc(a_name, "cpu_us"), b_name, inproc(b_name, "per_sec"),
              inproc(b_name, "p50_us"), inproc(b_name, "cpu_us")),
          "| protocol | c | infer/s %s | %s | × | p50 µs %s | %s | × | queue µs %s | %s | "
          "compute_input µs %s | %s | server CPU µs/req %s | %s | × | × infer/s per round |" % (
              (a_name, b_name) * 5),
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for (proto, c) in sorted(cells, key=lambda k: (k[0] != "http", k[1])):
        a, b = cells[(proto, c)].get(a_name, []), cells[(proto, c)].get(b_name, [])
        per_round = ", ".join("%.2f" % (float(y["infer_per_sec"]) / float(x["infer_per_sec"]))
                              for x, y in zip(a, b))
        ta, tb = med(a, "infer_per_sec"), med(b, "infer_per_sec")
        pa, pb = med(a, "p50_us"), med(b, "p50_us")
        ca, cb = med(a, "server_cpu_us"), med(b, "server_cpu_us")
        md.append("| %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.1f | %.1f | %.0f | %.0f "
                  "| %.0f | %.0f | %.2f | %s |" % (
                      "HTTP" if proto == "http" else "gRPC", c, ta, tb, tb / ta, pa, pb, pb / pa,
                      med(a, "server_queue_us"), med(b, "server_queue_us"),
                      med(a, "server_compute_input_us"), med(b, "server_compute_input_us"),
                      ca, cb, cb / ca, per_round))
    md.append("\nqueue and compute_input are the statistics endpoint's. On a CUDA instance "
              "compute_input is the batch's host time less the device's forward() and output "
              "copies (scheduler.c, apply_device_times): the gather, the launch, the input copy "
              "and how late the wait saw the end; queue is the time from enqueue to the batch's "
              "start, which includes waking the instance thread when the request is handed to it.")
    publish(raw, md)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
