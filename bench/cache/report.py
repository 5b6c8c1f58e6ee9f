"""bench/cache/report.py RAW OUT — the response-cache table from ptperf's CSVs.

RAW holds <model>.<mode>.<round>.csv (ptperf -f), stats_<mode>_<model>.json
(the statistics endpoint after the run) and meta.txt (bench/cache/run.sh).
Writes OUT/results.md, OUT/results.csv and OUT/plot.png: per model, mode and
concurrency the median over rounds of throughput, p50, p99 and server CPU
per request, and each one's ratio to the model without the cache in this run.
"""
import csv
import glob
import json
import os
import statistics
import sys

MODES = ("off", "hit", "off_b", "miss")
# What each mode is compared with: the model without the cache in the same
# server process.
BASE = {"off": "off", "hit": "off", "off_b": "off_b", "miss": "off_b"}
MODELS = ("mlp", "deep")
LABEL = {"off": "no cache (A)", "hit": "every request a hit (A)", "off_b": "no cache (B)",
         "miss": "every request a miss (B)"}


def read_meta(raw):
    meta = {}
    with open(os.path.join(raw, "meta.txt")) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            meta[k] = v
    return meta


def cache_counts(raw, mode, model):
    with open(os.path.join(raw, "stats_%s_%s.json" % (mode, model))) as f:
        st = json.load(f)["model_stats"][0]
    inf = st["inference_stats"]
    return {"requests": inf["success"]["count"] + inf["fail"]["count"],
            "hits": inf["cache_hit"]["count"], "misses": inf["cache_miss"]["count"],
            "executions": st["execution_count"]}


def main(raw, out):
    meta = read_meta(raw)
    rows = {}
    for path in sorted(glob.glob(os.path.join(raw, "*.csv"))):
        model, mode, _ = os.path.basename(path).split(".", 2)
        with open(path) as f:
            for r in csv.DictReader(f):
                rows.setdefault((model, mode, int(r["concurrency"])), []).append(r)

    def med(model, mode, conc, field):
        vals = [float(r[field]) for r in rows.get((model, mode, conc), [])]
        return statistics.median(vals) if vals else float("nan")

    concs = sorted({k[2] for k in rows})
    table = []
    for model in MODELS:
        counts = {mode: cache_counts(raw, mode, model) for mode in MODES}
        for conc in concs:
            for mode in MODES:
                base = {f: med(model, BASE[mode], conc, f)
                        for f in ("infer_per_sec", "p50_us", "server_cpu_us")}
                v = {f: med(model, mode, conc, f) for f in
                     ("infer_per_sec", "p50_us", "p99_us", "server_cpu_us", "other_cpu_pct")}
                errors = sum(int(r["errors"]) for r in rows.get((model, mode, conc), []))
                c = counts[mode]
                table.append({
                    "model": model, "mode": mode, "concurrency": conc,
                    "infer_per_sec": v["infer_per_sec"], "p50_us": v["p50_us"],
                    "p99_us": v["p99_us"], "server_cpu_us_per_req": v["server_cpu_us"],
                    "throughput_vs_off": v["infer_per_sec"] / base["infer_per_sec"],
                    "p50_vs_off": v["p50_us"] / base["p50_us"],
                    "server_cpu_vs_off": v["server_cpu_us"] / base["server_cpu_us"],
                    "others_cpu_pct": v["other_cpu_pct"], "errors": errors,
                    "model_requests": c["requests"], "model_hits": c["hits"],
                    "model_misses": c["misses"], "model_executions": c["executions"],
                    "rounds": len(rows.get((model, mode, conc), []))})

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)

    L = ["# The response cache: hits and misses against no cache (HTTP)\n",
         "Produced by `bench/cache/run.sh` on %s, ptserve `%s`; %s rounds, %s ms windows; "
         "machine: %s CPUs (%s), load average before %s, after %s.\n"
         % (meta.get("date"), meta.get("commit"), meta.get("rounds"), meta.get("interval_ms"),
            meta.get("cpus"), meta.get("cpu_model"), meta.get("load_before"),
            meta.get("load_after")),
         "Models: bench/cpu's `mlp` (16 → 4, a few µs of forward) and `deep` (24 × "
         "Linear(16, 16) + ReLU, tens of µs), one CPU instance each, served as they are (no "
         "cache) and as `<name>_cached` with `response_cache { enable: true }` (the same "
         "model.pt). Client: ptperf, HTTP keep-alive, binary tensors, its 16 different "
         "requests in turn, from two servers side by side. Server A has a 64 MiB cache: after "
         "the first 16 requests every one to `<name>_cached` is answered from it (*hit*). "
         "Server B's cache has room for two answers: the 16 requests evict each other and "
         "every one makes its key, misses, runs the model and stores its answer (*miss*). "
         "Medians over the rounds (modes in a turning order within each round); × = ÷ the "
         "same model without the cache, at the same concurrency, on the same server, in "
         "this run (hit ÷ no cache (A), miss ÷ no cache (B)). Client and servers share the "
         "machine's cores: read the ratios.\n",
         "| model | mode | c | infer/s | × | p50 µs | × | p99 µs | server CPU µs/req | × | "
         "hits / requests (all rounds) | executions | others' CPU % | errors |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in table:
        L.append("| %s | %s | %d | %s | %.2f | %.0f | %.2f | %.0f | %.1f | %.2f | %s / %s | %s "
                 "| %.1f | %d |" % (
                     r["model"], LABEL[r["mode"]], r["concurrency"],
                     format(round(r["infer_per_sec"]), ","), r["throughput_vs_off"],
                     r["p50_us"], r["p50_vs_off"], r["p99_us"], r["server_cpu_us_per_req"],
                     r["server_cpu_vs_off"], format(r["model_hits"], ","),
                     format(r["model_requests"], ","), format(r["model_executions"], ","),
                     r["others_cpu_pct"], r["errors"]))
    L.append("")
    L.append("Hits, requests and executions are the statistics endpoint's counts for the "
             "model over the whole run (every round and concurrency, warm-up requests "
             "included), the same for each of its rows.\n")
    L.append("![throughput and server CPU against no cache](plot.png)\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(L))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    groups = [(m, c) for m in MODELS for c in concs]
    colors = {"hit": "#55a868", "miss": "#c44e52"}
    for ax, field, title in ((axes[0], "throughput_vs_off",
                              "throughput ÷ no cache, same server"),
                             (axes[1], "server_cpu_vs_off",
                              "server CPU per request ÷ no cache, same server")):
        for j, mode in enumerate(("hit", "miss")):
            vals = [next(r[field] for r in table if (r["model"], r["concurrency"], r["mode"]) ==
                         (m, c, mode)) for m, c in groups]
            xs = [i * 3 + j for i in range(len(groups))]
            ax.bar(xs, vals, color=colors[mode], label=LABEL[mode])
            for x, v in zip(xs, vals):
                ax.annotate("%.2f" % v, (x, v), ha="center", va="bottom", fontsize=7)
        ax.axhline(1.0, color="#444444", lw=0.8)
        ax.set_xticks([i * 3 + 0.5 for i in range(len(groups))],
                      ["%s c=%d" % g for g in groups])
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.suptitle("The response cache, HTTP, ptperf (same run)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plot.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
