"""bench/cpu/run.py — ptserve on the CPU, over HTTP and gRPC, against
PyTorch itself running the same files.

    .venv/bin/python bench/cpu/run.py        (or: make bench)

Builds ptserve, ptperf and bench_inproc in build-bench/, writes the models
(gen_models.py → bench/cpu/models/), waits (BENCH_QUIET_WAIT s, 180) for
the machine to be nearly idle, then measures in one run:
  - the reference: PyTorch itself (torch_ref.py: torch.jit.load, eval,
    inference_mode) calling each model's forward() back to back, at batch 1;
  - a diagnostic, not a reference: the same files through ptserve's own
    bridge in process (bench_inproc), what the server's C path costs;
  - mlp and add_sub at concurrency 1, 2, 4, 8 with ptperf over HTTP, gRPC
    ModelInfer and gRPC ModelStreamInfer, one after the other, and mlp with
    NVIDIA's perf_analyzer right after ptperf's sweep of each protocol;
  - mlp and deep with and without dynamic batching at concurrency 8;
  - mlp at concurrency 1 and 4 with the server and ptperf on one core.
report.py writes bench/cpu/results/{results.md,results.csv,plot.png}; raw
files stay in bench/cpu/raw/. Client, server and LibTorch share the cores:
compare ratios within one run.

Environment: BENCH_INTERVAL_MS (2000), BENCH_QUIET_WAIT, BENCH_BUILD_DIR,
BENCH_RESULTS, JOBS (every core), PERF_ANALYZER (default: the venv's; its rows are left
out, with a note, when it is missing).
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import harness as h  # noqa: E402
import report  # noqa: E402

PROTOCOLS = ("http", "grpc", "grpc_stream")
INPROC = {"mlp": ("mlp", ["FP32:1,16"]), "add_sub": ("add_sub", ["FP32:1,16", "FP32:1,16"]),
          "deep": ("deep", ["FP32:1,16"]), "deep_batch8": ("deep", ["FP32:8,16"])}
PA_PROTO = {"http": ["-i", "http"], "grpc": ["-i", "grpc"], "grpc_stream": ["-i", "grpc",
                                                                             "--streaming"]}


def calls(models, csv, version_of, command, env=None):
    """Each INPROC file's forward() back to back at batch 1, one row each
    into csv, by command(model_path, label, csv, inputs) in `env` (None:
    this one); returns the version the runs print last on a line as
    "(<version_of> X)"."""
    with open(csv, "w") as f:
        f.write("label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us\n")
    text = ""
    for label, (model, inputs) in INPROC.items():
        text += subprocess.run(command(os.path.join(models, model, "1", "model.pt"), label, csv,
                                       inputs), check=True, capture_output=True, text=True,
                               env=env).stdout
    m = re.search(r"\(%s (.*)\)$" % version_of, text, re.M)
    return m.group(1) if m else "?"


def torch_ref(models, raw):
    """The reference: PyTorch itself (torch_ref.py), with the venv's torch,
    the one whose LibTorch ptserve links, on jemalloc as ptserve is
    (harness.reference_env). Returns (version, allocator note)."""
    h.log("the reference: PyTorch itself, batch 1 (one thread, forward() back to back)")
    env, allocator = h.reference_env()
    return calls(models, os.path.join(raw, "torch.csv"), "PyTorch",
                 lambda path, label, csv, inputs: [h.PY, os.path.join(HERE, "torch_ref.py"), path,
                                                   label, csv, *inputs], env), allocator


def inproc(build, models, raw):
    """A diagnostic: the same files through ptserve's bridge (bench_inproc)."""
    h.log("ptserve's bridge in process, batch 1 (one thread, forward() back to back)")
    return calls(models, os.path.join(raw, "inproc.csv"), "LibTorch",
                 lambda path, label, csv, inputs: [
                     os.path.join(build, "bench_inproc"), "--model", path, "--label", label,
                     "--csv", csv, *[a for i in inputs for a in ("--input", i)]])


