"""bench/gpu/run.py — ptserve on an NVIDIA GPU against PyTorch in process,
all in one run on the GPU host (issue: GPU execution, part 9).

On the GPU host, from the checkout, with the host's python3 (CUDA torch):

    python3 bench/harness.py gpu                   # the TorchScript set
    BENCH_SET=aoti python3 bench/harness.py gpu    # the AOTInductor set

(or python3 bench/gpu/run.py). It needs cmake, a C compiler, nvidia-smi and
pip torch with CUDA (its LibTorch is the one ptserve links; C dependencies
from the offline bundle .bundle/debs when present), numpy and requests.

1. builds ptserve, ptperf and bench_inproc (and aoti_ref for the aoti set),
   Release, in BENCH_BUILD_DIR (default build-bench-gpu/) against that
   torch; BENCH_PREBUILT=1 uses what BENCH_BUILD_DIR has as it is;
2. writes ResNet-50 (FP32, FP16: CUDA graphs at 13 batch sizes, batches
   padded up to them; FP16 with a CUDA graph at batch 1 only) and a small
   MLP (gen_models.py) into BENCH_MODELS (/tmp/pts-bench-gpu-models;
   BENCH_KEEP_MODELS=1 keeps the ones there);
3. (a) the reference: PyTorch itself (torch_ref.py) running the same model
       files at batch 1..256, the batch on the device and a pinned host
       batch copied in and out each call, eager and as CUDA graphs
       (BENCH_REF_SECONDS per point, 2), and the FP16 one's batch-1 graph
       again in two processes of its own (batch 1 alone; the graph as the
       process's only GPU work), for the batch-1 target's base;
   (a') a diagnostic, not a reference: the same files through ptserve's
       bridge in process (bench_inproc); BENCH_SKIP_BRIDGE=1 leaves it out;
   (b) ptserve over HTTP, binary tensors, dynamic batching, one image per
       request, concurrency 1..512 (ptperf, BENCH_INTERVAL_MS windows, 2000,
       at most BENCH_MAX_TRIALS, 10); the ResNet-50s again in system shared
       memory, in CUDA shared memory (PTPERF_CUDART, else found under the
       pip torch; skipped, saying why, where ptperf's CUDA mode fails) and
       over gRPC (4 channels); ptperf drives them from BENCH_CLIENT_THREADS
       threads (4); each sweep after a warm pass of the same load at
       concurrency 512 (BENCH_WARM=0 leaves it out);
   (b') the device's busy share (nvidia-smi) at concurrency 512;
   (c) the batch-1 CUDA-graph model at concurrency 1;
   (c') a diagnostic, not a reference: TCP over loopback alone carrying
       the bytes of (c)'s requests and answers (bench_loopback), the floor
       under its HTTP and client share on this host: answered at once, and
       answered after the forward's time, the client waiting as for (c);
   (d) first-request latency of a fresh server with and without warmup
       (BENCH_SKIP_FIRST=1 leaves it out);
   BENCH_SET=aoti instead: the FP16 ResNet-50 as an AOTInductor package,
   PyTorch's aoti_load_package of it as the reference (LibTorch's loader
   from C++, aoti_ref, where Python's crashes), and (b), (b') on it, and
   (c), (c') on its batch-1 CUDA-graph model (the same package);
4. report.py turns the raw files (BENCH_RAW, default bench/gpu/raw) into
   BENCH_RESULTS (bench/gpu/results, or results-aoti): results.md,
   results.csv, plot.png. BENCH_GIT names the commit where the tree's .git
   is not its own (a copy sent to the host). The server inherits the
   environment, so a server setting (PTSERVE_INLINE_MAX_US=2000, say) is
   measured by setting it for this command, and BENCH_SERVER_ARGS adds
   flags to its command line; the report's command names both.
"""
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import harness as h  # noqa: E402
import report  # noqa: E402

CONCURRENCY = "1,2,4,8,16,32,64,128,256,512"


