"""Turns one bench/cpu/hotpath.sh run into its committed table.

    .venv/bin/python bench/cpu/hotpath_report.py RAW_DIR OUT_DIR

RAW_DIR holds meta.txt, ptperf_<label>_r<round>_<protocol>_c<N>.csv (ptperf),
perfstat_<same tag>.txt (`perf stat -x,` on the server) and
perfstat_counts.csv (requests answered during each perf stat window, from
the statistics endpoint, and the server's user and kernel CPU ticks from
/proc/PID/stat over the same window). OUT_DIR gets results.csv (one row per server,
round, protocol and concurrency) and results.md (medians over the rounds,
baseline beside this tree, and the issue's targets).
"""
import csv
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import read_meta  # noqa: E402  (bench/cpu/report.py: the same meta.txt)

TAG = re.compile(r"^ptperf_(baseline|new)_r(\d+)_(http|grpc|stream)_c(\d+)\.csv$")
LABEL = {"http": "HTTP", "grpc": "gRPC", "stream": "gRPC stream"}
# Issue #13's targets for the 16 -> 4 MLP on the 2-core machine.
TARGET_CPU_US = 30.0
TARGET_P50_US = 60.0
TARGET_RATIO_C4 = 2.0


def perf_counts(path):
    """{event: value} from a `perf stat -x,` file; events perf could not
    count are left out."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) < 3 or line.startswith("#"):
                continue
            try:
                out[parts[2]] = float(parts[0])
            except ValueError:
                pass
    return out


def rows(raw, clk_tck):
    counts, ticks = {}, {}
    with open(os.path.join(raw, "perfstat_counts.csv"), newline="") as f:
        for r in csv.DictReader(f):
            key = (r["label"], r["round"], r["protocol"], r["concurrency"])
            counts[key] = int(r["requests"])
            # Runs before these columns existed have none.
            if r.get("sys_ticks") and r.get("user_ticks") and clk_tck:
                ticks[key] = (int(r["user_ticks"]), int(r["sys_ticks"]))
    out = []
    for name in sorted(os.listdir(raw)):
        m = TAG.match(name)
        if not m:
            continue
        label, rnd, proto, c = m.groups()
        with open(os.path.join(raw, name), newline="") as f:
            p = list(csv.DictReader(f))[0]
        tag = f"{label}_r{rnd}_{proto}_c{c}"
        ev = perf_counts(os.path.join(raw, f"perfstat_{tag}.txt"))
        n = counts.get((label, rnd, proto, c), 0)
        per = lambda k, scale=1.0: ev[k] * scale / n if n and k in ev else None
        t = ticks.get((label, rnd, proto, c))
        # /proc's ticks are 10 ms: over a 3 s window of a busy server, about
        # 1% of the kernel time the column shows.
        kernel = t[1] * 1e6 / clk_tck / n if t and n else None
        out.append({
            "server": label, "round": int(rnd), "protocol": proto, "concurrency": int(c),
            "infer_per_sec": float(p["infer_per_sec"]), "p50_us": float(p["p50_us"]),
            "server_cpu_us": float(p["server_cpu_us"]) if p["server_cpu_us"] else None,
            "stable": p["stable"], "errors": int(p["errors"]),
            "perf_requests": n,
            "ctx_switches_per_req": per("context-switches"),
            "migrations_per_req": per("cpu-migrations"),
            "perf_cpu_us_per_req": per("task-clock", 1e3),  # task-clock is in ms
            "kernel_us_per_req": kernel,
        })
    return out


def callgrind(raw):
    """{(server, protocol, concurrency): user-space instructions per request}."""
    out = {}
    path = os.path.join(raw, "callgrind_counts.csv")
    if not os.path.exists(path):
        return out
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            n, ir = int(r["requests"]), r["instructions"].strip()
            if n > 0 and ir:
                out[(r["label"], r["protocol"], int(r["concurrency"]))] = (int(ir) / n, n)
    return out


def med(rs, key):
    v = [r[key] for r in rs if r[key] is not None]
    return statistics.median(v) if v else None


def fmt(v, d=0):
    return "–" if v is None else f"{v:,.{d}f}"


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    raw, out = argv[1], argv[2]
    os.makedirs(out, exist_ok=True)
    meta = read_meta(raw)
    rs = rows(raw, int(meta["clk_tck"]) if meta.get("clk_tck") else None)
    cg = callgrind(raw)
    for r in rs:
        r["instr_per_req"] = cg.get((r["server"], r["protocol"], r["concurrency"]), (None, 0))[0]
    keys = list(rs[0].keys())
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in sorted(rs, key=lambda r: (r["protocol"], r["concurrency"], r["server"],
                                           r["round"])):
            w.writerow(r)
    # HOTPATH_TITLE: a run whose two servers are not "a baseline commit and
    # this tree" (NEW_EXTRA/BASE_EXTRA on one build: two gRPC transports).
    # Its title and what "base" and "new" are replace the default, and the
    # issue's targets, which are against the baseline commit, are left out.
    title = os.environ.get("HOTPATH_TITLE")
    L = [f"# {title or 'The CPU request path: this tree against the baseline (issue #13)'}", ""]
    if title and os.environ.get("HOTPATH_SERVERS"):
        L.append(os.environ["HOTPATH_SERVERS"])
        L.append("")
    L.append(f"Produced by `{meta.get('command')}` on {meta.get('date')}, this tree "
             f"`{meta.get('git')}`; machine: {meta.get('cpu')}, {meta.get('cores')} cores, "
             f"load average before {meta.get('load_before')}, after {meta.get('load_after')}.")
    L.append("")
    L.append("Model: the 16 → 4 MLP (`mlp` of bench/cpu/gen_models.py: one CPU instance, "
             "no dynamic batching), binary tensors, client ptperf on the same machine. "
             "Both servers were measured in the same run, alternating which went first; "
             "each cell is the median over the rounds. Throughput and p50 move with what "
             "else runs on this shared 2-core virtual machine, the host's other guests "
             "included (the load average is in the first line): read the ratios with care, "
             "and trust instructions and context switches per request (counted over an "
             "exact number of answered requests) more than times.")
    L.append("")
    L.append("| protocol | c | infer/s base | infer/s new | × | p50 µs base | p50 µs new | "
             "server CPU µs/req base | new | perf CPU µs/req base | new | of which kernel base | "
             "new | instr/req base | new | ctx switches/req base | new |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    verdict = []
    for proto in ("http", "grpc", "stream"):
        for c in (1, 4):
            b = [r for r in rs if r["server"] == "baseline" and r["protocol"] == proto
                 and r["concurrency"] == c]
            n = [r for r in rs if r["server"] == "new" and r["protocol"] == proto
                 and r["concurrency"] == c]
            if not b or not n:
                continue
            tb, tn = med(b, "infer_per_sec"), med(n, "infer_per_sec")
            ratio = tn / tb if tb else None
            L.append(f"| {LABEL[proto]} | {c} | {fmt(tb)} | {fmt(tn)} | {fmt(ratio, 2)} | "
                     f"{fmt(med(b, 'p50_us'))} | {fmt(med(n, 'p50_us'))} | "
                     f"{fmt(med(b, 'server_cpu_us'), 1)} | {fmt(med(n, 'server_cpu_us'), 1)} | "
                     f"{fmt(med(b, 'perf_cpu_us_per_req'), 1)} | "
                     f"{fmt(med(n, 'perf_cpu_us_per_req'), 1)} | "
                     f"{fmt(med(b, 'kernel_us_per_req'), 1)} | "
                     f"{fmt(med(n, 'kernel_us_per_req'), 1)} | "
                     f"{fmt(med(b, 'instr_per_req'))} | {fmt(med(n, 'instr_per_req'))} | "
                     f"{fmt(med(b, 'ctx_switches_per_req'), 2)} | "
                     f"{fmt(med(n, 'ctx_switches_per_req'), 2)} |")
            cpu = med(n, "server_cpu_us")
            kern = med(n, "kernel_us_per_req")
            verdict.append(f"- {LABEL[proto]} c={c}: server CPU/request {fmt(cpu, 1)} µs "
                           f"(target ≤ {TARGET_CPU_US:.0f}: "
                           f"{'met' if cpu is not None and cpu <= TARGET_CPU_US else 'not met'}"
                           + (f"; perf's window: {fmt(med(n, 'perf_cpu_us_per_req'), 1)} µs, "
                              f"{fmt(kern, 1)} of them in the kernel" if kern else "") + ")"
                           + (f"; throughput {fmt(ratio, 2)}× the baseline (target ≥ "
                              f"{TARGET_RATIO_C4:.0f}×: "
                              f"{'met' if ratio and ratio >= TARGET_RATIO_C4 else 'not met'})"
                              if c == 4 else "")
                           + (f"; p50 {fmt(med(n, 'p50_us'))} µs (target ≤ "
                              f"{TARGET_P50_US:.0f}: "
                              f"{'met' if med(n, 'p50_us') <= TARGET_P50_US else 'not met'})"
                              if c == 1 else ""))
    L.append("")
    L.append("Server CPU µs/req: ptperf's `--server-pid` (the server's /proc CPU time over its "
             "measurement windows ÷ requests). perf CPU µs/req and ctx switches/req: `perf "
             "stat -p` on the server (task-clock, context-switches) over a further window ÷ "
             "requests answered in it (statistics endpoint); of which kernel: the server's "
             "system time (/proc/PID/stat, 10 ms ticks) over that window ÷ the same requests. "
             "instr/req: user-space "
             "instructions of the server (every thread) under valgrind's callgrind, "
             "instrumented only during a window of requests, ÷ requests answered in it; "
             "one measurement per cell, not a median: it does not depend on the machine's "
             "load. This VM exposes no hardware counters to perf, hence callgrind (which "
             "does not see the kernel's side: context switches stand for it).")
    L.append("")
    if not title:
        L.append("## Against the issue's targets")
        L.append("")
        L.extend(verdict)
        L.append("")
    # Part 4: gRPC, unary and streaming, at least as fast as HTTP at every
    # concurrency (this tree's servers, same run).
    parity = []
    for proto in ("grpc", "stream"):
        for c in (1, 4):
            h = [r for r in rs if r["server"] == "new" and r["protocol"] == "http"
                 and r["concurrency"] == c]
            g = [r for r in rs if r["server"] == "new" and r["protocol"] == proto
                 and r["concurrency"] == c]
            if not h or not g:
                continue
            th, tg = med(h, "infer_per_sec"), med(g, "infer_per_sec")
            x = tg / th if th else None
            parity.append(f"- {LABEL[proto]} c={c}: {fmt(tg)} infer/s, {fmt(x, 2)}× HTTP's "
                          f"{fmt(th)} ({'met' if x and x >= 1.0 else 'not met'}); server CPU "
                          f"{fmt(med(g, 'server_cpu_us'), 1)} µs/request against "
                          f"{fmt(med(h, 'server_cpu_us'), 1)}")
    if parity:
        L.append("gRPC against HTTP, this tree (target: at least as fast at every "
                 "concurrency):")
        L.append("")
        L.extend(parity)
        L.append("")
    # Round by round: both servers ran in every round, one after the other,
    # so a ratio within a round shares that round's machine; the spread
    # says how far the host's other guests moved the times.
    L.append("## Round by round")
    L.append("")
    L.append("Throughput of this tree ÷ the baseline's within each round (the two servers ran "
             "back to back), and the range of server CPU per request over the rounds. Where "
             "a cell's rounds differ by 2× or more, the machine, not the server, changed "
             "between them; the quietest round is the closest this VM comes to the idle "
             "machine the issue's figures were taken on.")
    L.append("")
    nr = max(r["round"] for r in rs)
    L.append("| protocol | c | " + " | ".join(f"× round {i}" for i in range(1, nr + 1))
             + " | median × | server CPU µs/req base, min–max | new, min–max |")
    L.append("|---|---:|" + "---:|" * nr + "---:|---:|---:|")
    for proto in ("http", "grpc", "stream"):
        for c in (1, 4):
            by = {(r["server"], r["round"]): r for r in rs
                  if r["protocol"] == proto and r["concurrency"] == c}
            xs = []
            for i in range(1, nr + 1):
                b, n = by.get(("baseline", i)), by.get(("new", i))
                xs.append(n["infer_per_sec"] / b["infer_per_sec"]
                          if b and n and b["infer_per_sec"] else None)
            have = [x for x in xs if x is not None]
            if not have:
                continue
            span = lambda who: [r["server_cpu_us"] for (w, _), r in by.items()
                                if w == who and r["server_cpu_us"] is not None]
            sb, sn = span("baseline"), span("new")
            L.append(f"| {LABEL[proto]} | {c} | " + " | ".join(fmt(x, 2) for x in xs)
                     + f" | {fmt(statistics.median(have), 2)} | "
                     + (f"{fmt(min(sb), 1)}–{fmt(max(sb), 1)}" if sb else "–") + " | "
                     + (f"{fmt(min(sn), 1)}–{fmt(max(sn), 1)}" if sn else "–") + " |")
    L.append("")
    L.append("Where this tree's server spends its instructions at HTTP c=1 (callgrind, same "
             "window as the instr/req cell): self cost per symbol in "
             "[top_symbols.txt](top_symbols.txt), inclusive cost of ptserve's and libevent's "
             "request functions in [top_inclusive.txt](top_inclusive.txt) (the baseline's: "
             "[top_inclusive_baseline.txt](top_inclusive_baseline.txt)).")
    L.append("")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(L))
    print("wrote", os.path.join(out, "results.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
