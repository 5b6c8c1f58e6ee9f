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
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import report  # noqa: E402
import run as bench  # noqa: E402

models, out = sys.argv[1], sys.argv[2]
m = "resnet50_fp16_graph"
r, repo = bench.batch1_alone(models, out)
r.start(repo, "transport")
r.probe_cuda_shm(m, bench.find_cudart())
bench.graph_batch1(r, m)
r.server.stop()
bench.loopback(r, m)


def rows(name):
    return report.read_csv(os.path.join(out, name))


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