def perf_analyzer(pa, server, model, proto, raw, interval):
    """perf_analyzer with ptperf's windows and stability rule, one run per
    concurrency; a run that fails or never settles leaves no row and is
    listed in perf_analyzer_failed.txt (the report names it)."""
    port = server.port if proto == "http" else server.grpc_port
    for c in (1, 2, 4, 8):
        h.log("perf_analyzer %s over %s, concurrency %d" % (model, proto, c))
        out = os.path.join(raw, "perf_analyzer_%s_%s_c%d.csv" % (proto, model, c))
        with open(os.path.join(raw, "perf_analyzer.log"), "a") as log:
            rc = subprocess.run([pa, "-m", model, *PA_PROTO[proto], "-u", "127.0.0.1:%d" % port,
                                 "--concurrency-range", str(c), "-p", str(interval), "-s", "10",
                                 "-r", "10", "-f", out], stdout=log, stderr=log).returncode
        if rc != 0:
            if os.path.exists(out):
                os.remove(out)
            with open(os.path.join(raw, "perf_analyzer_failed.txt"), "a") as f:
                f.write("%s %s %d\n" % (proto, model, c))


def main():
    build = h.build(os.environ.get("BENCH_BUILD_DIR", os.path.join(h.ROOT, "build-bench")),
                    ["ptserve", "ptperf", "bench_inproc"])
    models, raw = os.path.join(HERE, "models"), os.path.join(HERE, "raw")
    results = os.environ.get("BENCH_RESULTS", os.path.join(HERE, "results"))
    interval = h.env("INTERVAL_MS", 2000)
    quiet = h.env("QUIET_WAIT", 180)
    pa = os.environ.get("PERF_ANALYZER", os.path.join(h.ROOT, ".venv", "bin", "perf_analyzer"))
    for d in (models, raw):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(raw)
    os.makedirs(results, exist_ok=True)
    subprocess.run([h.PY, os.path.join(HERE, "gen_models.py"), models], check=True,
                   stdout=subprocess.DEVNULL)
    ptserve, log = os.path.join(build, "ptserve"), os.path.join(raw, "server.log")
    meta = os.path.join(raw, "meta.txt")

    with h.Server(ptserve, ["--model-repository", models], log, grpc=True) as s:
        h.meta(meta, busy_before=h.wait_quiet(quiet), interval_ms=interval,
               command="BENCH_INTERVAL_MS=%d BENCH_QUIET_WAIT=%d bench/cpu/run.py"
               % (interval, quiet), server_args=" ".join(s.args[:-2]))
        version, allocator = torch_ref(models, raw)
        h.add_meta(meta, pytorch=version, pytorch_allocator=allocator)
        h.add_meta(meta, libtorch=inproc(build, models, raw))
        has_pa = os.access(pa, os.X_OK)
        h.add_meta(meta, perf_analyzer=h.version_line(pa) if has_pa else "missing")
        for m, p in ((m, p) for m in ("mlp", "add_sub") for p in PROTOCOLS):
            h.log("ptperf %s over %s, concurrency 1,2,4,8" % (m, p))
            h.ptperf(build, s, m, "1,2,4,8", os.path.join(raw, "ptperf_%s_%s.csv" % (p, m)),
                     interval, *h.proto_args(p, s))
            if m == "mlp" and has_pa:
                perf_analyzer(pa, s, m, p, raw, interval)
        for m, p in ((m, p) for m in ("mlp_dyn", "deep", "deep_dyn") for p in PROTOCOLS):
            h.log("ptperf %s over %s, concurrency 8" % (m, p))
            h.ptperf(build, s, m, "8", os.path.join(raw, "ptperf_%s_%s.csv" % (p, m)),
                     interval, *h.proto_args(p, s))
    if shutil.which("taskset"):
        h.log("mlp again, server and client on one core (taskset -c 0)")
        one = ("taskset", "-c", "0")
        with h.Server(ptserve, ["--model-repository", models], log, prefix=one) as s:
            h.ptperf(build, s, "mlp", "1,4", os.path.join(raw, "pinned_mlp.csv"), interval,
                     prefix=one)
    h.add_meta(meta, load_after=h.loadavg(), busy_after=h.cpu_busy_pct())
    h.log("report in %s" % results)
    report.main([None, raw, results])


if __name__ == "__main__":
    main()
