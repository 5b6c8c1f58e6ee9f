#!/usr/bin/env python3
"""Turns one bench/gpu/run.py run into the committed results.

    python3 bench/gpu/report.py RAW_DIR RESULTS_DIR

Writes results.md (tables and what they say), results.csv and plot.png.
Throughput is images (or rows) per second. The reference is PyTorch itself
running the same model file in the same run (bench/gpu/torch_ref.py), at
its best batch up to the models' max_batch_size (128): with the batch
already on the device for the CUDA shared-memory rows, whose inputs are on
the device too, and with a pinned host batch copied in and out each call
for HTTP, gRPC and system shared memory. ptserve's own bridge in process
(bench_inproc) is a diagnostic column, never the reference.
"""
import csv
import os
import sys

INPUT_BYTES = {"resnet50_fp32": 3 * 224 * 224 * 4, "resnet50_fp16": 3 * 224 * 224 * 2,
               "mlp": 64 * 4, "resnet50_fp16_graph": 3 * 224 * 224 * 2,
               "resnet50_fp16_aoti": 3 * 224 * 224 * 2,
               "resnet50_fp16_aoti_graph": 3 * 224 * 224 * 2}
# The models served under every load (HTTP, shared memory, gRPC): the
# TorchScript ResNet-50s, or (BENCH_SET=aoti) the AOTInductor one.
RESNETS = ("resnet50_fp32", "resnet50_fp16", "resnet50_fp16_aoti")
# Each set's batch-1 CUDA-graph model (served at concurrency 1), the model
# of PyTorch's reference runs it is held against, PyTorch's batch-1 graph
# variants of that model (the best one is the target's base), and a name.
# The TorchScript graph model reorders its input to channels-last
# (INPUT_MEMORY_FORMAT), and PyTorch's graph of a channels-last batch is
# the faster one (939 against 1,032 µs on an H100), so both count, and so
# does the same graph replayed on a stream of its own (graph_cl_stream), and
# every one of them again from a process that ran batch 1 alone (the
# second model name: run.py's own-process run); the fastest is the base.
# The package takes NCHW, as exported.
# The third process (torch_ref.py --graph-first, model name *_first) runs
# the graph as its only GPU work, the state in which a graph replays ~100 µs
# faster and in which ptserve's instances were seen replaying.
GRAPH = {"torchscript": ("resnet50_fp16_graph",
                         ("resnet50_fp16", "resnet50_fp16_b1", "resnet50_fp16_first"),
                         ("graph", "device_cl_graph", "graph_cl_stream", "graph_first"),
                         "FP16 ResNet-50"),
         "aoti": ("resnet50_fp16_aoti_graph", ("resnet50_fp16_aoti", "resnet50_fp16_aoti_first"),
                  ("device_graph", "graph_first"), "FP16 ResNet-50 package")}


# Suffixes of the ResNet-50 loads besides plain HTTP, as run.py names them.
SERVED_KINDS = ("_shm", "_cudashm", "_grpc")
# The served models' max_batch_size (bench/gpu/gen_models.py): the
# reference's best batch is taken up to it.
MAX_BATCH = 128
# Issue 46's targets.
TARGET_RATIO = 0.90
TAIL_CONCURRENCY = (64, 512)  # p99 <= 2 x p50 over this range
GRAPH_MARGIN_US = 150  # batch-1 CUDA graph p50 <= PyTorch's graph + this


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def aoti_reference(meta):
    """Which loader the AOTInductor rows of torch.csv came from (run.py
    writes it: Python's, or LibTorch's class from C++ where Python's crashed
    or could not capture the package as a CUDA graph)."""
    ref = meta.get("aoti_reference", "python")
    if ref.startswith("cxx"):
        return ("LibTorch's `torch::inductor::AOTIModelPackageLoader` called from C++ "
                "(`bench/gpu/aoti_ref.cc`, as PyTorch's C++ docs use it; no ptserve code), "
                "because PyTorch's Python `aoti_load_package` failed on this host (%s)"
                % ref[len("cxx"):].strip(" ()"))
    return "PyTorch's `torch._inductor.aoti_load_package`"


