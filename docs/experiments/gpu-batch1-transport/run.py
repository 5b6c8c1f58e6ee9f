"""How much of the batch-1 HTTP row is TCP's, on the GPU host (issue 46,
part 4). One device call, after bench/gpu's build (ptserve, ptperf,
bench_loopback) and gen_models.py:

    python3 docs/experiments/gpu-batch1-transport/run.py MODELS OUT

In this order, with the bench's own code (bench/gpu/run.py):
1. PyTorch's batch-1 graph as its process's only GPU work (torch_ref.py
   --graph-first): the batch-1 target's base;
2. ptserve serving resnet50_fp16_graph alone (the other models' graphs
   are not captured, so loading is quick), concurrency 1, over HTTP with
   the image in the body, then system and CUDA shared memory;
3. the server stopped, bench_loopback: TCP alone carrying those bytes.
Prints one table; the raw CSVs stay in OUT.
"""
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
models, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
os.environ["BENCH_RAW"] = out
os.environ.setdefault("BENCH_INTERVAL_MS", "1000")
os.environ.setdefault("BENCH_MAX_TRIALS", "5")
os.environ.setdefault("BENCH_REF_SECONDS", "0.7")
import report  # noqa: E402
import run as bench  # noqa: E402

m = "resnet50_fp16_graph"
repo = os.path.join(out, "repo")
os.makedirs(repo, exist_ok=True)
if not os.path.exists(os.path.join(repo, m)):
    os.symlink(os.path.join(models, m), os.path.join(repo, m))
r = bench.Run()
r.torch_ref(os.path.join(models, "resnet50_fp16", "1", "model.pt"), "FP16", "3,224,224",
            "resnet50_fp16_first", "1", "--graph-first")
r.start(repo, "transport")
r.probe_cuda_shm(m, bench.find_cudart())
bench.graph_batch1(r, m)
r.server.stop()
bench.loopback(r, m)


def rows(name):
    path = os.path.join(out, name)
    return list(csv.DictReader(open(path))) if os.path.exists(path) else []


base = float(rows("torch.csv")[0]["p50_us"])
floor = {x["label"]: float(x["p50_us"]) for x in rows("loopback.csv")}
print("base (PyTorch's graph, the process's only GPU work): %.0f us; target %.0f us"
      % (base, base + report.GRAPH_MARGIN_US))
print("| load | p50 | server request | input | HTTP and client | TCP alone, same bytes |")
print("|---|---:|---:|---:|---:|---:|")
for suffix, how, key in (("", "HTTP, binary tensors", "body"),
                         ("_shm", "system shared memory", "no_body"),
                         ("_cudashm", "CUDA shared memory", "no_body")):
    x = rows("ptperf_%s%s.csv" % (m, suffix))
    if x:
        x = x[0]
        print("| %s | %.0f | %.0f | %.0f | %.0f | %.0f |" % (
            how, float(x["p50_us"]), float(x["server_request_us"]),
            float(x["server_compute_input_us"]), float(x["client_overhead_us"]),
            floor.get(key, float("nan"))))