class Run:
    def __init__(self):
        self.raw = os.environ.get("BENCH_RAW", os.path.join(HERE, "raw"))
        self.build = os.environ.get("BENCH_BUILD_DIR", os.path.join(h.ROOT, "build-bench-gpu"))
        self.models = os.environ.get("BENCH_MODELS", "/tmp/pts-bench-gpu-models")
        self.interval = h.env("INTERVAL_MS", 2000)
        self.ref_seconds = os.environ.get("BENCH_REF_SECONDS", "2")
        self.set = h.env("SET", "torchscript")
        # ptperf's load threads: one saturates a core at about 14k ResNet-50
        # images/s over HTTP or gRPC (300-600 KB each), below what the
        # server takes (docs/gpu.md, "The client was the limit").
        self.client_threads = h.env("CLIENT_THREADS", 4)
        # A warm pass at the sweep's highest concurrency before each sweep
        # (BENCH_WARM=0: none). Measured on an H100 (FP32 over HTTP), the
        # first run at a load higher than any before had p99 above 2x p50
        # in 10 of 24 runs; the same load measured again right after, in
        # none (at most 1.81x; docs/experiments/gpu-http-tail, "The first
        # run at a new peak"). The likely cause, not yet proven: the pools
        # a higher load grows (LibTorch's pinned blocks, kept once made)
        # grow in the windows that catch them. The warm passes' own CSVs
        # stay in the raw files.
        self.warm = h.env("WARM", 1) == 1
        self.server, self.cuda_shm = None, False

    def sh(self, cmd, log, check=True, **kw):
        with open(os.path.join(self.raw, log), "a") as f:
            return subprocess.run([str(c) for c in cmd], stdout=f, stderr=kw.pop("stderr", f),
                                  check=check, **kw).returncode

    def start(self, repo, name):
        # BENCH_SERVER_ARGS: more flags for the server, space-separated
        # (--pinned-memory-pool-byte-size=268435456, say).
        self.server = h.Server(os.path.join(self.build, "ptserve"), [
            "--model-repository", repo, "--http-address", "127.0.0.1", "--http-thread-count", 16,
            "--allow-client-shm=true", *os.environ.get("BENCH_SERVER_ARGS", "").split()],
            os.path.join(self.raw, "server-%s.log" % name), grpc=True, metrics=True)

    def ptperf(self, *args, check=True):
        """ptperf against the server; exit 2 (not stable) is a result too."""
        rc = subprocess.run([os.path.join(self.build, "ptperf"), "-u", "127.0.0.1:%d" %
                             self.server.port, "-p", str(self.interval), "-r",
                             os.environ.get("BENCH_MAX_TRIALS", "10"), "-q", "--server-pid",
                             str(self.server.pid), "--threads", str(self.client_threads),
                             *[str(a) for a in args]]).returncode
        if check and rc not in (0, 2):
            sys.exit("ptperf %s failed (%d)" % (" ".join(map(str, args)), rc))
        return rc

    def grpc(self):
        return ["-i", "grpc", "--grpc-url", "127.0.0.1:%d" % self.server.grpc_port,
                "--grpc-channels", "4"]

    def probe_cuda_shm(self, model, cudart):
        """CUDA shared memory only where ptperf's CUDA mode works: a short
        run on the model first."""
        if not cudart:
            h.log("skip CUDA shared memory: no libcudart.so* under the pip torch "
                  "(set PTPERF_CUDART)")
            return
        os.environ["PTPERF_CUDART"] = cudart
        log = os.path.join(self.raw, "cudashm-probe.log")
        with open(log, "w") as f:
            rc = subprocess.run([os.path.join(self.build, "ptperf"), "-u", "127.0.0.1:%d" %
                                 self.server.port, "-m", model, "--shared-memory", "cuda",
                                 "--concurrency", "1", "-p", "200", "-r", "3", "-s", "100", "-q"],
                                stdout=f, stderr=f).returncode
        if rc == 0:
            self.cuda_shm = True
        else:
            del os.environ["PTPERF_CUDART"]
            lines = open(log).read().split("\n")
            h.log("skip CUDA shared memory, ptperf --shared-memory cuda fails: " + next(
                (l for l in lines if l.startswith("ptperf: ")), lines[-2] if len(lines) > 1 else ""))

    def loads(self):
        """(suffix, ptperf args) of the table's loads: HTTP binary tensors,
        system and CUDA shared memory, gRPC."""
        out = [("", []), ("_shm", ["--shared-memory", "system"])]
        out += [("_cudashm", ["--shared-memory", "cuda"])] if self.cuda_shm else []
        return out + [("_grpc", self.grpc())]

    def warm_up(self, m, args, label):
        """A warm pass: `m` at concurrency 512 for three 1 s windows (the
        later -p and -r override ptperf()'s)."""
        if self.warm:
            self.ptperf("-m", m, *args, "--concurrency", 512, "-p", 1000, "-r", 3, "-f",
                        os.path.join(self.raw, "warm_%s.csv" % label), check=False)

    def served_loads(self, m):
        for suffix, args in self.loads():
            self.warm_up(m, args, m + suffix)
            h.log("ptperf %s%s, concurrency 1..512" % (m, suffix))
            c = "1,16,64,128,256,512" if suffix == "_grpc" else CONCURRENCY
            self.ptperf("-m", m, *args, "--concurrency", c, "-f",
                        os.path.join(self.raw, "ptperf_%s%s.csv" % (m, suffix)))

    def busy_loads(self, m):
        """Device busy at saturation: nvidia-smi's utilization.gpu sampled
        every 100 ms while the same load runs at concurrency 512 again; the
        first half second (ramp-up) left out."""
        for suffix, args in self.loads():
            label = m + suffix
            txt = os.path.join(self.raw, "busy_%s.txt" % label)
            with open(txt, "w") as f:
                smi = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu",
                                        "--format=csv,noheader,nounits", "-i", "0", "-lms", "100"],
                                       stdout=f, stderr=subprocess.DEVNULL)
            self.ptperf("-m", m, *args, "--concurrency", 512, "-f",
                        os.path.join(self.raw, "busy_%s.csv" % label), check=False)
            smi.terminate()
            smi.wait()
            vals = [float(l) for l in open(txt).read().split("\n")[5:] if l.strip().isdigit()]
            if vals:
                with open(os.path.join(self.raw, "busy.csv"), "a") as f:
                    f.write("%s,%.1f\n" % (label, sum(vals) / len(vals)))

    def torch_ref(self, model, dtype, shape, label, batches, *flags, check=True):
        return self.sh([h.PY, os.path.join(HERE, "torch_ref.py"), model, dtype, shape, label,
                        os.path.join(self.raw, "torch.csv"), batches, "--seconds",
                        self.ref_seconds, *flags], "torch.log", check=check)