def warm_table(md, raw, resnets):
    """The warm passes (run.py's warm_up), in the order the run made them:
    each is the server's first three seconds at concurrency 512 of its
    load, so it shows the first meeting with a new peak that the sweep
    after it no longer has. Its tail and page faults beside the sweep's
    own window at 512."""
    order = ["mlp"] + [r + k for r in resnets for k in ("",) + SERVED_KINDS]
    rows = []
    for m in order:
        warm = read_csv(os.path.join(raw, "warm_%s.csv" % m))
        sweep = [r for r in read_csv(os.path.join(raw, "ptperf_%s.csv" % m))
                 if r["concurrency"] == "512"]
        if warm and float(warm[0]["p50_us"]) > 0:
            rows.append((m, warm[0], sweep[0] if sweep else None))
    if not rows:
        return
    md.append("\n### The warm passes: the first meeting with concurrency 512\n")
    md.append("Before each sweep the server met its load at concurrency 512 for three 1 s "
              "windows (rows in the order the run made them, all in one server process). "
              "A pass that is the first at that load and body size over HTTP "
              "grows the server's pools (LibTorch's pinned blocks for request bodies, "
              "made once and kept): its page faults per request show it. The sweep's own "
              "window at 512 comes after, on the grown pools.\n")
    md.append("| load | warm pass p50 | p99 | p99/p50 | server faults/req | "
              "sweep at 512: p99/p50 | faults/req |")
    md.append("|---|---:|---:|---:|---:|---:|---:|")

    def cells(r):
        return (float(r["p99_us"]) / float(r["p50_us"]), r.get("server_faults_per_req") or "–")
    for m, w, s in rows:
        wt, wf = cells(w)
        st, sf = cells(s) if s else (None, "–")
        md.append("| %s | %.1f ms | %.1f ms | %.2f | %s | %s | %s |"
                  % (m, float(w["p50_us"]) / 1000, float(w["p99_us"]) / 1000, wt, wf,
                     "%.2f" % st if st else "–", sf))


