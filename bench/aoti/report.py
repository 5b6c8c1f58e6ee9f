#!/usr/bin/env python3
"""Turns one bench/aoti/run.py run into the committed results.

    .venv/bin/python bench/aoti/report.py RAW_DIR RESULTS_DIR

RAW_DIR: meta.txt, inproc.csv (torch_ref.py's rows labelled
<model>/<eager|ts|aoti>/b<batch>, PyTorch itself, and bench_inproc's
<model>/<bridge_ts|bridge_aoti>/b<batch>, ptserve's bridge) and
ptperf_<model>_<ts|aoti>_b<batch>[_r<round>].csv.
RESULTS_DIR gets results.csv (one row per model and batch), results.md (the
tables and where AOTInductor wins or loses, by median latency and by
throughput) and plot.png.

    .venv/bin/python bench/aoti/report.py --from-results RESULTS_DIR

writes RESULTS_DIR/results.md again from the committed RESULTS_DIR/results.csv
(the raw files are not committed), keeping the old results.md's heading and
description, which hold the run's meta.txt; results.csv and plot.png stay.
"""
import csv
import os
import sys

VARIANTS = [("eager", "eager PyTorch, in process"),
            ("ts", "TorchScript, PyTorch in process"),
            ("aoti", "AOTInductor, PyTorch in process"), ("ptserve_ts", "ptserve TorchScript"),
            ("ptserve_aoti", "ptserve AOTInductor")]
# The same files through ptserve's own bridge in process (bench_inproc): a
# diagnostic of where served time goes, never the reference.
BRIDGE = [("bridge_ts", "TorchScript, ptserve's bridge"),
          ("bridge_aoti", "AOTInductor, ptserve's bridge")]
COLUMNS = ["model", "batch"] + ["%s_p50_us" % v for v, _ in VARIANTS + BRIDGE] + \
          ["%s_items_per_sec" % v for v, _ in VARIANTS + BRIDGE] + \
          ["aoti_vs_ts_inproc", "aoti_vs_ts_ptserve", "ptserve_aoti_server_compute_us",
           "ptserve_ts_server_compute_us"]


