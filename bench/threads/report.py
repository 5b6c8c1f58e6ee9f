"""The table of bench/threads/run.sh.

    python bench/threads/report.py RAW_DIR OUT_DIR

RAW_DIR holds meta.txt and ptperf_<protocol>_t<threads>.csv (ptperf's CSV);
OUT_DIR gets results.md and results.csv. Each ratio compares a thread count
with the smallest one of the same protocol at the same concurrency, both
measured in the same run.
"""
import csv
import os
import re
import sys

NAME = re.compile(r"^ptperf_(http|grpc)_t(\d+)\.csv$")
FLAG = {"http": "--http-thread-count", "grpc": "--grpc-infer-thread-count"}


def load(raw):
    rows = []
    for f in sorted(os.listdir(raw)):
        m = NAME.match(f)
        if not m:
            continue
        with open(os.path.join(raw, f), newline="") as fh:
            for r in csv.DictReader(fh):
                rows.append({
                    "protocol": m.group(1),
                    "threads": int(m.group(2)),
                    "concurrency": int(r["concurrency"]),
                    "infer_per_sec": float(r["infer_per_sec"]),
                    "p50_us": float(r["p50_us"]),
                    "server_cpu_us": float(r["server_cpu_us"]),
                    "errors": int(r["errors"]),
                })
    rows.sort(key=lambda r: (r["protocol"] != "http", r["concurrency"], r["threads"]))
    return rows


def main(argv):
    raw, out = argv[1], argv[2]
    meta = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(raw, "meta.txt")) if "=" in l)
    rows = load(raw)
    if not rows:
        sys.exit("report.py: no ptperf_*.csv in " + raw)
    base = {}
    for r in rows:
        key = (r["protocol"], r["concurrency"])
        base.setdefault(key, r)  # the smallest thread count comes first
        b = base[key]
        r["x_infer"] = r["infer_per_sec"] / b["infer_per_sec"] if b["infer_per_sec"] else 0.0
        r["base_threads"] = b["threads"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    md = ["# HTTP loops and gRPC completion-queue threads on this machine", "",
          "Produced by `%s` (%s) on %s, tree `%s`; machine: %s, %s cores; model `%s`; "
          "gRPC calls over %s connections%s. Load average before %s, after %s." % (
              meta.get("command", "bench/threads/run.sh"), meta.get("settings", ""),
              meta.get("date", "?"),
              meta.get("git", "?"), meta.get("cpu", "?"), meta.get("cores", "?"),
              meta.get("model", "?"), meta.get("grpc_channels", "?"),
              ("; ptperf " + meta["ptperf_extra"]) if meta.get("ptperf_extra") else "",
              meta.get("load_before", "?"), meta.get("load_after", "?")), "",
          "One server per row group, only the thread count changing; client ptperf on the "
          "same machine. × is the throughput as a ratio to the smallest thread count of "
          "the same protocol and concurrency, measured in the same run. Server CPU per "
          "request is ptperf's `--server-pid` (the server's /proc CPU time ÷ requests).", "",
          "| protocol | flag | threads | c | infer/s | × | p50 µs | server CPU µs/req | errors |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append("| %s | `%s` | %d | %d | %s | %.2f | %.0f | %.1f | %d |" % (
            r["protocol"], FLAG[r["protocol"]], r["threads"], r["concurrency"],
            format(round(r["infer_per_sec"]), ","), r["x_infer"], r["p50_us"],
            r["server_cpu_us"], r["errors"]))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main(sys.argv)
