#!/usr/bin/env python3
"""The reference of the GPU benchmark: PyTorch itself running the very file
ptserve serves, in this process, as a team's ten-line script would
(issue 46). Not ptserve's code: torch.jit.load (or, for a .pt2,
torch._inductor.aoti_load_package), eval mode, torch.no_grad(), the default
stream, cuDNN's defaults.

    python3 bench/gpu/torch_ref.py MODEL_FILE DTYPE SHAPE LABEL CSV [BATCHES]

SHAPE is one item's shape (3,224,224); BATCHES a comma list (default
1,8,32,128,256). For each batch size, two variants, each a row of CSV
(label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us; per_sec counts items):

  LABEL/device/b<N>  the batch already on cuda:0: forward, then a
                     synchronize (each call's answer is ready when timed);
  LABEL/pinned/b<N>  a pinned host batch copied in (non_blocking), forward,
                     the output copied back into a pinned host buffer, then
                     a synchronize: what a server must do per batch;
  LABEL/device_cl/b<N>, LABEL/pinned_cl/b<N>  for images (a 3-D SHAPE), the
                     same with the batch in channels-last order (on the
                     device already; after the copy in), as PyTorch's docs
                     feed convolutional networks: cuDNN's NHWC kernels;
  LABEL/device_cl_graph/b<N>, LABEL/pinned_cl_graph/b<N>  for images, the
                     channels-last forward captured as a CUDA graph at this
                     batch and replayed (the pinned one copies the host
                     batch into the graph's input and its output out).

  LABEL/device_graph/b<N>, LABEL/pinned_graph/b<N>  with --package-graph,
                     for an AOTInductor package (.pt2), which takes its
                     batch as it was exported (NCHW), loaded with
                     run_single_threaded=True as PyTorch's docs say for
                     CUDA graphs (aoti_ref.cc does the same): the forward captured
                     as a CUDA graph at this batch, these rows alone (a
                     separate run, so that a capture that kills the
                     process leaves the eager rows written); where capture
                     raises, a line says why.

Each variant is warmed for 20 calls (cuDNN's algorithm choice, the caching
allocator), then timed for --seconds of calls one after another. With
--graph, LABEL/graph/b1 too: batch 1 captured as a CUDA graph
(torch.cuda.graph) and replayed on its device-resident input; for images
also LABEL/graph_cl_stream/b1, the channels-last batch-1 graph replayed on
a stream of its own and waited for by an event.

With --graph-first instead, only LABEL/graph_first/b1: the batch-1 graph
(channels-last for images, NCHW for a package) as the process's first and
only GPU work besides making its input: the warm-up on the capture's side
stream, the capture, then replays. A graph replays faster in that state
than after any other kernel (830 against 935 µs on an H100,
docs/experiments/gpu-batch1-forward, part 7), and ptserve's instances
replayed at that level in the bench runs of eef981b and 54a6130, so this
is the batch-1 reference at its best.
"""
import argparse
import importlib.util
import os
import resource
import time

import torch

# bench/aoti_package.py by its path: bench/ itself on sys.path would make
# its scenario folders packages (bench/triton shadows the triton module).
_spec = importlib.util.spec_from_file_location("aoti_package", os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "aoti_package.py"))
aoti_package = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(aoti_package)


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load(path, single_threaded=False):
    """The model; for a package, single_threaded is aoti_load_package's
    run_single_threaded, which PyTorch's docs give for CUDA graphs (the
    runner's thread synchronization conflicts with capture). Loaded without
    it, the package's capture failed on an H100 at 4de973e ("operation not
    permitted when stream is capturing"); aoti_ref.cc and ptserve's bridge
    capture a single-threaded loader."""
    if path.endswith(".pt2"):
        # CUDA initialized first, the device named: loading a CUDA package
        # into a process that has not touched the GPU yet crashed torch
        # 2.11's loader (a segmentation fault inside _load_aoti).
        torch.empty(0, device="cuda:0")
        return aoti_package.load_package(path, device_index=0,
                                         run_single_threaded=single_threaded)
    return torch.jit.load(path, map_location="cuda:0").eval()


