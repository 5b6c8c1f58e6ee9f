"""bench/triton/run.py — ptserve and tritonserver side by side on this
machine: the same model files (one repository, read by both), the same
clients (ptperf, and NVIDIA's perf_analyzer), the same cells, measured back
to back on one server then the other, the order turning between rounds.

    .venv/bin/python bench/triton/run.py     (or bench/harness.py triton)

Knobs (environment): BENCH_ROUNDS (5), BENCH_CS ("1 4": concurrencies),
BENCH_PROTOS ("http grpc"), BENCH_INTERVAL_MS (1000), BENCH_PA (1; 0 skips
perf_analyzer, PERF_ANALYZER names it), BENCH_FIXED_RATES ("2000 8000"
requests/s) and BENCH_RATE_ROUNDS (3) for the fixed-rate rows, BENCH_KIND
(KIND_CPU or KIND_GPU: the models' instance kind), BENCH_RESULTS (the
output folder), BENCH_BUILD_DIR (ptserve's build, build-bench).

tritonserver is NVIDIA's own, r25.07, with its real PyTorch backend, as
scripts/tritonserver.sh provides it: built once and kept in TRITON_HOME
(default build-bench/tritonserver-r25.07 of this checkout or, from a git
worktree without one, of the main checkout), with the backend built again
against the venv's LibTorch (TRITON_LIBTORCH=venv, the default; debian keeps
the build's LibTorch 1.13); TRITONSERVER and TRITON_BACKENDS name another
build instead (NVIDIA's container: /opt/tritonserver/...).

Before measuring, check.py asks both servers for every model's answers to
random inputs and compares them with torch's own forward(). Per cell
(protocol, concurrency, server): ptperf --server-pid (infer/s, p50, server
CPU per request), then perf_analyzer (infer/s, p50; the server's CPU over
its run ÷ the requests the statistics endpoint counted); both also give the
statistics endpoint's queue and compute times per request. The fixed-rate
rows are perf_analyzer --request-rate-range. report.py writes
results/{results.csv,results.md,plot.png}; raw files stay in results/raw/.
"""
import csv
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import harness as h  # noqa: E402
import report  # noqa: E402

SERVERS = ("tritonserver", "ptserve")
COLUMNS = ("client,server,round,protocol,concurrency,infer_per_sec,p50_us,server_cpu_us,"
           "queue_us,compute_input_us,compute_infer_us,compute_output_us").split(",")


def triton_home():
    """TRITON_HOME, else build-bench/tritonserver-r25.07 of this checkout or,
    where it has none (a git worktree), of the main checkout."""
    if os.environ.get("TRITON_HOME"):
        return os.environ["TRITON_HOME"]
    common = subprocess.run(["git", "-C", h.ROOT, "rev-parse", "--path-format=absolute",
                             "--git-common-dir"], capture_output=True, text=True).stdout.strip()
    homes = [os.path.join(r, "build-bench", "tritonserver-r25.07")
             for r in (h.ROOT, os.path.dirname(common)) if r]
    return next((d for d in homes if os.access(os.path.join(d, "install", "bin", "tritonserver"),
                                               os.X_OK)), homes[0])


def provide_tritonserver():
    """scripts/tritonserver.sh's provide_tritonserver (which builds what is
    missing): (tritonserver, its backends, the LibTorch dir, words for meta)."""
    env = dict(os.environ, ROOT=h.ROOT, PY=h.PY, TRITON_HOME=triton_home(),
               TRITON_LIBTORCH=os.environ.get("TRITON_LIBTORCH", "venv"))
    out = subprocess.run(["bash", "-c", 'log() { echo "== $*" >&2; }; '
                          'TRITONSERVER="${TRITONSERVER:-}"; TRITON_BACKENDS="${TRITON_BACKENDS:-}"; '
                          'source scripts/tritonserver.sh && provide_tritonserver && printf '
                          '"%s\\n" "$TRITONSERVER" "$TRITON_BACKENDS" "$TORCH_DIR" "$triton_libtorch"'],
                         cwd=h.ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr)
    return out.stdout.split("\n")[:4]


