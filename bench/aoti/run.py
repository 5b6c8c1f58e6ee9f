"""bench/aoti/run.py — AOTInductor packages against TorchScript, the same
models, in process and served by ptserve (issue 10, part 7).

    .venv/bin/python bench/aoti/run.py          (or bench/harness.py aoti)
    BENCH_DEVICE=cuda python3 bench/aoti/run.py (a GPU host; CUDA torch)

1. builds ptserve, ptperf and bench_inproc (Release) in BENCH_BUILD_DIR
   (default build-bench/), against the interpreter's torch;
2. writes each model of bench/aoti/gen_models.py twice, TorchScript and
   AOTInductor, from the same module and weights (AOTInductor compiles C++:
   minutes);
3. measures, at batch 1 and 8 (cpu) or 1, 8 and 32 (cuda), one call at a
   time, in BENCH_ROUNDS (3) interleaved rounds, keeping each variant's best
   round: PyTorch itself in process (torch_ref.py: the eager module, the
   TorchScript file through torch.jit.load, the package through
   aoti_load_package), ptserve TorchScript and AOTInductor over HTTP,
   binary tensors, concurrency 1 (ptperf, BENCH_INTERVAL_MS windows, 2000),
   and, as a diagnostic, both files through ptserve's own bridge in process
   (bench_inproc);
4. report.py writes BENCH_RESULTS (bench/aoti/results for cpu,
   bench/aoti/results-cuda for cuda): results.md, results.csv, plot.png.

On the CPU every variant uses one intra-op thread (the server and the
client share the machine). Compare the columns of one run, not runs across
hosts.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import harness as h  # noqa: E402
import report  # noqa: E402


def config(models, name):
    """(wire type, dims without the batch) of the model's input."""
    with open(os.path.join(models, name, "config.pbtxt")) as f:
        text = f.read()
    line = next(l for l in text.split("\n") if l.startswith("input"))
    dims = line.split("dims: [", 1)[1].split("]", 1)[0].replace(" ", "")
    return ("FP16" if "TYPE_FP16" in text else "FP32"), dims


def main():
    device = h.env("DEVICE", "cpu")
    out = os.environ.get("BENCH_RESULTS", os.path.join(
        HERE, "results" + ("" if device == "cpu" else "-cuda")))
    models, raw = os.path.join(HERE, "models-" + device), os.path.join(HERE, "raw-" + device)
    interval, n = h.env("INTERVAL_MS", 2000), h.env("ROUNDS", 3)
    import torch
    build = h.build(os.environ.get("BENCH_BUILD_DIR", os.path.join(h.ROOT, "build-bench")),
                    ["ptserve", "ptperf", "bench_inproc"],
                    "-DCMAKE_PREFIX_PATH=" + torch.utils.cmake_prefix_path)
    h.log("models in %s (AOTInductor compiles C++: minutes)" % models)
    for d in (models, raw):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(raw)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(raw, "gen.log"), "w") as log:
        subprocess.run([h.PY, os.path.join(HERE, "gen_models.py"), models, "--device", device],
                       check=True, stdout=log, stderr=log)
    if device == "cpu":
        names, batches, dev = ("mlp", "cnn"), (1, 8), ["--threads", "1"]
    else:
        names, batches, dev = ("resnet50_fp16", "mlp"), (1, 8, 32), ["--device", "cuda:0"]
    meta_path = os.path.join(raw, "meta.txt")
    h.meta(meta_path, device=device, torch=torch.__version__, interval_ms=interval, rounds=n,
           command="BENCH_ROUNDS=%d BENCH_INTERVAL_MS=%d%s bench/aoti/run.py" % (
               n, interval, "" if device == "cpu" else " BENCH_DEVICE=" + device))
    meta = h.read_meta(meta_path)
    # report.py's names for the harness's meta keys.
    h.add_meta(meta_path, git=meta["commit"], cpu=meta["cpu_model"], cores=meta["cpus"])
    if device == "cuda":
        h.add_meta(meta_path, gpu=subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True).stdout.split("\n")[0])
    # On the CPU, PyTorch on jemalloc as ptserve is (harness.reference_env);
    # on CUDA the host allocator is CUDA's either way.
    ref_env, allocator = h.reference_env() if device == "cpu" else (None, "")
    if allocator:
        h.add_meta(meta_path, pytorch_allocator=allocator)
    inproc_csv = os.path.join(raw, "inproc.csv")
    with open(inproc_csv, "w") as f:
        f.write("label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us\n")
    log = open(os.path.join(raw, "inproc.log"), "a")
    with h.Server(os.path.join(build, "ptserve"), ["--model-repository", models,
                                                   "--http-address", "127.0.0.1"],
                  os.path.join(raw, "server.log"), grpc=True, metrics=True) as s:
        # Every variant measured n times, interleaved, so that a burst of load
        # from elsewhere hits one round, not one variant; the report keeps
        # each variant's best (lowest median) round.
        for r in range(1, n + 1):
            h.log("round %d/%d: PyTorch in process (eager, TorchScript, AOTInductor) and "
                  "ptserve's bridge, then served (HTTP, concurrency 1)" % (r, n))
            for m in names:
                for b in batches:
                    ref = [h.PY, os.path.join(HERE, "torch_ref.py"), m, str(b), "--device",
                           device, "--csv", inproc_csv]
                    subprocess.run(ref, check=True, stdout=log, stderr=log, env=ref_env)
                    for k, f in (("ts", "model.pt"), ("aoti", "model.pt2")):
                        path = os.path.join(models, "%s_%s" % (m, k), "1", f)
                        # PyTorch's own loader: torch 2.11's aoti_load_package
                        # crashed on a CUDA package (docs/gpu.md); its column
                        # is then empty, and the log says so.
                        rc = subprocess.run(ref + ["--file", path], stdout=log, stderr=log,
                                            env=ref_env).returncode
                        if rc:
                            h.log("PyTorch in process failed on %s (exit %d): its cell "
                                  "stays empty" % (path, rc))
                        wire, dims = config(models, "%s_%s" % (m, k))
                        subprocess.run([os.path.join(build, "bench_inproc"), "--model", path,
                                        "--input", "%s:%d,%s" % (wire, b, dims), *dev,
                                        "--seconds", "2", "--warmup", "100", "--label",
                                        "%s/bridge_%s/b%d" % (m, k, b), "--csv", inproc_csv],
                                       check=True, stdout=log)
            for m in names:
                for b in batches:
                    for k in ("ts", "aoti"):
                        h.ptperf(build, s, "%s_%s" % (m, k), "1",
                                 os.path.join(raw, "ptperf_%s_%s_b%d_r%d.csv" % (m, k, b, r)),
                                 interval, "-b", str(b))
    h.add_meta(meta_path, load_after=h.loadavg())
    h.log("report in %s" % out)
    report.main(raw, out)


if __name__ == "__main__":
    main()
