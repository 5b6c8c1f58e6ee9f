"""Turns one bench/cpu/run.py run into the committed results.

    .venv/bin/python bench/cpu/report.py RAW_DIR RESULTS_DIR

RAW_DIR holds what run.py measured: meta.txt (machine, load, versions),
torch.csv (PyTorch itself, the reference: torch_ref.py), inproc.csv
(bench_inproc, the bridge: a diagnostic), ptperf_<protocol>_<model>.csv (ptperf over HTTP,
gRPC ModelInfer and gRPC ModelStreamInfer; the protocol is also a column of
the CSV), perf_analyzer_<protocol>_<model>_c<N>.csv (NVIDIA's perf_analyzer
on the same server, one file per concurrency) and pinned_mlp.csv (ptperf
with the server and the client on one core). RESULTS_DIR gets results.csv
(one row per client, model, protocol and concurrency), results.md (the
tables and what they say) and plot.png.
"""
import csv
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness as h  # noqa: E402

SWEEP_MODELS = ["mlp", "add_sub"]
BATCHING_PAIRS = [("mlp", "mlp_dyn"), ("deep", "deep_dyn")]
# ptperf's protocol column: HTTP/1.1, gRPC ModelInfer, gRPC ModelStreamInfer.
PROTOCOLS = ["http", "grpc", "grpc_stream"]
PROTOCOL_LABEL = {"http": "HTTP", "grpc": "gRPC", "grpc_stream": "gRPC stream"}

COLUMNS = ["model", "protocol", "dynamic_batching", "concurrency", "infer_per_sec", "p50_us",
           "p90_us", "p99_us", "inproc_p50_us", "overhead_p50_us", "inproc_per_sec",
           "bridge_p50_us", "bridge_per_sec",
           "throughput_ratio", "server_request_us", "server_queue_us", "server_compute_infer_us",
           "avg_batch", "server_cpu_us", "client_cpu_us", "other_cpu_pct", "errors", "stable",
           "client"]
# grpc_stream before grpc: the alternation takes the first that matches.
PA_FILE = re.compile(r"^perf_analyzer_(grpc_stream|grpc|http)_(.+)_c(\d+)\.csv$")


def num(row, key):
    v = row.get(key, "")
    return float(v) if v not in ("", None) else None


def rows_for(raw, inproc, prefix="ptperf_", bridge=None):
    out = []
    for name in sorted(os.listdir(raw)):
        if not (name.startswith(prefix) and name.endswith(".csv")):
            continue
        for r in h.read_csv(os.path.join(raw, name)):
            model = r["model"]
            base = model[:-4] if model.endswith("_dyn") else model
            ip = inproc.get(base)
            br = (bridge or {}).get(base)
            thr, p50 = num(r, "infer_per_sec"), num(r, "p50_us")
            out.append({
                "model": base,
                "protocol": r.get("protocol") or "http",
                "dynamic_batching": "yes" if model.endswith("_dyn") else "no",
                "concurrency": int(r["concurrency"]),
                "infer_per_sec": thr,
                "p50_us": p50,
                "p90_us": num(r, "p90_us"),
                "p99_us": num(r, "p99_us"),
                "inproc_p50_us": ip["p50_us"] if ip else None,
                "overhead_p50_us": p50 - ip["p50_us"] if ip else None,
                "inproc_per_sec": ip["per_sec"] if ip else None,
                "bridge_p50_us": br["p50_us"] if br else None,
                "bridge_per_sec": br["per_sec"] if br else None,
                "throughput_ratio": thr / ip["per_sec"] if ip else None,
                "server_request_us": num(r, "server_request_us"),
                "server_queue_us": num(r, "server_queue_us"),
                "server_compute_infer_us": num(r, "server_compute_infer_us"),
                "avg_batch": num(r, "server_avg_batch"),
                "server_cpu_us": num(r, "server_cpu_us"),
                "client_cpu_us": num(r, "client_cpu_us"),
                "other_cpu_pct": num(r, "other_cpu_pct"),
                "errors": int(r["errors"]),
                "stable": "yes" if r["stable"] == "1" else "no",
                "client": "ptperf",
            })
    return out