def main(raw, out):
    os.makedirs(out, exist_ok=True)
    meta = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(raw, "meta.txt")) if "=" in l)
    inproc = {}
    for r in read_csv(os.path.join(raw, "inproc.csv")):
        model, b = r["label"].rsplit("/b", 1)
        b = int(b)
        inproc.setdefault(model, {})[b] = {"per_sec": float(r["per_sec"]) * b,
                                           "p50_us": float(r["p50_us"]),
                                           "cpu_us": float(r["cpu_us"]) if r.get("cpu_us") else None}
    # PyTorch itself: ref[model][variant][batch], variant device | pinned | graph
    ref = {}
    for r in read_csv(os.path.join(raw, "torch.csv")):
        model, variant, b = r["label"].split("/")
        ref.setdefault(model, {}).setdefault(variant, {})[int(b[1:])] = {
            "per_sec": float(r["per_sec"]), "p50_us": float(r["p50_us"])}

    def ref_best(model, family, max_batch=MAX_BATCH):
        """(items/s, batch, variant) of PyTorch's best run of a family
        (device: device, device_cl, device_cl_graph or, for a package,
        device_graph; pinned: the same with pinned) up to max_batch:
        PyTorch at its best, whichever memory format and launch (eager or a
        CUDA graph) that took."""
        runs = [(v["per_sec"], b, variant)
                for variant, by_b in ref.get(model, {}).items()
                if variant in (family, family + "_cl", family + "_cl_graph", family + "_graph")
                for b, v in by_b.items() if b <= max_batch]
        return max(runs) if runs else (None, None, None)

    served = {}
    graph_models = tuple(g[0] for g in GRAPH.values())
    for m in RESNETS + ("mlp",) + graph_models:
        served[m] = read_csv(os.path.join(raw, "ptperf_%s.csv" % m))
    # The same load with inputs and outputs in system shared memory, in CUDA
    # shared memory (absent from runs before ptperf had it, or on a host
    # where its CUDA mode failed), and over gRPC.
    for m in RESNETS:
        for kind in SERVED_KINDS:
            served[m + kind] = read_csv(os.path.join(raw, "ptperf_%s%s.csv" % (m, kind)))
    # The CUDA-graph model at c=1 with its input in shared memory (runs
    # before these rows have only HTTP).
    for m in graph_models:
        for kind in ("_shm", "_cudashm"):
            served[m + kind] = read_csv(os.path.join(raw, "ptperf_%s%s.csv" % (m, kind)))
    # TCP over loopback alone (bench_loopback), the bytes of the batch-1
    # rows' requests: "body" those over HTTP with the image in the body,
    # "no_body" the shared-memory ones (absent from runs before it); with
    # "_idle" the same answered after the forward's time, the client
    # waiting as long as for the model (absent before 2026-12-07).
    floor = {r["label"]: r for r in read_csv(os.path.join(raw, "loopback.csv"))}
    rows, md = [], []
    aoti = meta.get("set") == "aoti"
    graph_model, graph_ref, graph_variants, graph_name = GRAPH["aoti" if aoti else "torchscript"]
    resnets = [m for m in RESNETS if served[m]]
    md.append("# GPU benchmark%s: ptserve against PyTorch in process\n"
              % (" (AOTInductor)" if aoti else ""))
    md.append("Run on %s; %s cores (%s); torch %s; git %s; %s; ptserve build %s. Produced by "
              "%s on the GPU host.\n"
              % (meta.get("gpu"), meta.get("cores"), meta.get("cpu"), meta.get("torch"),
                 meta.get("git"), meta.get("date"), meta.get("build", "Release"),
                 "`%s`" % meta["command"] if meta.get("command") else
                 "`bench/gpu/run.sh`, then `bench/gpu/report.py`"))
    if aoti:
        md.append("This is the AOTInductor set (`BENCH_SET=aoti python3 bench/harness.py gpu`): the FP16 "
                  "ResNet-50 of the TorchScript set (same seed, same weights) exported with "
                  "`torch.export` and compiled for cuda:0 by AOTInductor, batch dimension "
                  "dynamic 1..128 (`bench/gpu/gen_models.py --aoti`), served by the `torch_aoti` "
                  "platform with the same padded CUDA graphs at 13 batch sizes as the TorchScript "
                  "ResNet-50s (the package takes NCHW, as exported), and its batch-1 latency "
                  "model `resnet50_fp16_aoti_graph` (the same package, a CUDA graph at batch 1, "
                  "no queue delay; runs before it lack its rows). Its "
                  "reference is %s of the same `model.pt2`, where the text below says "
                  "`torch.jit.load`; the package takes its batch as it was exported (NCHW), "
                  "so its graph rows are `device_graph` and `pinned_graph`, not "
                  "channels-last.\n" % aoti_reference(meta))
    md.append("The reference (a) is PyTorch itself running the same TorchScript file in one "
              "process (`bench/gpu/torch_ref.py`: `torch.jit.load`, eval, `torch.no_grad()`, "
              "the default stream, cuDNN's defaults), one call after another, each call's "
              "answer synchronized: **device** has the batch already on cuda:0, **pinned** "
              "copies a pinned host batch in and the output out each call; each eager and as a "
              "CUDA graph captured at that batch. Its best batch up to "
              "the served models' max_batch_size (%d), eager or graph, is the reference: *device* for the CUDA "
              "shared-memory rows (their inputs are on the device too), *pinned* for HTTP, "
              "gRPC and system shared memory. The server (b) gets one image per request from "
              "ptperf on the same host and forms batches with its dynamic batcher (2 instances, "
              "max batch 128, 200 µs queue delay; the ResNet-50s replay CUDA graphs captured "
              "at 13 batch sizes, each batch padded up to the next (`CUDA_GRAPH_PAD_BATCHES`); "
              "the batch-1 CUDA-graph model: no delay). The "
              "*bridge* column is ptserve's own code run in process (`bench_inproc`: pinned "
              "staging, one stream): a diagnostic of where the server's time goes, not a "
              "reference.\n" % MAX_BATCH)
    if not inproc:
        md.append("This run left out the bridge diagnostic (`BENCH_SKIP_BRIDGE=1`: its columns "
                  "are empty)%s, to fit a short device call; an earlier run's are in this "
                  "file's git history.\n" % (
                      "" if os.path.exists(os.path.join(raw, "first_request.csv"))
                      else " and the first-request table (`BENCH_SKIP_FIRST=1`)"))
    md.append("## Throughput at saturation and latency at concurrency 1\n")
    md.append("Rows ending in `_shm` are the same model with the inputs and outputs in system "
              "shared memory (ptperf `--shared-memory system`). Rows ending in `_cudashm` are "
              "the same with the regions in GPU memory (ptperf `--shared-memory cuda`, "
              "registered by CUDA IPC handle). Rows ending in `_grpc` are the same load as "
              "gRPC ModelInfer calls (ptperf `-i grpc`, 4 channels). ptperf drove the load "
              "from %s; *client cores* is its CPU time over the wall time at the best point, "
              "and a row whose client is near that many cores measured the client. "
              "The p99/p50 column is the "
              "largest p99 ÷ p50 of the concurrencies %d to %d. *Ratio to PyTorch, device* "
              "divides by PyTorch's best with the batch already on the device, the ceiling "
              "(no copy at all): the *pinned* reference copies in, runs and copies out one "
              "call after another on one stream, while the server's two instances overlap "
              "one batch's copies with the other's compute, so a served row can pass the "
              "pinned reference but not this one.%s\n" % (
                  "%s threads (`--threads`)" % meta["client_threads"]
                  if meta.get("client_threads") else "one thread (`--threads` came later)",
                  *TAIL_CONCURRENCY,
                  " Each sweep followed a warm pass of the same load at concurrency %s (three "
                  "1 s windows, not in the table; `BENCH_WARM=0` leaves it out): the pinned blocks "
                  "a higher load adds, which LibTorch keeps, are there before the sweep measures." %
                  meta["warm"] if meta.get("warm", "0") != "0" else
                  " No warm pass came before the sweeps (runs before `BENCH_WARM`, or "
                  "`BENCH_WARM=0`): a window at a load higher than any before may carry the "
                  "growth of the server's pools."))
    md.append("| model | PyTorch reference (batch) | ptserve best (concurrency) | ratio | "
              "ratio to PyTorch, device | p99/p50, c %d-%d | PyTorch p50 batch 1 | ptserve p50 c=1 | bridge best "
              "(batch) | avg batch at best | server CPU µs/req at best | client cores at best | "
              "device busy, c=512 |" % TAIL_CONCURRENCY)
    md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    # Device busy at saturation: nvidia-smi's utilization.gpu (the share of
    # each sample period in which a kernel ran), sampled during a run at
    # concurrency 512 of the same load (run.py's busy_probe).
    busy = {r["model"]: float(r["busy_pct"]) for r in read_csv(os.path.join(raw, "busy.csv"))
            if r.get("busy_pct")}
    ratios, tails = {}, {}
    for m in ([r + k for k in ("", "_grpc", "_shm", "_cudashm") for r in resnets] + ["mlp"]):
        base = m.rsplit("_", 1)[0] if m.endswith(SERVED_KINDS) else m
        variant = "device" if m.endswith("_cudashm") else "pinned"
        ref_rate, ref_b, ref_variant = ref_best(base, variant)
        if not ref_rate or not served.get(m):
            continue
        best = max(served[m], key=lambda r: float(r["infer_per_sec"]))
        c1 = [r for r in served[m] if r["concurrency"] == "1"]
        ratio = float(best["infer_per_sec"]) / ref_rate
        ratios[m] = ratio
        tail = [float(r["p99_us"]) / float(r["p50_us"]) for r in served[m]
                if TAIL_CONCURRENCY[0] <= int(r["concurrency"]) <= TAIL_CONCURRENCY[1]
                and float(r["p50_us"]) > 0]
        tails[m] = max(tail) if tail else None
        ip = inproc.get(base, {})
        bridge_b = max(ip, key=lambda b: ip[b]["per_sec"]) if ip else None
        ref_b1 = ref.get(base, {}).get("pinned", {}).get(1, {}).get("p50_us")
        ceiling = ref_best(base, "device")[0]
        # The load generator's own CPU at the best point, in cores: where it
        # reaches its thread count (meta client_threads) the row measures
        # the client, not the server.
        cli = best.get("client_cpu_us")
        cli_cores = "%.2f" % (float(cli) * float(best["infer_per_sec"]) / 1e6) if cli else "–"
        md.append("| %s | %.0f/s (%s, %d) | %.0f/s (%s) | **%.2f** | %.2f | %s | %s | %s µs | %s | %s | %s | %s | %s |"
                  % (m, ref_rate, ref_variant, ref_b, float(best["infer_per_sec"]),
                     best["concurrency"], ratio, float(best["infer_per_sec"]) / ceiling,
                     "%.1f" % tails[m] if tails[m] else "–",
                     "%.0f µs" % ref_b1 if ref_b1 else "–",
                     c1[0]["p50_us"] if c1 else "–",
                     "%.0f/s (%d)" % (ip[bridge_b]["per_sec"], bridge_b) if ip else "–",
                     best.get("server_avg_batch"), best.get("server_cpu_us", "–"), cli_cores,
                     "%.0f%%" % busy[m] if m in busy else "–"))
        for r in served[m]:
            rows.append({"model": m, "concurrency": r["concurrency"],
                         "infer_per_sec": r["infer_per_sec"], "p50_us": r["p50_us"],
                         "p99_us": r["p99_us"], "avg_batch": r.get("server_avg_batch"),
                         "server_queue_us": r.get("server_queue_us"),
                         "server_compute_infer_us": r.get("server_compute_infer_us"),
                         "server_cpu_us": r.get("server_cpu_us"),
                         "reference": "pytorch_%s_b%d" % (ref_variant, ref_b),
                         "reference_per_sec": "%.1f" % ref_rate,
                         "ratio": "%.3f" % (float(r["infer_per_sec"]) / ref_rate)})
    warm_table(md, raw, resnets)
    md.append("\n## In process, by batch size (images/s; p50 per call)\n")
    md.append("PyTorch with the batch on the device, PyTorch with the pinned copy in and out "
              "(each also with the batch in channels-last order, eager and as a CUDA graph "
              "captured at that batch), and ptserve's bridge (diagnostic; NCHW, eager).\n")
    batches = (1, 8, 32, 128, 256)
    md.append("| model | " + " | ".join("batch %d" % b for b in batches) + " |")
    md.append("|---|" + "---:|" * len(batches))
    for m in resnets + ["mlp"]:
        if m not in ref:
            continue
        for label, runs in (("PyTorch, device", ref.get(m, {}).get("device", {})),
                            ("PyTorch, device, channels-last", ref.get(m, {}).get("device_cl")),
                            ("PyTorch, pinned", ref.get(m, {}).get("pinned", {})),
                            ("PyTorch, pinned, channels-last", ref.get(m, {}).get("pinned_cl")),
                            ("PyTorch, device, channels-last, CUDA graph",
                             ref.get(m, {}).get("device_cl_graph")),
                            ("PyTorch, pinned, channels-last, CUDA graph",
                             ref.get(m, {}).get("pinned_cl_graph")),
                            ("PyTorch, device, CUDA graph", ref.get(m, {}).get("device_graph")),
                            ("PyTorch, pinned, CUDA graph", ref.get(m, {}).get("pinned_graph")),
                            ("bridge", inproc.get(m, {}))):
            if runs is None:
                continue
            md.append("| %s, %s | " % (m, label) + " | ".join(
                "%.0f/s, %.0f µs" % (runs[b]["per_sec"], runs[b]["p50_us"]) if b in runs else "–"
                for b in batches) + " |")
    md.append("\n## CUDA graphs at batch 1\n")
    md.append("| | p50 |")
    md.append("|---|---:|")
    for label, model, variant in (("PyTorch, eager, FP16 ResNet-50, batch on the device",
                                   "resnet50_fp16", "device"),
                                  ("PyTorch, CUDA graph, FP16 ResNet-50", "resnet50_fp16", "graph"),
                                  ("PyTorch, CUDA graph, FP16 ResNet-50, channels-last",
                                   "resnet50_fp16", "device_cl_graph"),
                                  ("PyTorch, CUDA graph, FP16 ResNet-50, channels-last, "
                                   "on a stream of its own", "resnet50_fp16", "graph_cl_stream"),
                                  ("PyTorch, CUDA graph, FP16 ResNet-50, channels-last, "
                                   "a process running batch 1 alone", "resnet50_fp16_b1",
                                   "device_cl_graph"),
                                  ("PyTorch, CUDA graph, FP16 ResNet-50, channels-last, "
                                   "on a stream of its own, a process running batch 1 alone",
                                   "resnet50_fp16_b1", "graph_cl_stream"),
                                  ("PyTorch, CUDA graph, FP16 ResNet-50, channels-last, "
                                   "the process's only GPU work", "resnet50_fp16_first",
                                   "graph_first"),
                                  ("PyTorch, eager, MLP, batch on the device", "mlp", "device"),
                                  ("PyTorch, CUDA graph, MLP", "mlp", "graph"),
                                  ("PyTorch, eager, FP16 ResNet-50 package, batch on the device",
                                   "resnet50_fp16_aoti", "device"),
                                  ("PyTorch, CUDA graph, FP16 ResNet-50 package",
                                   "resnet50_fp16_aoti", "device_graph"),
                                  ("PyTorch, CUDA graph, FP16 ResNet-50 package, "
                                   "the process's only GPU work", "resnet50_fp16_aoti_first",
                                   "graph_first")):
        run = ref.get(model, {}).get(variant, {}).get(1)
        if run:
            md.append("| %s | %.0f µs |" % (label, run["p50_us"]))
    for label, key in (("TCP over loopback alone (diagnostic), the bytes of an HTTP request with the "
                        "image in its body and of its answer", "body"),
                       ("TCP over loopback alone (diagnostic), the bytes of a shared-memory "
                        "request and its answer", "no_body")):
        for suffix in ("", "_idle"):
            r = floor.get(key + suffix)
            if not r:
                continue
            wait = float(r.get("answer_after_us") or 0)
            md.append("| %s (%s and %s bytes)%s | %.0f µs |" % (
                label, "{:,}".format(int(r["request_bytes"])),
                "{:,}".format(int(r["response_bytes"])),
                ", answered %.0f µs after the request (the client waits as for the model; "
                "the wait not counted)" % wait if wait else "", float(r["p50_us"])))
    for label, key in (("bridge (diagnostic), CUDA graph, FP16 ResNet-50", "resnet50_fp16_graph"),
                       ("bridge (diagnostic), CUDA graph, MLP", "mlp_graph")):
        if 1 in inproc.get(key, {}):
            md.append("| %s | %.0f µs |" % (label, inproc[key][1]["p50_us"]))
    g = served.get(graph_model)
    graph_paths = (("", "HTTP, binary tensors"), ("_shm", "HTTP, system shared memory"),
                   ("_cudashm", "HTTP, CUDA shared memory"))
    for kind, how in graph_paths:
        r = served.get(graph_model + kind)
        if r:
            md.append("| ptserve, CUDA graph, %s, c=1, %s | %s µs |" % (graph_name, how,
                                                                       r[0]["p50_us"]))
    if g:
        eager = ref.get(graph_ref[0], {}).get("device", {}).get(1, {}).get("p50_us")
        if eager:
            md.append("\nBatch-1 p50 with CUDA graphs below PyTorch's eager batch-1 "
                      "time (%.0f µs): **%s** (%s µs)." % (
                          eager, "met" if float(g[0]["p50_us"]) < eager else "not met",
                          g[0]["p50_us"]))
    md.append("\n## Issue 46's targets\n")
    md.append("| target | measured | |")
    md.append("|---|---:|---|")
    for m in resnets:
        for kind, how, against in (("_cudashm", "CUDA shared memory", "the batch on the device"),
                                   ("", "HTTP, binary tensors", "the pinned copy"),
                                   ("_grpc", "gRPC", "the pinned copy")):
            if m + kind in ratios:
                r = ratios[m + kind]
                # three places where two would print a miss as 0.90× and "by 0.00"
                places = 2 if r >= TARGET_RATIO or TARGET_RATIO - r >= 0.005 else 3
                md.append("| %s, %s ≥ %.2f× PyTorch with %s | %.*f× | %s |" % (
                    m, how, TARGET_RATIO, against, places, r,
                    "met" if r >= TARGET_RATIO else
                    "missed by %.*f" % (places, TARGET_RATIO - r)))
    for m in resnets:
        for kind in ("", "_grpc", "_shm", "_cudashm"):
            t = tails.get(m + kind)
            if t:
                md.append("| %s%s p99 ≤ 2× p50, concurrency %d-%d | %.1f× at worst | %s |" % (
                    m, kind, TAIL_CONCURRENCY[0], TAIL_CONCURRENCY[1], t,
                    "met" if t <= 2 else "missed"))
    for m in resnets:
        for kind in ("", "_grpc", "_shm", "_cudashm"):
            if m + kind in busy:
                b = busy[m + kind]
                md.append("| %s%s device busy ≥ 90%% at saturation (c=512) | %.0f%% | %s |" % (
                    m, kind, b, "met" if b >= 90 else "missed"))
    if not busy:
        md.append("| device busy ≥ 90% of wall time at saturation | not measured by this run | |")
    # PyTorch's best batch-1 graph of the same model (GRAPH says which).
    graph_runs = [(run["p50_us"], "%s/%s" % (m, v))
                  for m in graph_ref for v in graph_variants
                  for run in [ref.get(m, {}).get(v, {}).get(1)] if run]
    graph_ip, graph_from = min(graph_runs, default=(None, None))
    if graph_ip:
        md.append("| batch-1 base: PyTorch's fastest batch-1 graph of the run | %.0f µs | "
                  "`%s` in torch.csv |" % (graph_ip, graph_from))
    for kind, how in graph_paths:
        r = served.get(graph_model + kind)
        if r and graph_ip:
            got = float(r[0]["p50_us"])
            target = graph_ip + GRAPH_MARGIN_US
            md.append("| batch-1 CUDA graph p50 ≤ PyTorch's graph + %d µs (%.0f µs), %s | %.0f µs | %s |"
                      % (GRAPH_MARGIN_US, target, how, got, "met" if got <= target
                         else "missed by %.0f µs" % (got - target)))
    # Where a graph row's time goes, from ptperf's breakdown: the server's
    # request span less the device's forward (compute_infer, timed by CUDA
    # events) is the server's own share; the client's latency less the span
    # is HTTP on loopback and the client. Of that, TCP alone carrying the
    # same bytes (bench_loopback) is a floor no server goes under on this
    # host: its share of the 150 µs is what the transport takes before the
    # server's copies and HTTP get any.
    forwards = []
    for kind, how in graph_paths:
        r = served.get(graph_model + kind)
        if r and r[0].get("server_request_us") and graph_ip:
            r = r[0]
            f = lambda k: float(r.get(k) or 0)
            forwards.append(f("server_compute_infer_us"))
            own = f("server_request_us") - f("server_compute_infer_us")
            key = "body" if kind == "" else "no_body"
            tcp, idle = floor.get(key), floor.get(key + "_idle")
            transport = ""
            if tcp:
                t = float(tcp["p50_us"])
                transport = ("; of HTTP and client, TCP alone carrying the same bytes %.0f, "
                             "which is %.0f%% of the %d µs (the base plus TCP: %.0f µs)" % (
                                 t, 100 * t / GRAPH_MARGIN_US, GRAPH_MARGIN_US, graph_ip + t))
            if idle:
                t = float(idle["p50_us"])
                transport += ("; with the client waiting as long as for the model, TCP alone "
                              "%.0f, %.0f%% of the %d µs" % (t, 100 * t / GRAPH_MARGIN_US,
                                                             GRAPH_MARGIN_US))
            md.append("| ↳ %s: where the %.0f µs go | device forward %.0f; server %.0f (queue %.0f, "
                      "input %.0f, output %.0f, rest %.0f); HTTP and client %.0f%s | |" % (
                          how, f("avg_us"), f("server_compute_infer_us"), own,
                          f("server_queue_us"), f("server_compute_input_us"),
                          f("server_compute_output_us"),
                          own - f("server_queue_us") - f("server_compute_input_us")
                          - f("server_compute_output_us"), f("client_overhead_us"), transport))
    # The body's price: the HTTP row against the system shared-memory row
    # of the same run, which carries no image. TCP alone's share is the
    # difference of bench_loopback's two floors (the same bytes with and
    # without the body); the input phase's, the server's statistics; the
    # rest is ptserve's and ptperf's own handling of the bigger request.
    body, shm = served.get(graph_model), served.get(graph_model + "_shm")
    if body and shm and "body" in floor and "no_body" in floor:
        b, h = body[0], shm[0]
        f = lambda r, k: float(r.get(k) or 0)
        more = f(b, "p50_us") - f(h, "p50_us")
        tcp = float(floor["body"]["p50_us"]) - float(floor["no_body"]["p50_us"])
        inp = f(b, "server_compute_input_us") - f(h, "server_compute_input_us")
        md.append("| ↳ the image in the body: HTTP, binary tensors against HTTP, system shared "
                  "memory | %+.0f µs at p50 | TCP alone carrying the body %+.0f (the floors' "
                  "difference), the server's input phase %+.0f, the rest (ptserve's and "
                  "ptperf's handling of the bigger request) %+.0f |"
                  % (more, tcp, inp, more - tcp - inp))
    # The server's replay timed faster than the base (by more than noise)
    # means the reference is not PyTorch at its best: a graph replays
    # ~100 µs faster in a process that has run no other kernel
    # (docs/experiments/gpu-batch1-forward, part 7). Said, not hidden.
    if forwards and min(forwards) < graph_ip - 20:
        md.append("| ↳ the server's own replay (%.0f µs at best) beat the base by %.0f µs: the "
                  "base is not PyTorch at its best, and the batch-1 targets above are that much "
                  "easier than they should be "
                  "| | **check** |" % (min(forwards), graph_ip - min(forwards)))
    # For eager models the in-process CPU per call at batch 1 (bench_inproc's
    # calling thread) is what launching the network costs LibTorch, with no
    # server around it.
    for m in ("resnet50_fp32", "resnet50_fp16") + graph_models:
        c1 = [r for r in served.get(m) or [] if r["concurrency"] == "1"]
        if c1 and c1[0].get("server_cpu_us"):
            cpu = float(c1[0]["server_cpu_us"])
            ip_cpu = inproc.get(m, {}).get(1, {}).get("cpu_us")
            md.append("| %s server CPU per request at c=1 < 500 µs | %.0f µs%s | %s |" % (
                m, cpu, " (the bridge in process: %.0f µs per call)" % ip_cpu if ip_cpu else "",
                "met" if cpu < 500 else "missed by %.0f µs" % (cpu - 500)))
    first = read_csv(os.path.join(raw, "first_request.csv"))
    if first:
        md.append("\n## First request after start-up (FP16 ResNet-50)\n")
        md.append("| warmup | ready after | first request | second request |")
        md.append("|---|---:|---:|---:|")
        for r in first:
            md.append("| %s | %s ms | %s ms | %s ms |" % (r["warmup"], r["ready_ms"],
                                                          r["first_request_ms"], r["second_request_ms"]))
    md.append("\n## Where the bytes go\n")
    md.append("Per request the client sends the image in the body after a JSON header. "
              "ptserve reads the body from the socket straight into the request's own "
              "reference-counted buffer (tensors are views of it from then on): (1) the "
              "kernel's copy. Once a model runs on CUDA, bodies of 64 KiB and more land in "
              "pinned memory (core/pinned.h), so a batch of one goes to the GPU by DMA from "
              "the body itself; a larger batch is gathered (2) into the GPU instance's pinned "
              "staging buffer, then DMA. With system shared memory (`_shm` rows) the "
              "image is in a registered region that is pinned: a batch of one goes to the GPU "
              "by DMA from it, a larger batch is gathered once into staging. With CUDA shared "
              "memory (`_cudashm` rows) the image is already on the GPU and the model reads it "
              "where it is: a batch of one runs on the client's buffer, a larger batch is "
              "gathered on the device (device-to-device copies on a side stream), and no "
              "input byte crosses host memory. Outputs come back "
              "by DMA into pinned memory (or into the client's region) and go to the socket by "
              "reference (no copy).\n")
    md.append("| model | input bytes/request | at ptserve's best | host memory traffic (2 copies) |")
    md.append("|---|---:|---:|---:|")
    for m in resnets:
        if served[m]:
            best = max(float(r["infer_per_sec"]) for r in served[m])
            gbs = best * INPUT_BYTES[m] / 1e9
            md.append("| %s | %d | %.2f GB/s in | ≈ %.1f GB/s copied |" % (
                m, INPUT_BYTES[m], gbs, 2 * gbs))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    if rows:
        with open(os.path.join(out, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plotted = resnets + (["mlp"] if served["mlp"] else [])
        fig, axes = plt.subplots(1, len(plotted), figsize=(5 * len(plotted), 4.2), squeeze=False)
        for ax, m in zip(axes[0], plotted):
            if not served[m]:
                continue
            c = [int(r["concurrency"]) for r in served[m]]
            t = [float(r["infer_per_sec"]) for r in served[m]]
            ax.plot(c, t, "o-", label="ptserve over HTTP")
            for kind, mark, label in (("_shm", "s-", "ptserve, system shared memory"),
                                      ("_cudashm", "^-", "ptserve, CUDA shared memory")):
                kind_rows = served.get(m + kind)
                if kind_rows:
                    ax.plot([int(r["concurrency"]) for r in kind_rows],
                            [float(r["infer_per_sec"]) for r in kind_rows], mark, label=label)
            dev, dev_b, _ = ref_best(m, "device")
            pin, pin_b, _ = ref_best(m, "pinned")
            if dev:
                ax.axhline(dev, color="gray", ls="--",
                           label="PyTorch, batch on the device (b%d)" % dev_b)
            if pin:
                ax.axhline(pin, color="black", ls=":",
                           label="PyTorch, pinned copy each call (b%d)" % pin_b)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("concurrent requests (1 image each)")
            ax.set_ylabel("images/s" if m != "mlp" else "rows/s")
            ax.set_title(m)
            ax.legend(fontsize=8)
        fig.suptitle("ptserve on %s against PyTorch in process" % meta.get("gpu", "GPU").split(",")[0])
        fig.tight_layout()
        fig.savefig(os.path.join(out, "plot.png"), dpi=110)
    except ImportError:
        pass


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
