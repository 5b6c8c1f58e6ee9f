"""Why is the batch-1 graph's forward 100 µs shorter from CUDA shared
memory than from a host buffer? (issue 46, part 4.)

Every GPU table since d51379d splits the batch-1 CUDA-graph request the
same way: the device's forward (CUDA events around the graph's replay,
scheduler.c apply_device_times) takes 929-934 µs when the image comes from
an HTTP body or a system shared-memory region (pinned host memory), and
824-830 µs when it comes from a CUDA shared-memory region, on the same
model, the same graph, the same instance. PyTorch's own replay of that
graph, back to back, takes 935 µs a call with its synchronization. Over
HTTP the request misses its target (PyTorch's graph + 150 µs) by 72 µs;
a forward of 825 µs would meet it.

On the GPU host, after bench/gpu/run.py's build and models (BENCH_BUILD_DIR,
BENCH_MODELS):

    python3 docs/experiments/gpu-batch1-forward/run.py OUT_DIR

1. PyTorch alone, the served file (resnet50_fp16_graph/1/model.pt): its
   batch-1 forward captured as a channels-last CUDA graph on a stream of
   its own, then driven the way ptserve's bridge drives it (torch_bridge.cc
   begin_forward, run_forward): event 0, the image to the device (from a
   pinned host buffer, or already there), reordered to channels-last,
   event 1, copied into the graph's static input, replay, event 2, the
   output to a pinned host buffer, event 3, wait. Also the replay alone.
   Each with no pause between calls and with a 200 µs busy pause (a
   request's network time). Median µs of events 1-2 (the forward as the
   server's statistics count it), 0-3 and the wall time per call, and the
   SM clock (nvidia-smi) while each ran.
2. ptserve serving resnet50_fp16_graph alone, ptperf at concurrency 1 over
   HTTP with binary tensors, system and CUDA shared memory, twice, the
   second round in reverse order: the statistics' phases per request and
   the SM clock; then each load again with LibTorch's profiler on three
   executions (--profile-dir), whose device rows give every kernel and
   copy with its start and length.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
import harness as h  # noqa: E402
from run import find_cudart  # noqa: E402

BUILD = os.environ.get("BENCH_BUILD_DIR", os.path.join(ROOT, "build-bench-gpu"))
MODELS = os.environ.get("BENCH_MODELS", "/tmp/pts-bench-gpu-models")
MODEL = "resnet50_fp16_graph"
CALLS = int(os.environ.get("B1F_CALLS", "1500"))


class Clock:
    """nvidia-smi's SM clock and power, sampled every 50 ms while alive."""

    def __init__(self):
        self.f = open("/tmp/b1f-clock.txt", "w")
        self.p = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                                   "--format=csv,noheader,nounits", "-i", "0", "-lms", "50"],
                                  stdout=self.f, stderr=subprocess.DEVNULL)

    def stop(self):
        self.p.terminate()
        self.p.wait()
        self.f.close()
        rows = []
        for line in open("/tmp/b1f-clock.txt").read().split("\n")[4:]:
            try:
                mhz, watts = [float(v) for v in line.split(",")]
                rows.append((mhz, watts))
            except ValueError:
                pass
        if not rows:
            return "-", "-"
        return ("%.0f" % statistics.median(r[0] for r in rows),
                "%.0f" % statistics.median(r[1] for r in rows))