def perf_analyzer_rows(raw):
    """perf_analyzer's CSVs (its column names), in results.csv's terms. Its
    server columns are the statistics endpoint's averages per request, as
    ptperf's; it has no CPU or error columns (a run with errors fails and
    leaves no file)."""
    out = []
    for name in sorted(os.listdir(raw)):
        m = PA_FILE.match(name)
        if not m:
            continue
        for r in h.read_csv(os.path.join(raw, name)):
            row = {k: None for k in COLUMNS}
            row.update({
                "model": m.group(2), "protocol": m.group(1), "dynamic_batching": "no",
                "concurrency": int(r["Concurrency"]),
                "infer_per_sec": num(r, "Inferences/Second"),
                "p50_us": num(r, "p50 latency"), "p90_us": num(r, "p90 latency"),
                "p99_us": num(r, "p99 latency"),
                "server_queue_us": num(r, "Server Queue"),
                "server_compute_infer_us": num(r, "Server Compute Infer"),
                "errors": 0, "stable": "yes", "client": "perf_analyzer",
            })
            out.append(row)
    return out


def perf_analyzer_failures(raw):
    """(protocol, model, concurrency) of the perf_analyzer runs that failed
    or never settled (run.py lists them in perf_analyzer_failed.txt)."""
    path = os.path.join(raw, "perf_analyzer_failed.txt")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [tuple(line.split()) for line in f if len(line.split()) == 3]


