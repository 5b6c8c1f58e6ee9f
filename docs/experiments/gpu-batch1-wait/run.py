"""The batch-1 CUDA graph at concurrency 1, with and without the timed
wait's spin at the end (issue 46, part 4). One device call, after
bench/gpu's build (ptserve, ptperf, bench_loopback) and gen_models.py:

    python3 docs/experiments/gpu-batch1-wait/run.py MODELS OUT

With the bench's own code (bench/gpu/run.py), in this order:
1. PyTorch's batch-1 graph as its process's only GPU work (torch_ref.py
   --graph-first): the target's base;
2. four servers (WAIT_SERVERS), one after the other, each holding
   resnet50_fp16_graph alone: the spin on (PTSERVE_CUDA_SPIN_TAIL=1), off
   (=0, the default), off, on, ...; each measures concurrency 1 over HTTP with
   the image in the body, from system and from CUDA shared memory;
3. bench_loopback over the same bytes, answered at once and after the
   forward's time (the client waiting as long as for the model).
Prints one table; the raw CSVs stay in OUT, one folder per server.
"""
import os
import shutil
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
cudart = bench.find_cudart()
SETTINGS = (("spin", "1", "on"), ("nospin", "0", "off"))
# WAIT_SERVERS (default 4): how many servers, in the order on, off, off,
# on, on, off, off, on, ...
order = [SETTINGS[(i + 1) // 2 % 2] for i in range(int(os.environ.get("WAIT_SERVERS", "4")))]
for i, (name, value, _) in enumerate(order):
    r.raw = os.path.join(out, "%d-%s" % (i + 1, name))
    os.makedirs(r.raw, exist_ok=True)
    os.environ["PTSERVE_CUDA_SPIN_TAIL"] = value
    r.start(repo, "wait")
    del os.environ["PTSERVE_CUDA_SPIN_TAIL"]
    if i == 0:
        r.probe_cuda_shm(m, cudart)
    bench.graph_batch1(r, m)
    r.server.stop()
r.raw = out
# loopback() answers after the forward of the HTTP row it finds in OUT.
shutil.copy(os.path.join(out, "1-spin", "ptperf_%s.csv" % m), out)
bench.loopback(r, m)


rows = report.read_csv


base = float(rows(os.path.join(out, "torch.csv"))[0]["p50_us"])
floor = {x["label"]: float(x["p50_us"]) for x in rows(os.path.join(out, "loopback.csv"))}
print("base (PyTorch's graph, the process's only GPU work): %.0f us; target %.0f us"
      % (base, base + report.GRAPH_MARGIN_US))
print("TCP alone, same bytes (answered at once / after the forward): body %.0f / %.0f us, "
      "no body %.0f / %.0f us" % (floor.get("body", 0), floor.get("body_idle", 0),
                                  floor.get("no_body", 0), floor.get("no_body_idle", 0)))
print("| server | spin at the end | load | p50 | server request | input | infer | "
      "HTTP and client | server CPU µs/req |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for i, (name, _, on) in enumerate(order):
    for suffix, how in (("", "HTTP, binary tensors"), ("_shm", "system shared memory"),
                        ("_cudashm", "CUDA shared memory")):
        x = rows(os.path.join(out, "%d-%s" % (i + 1, name), "ptperf_%s%s.csv" % (m, suffix)))
        if x:
            x = x[0]
            print("| %d | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |" % (
                i + 1, on, how, float(x["p50_us"]), float(x["server_request_us"]),
                float(x["server_compute_input_us"]), float(x["server_compute_infer_us"]),
                float(x["client_overhead_us"]), float(x["server_cpu_us"])))
