"""Turns one bench/cpu/haltpoll/run.sh run into its committed table and plot.

    .venv/bin/python bench/cpu/haltpoll/report.py RAW_DIR OUT_DIR
    .venv/bin/python bench/cpu/haltpoll/report.py --from-results OUT_DIR

RAW_DIR holds meta.txt, poll.csv (per cell: requests the server answered and
microseconds of cpuidle POLL state, every CPU, over the ptperf run) and
ptperf_<ns>_<server>_<protocol>_c<N>_r<round>.csv. OUT_DIR gets results.csv
(one row per setting, server, protocol, concurrency and round), results.md
(medians over the rounds) and plot.png. --from-results writes results.md and
plot.png again from a committed results.csv (and its meta lines).
"""
import csv
import os
import statistics
import sys

CELLS = [("ptserve", "http", "ptserve, HTTP"), ("ptserve", "grpc", "ptserve, gRPC"),
         ("ptserve", "stream", "ptserve, gRPC stream"), ("floor", "http", "floor.c, HTTP")]
FIELDS = ["setting_ns", "server", "protocol", "concurrency", "round", "infer_per_sec", "p50_us",
          "server_cpu_us", "client_cpu_us", "poll_us_per_req", "forward_us"]


def read_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            meta[k] = v
    return meta


def rows_from_raw(raw):
    out = []
    with open(os.path.join(raw, "poll.csv"), newline="") as f:
        for p in csv.DictReader(f):
            name = "ptperf_{setting_ns}_{server}_{protocol}_c{concurrency}_r{round}.csv".format(**p)
            with open(os.path.join(raw, name), newline="") as g:
                q = list(csv.DictReader(g))[0]
            n = int(p["answered"])
            out.append({
                "setting_ns": int(p["setting_ns"]), "server": p["server"], "protocol": p["protocol"],
                "concurrency": int(p["concurrency"]), "round": int(p["round"]),
                "infer_per_sec": float(q["infer_per_sec"]), "p50_us": float(q["p50_us"]),
                "server_cpu_us": float(q["server_cpu_us"]), "client_cpu_us": float(q["client_cpu_us"]),
                "poll_us_per_req": round(int(p["poll_us"]) / n, 2) if n else None,
                # the model's forward, from ptserve's statistics (floor.c has none)
                "forward_us": float(q["server_compute_infer_us"]) if q["server_compute_infer_us"] else "",
            })
    return out


def read_results(out):
    rows, meta = [], {}
    with open(os.path.join(out, "results.csv"), newline="") as f:
        for line in f:
            if line.startswith("# "):
                k, _, v = line[2:].rstrip("\n").partition("=")
                meta[k] = v
            else:
                break
        f.seek(0)
        for r in csv.DictReader(line for line in f if not line.startswith("# ")):
            rows.append({k: (v if k in ("server", "protocol") or v == "" else float(v))
                         for k, v in r.items()})
    return rows, meta


def write_csv(rows, meta, out):
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        for k, v in meta.items():
            f.write(f"# {k}={v}\n")
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in sorted(rows, key=lambda r: (r["server"], r["protocol"], r["concurrency"],
                                             r["setting_ns"], r["round"])):
            w.writerow(r)


def med(rows, ns, s, proto, c, key):
    v = [float(r[key]) for r in rows if int(r["setting_ns"]) == ns and r["server"] == s
         and r["protocol"] == proto and int(r["concurrency"]) == c and r.get(key) not in ("", None)]
    return statistics.median(v) if v else None


def settings_of(meta, rows):
    if meta.get("settings"):
        return [int(x) for x in meta["settings"].split()]
    return sorted({int(r["setting_ns"]) for r in rows})


def label_ns(ns):
    return "off (0)" if ns == 0 else f"{ns // 1000} µs"


