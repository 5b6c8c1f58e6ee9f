"""Turns one bench/cpu/floor/run.sh run into its committed table and plot.

    .venv/bin/python bench/cpu/floor/report.py RAW_DIR OUT_DIR
    .venv/bin/python bench/cpu/floor/report.py --from-results OUT_DIR

RAW_DIR holds meta.txt, ptperf_<server>_r<round>_c<N>.csv, ticks.csv (user
and kernel ticks of each server over a window, and the requests it answered
in it) and dso_c<N>.txt (`perf report --sort dso` of ptserve). OUT_DIR gets
results.csv (one row per server, round and concurrency, and ptserve's time
shares by shared object), results.md and plot.png. --from-results writes
results.md and plot.png again from a committed results.csv.
"""
import csv
import os
import re
import statistics
import sys

# Shared objects, grouped as docs/benchmarks.md names them.
GROUPS = [
    ("kernel", re.compile(r"\[kernel")),
    ("LibTorch", re.compile(r"libtorch|libc10|libgomp|libiomp|mkl")),
    ("ptserve", re.compile(r"^ptserve$")),
    ("libc", re.compile(r"^libc\.so|^ld-linux|\[vdso\]")),
    ("jemalloc", re.compile(r"jemalloc")),
    ("http-parser", re.compile(r"http_parser")),
    ("libevent", re.compile(r"libevent")),
]

# The placements of run.sh at c=1, in table order: the server's threads are
# on CPU 0 in each; ptperf on CPU 0, on CPU 1, or where the scheduler puts it.
PLACES = ("same", "apart", "server")
PLACE_LABELS = {"same": "server and client\non the same CPU", "apart": "on two CPUs",
                "server": "server pinned,\nclient free"}