def find_cudart():
    """ptperf --shared-memory cuda loads the CUDA runtime at run time: the
    pip torch's (site-packages/nvidia/.../libcudart.so.*, or torch/lib), the
    one of torch's CUDA major version first."""
    if os.environ.get("PTPERF_CUDART"):
        return os.environ["PTPERF_CUDART"]
    import glob
    dirs, major = [], ""
    try:
        import nvidia
        dirs += list(nvidia.__path__)
    except ImportError:
        pass
    try:
        import torch
        dirs.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
        major = (torch.version.cuda or "").split(".")[0]
    except ImportError:
        pass
    found = sorted({f for d in dirs
                    for f in glob.glob(os.path.join(d, "**", "libcudart.so*"), recursive=True)})
    found.sort(key=lambda f: not f.endswith(".so." + major))
    return found[0] if found else ""


def reference_aoti(run, m):
    """PyTorch's aoti_load_package of the package (eager, then as a CUDA
    graph in a process of its own), or LibTorch's loader from C++ for the
    whole reference where Python's crashes (torch 2.11 on the GPU host:
    docs/gpu.md) or cannot capture the package as a graph: a reference
    without its graph rows is not PyTorch at its best (on 2026-12-06 an H100
    loaded the package in Python, its capture failed with "operation not
    permitted when stream is capturing", and the served rows outran the
    eager reference, the sign of a wrong one; the C++ loader's capture
    worked there before)."""
    pkg = os.path.join(run.models, m, "1", "model.pt2")
    meta = os.path.join(run.raw, "meta.txt")
    rc = run.torch_ref(pkg, "FP16", "3,224,224", m, "1,8,32,128", check=False)
    if rc == 0:
        rc = run.torch_ref(pkg, "FP16", "3,224,224", m, "1,8,32,128", "--package-graph",
                           check=False)
        if rc == 0:
            h.add_meta(meta, aoti_reference="python")
            # The batch-1 graph as its process's only GPU work, as for the
            # TorchScript set (its fastest state); a row, not a fallback.
            run.torch_ref(pkg, "FP16", "3,224,224", m + "_first", "1", "--graph-first",
                          check=False)
            return
        with open(os.path.join(run.raw, "torch.log"), "a") as f:
            f.write("package-graph: exit %d\n" % rc)
        why = "its CUDA graph capture of the package exited %d" % rc
    else:
        why = "python exit %d" % rc
    h.log("aoti_load_package failed (%s): LibTorch's AOTIModelPackageLoader from C++ "
          "instead, for the whole reference" % why)
    h.add_meta(meta, aoti_reference="cxx (%s)" % why)
    if os.path.exists(os.path.join(run.raw, "torch.csv")):
        os.remove(os.path.join(run.raw, "torch.csv"))
    run.sh([os.path.join(run.build, "aoti_ref"), pkg, "FP16", "3,224,224", m,
            os.path.join(run.raw, "torch.csv"), "1,8,32,128", run.ref_seconds], "torch.log")