def write_md(rows, meta, out):
    settings = settings_of(meta, rows)
    base = settings[0]
    L = ["# Guest halt polling and the request path at low concurrency (issue #13)\n"]
    L.append(f"Produced by `bench/cpu/haltpoll/run.sh` (ROUNDS={meta.get('rounds')}, "
             f"HALTPOLL_NS=\"{meta.get('settings')}\") on {meta.get('date')}, tree `{meta.get('tree')}`; "
             f"machine: {meta.get('cpu')}, {meta.get('cores')} cores, kernel {meta.get('kernel')}, "
             f"idle driver {meta.get('idle_driver')}, the machine's own guest_halt_poll_ns "
             f"{meta.get('original_ns')} (grow {meta.get('grow')}, grow_start {meta.get('grow_start')}, "
             f"shrink {meta.get('shrink')}); load average after {meta.get('load')}.\n")
    L.append("Each cell: one ptperf run (binary tensors, the 16 → 4 MLP) with "
             "`/sys/module/haltpoll/parameters/guest_halt_poll_ns` set to the column's value; the "
             "values alternate in order between rounds; medians over the rounds. floor.c is "
             "bench/cpu/floor's server, which answers with ptserve's recorded bytes and does "
             "nothing else.\n")
    L.append("Server and client CPU: ptperf's `--server-pid` and its own /proc time ÷ requests. "
             "Poll: the time every virtual CPU spent in cpuidle's POLL state over the run ÷ the "
             "requests the server answered; no process is charged for it (the guest counts it as "
             "idle), the host sees it as a busy virtual CPU. Total = server + client + poll: the "
             "virtual CPU time one request took, all told. Forward: the time ptserve's statistics "
             "endpoint gives the model's forward (compute_infer) per request.\n")
    for c in (1, 4):
        L.append(f"## c={c}\n")
        L.append("| server | guest_halt_poll_ns | infer/s | × off | p50 µs | server CPU µs/req | "
                 "client CPU µs/req | poll µs/req | total µs/req | forward µs |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s, proto, name in CELLS:
            b = med(rows, base, s, proto, c, "infer_per_sec")
            for ns in settings:
                m = {k: med(rows, ns, s, proto, c, k) for k in
                     ("infer_per_sec", "p50_us", "server_cpu_us", "client_cpu_us", "poll_us_per_req",
                      "forward_us")}
                if m["infer_per_sec"] is None:
                    continue
                tot = m["server_cpu_us"] + m["client_cpu_us"] + (m["poll_us_per_req"] or 0)
                L.append(f"| {name} | {label_ns(ns)} | {m['infer_per_sec']:,.0f} | "
                         f"{m['infer_per_sec'] / b:.2f} | {m['p50_us']:.0f} | {m['server_cpu_us']:.1f} | "
                         f"{m['client_cpu_us']:.1f} | {m['poll_us_per_req']:.1f} | {tot:.1f} | "
                         + (f"{m['forward_us']:.1f} |" if m["forward_us"] is not None else "— |"))
        L.append("")
    L.append("## Round by round, c=1, ptserve over HTTP\n")
    rounds = sorted({int(r["round"]) for r in rows})
    L.append("| guest_halt_poll_ns | " + " | ".join(f"round {r}: infer/s, p50 µs" for r in rounds) + " |")
    L.append("|---|" + "---:|" * len(rounds))
    for ns in settings:
        cells = []
        for rnd in rounds:
            v = [r for r in rows if int(r["setting_ns"]) == ns and r["server"] == "ptserve"
                 and r["protocol"] == "http" and int(r["concurrency"]) == 1 and int(r["round"]) == rnd]
            cells.append(f"{float(v[0]['infer_per_sec']):,.0f}, {float(v[0]['p50_us']):.0f}" if v else "")
        L.append(f"| {label_ns(ns)} | " + " | ".join(cells) + " |")
    L.append("\n![p50 and throughput at c=1 by guest_halt_poll_ns](plot.png)\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(L))


def write_plot(rows, meta, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    settings = settings_of(meta, rows)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    width = 0.8 / len(settings)
    xs = range(len(CELLS))
    for i, ns in enumerate(settings):
        off = [x - 0.4 + width * (i + 0.5) for x in xs]
        axes[0].bar(off, [med(rows, ns, s, p, 1, "p50_us") or 0 for s, p, _ in CELLS], width,
                    label=f"guest_halt_poll_ns {label_ns(ns)}")
        axes[1].bar(off, [med(rows, ns, s, p, 1, "infer_per_sec") or 0 for s, p, _ in CELLS], width)
        axes[2].bar(off, [med(rows, ns, s, p, 1, "server_cpu_us") or 0 for s, p, _ in CELLS], width)
    for ax, title in zip(axes, ("p50 µs at c=1 (lower is better)", "infer/s at c=1",
                                "server CPU µs per request at c=1")):
        ax.set_title(title)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([n.replace(", ", "\n") for _, _, n in CELLS], fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Guest halt polling, 16 → 4 MLP, {meta.get('cpu')}, {meta.get('cores')} vCPUs, "
                 f"{meta.get('date')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plot.png"), dpi=110)


def main(argv):
    if len(argv) == 3 and argv[1] == "--from-results":
        rows, meta = read_results(argv[2])
        out = argv[2]
    elif len(argv) == 3:
        raw, out = argv[1], argv[2]
        meta = read_meta(os.path.join(raw, "meta.txt"))
        rows = rows_from_raw(raw)
        write_csv(rows, meta, out)
    else:
        sys.exit(__doc__)
    write_md(rows, meta, out)
    write_plot(rows, meta, out)
    print(open(os.path.join(out, "results.md")).read())


if __name__ == "__main__":
    main(sys.argv)
