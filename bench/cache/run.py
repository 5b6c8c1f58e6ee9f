"""bench/cache/run.py — what the response cache gives and costs, in one run.

    .venv/bin/python bench/cache/run.py

bench/cpu's `mlp` (a 16 -> 4 MLP, a few µs of forward) and `deep` (24 x
Linear(16, 16) + ReLU, tens of µs) are served as they are and as
`<name>_cached` (response_cache { enable: true }, the same model.pt) by two
servers side by side: A with a 64 MiB cache, B with room for two answers,
fewer than ptperf's 16 different requests. For BENCH_ROUNDS rounds (3),
for each model, four modes one after the other (the order turning each
round), ptperf over HTTP at concurrency 1 and 4, BENCH_INTERVAL_MS
windows (1000):

  off    the model without the cache, on A;
  hit    <name>_cached on A: after the first 16 requests every one is a hit;
  off_b  the model without the cache, on B;
  miss   <name>_cached on B: the 16 requests evict each other, so every one
         makes its key, misses, runs the model and stores its answer.

hit is compared with off and miss with off_b, each pair in one server
process so that nothing but the cache differs. Writes
bench/cache/results/{results.md,results.csv,plot.png}; ptperf's CSVs and
the statistics in results/raw/ (not committed).
"""
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness as h  # noqa: E402

MODELS = ("mlp", "deep")
MODES = ("off", "hit", "off_b", "miss")
# Each mode's reference: the model without the cache on the same server.
BASE = {"off": "off", "hit": "off", "off_b": "off_b", "miss": "off_b"}
LABEL = {"off": "no cache (A)", "hit": "every request a hit (A)", "off_b": "no cache (B)",
         "miss": "every request a miss (B)"}
# Room for two answers at most of either model (an entry is about 450
# bytes: key, outputs, bookkeeping; docs/response-cache.md).
CACHE_BYTES = {"A": 64 << 20, "B": 1100}


def models(raw):
    repo = os.path.join(raw, "models")
    subprocess.run([h.PY, os.path.join(h.ROOT, "bench", "cpu", "gen_models.py"),
                    os.path.join(raw, "all")], check=True, stdout=subprocess.DEVNULL)
    for m in MODELS:
        shutil.move(os.path.join(raw, "all", m), os.path.join(repo, m))
        shutil.copytree(os.path.join(repo, m), os.path.join(repo, m + "_cached"))
        cfg = os.path.join(repo, m + "_cached", "config.pbtxt")
        with open(cfg) as f:
            text = f.read().replace('name: "%s"' % m, 'name: "%s_cached"' % m, 1)
        with open(cfg, "w") as f:
            f.write(text + "response_cache { enable: true }\n")
    shutil.rmtree(os.path.join(raw, "all"))
    return repo


def measure(raw, interval, n):
    build = h.build(os.environ.get("BENCH_BUILD_DIR", os.path.join(h.ROOT, "build-bench")),
                    ["ptserve", "ptperf"])
    repo = models(raw)
    servers = {name: h.Server(os.path.join(build, "ptserve"),
                              ["--model-repository", repo, "--cache-config",
                               "local,size=%d" % size],
                              os.path.join(raw, "server-%s.log" % name))
               for name, size in CACHE_BYTES.items()}
    try:
        h.meta(os.path.join(raw, "meta.txt"), interval_ms=interval, rounds=n)
        for r, mode in h.rounds(n, list(MODES)):
            for m in MODELS:
                s = servers["B" if mode in ("off_b", "miss") else "A"]
                h.log("round %d, %s, %s" % (r, m, mode))
                h.ptperf(build, s, m + "_cached" if mode in ("hit", "miss") else m, "1,4",
                         os.path.join(raw, "%s.%s.%d.csv" % (m, mode, r)), interval)
        h.add_meta(os.path.join(raw, "meta.txt"), load_after=h.loadavg())
        for mode in MODES:
            s = servers["B" if mode in ("off_b", "miss") else "A"]
            for m in MODELS:
                name = m + "_cached" if mode in ("hit", "miss") else m
                with open(os.path.join(raw, "stats_%s_%s.json" % (mode, m)), "wb") as f:
                    f.write(h.http_get(s.url("/v2/models/%s/stats" % name)))
    finally:
        for s in servers.values():
            s.stop()


def cache_counts(raw, mode, model):
    with open(os.path.join(raw, "stats_%s_%s.json" % (mode, model))) as f:
        st = json.load(f)["model_stats"][0]
    inf = st["inference_stats"]
    return {"requests": inf["success"]["count"] + inf["fail"]["count"],
            "hits": inf["cache_hit"]["count"], "misses": inf["cache_miss"]["count"],
            "executions": st["execution_count"]}


