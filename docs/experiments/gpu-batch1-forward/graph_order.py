"""Does a CUDA graph's replay depend on what the process did before it?
(docs/experiments/gpu-batch1-forward, part 4.)

    python3 graph_order.py ORDER [ORDER ...]   # ORDER: cl or nchw
    python3 graph_order.py --variants          # the next questions, below
    python3 graph_order.py --decay             # whether the slow level wears off
    python3 graph_order.py --decay-alone       # whether the fast level lasts

For each ORDER, in this one process: the served FP16 ResNet-50 loaded
again (torch.jit.load), for nchw first run eagerly 25 times on an NCHW
batch of one; then its channels-last batch-1 forward captured as a CUDA
graph (by bench/gpu/torch_ref.py's capture(): 10 eager runs on a side
stream first) and its replay timed (replay, synchronize; p50 of 600 after 30);
a second graph of the same module captured and timed the same way; the
first graph timed again. Calls 6 and 7 of the README ran this (call 6 an
earlier form that timed the first graph only).

--variants runs `cl` again in a process of its own per setting, to tell
the README's candidate causes apart, and times the first graph once the
second exists fed the way the bridge feeds it: its image copied in from a
pinned host buffer (the HTTP and system shared-memory rows) or from device
memory (the CUDA shared-memory rows, which stayed at the fast level in
three of the bench's servers). Run in the README's second lease (part 7:
no setting changed either level); the settings:

  base                        as above
  CUDA_MODULE_LOADING=EAGER   every kernel loaded at start (lazy loading
                              is CUDA's default since 12.2)
  expandable segments         PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  cudnn.benchmark             cuDNN's autotuner picks each convolution
"""
import importlib.util
import os
import statistics
import subprocess
import sys
import time

import torch

# bench/gpu/torch_ref.py by its path (bench/ on sys.path would shadow
# packages: bench/triton), for its capture().
_spec = importlib.util.spec_from_file_location("torch_ref", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "gpu", "torch_ref.py"))
torch_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(torch_ref)

P = os.environ.get("GRAPH_ORDER_MODEL", "/tmp/pts-bench-gpu-models/resnet50_fp16/1/model.pt")
VARIANTS = [("base", {}), ("CUDA_MODULE_LOADING=EAGER", {"CUDA_MODULE_LOADING": "EAGER"}),
            ("expandable segments", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
            ("cudnn.benchmark", {"GRAPH_ORDER_CUDNN_BENCHMARK": "1"})]


def bench(call, n=600):
    for _ in range(30):
        call()
        torch.cuda.synchronize()
    t = []
    for _ in range(n):
        s = time.perf_counter()
        call()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - s) * 1e6)
    return statistics.median(t)


def cap(m, x):
    """x's forward captured as torch_ref.py captures it: (the graph)."""
    return torch_ref.capture(m, x)[0]


def fed(g, static_in, src):
    """A replay fed as the bridge feeds it: the image to the device (from
    pinned host memory, or already there), reordered to channels-last,
    copied into the static input."""
    def call():
        a = src.to("cuda:0", non_blocking=True) if src.device.type == "cpu" else src
        static_in.copy_(a.contiguous(memory_format=torch.channels_last), non_blocking=True)
        g.replay()
    return call


def orders(names):
    if os.environ.get("GRAPH_ORDER_CUDNN_BENCHMARK") == "1":
        torch.backends.cudnn.benchmark = True
    with torch.no_grad():
        for order in names:
            m = torch.jit.load(P, map_location="cuda:0").eval()
            x = torch.randn(1, 3, 224, 224, device="cuda").half()
            xcl = x.contiguous(memory_format=torch.channels_last)
            if order == "nchw":
                for _ in range(25):
                    m(x)
            g = cap(m, xcl)
            a = bench(g.replay)
            g2 = cap(m, xcl)
            b = bench(g2.replay)
            line = ("%s: first graph %.0f us, second graph of the same module %.0f us, "
                    "first again %.0f us" % (order, a, b, bench(g.replay)))
            if "--fed" in sys.argv:
                line += ("; first, fed from pinned host memory %.0f us, from the device %.0f us"
                         % (bench(fed(g, xcl, x.cpu().pin_memory())), bench(fed(g, xcl, x))))
            print(line, flush=True)


def clocks():
    """The SM and memory clocks (MHz), temperature (C) and power (W) now, by
    nvidia-smi: a level that changes with time might be the card's."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,"
                          "power.draw", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout.strip().split("\n")[0]
    vals = [v.strip() for v in out.split(",")]
    return "sm/mem %s / %s MHz, %s C, %s W" % tuple(vals) if len(vals) == 4 else out


def decay(second, seconds=40):
    """--decay: does the slow level wear off? The first graph replayed back
    to back for `seconds` once a second graph exists, its p50 printed for
    every two seconds with the card's clocks. The bench's servers came to
    the fast level after about 10-14 s of batch-1 traffic (README, part 4).
    --decay-alone does the same without the second graph: does the fast
    level last?"""
    with torch.no_grad():
        m = torch.jit.load(P, map_location="cuda:0").eval()
        xcl = torch.randn(1, 3, 224, 224, device="cuda").half().contiguous(
            memory_format=torch.channels_last)
        g = cap(m, xcl)
        print("first graph alone: %.0f us (%s)" % (bench(g.replay), clocks()), flush=True)
        if second:
            cap(m, xcl)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            lat, start = [], time.perf_counter()
            while time.perf_counter() - start < 2:
                s = time.perf_counter()
                g.replay()
                torch.cuda.synchronize()
                lat.append((time.perf_counter() - s) * 1e6)
            print("%4.0f s after the %s: %.0f us (%d replays; %s)"
                  % (time.perf_counter() - t0, "second graph" if second else "first timing",
                     statistics.median(lat), len(lat), clocks()), flush=True)


def variants():
    for label, env in VARIANTS:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "cl", "--fed"],
                             env=dict(os.environ, **env), capture_output=True, text=True)
        print("%s | %s" % (label, (out.stdout.strip() or out.stderr.strip()[-300:])), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--variants"]:
        variants()
    elif sys.argv[1:] in (["--decay"], ["--decay-alone"]):
        decay(sys.argv[1] == "--decay")
    else:
        orders([a for a in sys.argv[1:] if not a.startswith("--")])