def read_meta(raw):
    meta = {}
    with open(os.path.join(raw, "meta.txt")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            meta[k] = v
    return meta


def group_of(dso):
    for name, rx in GROUPS:
        if rx.search(dso):
            return name
    return "other"


def dso_shares(path):
    """{group: percent of ptserve's samples} from `perf report --sort dso`."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*([\d.]+)%\s+(\S+)", line)
            if m:
                g = group_of(m.group(2))
                out[g] = out.get(g, 0.0) + float(m.group(1))
    return out


def read_ptperf(path):
    """ptperf's figures from its -f CSV (one row): infer/s, p50 and the
    server's and client's CPU per request."""
    with open(path, newline="") as f:
        p = list(csv.DictReader(f))[0]
    return {k: float(p[k]) for k in ("infer_per_sec", "p50_us", "server_cpu_us", "client_cpu_us")}


def rows_from_raw(raw, meta):
    clk = float(meta.get("clk_tck", "100"))
    ticks = {}
    with open(os.path.join(raw, "ticks.csv"), newline="") as f:
        for r in csv.DictReader(f):
            ticks[(r["server"], r["round"], r["concurrency"])] = r
    out = []
    for name in sorted(os.listdir(raw)):
        m = re.match(r"^ptperf_(ptserve|floor)_r(\d+)_c(\d+)\.csv$", name)
        if not m:
            continue
        s, rnd, c = m.groups()
        t = ticks[(s, rnd, c)]
        n = int(t["requests"])
        out.append({
            "kind": "run", "server": s, "round": int(rnd), "concurrency": int(c),
            **read_ptperf(os.path.join(raw, name)),
            "window_requests": n,
            "user_us": int(t["user_ticks"]) * 1e6 / clk / n if n else None,
            "kernel_us": int(t["sys_ticks"]) * 1e6 / clk / n if n else None,
            "group": "", "share_pct": "",
        })
    for name in sorted(os.listdir(raw)):
        m = re.match(r"^place_(ptserve|floor)_(same|apart|server)_r(\d+)\.csv$", name)
        if not m:
            continue
        s, place, rnd = m.groups()
        out.append({"kind": f"place_{place}", "server": s, "round": int(rnd), "concurrency": 1,
                    **read_ptperf(os.path.join(raw, name)), "group": "", "share_pct": ""})
    for c in (1, 4):
        for g, pct in sorted(dso_shares(os.path.join(raw, f"dso_c{c}.txt")).items()):
            out.append({"kind": "dso", "server": "ptserve", "round": "", "concurrency": c,
                        "group": g, "share_pct": round(pct, 2)})
    return out


FIELDS = ["kind", "server", "round", "concurrency", "infer_per_sec", "p50_us", "server_cpu_us",
          "client_cpu_us", "window_requests", "user_us", "kernel_us", "group", "share_pct"]


def med(rows, s, c, key, kind="run"):
    v = [float(r[key]) for r in rows
         if r["kind"] == kind and r["server"] == s and int(r["concurrency"]) == c and r[key] not in ("", None)]
    return statistics.median(v) if v else None


def write_md(rows, meta, out):
    cs = (1, 4)
    m = {(s, c, k): med(rows, s, c, k) for s in ("ptserve", "floor") for c in cs
         for k in ("infer_per_sec", "p50_us", "server_cpu_us", "user_us", "kernel_us", "client_cpu_us")}
    L = []
    L.append("# ptserve against the floor of this machine (issue #13)\n")
    L.append(f"Produced by `bench/cpu/floor/run.sh` (ROUNDS={meta.get('rounds')}) on {meta.get('date')}, "
             f"tree `{meta.get('tree')}`; machine: {meta.get('cpu')}, {meta.get('cores')} cores, "
             f"load average after {meta.get('load')}.\n")
    L.append("The floor is `floor.c`: one epoll loop on one thread that answers ptperf's requests "
             "for the 16 → 4 MLP with the bytes ptserve sent for them (recorded at the start of the run), "
             "with no parser library, no model and no allocation per request. Same client (ptperf, HTTP, "
             "binary tensors), same requests, same answers, measured back to back in each round, the "
             "order alternating. Medians over the rounds.\n")
    L.append("| c | server | infer/s | p50 µs | server CPU µs/req | window: user µs/req | kernel µs/req | client CPU µs/req |")
    L.append("|---:|---|---:|---:|---:|---:|---:|---:|")
    for c in cs:
        for s in ("floor", "ptserve"):
            L.append(f"| {c} | {s} | {m[(s, c, 'infer_per_sec')]:,.0f} | {m[(s, c, 'p50_us')]:.0f} | "
                     f"{m[(s, c, 'server_cpu_us')]:.1f} | {m[(s, c, 'user_us')]:.1f} | "
                     f"{m[(s, c, 'kernel_us')]:.1f} | {m[(s, c, 'client_cpu_us')]:.1f} |")
    L.append("")
    L.append("Server CPU µs/req: ptperf's `--server-pid` (the server's CPU time over its windows ÷ "
             "requests). Window: the server's user and kernel time from /proc/PID/stat (10 ms ticks) "
             "over a further window under the same load ÷ the requests answered in it (exact counts); "
             "a different stretch of time than ptperf's, so on a busy host the two need not agree.\n")
    L.append("Round by round (the two servers back to back): server CPU µs per request, and what "
             "ptserve spends above the floor.\n")
    L.append("| round | c=1 floor | c=1 ptserve | c=1 difference | c=4 floor | c=4 ptserve | c=4 difference |")
    L.append("|---:|---:|---:|---:|---:|---:|---:|")
    per = {(r["server"], int(r["round"]), int(r["concurrency"])): float(r["server_cpu_us"])
           for r in rows if r["kind"] == "run"}
    for rnd in sorted({k[1] for k in per}):
        cells = []
        for c in cs:
            f_, p_ = per.get(("floor", rnd, c)), per.get(("ptserve", rnd, c))
            cells += [f"{f_:.1f}", f"{p_:.1f}", f"{p_ - f_:.1f}"]
        L.append(f"| {rnd} | {' | '.join(cells)} |")
    diffs = {c: statistics.median(per[("ptserve", r, c)] - per[("floor", r, c)]
                                  for r in {k[1] for k in per}) for c in cs}
    L.append(f"| median | {m[('floor', 1, 'server_cpu_us')]:.1f} | {m[('ptserve', 1, 'server_cpu_us')]:.1f} | "
             f"**{diffs[1]:.1f}** | {m[('floor', 4, 'server_cpu_us')]:.1f} | "
             f"{m[('ptserve', 4, 'server_cpu_us')]:.1f} | **{diffs[4]:.1f}** |")
    L.append("")
    if any(r["kind"].startswith("place_") for r in rows):
        L.append("## Placement at c=1\n")
        L.append(f"Every thread of the server pinned to CPU 0 and ptperf to CPU 0 (same), to CPU 1 "
                 f"(apart) or to no CPU (server: only the server pinned), {meta.get('place_rounds')} "
                 "rounds, the servers and placements alternating; medians. Apart, each request wakes "
                 "the server on one virtual CPU and each reply the client on the other; on the same "
                 "CPU a wake-up is a switch between two threads. With only the server pinned, the "
                 "scheduler places the client: whether it stays on the server's CPU says whether a "
                 "server could bring the same-CPU figures about by pinning itself.\n")
        L.append("| placement | server | infer/s | p50 µs | server CPU µs/req | client CPU µs/req |")
        L.append("|---|---|---:|---:|---:|---:|")
        for place in PLACES:
            if not any(r["kind"] == f"place_{place}" for r in rows):
                continue
            for s in ("floor", "ptserve"):
                k = f"place_{place}"
                L.append(f"| {place} | {s} | {med(rows, s, 1, 'infer_per_sec', k):,.0f} | "
                         f"{med(rows, s, 1, 'p50_us', k):.0f} | {med(rows, s, 1, 'server_cpu_us', k):.1f} | "
                         f"{med(rows, s, 1, 'client_cpu_us', k):.1f} |")
        L.append("")
    L.append("## Where ptserve's time goes\n")
    L.append("`perf record -e cpu-clock` on ptserve (timer samples; this VM has no hardware counters), "
             "by shared object, as a share of its samples and as µs per request (the share × ptserve's "
             "server CPU per request above):\n")
    groups = [g for g, _ in GROUPS] + ["other"]
    shares = {(int(r["concurrency"]), r["group"]): float(r["share_pct"]) for r in rows if r["kind"] == "dso"}
    L.append("| part | c=1 share | c=1 µs/req | c=4 share | c=4 µs/req |")
    L.append("|---|---:|---:|---:|---:|")
    for g in groups:
        cells = []
        for c in cs:
            sh = shares.get((c, g))
            cpu = m[("ptserve", c, "server_cpu_us")]
            cells.append(f"{sh:.1f}% | {sh * cpu / 100:.1f}" if sh is not None else "– | –")
        L.append(f"| {g} | {' | '.join(cells)} |")
    L.append("")
    L.append("![ptserve and the floor, CPU per request](plot.png)\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(L))
    return m, shares


def plot(m, shares, rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = [g for g, _ in GROUPS] + ["other"]
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
    has_place = any(r["kind"].startswith("place_") for r in rows)
    fig, axes = plt.subplots(1, 3 if has_place else 2, figsize=(15 if has_place else 11, 4.2))
    ax, ax2 = axes[0], axes[1]
    xs, labels = [], []
    for i, c in enumerate((1, 4)):
        x0 = i * 3
        ax.bar(x0, m[("floor", c, "server_cpu_us")], color="#bbbbbb", label="floor (all of it)" if i == 0 else None)
        cpu = m[("ptserve", c, "server_cpu_us")]
        bottom = 0.0
        for g, col in zip(groups, colors):
            v = shares.get((c, g), 0.0) * cpu / 100
            ax.bar(x0 + 1, v, bottom=bottom, color=col, label=g if i == 0 else None)
            bottom += v
        xs += [x0, x0 + 1]
        labels += [f"floor\nc={c}", f"ptserve\nc={c}"]
    ax.set_xticks(xs, labels)
    ax.set_ylabel("server CPU µs per request (median)")
    ax.set_title("ptserve by part (perf samples) against the floor")
    ax.set_xlim(-0.8, 6.2)
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    ax.set_ylim(0, max(m[("ptserve", c, "server_cpu_us")] for c in (1, 4)) * 1.45)
    for c, style in ((1, "-"), (4, "--")):
        for s, col in (("ptserve", "#c44e52"), ("floor", "#4c72b0")):
            pts = sorted((int(r["round"]), float(r["server_cpu_us"])) for r in rows
                         if r["kind"] == "run" and r["server"] == s and int(r["concurrency"]) == c)
            ax2.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=col,
                     label=f"{s} c={c}")
    ax2.set_xlabel("round")
    ax2.set_xticks(sorted({int(r["round"]) for r in rows if r["kind"] == "run"}))
    ax2.set_ylabel("server CPU µs per request")
    ax2.set_ylim(bottom=0)
    ax2.set_title("round by round (the two back to back)")
    ax2.legend(fontsize=7)
    if has_place:
        ax3 = axes[2]
        places = [p for p in PLACES if any(r["kind"] == f"place_{p}" for r in rows)]
        for i, place in enumerate(places):
            for j, (s, col) in enumerate((("floor", "#bbbbbb"), ("ptserve", "#c44e52"))):
                v = med(rows, s, 1, "server_cpu_us", f"place_{place}")
                ax3.bar(i * 3 + j, v, color=col, label=s if i == 0 else None)
                ax3.annotate(f"{v:.1f}", (i * 3 + j, v), ha="center", va="bottom", fontsize=8)
        ax3.set_xticks([i * 3 + 0.5 for i in range(len(places))],
                       [PLACE_LABELS[p] for p in places])
        ax3.set_ylabel("server CPU µs per request, c=1 (median)")
        ax3.set_title("placement at c=1 (taskset)")
        ax3.legend(fontsize=7)
    fig.suptitle("16 → 4 MLP over HTTP, ptperf: ptserve against the floor of this VM")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plot.png"), dpi=110)


def main():
    if sys.argv[1] == "--from-results":
        out = sys.argv[2]
        with open(os.path.join(out, "results.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        meta = read_meta(out)  # report.py wrote it there beside results.csv
    else:
        raw, out = sys.argv[1], sys.argv[2]
        meta = read_meta(raw)
        rows = rows_from_raw(raw, meta)
        with open(os.path.join(out, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            for r in rows:
                w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in FIELDS})
        with open(os.path.join(out, "meta.txt"), "w") as f:
            for k, v in meta.items():
                f.write(f"{k}={v}\n")
    m, shares = write_md(rows, meta, out)
    plot(m, shares, rows, out)
    print(open(os.path.join(out, "results.md")).read())


if __name__ == "__main__":
    main()