def report(raw, out):
    meta = h.read_meta(os.path.join(raw, "meta.txt"))
    runs = {}
    for path in sorted(glob.glob(os.path.join(raw, "*.csv"))):
        model, mode, _ = os.path.basename(path).split(".", 2)
        for r in h.read_csv(path):
            runs.setdefault((model, mode, int(r["concurrency"])), []).append(r)
    concs = sorted({k[2] for k in runs})
    rows = []
    for model in MODELS:
        counts = {mode: cache_counts(raw, mode, model) for mode in MODES}
        for conc, mode in ((c, m) for c in concs for m in MODES):
            rs, base = runs.get((model, mode, conc), []), runs[(model, BASE[mode], conc)]
            v = {f: h.median(rs, f) for f in ("infer_per_sec", "p50_us", "p99_us",
                                              "server_cpu_us", "other_cpu_pct")}
            c = counts[mode]
            rows.append({
                "model": model, "mode": mode, "concurrency": conc,
                "infer_per_sec": v["infer_per_sec"], "p50_us": v["p50_us"],
                "p99_us": v["p99_us"], "server_cpu_us_per_req": v["server_cpu_us"],
                "throughput_vs_off": v["infer_per_sec"] / h.median(base, "infer_per_sec"),
                "p50_vs_off": v["p50_us"] / h.median(base, "p50_us"),
                "server_cpu_vs_off": v["server_cpu_us"] / h.median(base, "server_cpu_us"),
                "others_cpu_pct": v["other_cpu_pct"],
                "errors": sum(int(r["errors"]) for r in rs),
                "model_requests": c["requests"], "model_hits": c["hits"],
                "model_misses": c["misses"], "model_executions": c["executions"],
                "rounds": len(rs)})
    os.makedirs(out, exist_ok=True)
    h.write_csv(os.path.join(out, "results.csv"), rows)
    f0, f1, f2 = ((lambda d: lambda k: lambda r: "%.*f" % (d, r[k]))(d) for d in (0, 1, 2))
    h.write_md(os.path.join(out, "results.md"), [
        "# The response cache: hits and misses against no cache (HTTP)", "",
        h.produced_by("bench/cache/run.py", meta), "",
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
        "machine's cores: read the ratios.", "",
        *h.table([("model", lambda r: r["model"]), ("mode", lambda r: LABEL[r["mode"]]),
                  ("c", lambda r: str(r["concurrency"])),
                  ("infer/s", lambda r: format(round(r["infer_per_sec"]), ",")),
                  ("×", f2("throughput_vs_off")), ("p50 µs", f0("p50_us")),
                  ("×", f2("p50_vs_off")), ("p99 µs", f0("p99_us")),
                  ("server CPU µs/req", f1("server_cpu_us_per_req")),
                  ("×", f2("server_cpu_vs_off")),
                  ("hits / requests (all rounds)", lambda r: "%s / %s" % (
                      format(r["model_hits"], ","), format(r["model_requests"], ","))),
                  ("executions", lambda r: format(r["model_executions"], ",")),
                  ("others' CPU %", f1("others_cpu_pct")),
                  ("errors", lambda r: str(r["errors"]))], rows, left=(0, 1)), "",
        "Hits, requests and executions are the statistics endpoint's counts for the model "
        "over the whole run (every round and concurrency, warm-up requests included), the "
        "same for each of its rows.", "",
        "![throughput and server CPU against no cache](plot.png)", ""])
    plot(rows, concs, os.path.join(out, "plot.png"))


def plot(rows, concs, path):
    plt = h.pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    groups = [(m, c) for m in MODELS for c in concs]
    colors = {"hit": "#55a868", "miss": "#c44e52"}
    for ax, field, title in ((axes[0], "throughput_vs_off", "throughput ÷ no cache, same server"),
                             (axes[1], "server_cpu_vs_off",
                              "server CPU per request ÷ no cache, same server")):
        for j, mode in enumerate(("hit", "miss")):
            vals = [next(r[field] for r in rows if (r["model"], r["concurrency"], r["mode"]) ==
                         (m, c, mode)) for m, c in groups]
            xs = [i * 3 + j for i in range(len(groups))]
            ax.bar(xs, vals, color=colors[mode], label=LABEL[mode])
            for x, v in zip(xs, vals):
                ax.annotate("%.2f" % v, (x, v), ha="center", va="bottom", fontsize=7)
        ax.axhline(1.0, color="#444444", lw=0.8)
        ax.set_xticks([i * 3 + 0.5 for i in range(len(groups))], ["%s c=%d" % g for g in groups])
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.suptitle("The response cache, HTTP, ptperf (same run)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    out = os.environ.get("BENCH_RESULTS", os.path.join(h.ROOT, "bench", "cache", "results"))
    raw = os.path.join(out, "raw")
    shutil.rmtree(raw, ignore_errors=True)
    os.makedirs(os.path.join(raw, "models"))
    measure(raw, h.env("INTERVAL_MS", 1000), h.env("ROUNDS", 3))
    report(raw, out)
    h.log("report in %s/results.md" % out)


if __name__ == "__main__":
    main()