def models(raw, kind):
    repo = os.path.join(raw, "models")
    subprocess.run([h.PY, os.path.join(h.ROOT, "bench", "cpu", "gen_models.py"),
                    os.path.join(raw, "all")], check=True, stdout=subprocess.DEVNULL)
    for m in ("mlp", "add_sub"):
        cfg = os.path.join(raw, "all", m, "config.pbtxt")
        with open(cfg) as f:
            text = f.read().replace("kind: KIND_CPU", "kind: " + kind)
        with open(cfg, "w") as f:
            f.write(text)
        shutil.move(os.path.join(raw, "all", m), os.path.join(repo, m))
    shutil.rmtree(os.path.join(raw, "all"))
    return repo


def ptperf_cell(build, s, r, p, c, raw, interval):
    f = os.path.join(raw, "ptperf_%s_%s_c%s_r%d.csv" % (s.name, p, c, r))
    h.ptperf(build, s, "mlp", str(c), f, interval, *h.proto_args(p, s))
    v = h.read_csv(f)[0]
    return ["ptperf", s.name, r, p, c] + [v[k] for k in (
        "infer_per_sec", "p50_us", "server_cpu_us", "server_queue_us", "server_compute_input_us",
        "server_compute_infer_us", "server_compute_output_us")]


def pa_cell(pa, s, r, p, v, raw, interval, rate=False):
    """One perf_analyzer run (--concurrency-range v, or --request-rate-range
    v); the server's CPU per request is its CPU over the run ÷ the requests
    its statistics endpoint counted. A rate the server can not keep never
    settles and perf_analyzer writes no CSV: the rate kept is then the
    server's count over the run's wall time (start-up included: a little
    low), with no p50; a concurrency cell is then left out (None)."""
    client = "perf_analyzer_rate" if rate else "perf_analyzer"
    f = os.path.join(raw, "%s_%s_%s_%s_r%d.csv" % (client.replace("perf_analyzer", "pa"),
                                                   s.name, p, v, r))
    port = s.port if p == "http" else s.grpc_port
    n0, c0, t0 = s.answered("mlp"), h.cpu_seconds(s.pid), time.monotonic()
    with open(os.path.join(raw, "perf_analyzer.log"), "a") as log:
        subprocess.run([pa, "-m", "mlp", "-i", p, "-u", "127.0.0.1:%d" % port,
                        "--request-rate-range" if rate else "--concurrency-range", str(v),
                        "-p", str(interval), "-s", "10", "-r", "10", "-f", f],
                       stdout=log, stderr=log)
    t1, c1, n1 = time.monotonic(), h.cpu_seconds(s.pid), s.answered("mlp")
    row = next(csv.DictReader(open(f)), {}) if os.path.exists(f) and os.path.getsize(f) else {}
    if not row and not rate:
        h.log("perf_analyzer on %s, %s, c=%s failed; see %s/perf_analyzer.log" % (
            s.name, p, v, raw))
        return None
    n = n1 - n0
    kept = float(row["Inferences/Second"]) if row else n / (t1 - t0)
    return [client, s.name, r, p, v, "%.1f" % kept,
            "%.1f" % float(row["p50 latency"]) if row else "",
            "%.2f" % ((c1 - c0) * 1e6 / n if n else 0.0),
            row.get("Server Queue", ""), row.get("Server Compute Input", ""),
            row.get("Server Compute Infer", ""), row.get("Server Compute Output", "")]