def bridge(run):
    """(a') the same files through ptserve's bridge, in process."""
    with open(os.path.join(run.raw, "inproc.csv"), "w") as f:
        f.write("label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us\n")

    def inproc(label, model, *args):
        run.sh([os.path.join(run.build, "bench_inproc"), "--device", "cuda:0", "--model",
                os.path.join(run.models, model, "1", "model.pt"), *args, "--label", label,
                "--seconds", 2, "--warmup", 50, "--csv", os.path.join(run.raw, "inproc.csv")],
               "inproc.log", stderr=None)
    for b in (1, 8, 32, 128):
        inproc("resnet50_fp32/b%d" % b, "resnet50_fp32", "--input", "FP32:%d,3,224,224" % b)
        inproc("resnet50_fp16/b%d" % b, "resnet50_fp16", "--input", "FP16:%d,3,224,224" % b)
        inproc("mlp/b%d" % b, "mlp", "--input", "FP32:%d,64" % b)
    inproc("resnet50_fp16_graph/b1", "resnet50_fp16", "--input", "FP16:1,3,224,224", "--graph")
    inproc("mlp_graph/b1", "mlp", "--input", "FP32:1,64", "--graph")


def first_request(run):
    """(d) a fresh server's first and second request, with and without
    model_warmup."""
    with open(os.path.join(run.raw, "first_request.csv"), "w") as f:
        f.write("model,warmup,ready_ms,first_request_ms,second_request_ms\n")
    for w in ("no", "yes"):
        d = "%s-first-%s" % (run.models, w)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(os.path.join(run.models, "resnet50_fp16"), os.path.join(d, "resnet50_fp16"))
        if w == "yes":
            with open(os.path.join(d, "resnet50_fp16", "config.pbtxt"), "a") as f:
                f.write('model_warmup [ { name: "w" batch_size: 1 count: 3 inputs { key: '
                        '"INPUT__0" value: { data_type: TYPE_FP16 dims: [ 3, 224, 224 ] '
                        'random_data: true } } } ]\n')
        t0 = time.monotonic()
        run.start(d, "first-" + w)
        ms = int((time.monotonic() - t0) * 1000)
        with open(os.path.join(run.raw, "first_request.csv"), "a") as f:
            subprocess.run([h.PY, os.path.join(HERE, "first_request.py"),
                            "127.0.0.1:%d" % run.server.port, "resnet50_fp16", w, str(ms)],
                           stdout=f, check=True)
        run.server.stop()


