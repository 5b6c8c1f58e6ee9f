"""Turns one bench/triton/run.py run into its committed table and plot.

    .venv/bin/python bench/triton/report.py RAW_DIR OUT_DIR
    .venv/bin/python bench/triton/report.py --from-results OUT_DIR

RAW_DIR holds meta.txt and results.csv (one row per client, server, round,
protocol and concurrency). OUT_DIR gets results.csv (the rows, with the
run's metadata as comment lines at the top), results.md and plot.png.
--from-results writes results.md and plot.png again from a committed
results.csv.
"""
import csv
import os
import statistics
import sys

SERVERS = ("tritonserver", "ptserve")
PROTO = {"http": "HTTP", "grpc": "gRPC"}
METRICS = (("infer_per_sec", "infer/s", "{:,.0f}"), ("p50_us", "p50 µs", "{:.0f}"),
           ("server_cpu_us", "server CPU µs/req", "{:.1f}"))


def read_rows(path):
    meta, lines = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("# "):
                k, _, v = line[2:].rstrip("\n").partition("=")
                meta[k] = v
            else:
                lines.append(line)
    return meta, list(csv.DictReader(lines))


def read_meta(path):
    with open(path) as f:
        return dict(line.rstrip("\n").partition("=")[::2] for line in f if "=" in line)


def instance(meta):
    """The models' instance kind in words: "CPU", or the GPU's name."""
    if meta.get("kind") == "KIND_GPU":
        return f"GPU ({meta.get('gpu', 'CUDA')})"
    return "CPU"


def cells(rows, client_kinds=("ptperf", "perf_analyzer")):
    """The (client, protocol, concurrency) cells, in table order; the
    fixed-rate rows (client perf_analyzer_rate, the rate in the concurrency
    column) only when asked for."""
    order = {"ptperf": 0, "perf_analyzer": 1, "perf_analyzer_rate": 2, "http": 0, "grpc": 1}
    keys = {(r["client"], r["protocol"], int(r["concurrency"])) for r in rows
            if r["client"] in client_kinds}
    return sorted(keys, key=lambda k: (order[k[0]], order[k[1]], k[2]))


def per_round(rows, cell, metric):
    """{round: {server: value}} for one cell."""
    out = {}
    for r in rows:
        if (r["client"], r["protocol"], int(r["concurrency"])) == cell and r[metric] != "":
            out.setdefault(int(r["round"]), {})[r["server"]] = float(r[metric])
    return {k: v for k, v in out.items() if len(v) == 2}


def summary(rows, cell, metric):
    """Medians of each server, and the median and range of the per-round
    ptserve ÷ tritonserver ratios (a round's two figures were back to back)."""
    rounds = per_round(rows, cell, metric)
    if not rounds:
        return None
    med = {s: statistics.median(v[s] for v in rounds.values()) for s in SERVERS}
    ratios = [v["ptserve"] / v["tritonserver"] for v in rounds.values() if v["tritonserver"]]
    return med, statistics.median(ratios), min(ratios), max(ratios), len(rounds)