def write_row(out, label, variant, batch, row):
    """One measured row (measure()'s tuple) written to the CSV and printed."""
    out.write("%s/%s/b%d,%d,%.1f,%.1f,%.1f,%.1f,%.1f\n" % ((label, variant, batch) + row))
    out.flush()
    print("%s/%s/b%d: %.0f items/s, p50 %.0f us" % (label, variant, batch, row[1], row[3]),
          flush=True)


def measure(call, items, seconds):
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    lat = []
    c0, t0 = cpu_s(), time.perf_counter()
    while time.perf_counter() - t0 < seconds or len(lat) < 10:
        s = time.perf_counter()
        call()
        lat.append(time.perf_counter() - s)
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    lat.sort()
    n = len(lat)
    return (n, n * items / wall, 1e6 * wall / n, 1e6 * lat[n // 2],
            1e6 * lat[min(n - 1, int(n * 0.99))], 1e6 * cpu / n)


def capture(model, x):
    """model(x) captured as a CUDA graph after TorchScript's profiling runs
    (on a side stream, off the graph): (graph, its static output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(10):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(x)
    return g, out


def batch1_graph(model, shape, dtype, channels_last, seconds):
    """measure()'s row of a batch-1 input made on the device, the forward
    captured on it (capture()) and replayed. For --graph-first it is all
    the GPU work the process does before it is timed (as graph_pool.py's
    first graph in docs/experiments/gpu-batch1-forward)."""
    x = torch.randn([1] + shape, device="cuda:0").to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    g, _ = capture(model, x)

    def replay():
        g.replay()
        torch.cuda.synchronize()

    return measure(replay, 1, seconds)


def graph_variants(model, x_dev, x_host, y_host):
    """[(device_graph, call), (pinned_graph, call)] of an AOTInductor
    package captured at x_dev's batch, or [] where capture fails (said)."""
    try:
        g, static_out = capture(model, x_dev)
    except RuntimeError as e:
        print("no CUDA graph of the package at batch %d: %s" % (x_dev.shape[0], e), flush=True)
        torch.cuda.synchronize()
        return []
    return graph_calls("", g, x_dev, static_out, x_host, y_host)


def graph_calls(infix, g, static_in, static_out, x_host, y_host):
    """[(device<infix>_graph, replay), (pinned<infix>_graph, copy in, replay,
    copy out)] of a captured graph: the pinned one copies the host batch
    into the graph's static input (reordered there when that is
    channels-last) and its static output out."""
    def device_graph():
        g.replay()
        torch.cuda.synchronize()

    def pinned_graph():
        static_in.copy_(x_host, non_blocking=True)
        g.replay()
        y_host.copy_(static_out, non_blocking=True)
        torch.cuda.synchronize()

    return [("device%s_graph" % infix, device_graph), ("pinned%s_graph" % infix, pinned_graph)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("dtype", choices=["FP32", "FP16"])
    ap.add_argument("shape")
    ap.add_argument("label")
    ap.add_argument("csv")
    ap.add_argument("batches", nargs="?", default="1,8,32,128,256")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--package-graph", action="store_true",
                    help="a .pt2 only: the device_graph and pinned_graph rows, not the eager ones")
    ap.add_argument("--graph-first", action="store_true",
                    help="only LABEL/graph_first/b1: the batch-1 graph as the process's only "
                         "GPU work (its input, warm-up on the capture's stream, capture)")
    ap.add_argument("--graph", action="store_true",
                    help="also LABEL/graph/b1: the batch-1 forward captured as a CUDA graph "
                         "(torch.cuda.graph) and replayed on a device-resident input")
    a = ap.parse_args()
    dtype = {"FP32": torch.float32, "FP16": torch.float16}[a.dtype]
    shape = [int(d) for d in a.shape.split(",")]
    package = a.model.endswith(".pt2")
    model = load(a.model, single_threaded=a.package_graph or (a.graph_first and package))
    new = not os.path.exists(a.csv)
    with open(a.csv, "a") as out, torch.no_grad():
        if new:
            out.write("label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us\n")
        if a.graph_first:
            write_row(out, a.label, "graph_first", 1,
                      batch1_graph(model, shape, dtype,
                                   channels_last=len(shape) == 3 and not package,
                                   seconds=a.seconds))
            return
        cl_graphs = {}  # batch -> its channels-last graph (images only)
        for b in [int(x) for x in a.batches.split(",")]:
            x_dev = torch.randn([b] + shape, device="cuda:0").to(dtype)
            y = model(x_dev)
            x_host = x_dev.cpu().pin_memory()
            y_host = torch.empty(y.shape, dtype=y.dtype).pin_memory()

            images = len(shape) == 3 and not package  # channels-last takes 4-D batches
            x_dev_cl = x_dev.contiguous(memory_format=torch.channels_last) if images else None

            def on_device():
                model(x_dev)
                torch.cuda.synchronize()

            def on_device_cl():
                model(x_dev_cl)
                torch.cuda.synchronize()

            def pinned():
                x = x_host.to("cuda:0", non_blocking=True)
                y_host.copy_(model(x), non_blocking=True)
                torch.cuda.synchronize()

            def pinned_cl():
                x = x_host.to("cuda:0", non_blocking=True)
                x = x.contiguous(memory_format=torch.channels_last)
                y_host.copy_(model(x), non_blocking=True)
                torch.cuda.synchronize()

            variants = [("device", on_device), ("pinned", pinned)]
            if a.package_graph:
                variants = graph_variants(model, x_dev, x_host, y_host)
            if images:  # channels-last too, as PyTorch's docs feed CNNs
                variants += [("device_cl", on_device_cl), ("pinned_cl", pinned_cl)]
                # and as a CUDA graph (torch.cuda.graph) at this batch,
                # channels-last: PyTorch at its best. pinned_cl_graph
                # copies the pinned batch into the graph's static input
                # (reordered there) and the static output out.
                g, static_out = capture(model, x_dev_cl)
                cl_graphs[b] = g
                variants += graph_calls("_cl", g, x_dev_cl, static_out, x_host, y_host)
            for variant, call in variants:
                write_row(out, a.label, variant, b, measure(call, b, a.seconds))
        if a.graph:
            write_row(out, a.label, "graph", 1,
                      batch1_graph(model, shape, dtype, channels_last=False, seconds=a.seconds))
            if len(shape) == 3 and not a.model.endswith(".pt2"):
                # The channels-last graph replayed on a stream of its own,
                # each call waited for by an event on it, not by a
                # device-wide synchronize: what a server's instance does.
                # On an H100 this took 951 us against the default stream's
                # 938: the stream is not what slows a graph; any kernel the
                # process ran besides its warm-up and capture is
                # (docs/experiments/gpu-batch1-forward, part 7).
                # The sweep's batch-1 graph where it made one, so that the
                # row adds no capture of its own.
                g_cl = cl_graphs.get(1)
                if g_cl is None:
                    x_cl = torch.randn([1] + shape, device="cuda:0").to(dtype).contiguous(
                        memory_format=torch.channels_last)
                    g_cl, _ = capture(model, x_cl)
                side = torch.cuda.Stream()
                done = torch.cuda.Event()

                def replay_stream():
                    with torch.cuda.stream(side):
                        g_cl.replay()
                        done.record(side)
                    done.synchronize()

                write_row(out, a.label, "graph_cl_stream", 1,
                          measure(replay_stream, 1, a.seconds))


if __name__ == "__main__":
    main()