def main():
    out = os.environ.get("BENCH_RESULTS", os.path.join(HERE, "results"))
    raw = os.path.join(out, "raw")
    n, interval = h.env("ROUNDS", 5), h.env("INTERVAL_MS", 1000)
    cs, protos = h.env("CS", "1 4").split(), h.env("PROTOS", "http grpc").split()
    rates, rate_rounds = h.env("FIXED_RATES", "2000 8000").split(), h.env("RATE_ROUNDS", 3)
    kind = h.env("KIND", "KIND_CPU")
    pa = os.environ.get("PERF_ANALYZER", os.path.join(h.ROOT, ".venv", "bin", "perf_analyzer"))
    use_pa = h.env("PA", 1) == 1 and os.access(pa, os.X_OK)
    build = h.build(os.environ.get("BENCH_BUILD_DIR", os.path.join(h.ROOT, "build-bench")),
                    ["ptserve", "ptperf"])
    tritonserver, backends, torch_dir, triton_libtorch = provide_tritonserver()
    shutil.rmtree(raw, ignore_errors=True)
    os.makedirs(os.path.join(raw, "models"))
    repo = models(raw, kind)
    # The venv's LibTorch first on the loader's path (libtorch.so has no
    # version in its name there; Debian's are libtorch.so.1.13).
    ld = {"LD_LIBRARY_PATH": os.path.join(torch_dir, "lib") + (
        ":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")}
    ready = ("/v2/models/mlp/ready", "/v2/models/add_sub/ready")
    # Both with their default flags, on the same repository. tritonserver's
    # metrics are compiled out of the Debian build: no metrics flag for it.
    triton_help = subprocess.run([tritonserver, "--help"], capture_output=True, text=True,
                                 env=dict(os.environ, **ld))
    servers = {}
    try:
        servers["tritonserver"] = h.Server(
            tritonserver, ["--model-repository", repo, "--backend-directory", backends],
            os.path.join(raw, "server_tritonserver.log"), grpc=True, env=ld, ready=ready,
            metrics=True if "--metrics-port" in triton_help.stdout + triton_help.stderr else None)
        servers["ptserve"] = h.Server(os.path.join(build, "ptserve"), ["--model-repository", repo],
                                      os.path.join(raw, "server_ptserve.log"), grpc=True,
                                      env=ld, ready=ready, metrics=True)
        for name, s in servers.items():
            s.name = name
        subprocess.run([h.PY, os.path.join(HERE, "check.py"), repo] + [
            "%s=127.0.0.1:%d,127.0.0.1:%d" % (k, s.port, s.grpc_port)
            for k, s in servers.items()], check=True)
        import torch
        meta_path = os.path.join(raw, "meta.txt")
        h.meta(meta_path, kernel=os.uname().release,
               tritonserver="%s (%s)" % (servers["tritonserver"].version(), tritonserver),
               triton_backend="Triton's PyTorch backend r25.07 in %s/pytorch" % backends,
               triton_libtorch=triton_libtorch or "as built in " + backends,
               ptserve_libtorch="the venv's LibTorch " + torch.__version__,
               ptserve=servers["ptserve"].version(), torch=torch.__version__,
               perf_analyzer=h.version_line(pa) if use_pa else "missing",
               kind=kind, rounds=n, interval_ms=interval,
               command="BENCH_ROUNDS=%d BENCH_INTERVAL_MS=%d BENCH_RATE_ROUNDS=%d%s "
               "bench/triton/run.py" % (n, interval, rate_rounds,
                                        "" if kind == "KIND_CPU" else " BENCH_KIND=" + kind))
        meta = h.read_meta(meta_path)
        # report.py's names for the harness's meta keys.
        h.add_meta(meta_path, cpu=meta["cpu_model"], cores=meta["cpus"])
        if kind == "KIND_GPU":
            h.add_meta(meta_path, gpu=subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True, text=True).stdout.split("\n")[0])
        # Warm-up: TorchScript profiles a model's first runs.
        for s in servers.values():
            for p in protos:
                subprocess.run([os.path.join(build, "ptperf"), "-m", "mlp", "-u",
                                "127.0.0.1:%d" % s.port, *h.proto_args(p, s), "-q",
                                "--no-server-stats", "-p", "500", "--concurrency", "4"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = []
        for r in range(1, n + 1):
            for p in protos:
                for c in cs:
                    for name in SERVERS if r % 2 else SERVERS[::-1]:
                        s = servers[name]
                        h.log("round %d, %s, c=%s, %s" % (r, p, c, name))
                        rows.append(ptperf_cell(build, s, r, p, c, raw, interval))
                        if use_pa:
                            rows.append(pa_cell(pa, s, r, p, c, raw, interval))
        for r in range(1, rate_rounds + 1 if use_pa else 1):
            for p in protos:
                for rate in rates:
                    for name in SERVERS if r % 2 else SERVERS[::-1]:
                        h.log("fixed rate, round %d, %s, %s/s, %s" % (r, p, rate, name))
                        rows.append(pa_cell(pa, servers[name], r, p, rate, raw, interval, True))
        h.add_meta(meta_path, load_after=h.loadavg())
        for name, s in servers.items():
            h.add_meta(meta_path, **{"rss_kb_" + name: h.proc_status(s.pid, "VmRSS"),
                                     "threads_" + name: h.proc_status(s.pid, "Threads")})
    finally:
        for s in servers.values():
            s.stop()
    with open(os.path.join(raw, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(r for r in rows if r)
    report.main([None, raw, out])


if __name__ == "__main__":
    main()