def torch_alone():
    import torch
    torch.backends.cudnn.enabled = True
    m = torch.jit.load(os.path.join(MODELS, MODEL, "1", "model.pt"), map_location="cuda").eval()
    torch.manual_seed(0)
    x_dev = torch.randn(1, 3, 224, 224, device="cuda").half()
    x_pin = x_dev.cpu().pin_memory()
    s = torch.cuda.Stream()
    rows = []
    with torch.no_grad(), torch.cuda.stream(s):
        static_in = x_dev.contiguous(memory_format=torch.channels_last).clone(
            memory_format=torch.channels_last)
        for _ in range(10):
            m(static_in)
        s.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            static_out = m(static_in)
        y_pin = torch.empty(static_out.shape, dtype=static_out.dtype).pin_memory()
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]

        def bridge(src):
            def call():
                ev[0].record(s)
                a = x_pin.to("cuda", non_blocking=True) if src == "pinned" else x_dev
                b = a.contiguous(memory_format=torch.channels_last)
                ev[1].record(s)
                static_in.copy_(b, non_blocking=True)
                g.replay()
                ev[2].record(s)
                y_pin.copy_(static_out, non_blocking=True)
                ev[3].record(s)
                ev[3].synchronize()
            return call

        def replay_only():
            ev[0].record(s)
            ev[1].record(s)
            g.replay()
            ev[2].record(s)
            ev[3].record(s)
            ev[3].synchronize()

        variants = [("bridge, image in pinned host memory", bridge("pinned")),
                    ("bridge, image on the device", bridge("device")),
                    ("replay alone", replay_only)]
        for pause_us in (0, 200):
            for rnd in range(2):
                for label, call in (variants if rnd == 0 else variants[::-1]):
                    for _ in range(50):
                        call()
                    clock = Clock()
                    fwd, whole, wall = [], [], []
                    for _ in range(CALLS):
                        t = time.perf_counter()
                        call()
                        wall.append((time.perf_counter() - t) * 1e6)
                        fwd.append(ev[1].elapsed_time(ev[2]) * 1000)
                        whole.append(ev[0].elapsed_time(ev[3]) * 1000)
                        if pause_us:
                            until = time.perf_counter() + pause_us / 1e6
                            while time.perf_counter() < until:
                                pass
                    mhz, watts = clock.stop()
                    row = (label, pause_us, rnd + 1, statistics.median(fwd),
                           statistics.median(whole), statistics.median(wall), mhz, watts)
                    h.log("%s, pause %d, round %d: forward %.1f, events 0-3 %.1f, wall %.1f us, "
                          "%s MHz %s W" % row)
                    rows.append(row)
    return rows


def stats(server):
    s = json.loads(h.http_get(server.url("/v2/models/%s/stats" % MODEL)))
    st = s["model_stats"][0]["inference_stats"]
    return {k: (st[k]["count"], st[k]["ns"]) for k in
            ("success", "queue", "compute_input", "compute_infer", "compute_output")}


def ptperf(server, interval, trials, csv, args=(), env=None):
    """ptperf on MODEL at concurrency 1."""
    return subprocess.run([os.path.join(BUILD, "ptperf"), "-u", "127.0.0.1:%d" % server.port,
                           "-m", MODEL, "--concurrency", "1", "-p", str(interval), "-r",
                           str(trials), "-q", "-f", csv, *args], env=env).returncode


def per_request(server, load):
    """Runs load(); returns the requests it made and the statistics' queue,
    compute input, infer and output µs per request over them."""
    a = stats(server)
    load()
    b = stats(server)
    n = b["success"][0] - a["success"][0]
    per = {k: (b[k][1] - a[k][1]) / 1000 / max(1, n) for k in b if k != "success"}
    return (n, per["queue"], per["compute_input"], per["compute_infer"], per["compute_output"])


def profile_next(server, executions=3):
    """Asks the server to profile MODEL's next executions (--profile-dir)."""
    req = urllib.request.Request(server.url("/v2/models/%s/trace/setting" % MODEL),
                                 data=json.dumps({"profile_executions": str(executions)}).encode(),
                                 method="POST")
    urllib.request.urlopen(req).read()


def served(out, cudart):
    repo = "/tmp/pts-b1f-repo"
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(os.path.join(MODELS, MODEL), os.path.join(repo, MODEL))
    prof = os.path.join(out, "profiles")
    os.makedirs(prof, exist_ok=True)
    server = h.Server(os.path.join(BUILD, "ptserve"),
                      ["--model-repository", repo, "--http-address", "127.0.0.1",
                       "--allow-client-shm=true", "--profile-dir", prof],
                      os.path.join(out, "server.log"))
    env = dict(os.environ, PTPERF_CUDART=cudart)
    loads = [("HTTP, binary tensors", []), ("system shared memory", ["--shared-memory", "system"]),
             ("CUDA shared memory", ["--shared-memory", "cuda"])]

    rows, profiled = [], []
    try:
        for rnd in range(2):
            for label, args in (loads if rnd == 0 else loads[::-1]):
                ptperf(server, 300, 3, os.path.join(out, "warm.csv"), args, env)
                clock = Clock()
                csv = os.path.join(out, "ptperf_%d_%s.csv" % (rnd + 1, label[:4]))
                got = per_request(server, lambda: ptperf(server, 1000, 3, csv, args, env))
                mhz, watts = clock.stop()
                row = (label, rnd + 1) + got + (mhz, watts)
                h.log("%s, round %d: %d requests, queue %.1f, input %.1f, infer %.1f, "
                      "output %.1f us, %s MHz %s W" % row)
                rows.append(row)
        for label, args in loads:
            before = set(os.listdir(prof))
            profile_next(server)
            ptperf(server, 300, 3, os.path.join(out, "profiled.csv"), args, env)
            time.sleep(1)
            new = sorted(set(os.listdir(prof)) - before)
            profiled.append((label, [os.path.join("profiles", f) for f in new
                                     if f.endswith(".trace.json")]))
            h.log("%s profiled: %s" % (label, new))
    finally:
        server.stop()
    return rows, profiled


