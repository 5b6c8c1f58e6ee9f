"""What about a second graph slows the first? (docs/experiments/gpu-batch1-forward.)

    python3 graph_pool.py [SCENARIO ...]   # each in a process of its own (default: all)

graph_order.py found a channels-last batch-1 graph replaying at ~830 us
while it is its process's only graph, and ~935 us once a second graph of
the same module was captured (by torch_ref.capture: 10 eager runs on a side
stream, then the capture). Each scenario here starts from that first graph
and does one part of that second capture, then times the first again:

  eager      10 eager runs on a side stream, no capture
  same-pool  a second capture, no eager runs first, in the first graph's
             memory pool (torch.cuda.graph(pool=...))
  own-pool   a second capture, no eager runs first, in a pool of its own;
             then the second graph freed and the cache emptied
  tiny       10 runs of x + 1 on a side stream: any kernel, or the model's?
             then the first graph after 2 s idle, replayed on a new stream,
             and a graph captured then
  tiny-before  10 runs of x + 1 before the first capture; then a second
             capture as own-pool does
  alloc      10 tensors of x's size allocated (kept), no kernel run
  alloc-before the same before the first capture
  eager-main the 10 eager runs on the current stream instead
  unoptimized  as eager, with TorchScript's graph executor optimization
             off for the whole process (torch._C._set_graph_executor_optimize)
"""
import importlib.util
import os
import subprocess
import sys
import time

import torch

_spec = importlib.util.spec_from_file_location("graph_order", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "graph_order.py"))
graph_order = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graph_order)
bench, cap = graph_order.bench, graph_order.cap


def scenario(name):
    if name == "unoptimized":
        torch._C._set_graph_executor_optimize(False)
    with torch.no_grad():
        m = torch.jit.load(graph_order.P, map_location="cuda:0").eval()
        x = torch.randn(1, 3, 224, 224, device="cuda").half().contiguous(
            memory_format=torch.channels_last)
        keep = []
        if name == "tiny-before":
            for _ in range(10):
                x + 1
        if name == "alloc-before":
            keep = [torch.empty_like(x) for _ in range(10)]
        g = cap(m, x)
        line = "%s: first graph alone %.0f us" % (name, bench(g.replay))
        if name == "alloc":
            keep = [torch.empty_like(x) for _ in range(10)]
            line += ", after 10 allocations (no kernel) %.0f us" % bench(g.replay)
        elif name == "alloc-before":
            line += " (%d allocations kept)" % len(keep)
        elif name in ("eager", "tiny", "eager-main", "unoptimized"):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(torch.cuda.current_stream() if name == "eager-main" else side):
                for _ in range(10):
                    if name == "tiny":
                        x + 1
                    else:
                        m(x)
            torch.cuda.current_stream().wait_stream(side)
            line += ", after 10 %s runs %.0f us" % (name, bench(g.replay))
            if name == "tiny":
                time.sleep(2)
                line += "; after 2 s idle %.0f us" % bench(g.replay)
                fresh = torch.cuda.Stream()
                with torch.cuda.stream(fresh):
                    line += ", replayed on a new stream %.0f us" % bench(g.replay)
                g3 = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g3):
                    m(x)
                line += ", a graph captured now %.0f us" % bench(g3.replay)
        else:
            g2 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g2, pool=g.pool() if name == "same-pool" else None):
                m(x)
            line += ", after a second capture %.0f us (the second %.0f us)" % (
                bench(g.replay), bench(g2.replay))
            if name == "own-pool":
                del g2
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                line += ", the second freed %.0f us" % bench(g.replay)
        print(line, flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        scenario(sys.argv[2])
    else:
        for s in sys.argv[1:] or ("eager", "same-pool", "own-pool", "tiny", "tiny-before",
                                  "alloc", "alloc-before", "eager-main", "unoptimized"):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", s],
                                 capture_output=True, text=True)
            print(out.stdout.strip() or out.stderr.strip()[-400:], flush=True)