def markdown(meta, rows):
    L = ["# ptserve and tritonserver side by side", "",
         (f"Produced by `{meta['command']}` on {meta.get('date')}, ptserve "
          if meta.get("command") else
          f"Produced by `bench/triton/run.sh` (ROUNDS={meta.get('rounds')}, "
          f"BENCH_INTERVAL_MS={meta.get('interval_ms')}"
          + (", KIND=KIND_GPU" if meta.get("kind") == "KIND_GPU" else "")
          + f") on {meta.get('date')}, ptserve ") +
         f"`{meta.get('commit')}`.", "",
         f"- Machine: {meta.get('cpu')}, {meta.get('cores')} cores shared by the client and the "
         f"server, kernel {meta.get('kernel')}; load average before {meta.get('load_before')}, "
         f"after {meta.get('load_after')}"
         + ("; a host shared with other work: compare the ratios of one run, not runs."
            if meta.get("command") else "."),
         f"- tritonserver {meta.get('tritonserver')}, default flags, with "
         f"{meta.get('triton_backend')}, running {meta.get('triton_libtorch')}. "
         f"ptserve, default flags, Release build, running {meta.get('ptserve_libtorch')}.",
         "- The same repository (one directory, read by both), the 16 → 4 MLP (`mlp`), one "
         f"{instance(meta)} instance, `max_batch_size: 8`, no dynamic batching; both servers' "
         "answers were checked against torch's forward() before measuring (check.py).",
         "- Clients: ptperf (`--server-pid`: the server's CPU over its windows ÷ requests)"
         + (f", then NVIDIA's perf_analyzer ({meta.get('perf_analyzer')}; the server's CPU from "
            "/proc over its run ÷ the requests its statistics endpoint counted)"
            if any(r["client"] == "perf_analyzer" for r in rows) else
            " (perf_analyzer was not run: PA=0, or not installed)")
         + ". Each cell on one server then the other, back to back, the order alternating "
         "between rounds.",
         "", "Medians over the rounds; × = ptserve ÷ tritonserver, the median of the rounds' "
         "ratios (range in brackets).", "",
         "| client | protocol | c | infer/s tritonserver | ptserve | × | p50 µs tritonserver | "
         "ptserve | × | server CPU µs/req tritonserver | ptserve | × |",
         "|---|---|---:|---:|---:|---|---:|---:|---|---:|---:|---|"]
    for cell in cells(rows):
        parts = [cell[0], PROTO[cell[1]], str(cell[2])]
        for metric, _, fmt in METRICS:
            s = summary(rows, cell, metric)
            if s is None:
                parts += ["", "", ""]
                continue
            med, ratio, lo, hi, _ = s
            parts += [fmt.format(med["tritonserver"]), fmt.format(med["ptserve"]),
                      f"{ratio:.2f} ({lo:.2f}–{hi:.2f})"]
        L.append("| " + " | ".join(parts) + " |")
    L += fixed_rate(rows)
    L += targets(rows)
    L += breakdown(meta, rows)
    rss = {s: meta.get(f"rss_kb_{s}") for s in SERVERS}
    if all(rss.values()):
        L += ["", "After the run: tritonserver "
              f"{int(rss['tritonserver']) / 1024:,.0f} MiB resident in "
              f"{meta.get('threads_tritonserver')} threads, ptserve "
              f"{int(rss['ptserve']) / 1024:,.0f} MiB in {meta.get('threads_ptserve')} threads "
              "(both with LibTorch loaded and the same two models)."]
    L += ["", "![ptserve and tritonserver](plot.png)"]
    return "\n".join(L) + "\n"