def main():
    run = Run()
    os.makedirs(run.raw, exist_ok=True)
    import torch
    if os.path.isdir(os.path.join(h.ROOT, ".bundle", "debs")):
        env = subprocess.run(["bash", "-c", "source scripts/use-bundle.sh >/dev/null && env -0"],
                             cwd=h.ROOT, capture_output=True, check=True).stdout
        os.environ.update(dict(kv.split("=", 1) for kv in env.decode().split("\0") if "=" in kv))
    if h.env("PREBUILT", 0) == 1:
        h.log("using the build in %s as it is (BENCH_PREBUILT=1)" % run.build)
    else:
        h.build(run.build, ["ptserve", "ptperf", "bench_inproc", "bench_loopback"] +
                (["aoti_ref"] if run.set == "aoti" else []),
                "-DCMAKE_PREFIX_PATH=" + torch.utils.cmake_prefix_path)
    if h.env("KEEP_MODELS", 0) == 1 and os.path.isdir(run.models):
        h.log("models (%s) in %s as they are (BENCH_KEEP_MODELS=1)" % (run.set, run.models))
    else:
        h.log("models (%s) in %s" % (run.set, run.models))
        shutil.rmtree(run.models, ignore_errors=True)
        subprocess.run([h.PY, os.path.join(HERE, "gen_models.py"), run.models] +
                       (["--aoti"] if run.set == "aoti" else []), check=True)
    meta = os.path.join(run.raw, "meta.txt")
    if os.path.exists(meta):
        os.remove(meta)
    for f in ("torch.csv", "busy.csv", "inproc.csv", "first_request.csv", "loopback.csv"):
        if os.path.exists(os.path.join(run.raw, f)):
            os.remove(os.path.join(run.raw, f))
    m = h.meta(meta, interval_ms=run.interval, set=run.set, warm=512 if run.warm else 0,
               # PTSERVE_* reach the server (it inherits this environment),
               # so a run with a server knob set says so in its command.
               command=" ".join("%s=%s" % (k, os.environ[k]) for k in sorted(os.environ)
                                if k.startswith(("BENCH_", "PTSERVE_")) and k != "BENCH_GIT")
               + " python3 bench/harness.py gpu")
    cache = open(os.path.join(run.build, "CMakeCache.txt")).read() if os.path.exists(
        os.path.join(run.build, "CMakeCache.txt")) else ""
    h.add_meta(meta, git=os.environ.get("BENCH_GIT", m["commit"]),
               gpu=subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                   "--format=csv,noheader"], capture_output=True,
                                  text=True).stdout.split("\n")[0],
               cpu=m["cpu_model"], cores=m["cpus"],
               torch="%s cuda %s" % (torch.__version__, torch.version.cuda),
               build="%s (%s)" % (next((l.split("=", 1)[1] for l in cache.split("\n")
                                        if l.startswith("CMAKE_BUILD_TYPE:")), ""), run.build))
    cudart = find_cudart()
    h.add_meta(meta, cudart=cudart or "none", client_threads=run.client_threads)
    with open(os.path.join(run.raw, "busy.csv"), "w") as f:
        f.write("model,busy_pct\n")
    try:
        measure(run, cudart)
    finally:
        if run.server:
            run.server.stop()
    h.add_meta(meta, load_after=h.loadavg())
    out = os.environ.get("BENCH_RESULTS", os.path.join(
        HERE, "results-aoti" if run.set == "aoti" else "results"))
    os.makedirs(out, exist_ok=True)
    h.log("report in %s" % out)
    report.main(run.raw, out)


def batch1_alone(models, out):
    """For the one-call experiments on the batch-1 graph model
    (docs/experiments/gpu-batch1-*): raw files in `out`, short windows
    unless set, a repository in out/repo holding resnet50_fp16_graph alone
    (the other models' graphs are not captured, so a server loads quickly),
    and PyTorch's batch-1 graph as its process's only GPU work measured
    first, the target's base. Returns the Run and the repository."""
    os.makedirs(out, exist_ok=True)
    os.environ["BENCH_RAW"] = out
    os.environ.setdefault("BENCH_INTERVAL_MS", "1000")
    os.environ.setdefault("BENCH_MAX_TRIALS", "5")
    os.environ.setdefault("BENCH_REF_SECONDS", "0.7")
    m = "resnet50_fp16_graph"
    repo = os.path.join(out, "repo")
    os.makedirs(repo, exist_ok=True)
    if not os.path.exists(os.path.join(repo, m)):
        os.symlink(os.path.join(models, m), os.path.join(repo, m))
    run = Run()
    run.torch_ref(os.path.join(models, "resnet50_fp16", "1", "model.pt"), "FP16", "3,224,224",
                  "resnet50_fp16_first", "1", "--graph-first")
    return run, repo


def graph_batch1(run, m):
    """(c) the set's batch-1 CUDA-graph model at concurrency 1, its input
    in the body, in system and in CUDA shared memory."""
    h.log("ptperf %s, concurrency 1: binary tensors, system and CUDA shared memory" % m)
    for suffix, args in run.loads():
        if suffix != "_grpc":
            run.ptperf("-m", m, *args, "--concurrency", 1, "-f",
                       os.path.join(run.raw, "ptperf_%s%s.csv" % (m, suffix)))