def perf_analyzer_lines(rows, pa_rows, meta, failed=()):
    """perf_analyzer's figures beside ptperf's: same server, same run."""
    if not pa_rows:
        if meta.get("perf_analyzer") == "missing":
            return ["## ptperf and perf_analyzer", "",
                    "perf_analyzer was not installed on this host (scripts/setup.sh installs "
                    "it on Linux x86_64): no perf_analyzer rows.", ""]
        return []
    L = ["## ptperf and perf_analyzer",
         "",
         f"NVIDIA's perf_analyzer ({meta.get('perf_analyzer', '?')}) measured mlp against the "
         "same server in this run, each protocol right after ptperf's sweep of it, with the "
         "same windows and stability rule (`-p`, 3 windows within 10%). × = perf_analyzer ÷ "
         "ptperf. Why the two differ: "
         "[docs/benchmarks.md](../../../docs/benchmarks.md#ptperf-and-perf_analyzer).",
         "",
         "| protocol | concurrency | ptperf infer/s | perf_analyzer infer/s | × | ptperf p50 µs "
         "| perf_analyzer p50 µs | × | ptperf p99 µs | perf_analyzer p99 µs | "
         "server queue µs (ptperf / pa) | server infer µs (ptperf / pa) |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    thr, lat = [], []
    for p in PROTOCOLS:
        for a in sorted((r for r in pa_rows if r["protocol"] == p), key=lambda r: r["concurrency"]):
            t = find(rows, a["model"], "no", a["concurrency"], p)
            if t is None:
                continue
            x_thr, x_lat = ratio(a["infer_per_sec"], t["infer_per_sec"]), ratio(a["p50_us"],
                                                                                 t["p50_us"])
            thr.append(x_thr)
            lat.append(x_lat)
            L.append(f"| {PROTOCOL_LABEL[p]} | {a['concurrency']} | {fmt(t['infer_per_sec'])} | "
                     f"{fmt(a['infer_per_sec'])} | {fmt(x_thr, 2)} | {fmt(t['p50_us'])} | "
                     f"{fmt(a['p50_us'])} | {fmt(x_lat, 2)} | {fmt(t['p99_us'])} | "
                     f"{fmt(a['p99_us'])} | {fmt(t['server_queue_us'], 1)} / "
                     f"{fmt(a['server_queue_us'], 1)} | {fmt(t['server_compute_infer_us'], 1)} / "
                     f"{fmt(a['server_compute_infer_us'], 1)} |")
    L.append("")
    g = lambda v: (lambda w: math.exp(sum(map(math.log, w)) / len(w)) if w else None)(
        [x for x in v if x])
    if g(thr):
        L.append(f"Over these {len(thr)} points perf_analyzer measured {g(thr):.2f}× ptperf's "
                 f"throughput at {g(lat):.2f}× its p50 (geometric means).")
        L.append("")
    if failed:
        L.append("perf_analyzer failed or did not settle within 10 windows (no row) at: " +
                 ", ".join(f"{m} {PROTOCOL_LABEL.get(p, p)} concurrency {c}"
                           for p, m, c in failed) + " (`raw/perf_analyzer.log` says which).")
        L.append("")
    return L


def fmt(v, digits=0):
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    return f"{v:,.{digits}f}"


def find(rows, model, dyn, c, protocol="http"):
    for r in rows:
        if (r["model"] == model and r["dynamic_batching"] == dyn and r["concurrency"] == c and
                r["protocol"] == protocol):
            return r
    return None


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([cell(k, r[k]) for k in COLUMNS])


def cell(key, v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}" if key == "throughput_ratio" else f"{v:.2f}"
    return v


def cpu_bound(r, cores):
    """Requests/s the machine could serve if CPU time were the only limit."""
    if r["server_cpu_us"] is None or r["client_cpu_us"] is None or not cores:
        return None
    return cores * 1e6 / (r["server_cpu_us"] + r["client_cpu_us"])


def pinned_lines(rows, pinned):
    """mlp with everything on one core next to the same on every core."""
    if not pinned:
        return []
    L = ["## Moving work between cores",
         "",
         "The same mlp measurement with the server and ptperf pinned to one core "
         "(`taskset -c 0`), right after the main run. A request goes from ptperf to the "
         "server and back; when their threads sit on different cores, each hand-off wakes "
         "another (virtual) CPU.",
         "",
         "| concurrency | cores | infer/s | p50 µs | server µs | queue µs | infer µs | "
         "server CPU µs/req | client CPU µs/req | others' CPU % |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in sorted(pinned, key=lambda r: r["concurrency"]):
        a = find(rows, "mlp", "no", p["concurrency"])
        for r, cores in ((a, "all"), (p, "1")):
            if r is None:
                continue
            L.append(f"| {r['concurrency']} | {cores} | {fmt(r['infer_per_sec'])} | "
                     f"{fmt(r['p50_us'])} | {fmt(r['server_request_us'], 1)} | "
                     f"{fmt(r['server_queue_us'], 1)} | {fmt(r['server_compute_infer_us'], 1)} | "
                     f"{fmt(r['server_cpu_us'], 1)} | {fmt(r['client_cpu_us'], 1)} | "
                     f"{fmt(r['other_cpu_pct'], 1)} |")
    L.append("")
    return L


def ratio(a, b):
    return a / b if a is not None and b else None


def protocol_lines(rows):
    """gRPC unary and streaming next to HTTP, same model and concurrency."""
    present = [p for p in PROTOCOLS if any(r["protocol"] == p for r in rows)]
    if present == ["http"]:
        return []
    L = ["## HTTP vs gRPC",
         "",
         "The same server, models and concurrencies, measured one protocol after the other "
         "in this run. × = gRPC ÷ HTTP (throughput: higher is better; p50 and CPU: lower is "
         "better).",
         "",
         "| model | concurrency | protocol | infer/s | × | p50 µs | × | p99 µs | server µs | "
         "server CPU µs/req | × | client CPU µs/req | others' CPU % | errors |",
         "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in SWEEP_MODELS:
        for c in sorted({r["concurrency"] for r in rows if r["model"] == m}):
            h = find(rows, m, "no", c)
            for p in present:
                r = find(rows, m, "no", c, p)
                if r is None:
                    continue
                x = lambda k: "" if p == "http" or h is None else fmt(ratio(r[k], h[k]), 2)
                L.append(f"| {m} | {c} | {PROTOCOL_LABEL[p]} | {fmt(r['infer_per_sec'])} | "
                         f"{x('infer_per_sec')} | {fmt(r['p50_us'])} | {x('p50_us')} | "
                         f"{fmt(r['p99_us'])} | {fmt(r['server_request_us'], 1)} | "
                         f"{fmt(r['server_cpu_us'], 1)} | {x('server_cpu_us')} | "
                         f"{fmt(r['client_cpu_us'], 1)} | {fmt(r['other_cpu_pct'], 1)} | "
                         f"{r['errors']} |")
    L.append("")
    # In words: the geometric mean of the ratios over the sweep.
    for p in present:
        if p == "http":
            continue
        thr, lat, cpu = [], [], []
        for m in SWEEP_MODELS:
            for r in rows:
                h = find(rows, m, "no", r["concurrency"])
                if r["model"] != m or r["protocol"] != p or r["dynamic_batching"] != "no" or not h:
                    continue
                thr.append(ratio(r["infer_per_sec"], h["infer_per_sec"]))
                lat.append(ratio(r["p50_us"], h["p50_us"]))
                cpu.append(ratio(r["server_cpu_us"], h["server_cpu_us"]))
        g = lambda v: (lambda w: math.exp(sum(map(math.log, w)) / len(w)) if w else None)(
            [x for x in v if x])
        if g(thr) is None:
            continue
        L.append(f"- **{PROTOCOL_LABEL[p]}** over the {len(thr)} sweep points (mlp, add_sub × "
                 f"concurrency): throughput {g(thr):.2f}× HTTP's, p50 {g(lat):.2f}× "
                 + (f"and server CPU per request {g(cpu):.2f}× " if g(cpu) else "")
                 + "(geometric means of the ratios above).")
    L.append("")
    return L


def write_md(rows, inproc, meta, path, pinned=None, pa_rows=(), pa_failed=(), pytorch=True):
    cores = int(meta.get("cpus", "0") or 0)
    L = []
    L.append("# CPU benchmark: ptserve over HTTP and gRPC vs %s in process"
             % ("PyTorch" if pytorch else "LibTorch"))
    L.append("")
    L.append(f"Produced by `{meta.get('command', 'bench/cpu/run.py')}` (`make bench`) on "
             f"{meta.get('date', '?')}, ptserve `{meta.get('commit', '?')}`, "
             + (f"PyTorch {meta.get('pytorch', '?')}, " if pytorch else "")
             + f"LibTorch {meta.get('libtorch', '?')}.")
    L.append("")
    L.append(f"- Machine: {meta.get('cpu_model', '?')}, **{meta.get('cpus', '?')} cores shared by "
             "the client (ptperf), the server (ptserve) and LibTorch** — and by anything "
             "else running: the machine was "
             f"{meta.get('busy_before', '?')}% busy just before the run (waited for <= 15%), "
             f"{meta.get('busy_after', '?')}% just after; load average before "
             f"{meta.get('load_before', '?')}, after {meta.get('load_after', '?')} "
             "(these include the benchmark's own threads).")
    L.append(f"- Server: `ptserve {meta.get('server_args', '')}` (Release build, default "
             "flags: one HTTP thread per core (2 to 8), one gRPC event loop per core (nghttp2, 2 to 8; "
             "ptperf's one gRPC connection is on one of them), one CPU instance per "
             "model).")
    L.append(f"- Client: `ptperf`, {meta.get('interval_ms', '?')} ms windows repeated until "
             "the last 3 agree within 10% (throughput and p50), 16 different random requests "
             "in turn, over three protocols against the same server in the same run: **HTTP** "
             "(KServe v2 HTTP/1.1 keep-alive, binary tensors both ways, every response checked "
             "for 200), **gRPC** (`ModelInfer`, one call per request, all multiplexed on one "
             "HTTP/2 connection, `raw_input_contents` / `raw_output_contents`) and **gRPC "
             "stream** (`ModelStreamInfer`, one stream per request in flight, as "
             "perf_analyzer's `--streaming`); every gRPC response checked for status OK, no "
             "`error_message` and one raw output per output.")
    if pytorch:
        L.append("- In process, the reference: PyTorch itself running the same model.pt "
                 "(`bench/cpu/torch_ref.py`: `torch.jit.load`, eval, `torch.inference_mode()`, "
                 "LibTorch's default intra-op threads), forward() back to back on one thread at "
                 "batch 1, as a team's ten-line script would, "
                 + (f"with {meta['pytorch_allocator']} (as ptserve runs on jemalloc, and as "
                    "PyTorch's CPU tuning guide advises). " if meta.get("pytorch_allocator")
                    else "") +
                 "*Bridge /s*: the same file "
                 "through ptserve's own bridge (`bench_inproc`, `torch_bridge.h`, the backend's "
                 "default options), a diagnostic of the server's C path, not a reference.")
    else:
        L.append("- In process: `bench_inproc`, the same model.pt through the same bridge "
                 "(`torch_bridge.h`) with the backend's default options, forward() back to "
                 "back on one thread at batch 1 (this run had no PyTorch reference).")
    L.append("- Compare ratios within this run only: the client and the server compete for "
             "the same two cores, so absolute numbers move with the machine and its load.")
    L.append("")
    L.append("## Served vs in process")
    L.append("")
    L.append("Overhead = served p50 − in-process p50: what the server, the protocol and the "
             "client add to one request. Ratio = served throughput ÷ in-process throughput of one "
             "thread.")
    L.append("")
    L.append("| model | protocol | concurrency | infer/s | p50 µs | p90 µs | p99 µs | "
             "in-process p50 µs | overhead µs | in-process /s | ratio | bridge /s | server µs | "
             "queue µs | infer µs | server CPU µs/req | client CPU µs/req | CPU bound /s | "
             "others' CPU % | errors |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
             "---:|---:|---:|")
    for m in SWEEP_MODELS:
        for r in sorted((r for r in rows if r["model"] == m and r["dynamic_batching"] == "no"),
                        key=lambda r: (PROTOCOLS.index(r["protocol"]), r["concurrency"])):
            L.append(f"| {m} | {PROTOCOL_LABEL[r['protocol']]} | {r['concurrency']} | "
                     f"{fmt(r['infer_per_sec'])} | "
                     f"{fmt(r['p50_us'])} | {fmt(r['p90_us'])} | {fmt(r['p99_us'])} | "
                     f"{fmt(r['inproc_p50_us'], 1)} | {fmt(r['overhead_p50_us'])} | "
                     f"{fmt(r['inproc_per_sec'])} | {fmt(r['throughput_ratio'], 3)} | "
                     f"{fmt(r['bridge_per_sec'])} | {fmt(r['server_request_us'], 1)} | {fmt(r['server_queue_us'], 1)} | "
                     f"{fmt(r['server_compute_infer_us'], 1)} | {fmt(r['server_cpu_us'], 1)} | "
                     f"{fmt(r['client_cpu_us'], 1)} | {fmt(cpu_bound(r, cores))} | "
                     f"{fmt(r['other_cpu_pct'], 1)} | "
                     f"{r['errors']} |")
    L.append("")
    L.append("Server/queue/infer columns are the statistics endpoint's averages per request "
             "over the same windows (– when the server had no statistics endpoint). CPU "
             "columns are CPU time per request of the ptserve process (/proc) and of ptperf "
             "(getrusage) over the same windows; CPU bound = cores × 10⁶ ÷ (server + client "
             "CPU µs): the throughput at which the two would use every core. Others' CPU = the "
             "share of all cores' time that other processes used during the windows: rows "
             "where it is high were measured on a disturbed machine.")
    L.append("")
    L.extend(protocol_lines(rows))
    L.extend(perf_analyzer_lines(rows, pa_rows, meta, pa_failed))
    L.append("## Dynamic batching at concurrency 8")
    L.append("")
    d8 = inproc.get("deep_batch8")
    d1 = inproc.get("deep")
    if d1 and d8:
        L.append(f"`deep` is batch-friendly: in process, forward() takes "
                 f"{d1['p50_us']:.0f} µs for 1 row and {d8['p50_us']:.0f} µs for 8.")
        L.append("")
    L.append("| model | protocol | without: infer/s | p50 µs | others' CPU % | with "
             "dynamic_batching: infer/s | p50 µs | avg batch | others' CPU % | gain |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (base, _), proto in ((b, p) for b in BATCHING_PAIRS for p in PROTOCOLS):
        a, b = find(rows, base, "no", 8, proto), find(rows, base, "yes", 8, proto)
        if not a or not b:
            continue
        gain = b["infer_per_sec"] / a["infer_per_sec"] if a["infer_per_sec"] else None
        L.append(f"| {base} | {PROTOCOL_LABEL[proto]} | {fmt(a['infer_per_sec'])} | "
                 f"{fmt(a['p50_us'])} | "
                 f"{fmt(a['other_cpu_pct'], 1)} | {fmt(b['infer_per_sec'])} | "
                 f"{fmt(b['p50_us'])} | {fmt(b['avg_batch'], 2)} | {fmt(b['other_cpu_pct'], 1)} | "
                 f"{fmt(gain, 2)}× |")
    L.append("")
    L.extend(pinned_lines(rows, pinned))
    L.append("## Against tritonserver")
    L.append("")
    L.append("Not measured here: bench/triton/run.py serves the same model files with "
             "tritonserver and ptserve side by side, with the same clients in the same run "
             "(bench/triton/results/results.md). Figures from another machine or day are "
             "not compared with this run's.")
    L.append("")
    c1 = find(rows, "mlp", "no", 1)
    if c1 and c1["server_request_us"] is not None:
        L.append("Where one mlp request's time goes at concurrency 1 (averages; statistics "
                 "endpoint and /proc, same windows): client-side p50 "
                 f"{fmt(c1['p50_us'])} µs; inside the server {c1['server_request_us']:.0f} µs"
                 f" from receipt to response, of which {c1['server_queue_us']:.0f} µs queued "
                 "(the instance thread waking up) and "
                 f"{c1['server_compute_infer_us']:.0f} µs in forward() (in process, back to "
                 f"back: {c1['inproc_p50_us']:.1f} µs"
                 + (f"; through ptserve's bridge {c1['bridge_p50_us']:.1f} µs"
                    if pytorch and c1.get("bridge_p50_us") else "") + "); the rest is HTTP, the loopback network "
                 "and the client. CPU per request: server "
                 f"{fmt(c1['server_cpu_us'])} µs, client {fmt(c1['client_cpu_us'])} µs.")
        L.append("")
    L.append("![throughput and latency](plot.png)")
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


def write_plot(rows, inproc, path, pinned=(), pa_rows=()):
    plt = h.pyplot()
    if plt is None:
        return
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.6))
    styles = {"http": ("o", "-"), "grpc": ("s", "--"), "grpc_stream": ("v", ":")}
    for m, color in zip(SWEEP_MODELS, ["tab:blue", "tab:orange"]):
        for p in PROTOCOLS:
            rs = sorted((r for r in rows if r["model"] == m and r["dynamic_batching"] == "no"
                         and r["protocol"] == p), key=lambda r: r["concurrency"])
            if not rs:
                continue
            marker, line = styles[p]
            cs = [r["concurrency"] for r in rs]
            ax1.plot(cs, [r["infer_per_sec"] for r in rs], marker + line, color=color,
                     label=f"{m}, {PROTOCOL_LABEL[p]}")
            ax2.plot(cs, [r["p50_us"] for r in rs], marker + line, color=color,
                     label=f"{m} p50, {PROTOCOL_LABEL[p]}")
        ip = inproc.get(m)
        if ip:
            ax2.axhline(ip["p50_us"], color=color, linestyle="-.", linewidth=1,
                        label=f"{m} in-process p50 (reference)")
    for p in PROTOCOLS:
        ps = sorted((r for r in pa_rows if r["protocol"] == p and r["model"] == "mlp"),
                    key=lambda r: r["concurrency"])
        if ps:
            cs = [r["concurrency"] for r in ps]
            ax1.plot(cs, [r["infer_per_sec"] for r in ps], "x", color="tab:red",
                     label="mlp, perf_analyzer (every protocol)" if p == "http" else None)
            ax2.plot(cs, [r["p50_us"] for r in ps], "x", color="tab:red",
                     label="mlp p50, perf_analyzer" if p == "http" else None)
    if pinned:
        ps = sorted(pinned, key=lambda r: r["concurrency"])
        cs = [r["concurrency"] for r in ps]
        ax1.plot(cs, [r["infer_per_sec"] for r in ps], "D-.", color="tab:purple",
                 label="mlp, HTTP, one core")
        ax2.plot(cs, [r["p50_us"] for r in ps], "D-.", color="tab:purple",
                 label="mlp p50, HTTP, one core")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8])
        ax.set_xticklabels(["1", "2", "4", "8"])
        ax.set_xlabel("concurrency (requests in flight)")
        ax.grid(True, alpha=0.3)
    ax1.set_ylabel("inferences / s")
    ax1.set_ylim(bottom=0)
    ax1.set_title("Throughput (HTTP, gRPC, gRPC stream)")
    ax1.legend(fontsize=6)
    ax2.set_ylabel("latency, µs")
    ax2.set_yscale("log")
    ax2.set_title("p50 latency (client side)")
    ax2.legend(fontsize=6)
    labels, without, with_ = [], [], []
    for base, _ in BATCHING_PAIRS:
        a, b = find(rows, base, "no", 8), find(rows, base, "yes", 8)
        if a and b:
            labels.append(base)
            without.append(a["infer_per_sec"])
            with_.append(b["infer_per_sec"])
    x = range(len(labels))
    ax3.bar([i - 0.2 for i in x], without, 0.4, label="no batching")
    ax3.bar([i + 0.2 for i in x], with_, 0.4, label="dynamic_batching")
    ax3.set_xticks(list(x))
    ax3.set_xticklabels(labels)
    ax3.set_ylabel("inferences / s")
    ax3.set_title("Dynamic batching, concurrency 8 (HTTP)")
    ax3.legend(fontsize=8)
    fig.suptitle("ptserve on the CPU (client and server share the machine's cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    raw, out = argv[1], argv[2]
    os.makedirs(out, exist_ok=True)
    meta = h.read_meta(os.path.join(raw, "meta.txt"))
    def calls(name):
        path = os.path.join(raw, name)
        if not os.path.exists(path):
            return None
        return {r["label"]: {"per_sec": float(r["per_sec"]), "p50_us": float(r["p50_us"])}
                for r in h.read_csv(path)}
    # The reference is PyTorch itself (torch.csv); the bridge (inproc.csv)
    # is a diagnostic column. Raw files of runs before torch_ref.py have
    # the bridge alone, and the report says so.
    bridge = calls("inproc.csv") or {}
    pytorch = calls("torch.csv")
    inproc = pytorch if pytorch else bridge
    order = lambda r: (r["model"], r["dynamic_batching"], PROTOCOLS.index(r["protocol"]),
                       r["concurrency"])
    rows = sorted(rows_for(raw, inproc, bridge=bridge if pytorch else None), key=order)
    pinned = sorted(rows_for(raw, inproc, prefix="pinned_"), key=order)
    pa_rows = sorted(perf_analyzer_rows(raw), key=order)
    # In the CSV the one-core rows are a model of their own.
    write_csv(rows + [dict(r, model="mlp_one_core") for r in pinned] + pa_rows,
              os.path.join(out, "results.csv"))
    write_md(rows, inproc, meta, os.path.join(out, "results.md"), pinned, pa_rows,
             perf_analyzer_failures(raw), pytorch=pytorch is not None)
    write_plot(rows, inproc, os.path.join(out, "plot.png"), pinned, pa_rows)
    print("wrote", ", ".join(os.path.join(out, f) for f in
                             ("results.md", "results.csv", "plot.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