def read_meta(raw):
    meta = {}
    with open(os.path.join(raw, "meta.txt")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    return meta


def heading(meta):
    """The lines of results.md before its first table: the run and what the
    numbers mean."""
    return ["# AOTInductor vs TorchScript (%s)" % meta.get("device", "?"), "",
            "Produced by `%s` on %s (%s cores%s), torch %s, git %s, %s; "
            "load average %s before, %s after." % (
                meta.get("command") or "bench/aoti/run.sh" + (
                    " --device cuda" if meta.get("device") == "cuda" else ""), meta.get("cpu", "?"),
                meta.get("cores", "?"), ", " + meta["gpu"] if meta.get("gpu") else "",
                meta.get("torch", "?"), meta.get("git", "?"), meta.get("date", "?"),
                meta.get("load_before", "?"), meta.get("load_after", "?")), "",
            "Median latency of one call in microseconds, one call at a time (lower is better), "
            "the best of %s interleaved rounds. " % meta.get("rounds", "1") +
            "In process: PyTorch itself running the same file (torch.jit.load, "
            "aoti_load_package; eager: the module it was made from), inputs from the host "
            "and results back on it%s. ptserve: HTTP with binary tensors, concurrency 1 (ptperf), the whole round trip. "
            "The last two columns are TorchScript's median over AOTInductor's (above 1: "
            "AOTInductor is faster)." % (
                ", with %s (as ptserve runs on jemalloc)" % meta["pytorch_allocator"]
                if meta.get("pytorch_allocator") else ""), ""]


def throughput_ratios(row):
    """AOTInductor's items per second over TorchScript's, in process and
    served (None where a variant is missing)."""
    def ratio(aoti, ts):
        a, t = row.get("%s_items_per_sec" % aoti), row.get("%s_items_per_sec" % ts)
        return a / t if a and t else None
    return {"aoti_vs_ts_inproc": ratio("aoti", "ts"),
            "aoti_vs_ts_ptserve": ratio("ptserve_aoti", "ptserve_ts")}


def wins_and_losses(ordered, ratios, more, less):
    """One line per place (in process, served): where the ratio (above 1:
    AOTInductor better) is above, below or within 5 % of 1."""
    lines = []
    for key, where in (("aoti_vs_ts_inproc", "in process"), ("aoti_vs_ts_ptserve", "served")):
        def pick(test):
            return ", ".join("%s at batch %d (%.2fx)" % (r["model"], r["batch"], ratios(r)[key])
                             for r in ordered if ratios(r)[key] and test(ratios(r)[key])) \
                or "nowhere"
        lines.append("- %s: %s than TorchScript: %s; %s: %s; within 5 %%: %s." % (
            where[0].upper() + where[1:], more, pick(lambda v: v > 1.05), less,
            pick(lambda v: v < 0.95), pick(lambda v: 0.95 <= v <= 1.05)))
    return lines


def write_md(out, head, ordered):
    """results.md: `head`, the latency and throughput tables, and where
    AOTInductor wins and loses by each measure."""
    def cell(row, key):
        v = row.get(key)
        return "%.1f" % v if v is not None else "-"

    lines = list(head) + [
        "| model | batch | " + " | ".join(label for _, label in VARIANTS) +
        " | AOTI speed-up in process | AOTI speed-up served |",
        "|---|---:|" + "---:|" * (len(VARIANTS) + 2)]
    for row in ordered:
        lines.append("| %s | %d | %s | %s | %s |" % (
            row["model"], row["batch"], " | ".join(cell(row, "%s_p50_us" % v) for v, _ in VARIANTS),
            "%.2fx" % row["aoti_vs_ts_inproc"] if row.get("aoti_vs_ts_inproc") else "-",
            "%.2fx" % row["aoti_vs_ts_ptserve"] if row.get("aoti_vs_ts_ptserve") else "-"))
    lines += ["", "Throughput (items per second, batch included):", "",
              "| model | batch | " + " | ".join(label for _, label in VARIANTS) + " |",
              "|---|---:|" + "---:|" * len(VARIANTS)]
    for row in ordered:
        lines.append("| %s | %d | %s |" % (row["model"], row["batch"], " | ".join(
            "%.0f" % row["%s_items_per_sec" % v] if row.get("%s_items_per_sec" % v) else "-"
            for v, _ in VARIANTS)))
    lines += ["", "## What serving adds, and ptserve's bridge (diagnostic)", "",
              "Served median minus PyTorch's in process for the same file: HTTP, the "
              "server's request path and the client. The bridge columns are the same files "
              "run by ptserve's own code in process (bench_inproc), a diagnostic of where "
              "the served time goes, not a reference.", "",
              "| model | batch | served − PyTorch, TorchScript (µs) | "
              "served − PyTorch, AOTInductor (µs) | " +
              " | ".join(label for _, label in BRIDGE) + " |",
              "|---|---:|---:|---:|" + "---:|" * len(BRIDGE)]
    for row in ordered:
        def gap(k):
            a, b = row.get("ptserve_%s_p50_us" % k), row.get("%s_p50_us" % k)
            return "%.1f" % (a - b) if a is not None and b is not None else "-"
        lines.append("| %s | %d | %s | %s | %s |" % (
            row["model"], row["batch"], gap("ts"), gap("aoti"),
            " | ".join(cell(row, "%s_p50_us" % v) for v, _ in BRIDGE)))
    lines += ["", "## Where AOTInductor wins and where it loses (median latency, 5 % margin)", ""]
    lines += wins_and_losses(ordered, lambda r: r, "faster", "slower")

    lines += ["", "## Where AOTInductor wins and where it loses (throughput, 5 % margin)", "",
              "AOTInductor's items per second over TorchScript's, from the same round as the "
              "medians above (above 1: AOTInductor does more). Throughput is the calls of the "
              "whole round over its time, so unlike the median it counts the slow tail too: "
              "the two measures can disagree.", "",
              "| model | batch | AOTI throughput in process | AOTI throughput served |",
              "|---|---:|---:|---:|"]
    for row in ordered:
        t = throughput_ratios(row)
        lines.append("| %s | %d | %s |" % (row["model"], row["batch"], " | ".join(
            "%.2fx" % t[k] if t[k] else "-" for k in ("aoti_vs_ts_inproc", "aoti_vs_ts_ptserve"))))
    lines.append("")
    lines += wins_and_losses(ordered, throughput_ratios, "more throughput", "less")
    disagree = []
    for key, where in (("aoti_vs_ts_inproc", "in process"), ("aoti_vs_ts_ptserve", "served")):
        for r in ordered:
            lat, thr = r.get(key), throughput_ratios(r)[key]
            if lat and thr and (lat > 1.05 and thr < 0.95 or lat < 0.95 and thr > 1.05):
                disagree.append("%s at batch %d %s (median %.2fx, throughput %.2fx)"
                                % (r["model"], r["batch"], where, lat, thr))
    lines.append("- The two measures disagree: %s." % (", ".join(disagree) or "nowhere"))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def from_results(out):
    """results.md again from out/results.csv, with the old heading."""
    with open(os.path.join(out, "results.md")) as f:
        old = f.read().split("\n")
    head = old[:next(i for i, line in enumerate(old) if line.startswith("|"))]
    ordered = []
    with open(os.path.join(out, "results.csv"), newline="") as f:
        for r in csv.DictReader(f):
            row = {"model": r["model"], "batch": int(r["batch"])}
            row.update({k: float(v) for k, v in r.items() if k not in row and v})
            ordered.append(row)
    write_md(out, head, ordered)
    return 0


def main(raw, out):
    meta = read_meta(raw)
    rows = {}
    def keep_best(row, variant, p50, per_sec, compute=None):
        """Each variant's best round: the lowest median (run.py interleaves
        the rounds, so load from elsewhere spoils rounds, not variants)."""
        key = "%s_p50_us" % variant
        if key in row and row[key] <= p50:
            return
        row[key] = p50
        row["%s_items_per_sec" % variant] = per_sec
        if compute is not None:
            row["%s_server_compute_us" % variant] = compute

    with open(os.path.join(raw, "inproc.csv"), newline="") as f:
        for r in csv.DictReader(f):
            model, variant, b = r["label"].split("/")
            row = rows.setdefault((model, int(b[1:])), {"model": model, "batch": int(b[1:])})
            keep_best(row, variant, float(r["p50_us"]), float(r["per_sec"]) * int(b[1:]))
    for name in sorted(os.listdir(raw)):
        if not (name.startswith("ptperf_") and name.endswith(".csv")):
            continue
        parts = name[len("ptperf_"):-len(".csv")].rsplit("_", 3)
        if parts[-1].startswith("r") and parts[-2].startswith("b"):
            model, kind, b = parts[0], parts[1], parts[2]  # <model>_<kind>_b<B>_r<round>
        else:
            model, kind, b = name[len("ptperf_"):-len(".csv")].rsplit("_", 2)
        with open(os.path.join(raw, name), newline="") as f:
            r = list(csv.DictReader(f))[-1]
        row = rows.setdefault((model, int(b[1:])), {"model": model, "batch": int(b[1:])})
        compute = r.get("server_compute_infer_us")
        keep_best(row, "ptserve_" + kind, float(r["p50_us"]), float(r["infer_per_sec"]),
                  float(compute) if compute else None)
    for row in rows.values():
        if row.get("aoti_p50_us") and row.get("ts_p50_us"):
            row["aoti_vs_ts_inproc"] = row["ts_p50_us"] / row["aoti_p50_us"]
        if row.get("ptserve_aoti_p50_us") and row.get("ptserve_ts_p50_us"):
            row["aoti_vs_ts_ptserve"] = row["ptserve_ts_p50_us"] / row["ptserve_aoti_p50_us"]
    ordered = [rows[k] for k in sorted(rows)]

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for row in ordered:
            w.writerow({k: ("%.2f" % v if isinstance(v, float) else v)
                        for k, v in row.items() if k in COLUMNS})

    write_md(out, heading(meta), ordered)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report.py: no matplotlib; no plot", file=sys.stderr)
        return 0
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(VARIANTS)
    for i, (v, label) in enumerate(VARIANTS):
        xs = [j + i * width for j in range(len(ordered))]
        ax.bar(xs, [r.get("%s_p50_us" % v) or 0 for r in ordered], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(ordered))])
    ax.set_xticklabels(["%s b%d" % (r["model"], r["batch"]) for r in ordered])
    ax.set_yscale("log")
    ax.set_ylabel("median latency per call (us, log)")
    ax.set_title("AOTInductor vs TorchScript, %s" % meta.get("device", "?"))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plot.png"), dpi=110)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--from-results":
        sys.exit(from_results(sys.argv[2]))
    sys.exit(main(sys.argv[1], sys.argv[2]))