VARIANTS = [
    ("2 instances, instance threads", 2, {"PTSERVE_INLINE_MAX_US": "0"}),
    ("2 instances, receiving thread", 2, {"PTSERVE_INLINE_MAX_US": "2000"}),
    ("1 instance, instance thread", 1, {"PTSERVE_INLINE_MAX_US": "0"}),
    ("1 instance, receiving thread", 1, {"PTSERVE_INLINE_MAX_US": "2000"}),
    ("1 instance, instance thread, spin wait", 1,
     {"PTSERVE_INLINE_MAX_US": "0", "PTSERVE_CUDA_WAIT": "spin"}),
    ("1 instance, instance thread, blocking wait", 1,
     {"PTSERVE_INLINE_MAX_US": "0", "PTSERVE_CUDA_WAIT": "block"}),
    # A woken virtual CPU runs slowly for a while (docs/experiments/haltpoll:
    # a forward took 19 us after a halt, 5 us with halt polling): the same
    # two with the guest polling 200 us before it halts, where it can.
    ("1 instance, instance thread, guest halt polling 200 us", 1,
     {"PTSERVE_INLINE_MAX_US": "0", "B1F_HALTPOLL": "200000"}),
    ("1 instance, receiving thread, guest halt polling 200 us", 1,
     {"PTSERVE_INLINE_MAX_US": "2000", "B1F_HALTPOLL": "200000"}),
]
HALTPOLL = "/sys/module/haltpoll/parameters/guest_halt_poll_ns"


def set_haltpoll(value):
    """Writes guest_halt_poll_ns where the guest has it (root); returns
    what it was, or None."""
    try:
        old = open(HALTPOLL).read().strip()
        with open(HALTPOLL, "w") as f:
            f.write(value)
        return old
    except OSError as e:
        h.log("guest halt polling not set (%s)" % e)
        return None


def variants(out):
    """HTTP with binary tensors at concurrency 1 on a fresh server per
    variant: the batch run by an instance thread (PTSERVE_INLINE_MAX_US=0)
    or by the thread that received it (2000), with one instance or two,
    and the instance thread's wait spinning or blocking; twice, the second
    round in reverse order; three profiled executions in the first."""
    repos = {}
    for count in (1, 2):
        repo = "/tmp/pts-b1f-repo%d" % count
        shutil.rmtree(repo, ignore_errors=True)
        shutil.copytree(os.path.join(MODELS, MODEL), os.path.join(repo, MODEL))
        cfg = os.path.join(repo, MODEL, "config.pbtxt")
        text = open(cfg).read()
        open(cfg, "w").write(text.replace("count: 2 ", "count: %d " % count))
        repos[count] = repo
    rows, profiled = [], []
    for rnd in range(2):
        for label, count, env in (VARIANTS if rnd == 0 else VARIANTS[::-1]):
            sub = "v%d-%d" % (VARIANTS.index((label, count, env)), rnd + 1)
            prof = os.path.join(out, "vprofiles", sub)
            os.makedirs(prof, exist_ok=True)
            restore = set_haltpoll(env["B1F_HALTPOLL"]) if "B1F_HALTPOLL" in env else None
            server = h.Server(os.path.join(BUILD, "ptserve"),
                              ["--model-repository", repos[count], "--http-address",
                               "127.0.0.1", "--profile-dir", prof],
                              os.path.join(out, "server-variants.log"), env=env)
            try:
                ptperf(server, 300, 3, os.path.join(out, "warm.csv"))
                csv = os.path.join(out, "variants.csv")
                row = (label, rnd + 1) + per_request(server,
                                                     lambda: ptperf(server, 1000, 3, csv))
                h.log("%s, round %d: %d requests, queue %.1f, input %.1f, infer %.1f, "
                      "output %.1f us" % row)
                rows.append(row)
                if rnd == 0:
                    profile_next(server)
                    ptperf(server, 300, 3, os.path.join(out, "profiled.csv"))
                    time.sleep(1)
                    new = sorted(f for f in os.listdir(prof) if f.endswith(".trace.json"))
                    profiled.append((label, [os.path.join("vprofiles", sub, f) for f in new]))
            finally:
                server.stop()
                if restore is not None:
                    set_haltpoll(restore)
    return rows, profiled


