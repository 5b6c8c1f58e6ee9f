"""bench/trace/run.py — what request tracing costs: off, at rate 1000
(Triton's default rate) and at rate 1 (every request), on a tiny model.

    .venv/bin/python bench/trace/run.py

For BENCH_ROUNDS rounds (3) it serves the model once per mode, ptperf over
HTTP at concurrency 1 and 4, BENCH_INTERVAL_MS windows (2000). Tracing on
is `level=TIMESTAMPS rate=N log-frequency=1000`, written as Triton JSON and
a Chrome trace by the writer thread, so the cost includes writing. Writes
bench/trace/results/{results.md,results.csv} and raw/ (ptperf's CSVs,
meta.txt): medians over rounds and each mode's ratio to off in this run.
"""
import glob
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness as h  # noqa: E402

MODES = {"off": "off", "rate1000": "rate 1000", "rate1": "rate 1"}
CONFIG = """name: "tiny"
backend: "pytorch"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
parameters: { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
"""


def tiny_model(repo):
    import torch

    class AddSub(torch.nn.Module):
        def forward(self, a, b):
            return a + b, a - b

    os.makedirs(os.path.join(repo, "tiny", "1"))
    torch.jit.script(AddSub()).save(os.path.join(repo, "tiny", "1", "model.pt"))
    with open(os.path.join(repo, "tiny", "config.pbtxt"), "w") as f:
        f.write(CONFIG)


def trace_args(mode, traces):
    if mode == "off":
        return []
    rate = mode[len("rate"):]
    return ["--trace-config", "triton,file=%s/%s.json" % (traces, mode), "--trace-config",
            "level=TIMESTAMPS", "--trace-config", "rate=" + rate, "--trace-config",
            "log-frequency=1000"]


def measure(work, raw, interval, n):
    build = h.build(os.environ.get("BENCH_BUILD_DIR", os.path.join(h.ROOT, "build-bench")),
                    ["ptserve", "ptperf"])
    tiny_model(os.path.join(work, "models"))
    h.meta(os.path.join(raw, "meta.txt"), interval_ms=interval, rounds=n)
    for r, mode in h.rounds(n, list(MODES)):
        traces = os.path.join(work, "traces")
        shutil.rmtree(traces, ignore_errors=True)
        os.makedirs(traces)
        with h.Server(os.path.join(build, "ptserve"),
                      ["--model-repository", os.path.join(work, "models"),
                       *trace_args(mode, traces)], os.path.join(raw, "server.log")) as s:
            h.log("round %d, tracing %s" % (r, mode))
            h.ptperf(build, s, "tiny", "1,4", os.path.join(raw, "%s.%d.csv" % (mode, r)),
                     interval)
        written = 0
        for path in glob.glob(os.path.join(traces, "*.json*")):
            with open(path, errors="replace") as f:
                written += sum(line.count('"timestamps"') for line in f)
        h.add_meta(os.path.join(raw, "meta.txt"), **{"traces_%s_%d" % (mode, r): written})
    h.add_meta(os.path.join(raw, "meta.txt"), load_after=h.loadavg())


def report(raw, out):
    meta = h.read_meta(os.path.join(raw, "meta.txt"))
    runs = {}
    for path in sorted(glob.glob(os.path.join(raw, "*.csv"))):
        mode = os.path.basename(path).split(".")[0]
        for r in h.read_csv(path):
            runs.setdefault((mode, int(r["concurrency"])), []).append(r)
    traces = {m: sum(int(v) for k, v in meta.items() if k.startswith("traces_%s_" % m))
              for m in MODES}
    rows = []
    for conc in sorted({c for _, c in runs}):
        off = runs[("off", conc)]
        for mode, label in MODES.items():
            rs = runs.get((mode, conc), [])
            v = {f: h.median(rs, f) for f in ("infer_per_sec", "p50_us", "p99_us",
                                              "server_cpu_us", "other_cpu_pct")}
            rows.append({
                "tracing": label, "concurrency": conc, "infer_per_sec": v["infer_per_sec"],
                "p50_us": v["p50_us"], "p99_us": v["p99_us"],
                "server_cpu_us_per_req": v["server_cpu_us"],
                "throughput_vs_off": v["infer_per_sec"] / h.median(off, "infer_per_sec"),
                "p50_vs_off": v["p50_us"] / h.median(off, "p50_us"),
                "server_cpu_vs_off": v["server_cpu_us"] / h.median(off, "server_cpu_us"),
                "rounds": len(rs), "others_cpu_pct": v["other_cpu_pct"],
                "errors": sum(int(r["errors"]) for r in rs),
                "traces_written_all_rounds": traces[mode]})
    os.makedirs(out, exist_ok=True)
    h.write_csv(os.path.join(out, "results.csv"), rows)
    f1, f3 = (lambda k: lambda r: "%.1f" % r[k]), (lambda k: lambda r: "%.3f" % r[k])
    h.write_md(os.path.join(out, "results.md"), [
        "# Tracing cost: off, rate 1000, rate 1 (tiny model, HTTP)", "",
        h.produced_by("bench/trace/run.py", meta), "",
        "Model: `tiny` (TorchScript, OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 on "
        "16 floats, one CPU instance). Client: ptperf, HTTP keep-alive, binary tensors. "
        "Tracing on means `--trace-config level=TIMESTAMPS rate=N log-frequency=1000`: every "
        "traced request is stamped and, 1000 at a time, written as Triton JSON and a Chrome "
        "trace by the writer thread.", "",
        "Each value is the median over the rounds (modes interleaved within each round); "
        "ratios are to tracing off at the same concurrency in this run. Client and server "
        "share the machine's cores: read the ratios, not the absolute numbers.", "",
        *h.table([("tracing", lambda r: r["tracing"]),
                  ("concurrency", lambda r: str(r["concurrency"])),
                  ("infer/s", lambda r: format(round(r["infer_per_sec"]), ",")),
                  ("p50 µs", f1("p50_us")), ("p99 µs", f1("p99_us")),
                  ("server CPU µs/req", f1("server_cpu_us_per_req")),
                  ("throughput vs off", f3("throughput_vs_off")),
                  ("p50 vs off", f3("p50_vs_off")),
                  ("server CPU vs off", f3("server_cpu_vs_off")),
                  ("others' CPU %", lambda r: "%.0f" % r["others_cpu_pct"]),
                  ("errors", lambda r: str(r["errors"]))], rows), "",
        "Traces written over all rounds (both concurrencies and the windows ptperf "
        "discards): %s." % ", ".join("%s %s" % (label, format(traces[m], ","))
                                     for m, label in MODES.items()), "",
        "Others' CPU % is the share of the machine's CPU time used by other processes during "
        "the windows (ptperf's other_cpu_pct): this 2-core host is shared, so differences of a "
        "few per cent are noise; rows with much other load are less reliable.", ""])


def main():
    out = os.environ.get("BENCH_RESULTS", os.path.join(h.ROOT, "bench", "trace", "results"))
    raw = os.path.join(out, "raw")
    shutil.rmtree(raw, ignore_errors=True)
    os.makedirs(raw)
    with tempfile.TemporaryDirectory(prefix="pts_bench_trace.") as work:
        measure(work, raw, h.env("INTERVAL_MS", 2000), h.env("ROUNDS", 3))
    report(raw, out)
    h.log("report in %s/results.md" % out)


if __name__ == "__main__":
    main()