def loopback(run, m):
    """(c') TCP over loopback alone, with no server running: a request of
    the batch-1 model's body and ptperf's HTTP and JSON header (318 bytes
    for a model of four letters, strace), its answer of the 1,000 FP16
    classes and ptserve's header (304); and a request and answer of the
    shared-memory rows, which carry no tensor. Headers rounded up. Each
    twice: answered at once, and answered after the batch-1 row's forward
    (the server's compute_infer over HTTP; 800 µs without it), so that the
    client waits as long as it waits for the model (labels ending _idle)."""
    body = report.INPUT_BYTES[m]
    tool = os.path.join(run.build, "bench_loopback")
    if not os.path.exists(tool):
        h.log("(c') skipped: %s is not built" % tool)
        return
    h.log("(c') TCP over loopback alone, the bytes of %s's requests" % m)
    rows = report.read_csv(os.path.join(run.raw, "ptperf_%s.csv" % m))
    forward = float(rows[0].get("server_compute_infer_us") or 800) if rows else 800
    for label, request, response in (("body", body + 384, 2000 + 320), ("no_body", 640, 320)):
        for suffix, after in (("", 0), ("_idle", round(forward))):
            run.sh([tool, "--label", label + suffix, "--request", request, "--response",
                    response, "--answer-after-us", after, "--seconds", 2, "--csv",
                    os.path.join(run.raw, "loopback.csv")], "loopback.log", check=False)


def measure(run, cudart):
    if run.set == "aoti":
        m = "resnet50_fp16_aoti"
        h.log("(a) the reference: PyTorch's aoti_load_package of the same package")
        reference_aoti(run, m)
        h.log("(b) ptserve, torch_aoti")
        run.start(run.models, "serve")
        run.probe_cuda_shm(m, cudart)
        run.served_loads(m)
        h.log("device busy at concurrency 512 (nvidia-smi)")
        run.busy_loads(m)
        graph_batch1(run, "resnet50_fp16_aoti_graph")
        run.server.stop()
        loopback(run, "resnet50_fp16_aoti_graph")
    else:
        h.log("(a) the reference: PyTorch itself running the same files (torch_ref.py)")
        for name, dtype, shape, batches, flags in (
                ("resnet50_fp32", "FP32", "3,224,224", "1,8,32,128,256", ()),
                ("resnet50_fp16", "FP16", "3,224,224", "1,8,32,128,256", ("--graph",)),
                ("mlp", "FP32", "64", "1,8,32,128", ("--graph",))):
            run.torch_ref(os.path.join(run.models, name, "1", "model.pt"), dtype, shape, name,
                          batches, *flags)
        # The batch-1 target's base again from a process that runs batch 1
        # alone, and from one whose only GPU work is the graph's warm-up
        # and capture; the fastest counts. The first took 935-937 us on an
        # H100, as the sweep's 935-938: it too runs other kernels (the
        # eager rows) besides the graph, and any one kernel slows a
        # graph's replay for good (docs/experiments/gpu-batch1-forward,
        # part 7). The second is the state of 830-851 us, and ptserve's
        # instances replayed at that level at eef981b and 54a6130.
        fp16 = os.path.join(run.models, "resnet50_fp16", "1", "model.pt")
        run.torch_ref(fp16, "FP16", "3,224,224", "resnet50_fp16_b1", "1", "--graph")
        run.torch_ref(fp16, "FP16", "3,224,224", "resnet50_fp16_first", "1", "--graph-first")
        if h.env("SKIP_BRIDGE", 0) == 1:
            h.log("(a') skipped (BENCH_SKIP_BRIDGE=1)")
        else:
            h.log("(a') diagnostic: the same files through ptserve's bridge, in process")
            bridge(run)
        h.log("(b, c) ptserve over HTTP")
        run.start(run.models, "serve")
        run.warm_up("mlp", [], "mlp")
        h.log("ptperf mlp, concurrency 1..512")
        run.ptperf("-m", "mlp", "--concurrency", CONCURRENCY, "-f",
                   os.path.join(run.raw, "ptperf_mlp.csv"))
        run.probe_cuda_shm("mlp", cudart)
        for name in ("resnet50_fp32", "resnet50_fp16"):
            run.served_loads(name)
        h.log("device busy at concurrency 512 (nvidia-smi)")
        for name in ("resnet50_fp32", "resnet50_fp16"):
            run.busy_loads(name)
        graph_batch1(run, "resnet50_fp16_graph")
        run.sh(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv"],
               "nvidia-smi.txt", check=False)
        run.server.stop()
        loopback(run, "resnet50_fp16_graph")
        if h.env("SKIP_FIRST", 0) == 1:
            h.log("(d) skipped (BENCH_SKIP_FIRST=1)")
        else:
            h.log("(d) first request with and without warmup")
            first_request(run)


if __name__ == "__main__":
    main()