def device_rows(path):
    """Per execution in a trace: (first device event's start, last end,
    sum of kernel times, count, the gaps over 5 µs) in µs."""
    ev = json.load(open(path))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    dev = sorted((e for e in ev if e.get("cat") == "device"), key=lambda e: e["ts"])
    out = []
    by_tid = {}
    for e in dev:
        by_tid.setdefault(e.get("tid"), []).append(e)
    for tid, es in by_tid.items():
        start, end = es[0]["ts"], max(e["ts"] + e["dur"] for e in es)
        busy = sum(e["dur"] for e in es)
        gaps, last = [], es[0]["ts"] + es[0]["dur"]
        for e in es[1:]:
            if e["ts"] - last > 5:
                gaps.append((round(e["ts"] - start), round(e["ts"] - last), e["name"][:60]))
            last = max(last, e["ts"] + e["dur"])
        out.append((tid, len(es), end - start, busy, gaps[:12], [e["name"][:50] for e in es[:4]]))
    return out


def finish(out, name, md, profiled):
    """Appends the profiled executions' device rows to md and writes it
    to out/name (and stdout)."""
    md += ["", "## Profiled executions: device rows", ""]
    for label, files in profiled:
        for f in files:
            for tid, n, span, busy, gaps, first in device_rows(os.path.join(out, f)):
                md.append("- %s, %s (row %s): %d device events over %.1f µs, busy %.1f µs; "
                          "first %s; gaps over 5 µs (at, length, before): %s"
                          % (label, f, tid, n, span, busy, first, gaps))
    text = "\n".join(md) + "\n"
    open(os.path.join(out, name), "w").write(text)
    print(text)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    md = ["# The batch-1 graph's forward: host buffer against device buffer", ""]
    if os.environ.get("B1F_SKIP_TORCH") != "1":
        md += ["## PyTorch alone, the served file, driven as the bridge drives it", "",
               "| what | pause between calls µs | round | forward (events 1-2) µs | "
               "events 0-3 µs | wall per call µs | SM MHz | W |",
               "|---|---:|---:|---:|---:|---:|---:|---:|"]
        md += ["| %s | %d | %d | %.1f | %.1f | %.1f | %s | %s |" % r for r in torch_alone()]
    if os.environ.get("B1F_PART") == "variants":
        rows, profiled = variants(out)
        idle = "/sys/devices/system/cpu/cpuidle/current_driver"
        md += ["cpuidle driver: %s" % (open(idle).read().strip() if os.path.exists(idle)
                                       else "none")]
        md += ["", "## ptserve, HTTP with binary tensors, concurrency 1, by variant "
               "(statistics per request)", "",
               "| variant | round | requests | queue µs | compute input µs | compute infer µs | "
               "compute output µs |", "|---|---:|---:|---:|---:|---:|---:|"]
        md += ["| %s | %d | %d | %.1f | %.1f | %.1f | %.1f |" % r for r in rows]
        finish(out, "results-variants.md", md, profiled)
        return
    rows, profiled = served(out, find_cudart())
    md += ["", "## ptserve, resnet50_fp16_graph, concurrency 1 (statistics per request)", "",
           "| load | round | requests | queue µs | compute input µs | compute infer µs | "
           "compute output µs | SM MHz | W |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    md += ["| %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %s | %s |" % r for r in rows]
    finish(out, "results.md", md, profiled)


if __name__ == "__main__":
    main()