def fixed_rate(rows):
    """perf_analyzer at a fixed request rate: the rate each server kept and
    its CPU per request (what a team paying for cores sees)."""
    cs = cells(rows, ("perf_analyzer_rate",))
    if not cs:
        return []
    L = ["", "At a fixed request rate (perf_analyzer `--request-rate-range`): the rate each "
         "server kept (perf_analyzer's figure; where it never settled, as at a rate the server "
         "can not keep, the requests the server counted over the run's wall time, and no p50) "
         "and the server's CPU per request. Medians over the rounds; × = ptserve "
         "÷ tritonserver, the median of the rounds' ratios (range).", "",
         "| protocol | asked, req/s | kept, tritonserver | ptserve | p50 µs tritonserver | "
         "ptserve | server CPU µs/req tritonserver | ptserve | × |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for cell in cs:
        kept = summary(rows, cell, "infer_per_sec")
        p50 = summary(rows, cell, "p50_us")
        cpu = summary(rows, cell, "server_cpu_us")
        if not (kept and cpu):
            continue
        # No p50 where perf_analyzer never settled (a rate not kept).
        p50s = (f"{p50[0]['tritonserver']:.0f} | {p50[0]['ptserve']:.0f}" if p50
                else "– | –")
        L.append(f"| {PROTO[cell[1]]} | {cell[2]:,} | {kept[0]['tritonserver']:,.0f} | "
                 f"{kept[0]['ptserve']:,.0f} | {p50s} | {cpu[0]['tritonserver']:.1f} | "
                 f"{cpu[0]['ptserve']:.1f} | {cpu[1]:.2f} ({cpu[2]:.2f}–{cpu[3]:.2f}) |")
    return L


# Issue 47's targets on the 2-core build machine: (what, cells' client
# kinds, metric, concurrency or rate, bound on ptserve ÷ tritonserver,
# True when the ratio must reach the bound from above).
TARGETS = (("throughput at c=4", ("ptperf", "perf_analyzer"), "infer_per_sec", 4, 2.0, True),
           ("p50 at c=1", ("ptperf", "perf_analyzer"), "p50_us", 1, 0.6, False),
           ("server CPU per request at 2,000 req/s", ("perf_analyzer_rate",), "server_cpu_us",
            2000, 0.35, False),
           ("server CPU per request at 8,000 req/s", ("perf_analyzer_rate",), "server_cpu_us",
            8000, 0.35, False))


def targets(rows):
    """Issue 47's targets against this run's medians of per-round ratios."""
    L = ["", "Issue 47's targets (ptserve ÷ tritonserver, the median of the rounds' ratios):", "",
         "| target | client | protocol | measured | |", "|---|---|---|---:|---|"]
    for what, kinds, metric, at, bound, above in TARGETS:
        for cell in cells(rows, kinds):
            if cell[2] != at:
                continue
            s = summary(rows, cell, metric)
            if not s:
                continue
            ratio = s[1]
            ok = ratio >= bound if above else ratio <= bound
            verdict = "met" if ok else "missed by %.2f" % abs(ratio - bound)
            client = "perf_analyzer" if cell[0] == "perf_analyzer_rate" else cell[0]
            L.append(f"| {what} {'≥' if above else '≤'} {bound}× | {client} | {PROTO[cell[1]]} | "
                     f"{ratio:.2f}× | {verdict} |")
    return L if len(L) > 5 else []


def breakdown(meta, rows):
    """Where each server says a request's time went (its statistics
    endpoint, averages per request over each client's run), medians over
    the rounds; nothing for runs that did not record it."""
    if not rows or not rows[0].get("queue_us"):
        return []
    gpu = meta.get("kind") == "KIND_GPU"
    L = ["", "Inside the servers (their statistics endpoints, µs per request, medians over the "
         "rounds): queue, then compute input, infer and output. The sum is comparable between "
         "the two" + ("; the split is not quite — ptserve times a CUDA batch's phases with "
                      "events on the device." if gpu else "."),
         "", "| client | protocol | c | server | queue | compute input | compute infer | "
         "compute output | sum |", "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    keys = ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")
    for cell in cells(rows):
        for s in SERVERS:
            vals = []
            for k in keys:
                got = [float(r[k]) for r in rows if r["server"] == s and r[k] != "" and
                       (r["client"], r["protocol"], int(r["concurrency"])) == cell]
                vals.append(statistics.median(got) if got else None)
            if None in vals:
                continue
            L.append(f"| {cell[0]} | {PROTO[cell[1]]} | {cell[2]} | {s} | " +
                     " | ".join(f"{v:.1f}" for v in vals) + f" | {sum(vals):.1f} |")
    return L


def plot(meta, rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = cells(rows)
    names = {"http": "HTTP", "grpc": "gRPC", "ptperf": "ptperf", "perf_analyzer": "perf_an."}
    labels = [f"{names[c[0]]}\n{names[c[1]]} c={c[2]}" for c in cs]
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    for ax, (metric, title, _) in zip(axes, METRICS):
        for i, s in enumerate(SERVERS):
            vals = []
            for cell in cs:
                r = summary(rows, cell, metric)
                vals.append(r[0][s] if r else 0)
            ax.bar([x + (i - 0.5) * 0.4 for x in range(len(cs))], vals, 0.4, label=s,
                   color=("#76b900", "#1f5fa8")[i])
        ax.set_xticks(range(len(cs)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(title + (" (higher is better)" if metric == "infer_per_sec"
                              else " (lower is better)"))
        ax.legend()
    fig.suptitle(f"16 → 4 MLP on one {instance(meta)} instance, same model file, same clients "
                 "(medians; perf_an. = perf_analyzer)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv):
    if len(argv) == 3 and argv[1] == "--from-results":
        out = argv[2]
        meta, rows = read_rows(os.path.join(out, "results.csv"))
    elif len(argv) == 3:
        raw, out = argv[1], argv[2]
        meta = read_meta(os.path.join(raw, "meta.txt"))
        with open(os.path.join(raw, "results.csv")) as f:
            text = f.read()
        with open(os.path.join(out, "results.csv"), "w") as f:
            f.write("".join(f"# {k}={v}\n" for k, v in meta.items()) + text)
        meta, rows = read_rows(os.path.join(out, "results.csv"))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    md = markdown(meta, rows)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    plot(meta, rows, os.path.join(out, "plot.png"))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
