"""Does a CUDA graph's replay depend on what the process did before it?
(docs/experiments/gpu-batch1-forward, part 4.)

    python3 graph_order.py ORDER [ORDER ...]   # ORDER: cl or nchw

For each ORDER, in this one process: the served FP16 ResNet-50 loaded
again (torch.jit.load), for nchw first run eagerly 25 times on an NCHW
batch of one; then its channels-last batch-1 forward captured as a CUDA
graph (after 10 eager runs on a side stream, as bench/gpu/torch_ref.py
captures) and its replay timed (replay, synchronize; p50 of 600 after 30);
a second graph of the same module captured and timed the same way; the
first graph timed again.
"""
import statistics
import sys
import time

import torch

P = "/tmp/pts-bench-gpu-models/resnet50_fp16/1/model.pt"


def bench(g, n=600):
    for _ in range(30):
        g.replay()
        torch.cuda.synchronize()
    t = []
    for _ in range(n):
        s = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - s) * 1e6)
    return statistics.median(t)


def cap(m, x):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(10):
            m(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        m(x)
    return g


with torch.no_grad():
    for order in sys.argv[1:]:
        m = torch.jit.load(P, map_location="cuda:0").eval()
        x = torch.randn(1, 3, 224, 224, device="cuda").half()
        xcl = x.contiguous(memory_format=torch.channels_last)
        if order == "nchw":
            for _ in range(25):
                m(x)
        g = cap(m, xcl)
        a = bench(g)
        g2 = cap(m, xcl)
        b = bench(g2)
        print(order, "first graph %.0f us, second graph of the same module %.0f us, "
              "first again %.0f us" % (a, b, bench(g)), flush=True)
