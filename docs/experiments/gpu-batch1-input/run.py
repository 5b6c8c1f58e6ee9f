"""Why does a batch of one take twice as long to reach the GPU from an HTTP
body as from a shared-memory region? (issue 46, part 4: the batch-1 CUDA
graph over HTTP binary is 90 µs over its target; the GPU table of d51379d
gives its input phase as 109 µs, against 56 µs from system shared memory,
though both bodies are pinned and both go to the device by one DMA.)

The one difference left between the two: where the tensor starts. A shared
-memory region hands over its first byte, page-aligned; an HTTP body puts
the JSON header first, and the tensor starts right after it (154 bytes in
for ptperf's FP16 ResNet-50 request: 2-byte aligned, no more).

On the GPU host, after bench/gpu/run.py's build and models (BENCH_BUILD_DIR,
BENCH_MODELS):

    python3 docs/experiments/gpu-batch1-input/run.py OUT_DIR

1. copies: PyTorch alone (no ptserve), one 301,056-byte (FP16 image) and
   one 602,112-byte (FP32) host-to-device copy from a pinned buffer at
   offsets 0, 154, 160, 192, 256 and 4096 bytes, and from pageable memory;
   CUDA events around each copy, median of 300.
2. served: ptserve serving resnet50_fp16_graph alone; one client thread
   sends the same image with the JSON header padded with spaces (valid
   JSON) so that the tensor starts at each of those offsets in the body;
   the server's own compute-input time per request (statistics endpoint,
   before and after) and the client's p50. Rounds alternate the offsets.
   Then again with PTSERVE_PINNED_BODIES_MAX=0 (bodies in ordinary memory),
   and with PTSERVE_INLINE_MAX_US=2000: a batch of one runs on the thread
   that received it when its model's batches take at most 1 ms on average
   (scheduler.c, INLINE_MAX_NS), else an instance thread is woken for it;
   the d51379d table's queue phase was 0 µs from CUDA shared memory (0.87
   ms batches), 6 from system shared memory and 14 over HTTP (1.05 ms).
"""
import http.client
import json
import os
import shutil
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import harness as h  # noqa: E402

BUILD = os.environ.get("BENCH_BUILD_DIR", os.path.join(ROOT, "build-bench-gpu"))
MODELS = os.environ.get("BENCH_MODELS", "/tmp/pts-bench-gpu-models")
MODEL = "resnet50_fp16_graph"
OFFSETS = [0, 154, 160, 192, 256, 4096]
REQUESTS = int(os.environ.get("B1_REQUESTS", "400"))
ROUNDS = int(os.environ.get("B1_ROUNDS", "3"))
# B1_SKIP_COPIES=1: the served part alone (a second build in the same call)
SKIP_COPIES = os.environ.get("B1_SKIP_COPIES") == "1"


def copies():
    import torch
    rows = []
    for n in (301056, 602112):
        dev = torch.empty(n, dtype=torch.uint8, device="cuda")
        for pinned in (True, False):
            host = torch.randint(0, 255, (n + 8192,), dtype=torch.uint8).pin_memory() \
                if pinned else torch.randint(0, 255, (n + 8192,), dtype=torch.uint8)
            for off in OFFSETS if pinned else [0, 154]:
                src = host[off:off + n]
                times = []
                for i in range(330):
                    a = torch.cuda.Event(enable_timing=True)
                    b = torch.cuda.Event(enable_timing=True)
                    a.record()
                    dev.copy_(src, non_blocking=pinned)
                    b.record()
                    b.synchronize()
                    if i >= 30:
                        times.append(a.elapsed_time(b) * 1000)
                rows.append((n, "pinned" if pinned else "pageable", off,
                             host.data_ptr() % 4096, statistics.median(times)))
    return rows


def request_body(image, pad_to):
    head = {"inputs": [{"name": "INPUT__0", "shape": [1, 3, 224, 224], "datatype": "FP16",
                        "parameters": {"binary_data_size": len(image)}}],
            "parameters": {"binary_data_output": True}}
    text = json.dumps(head, separators=(",", ":")).encode()
    if pad_to and pad_to > len(text):
        text += b" " * (pad_to - len(text))
    return text, text + image


def input_stats(server):
    s = json.loads(h.http_get(server.url("/v2/models/%s/stats" % MODEL)))
    ci = s["model_stats"][0]["inference_stats"]["compute_input"]
    return ci["count"], ci["ns"]


def measure(server, image, pad_to):
    text, body = request_body(image, pad_to)
    headers = {"Content-Type": "application/octet-stream",
               "Inference-Header-Content-Length": str(len(text))}
    conn = http.client.HTTPConnection("127.0.0.1", server.port)
    path = "/v2/models/%s/infer" % MODEL
    lat = []
    for i in range(30 + REQUESTS):
        if i == 30:
            c0, ns0 = input_stats(server)
        t = time.perf_counter()
        conn.request("POST", path, body, headers)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            sys.exit("HTTP %d at offset %d" % (r.status, len(text)))
        if i >= 30:
            lat.append((time.perf_counter() - t) * 1e6)
    conn.close()
    c1, ns1 = input_stats(server)
    return len(text), (ns1 - ns0) / 1000 / max(1, c1 - c0), statistics.median(lat)


def served(out):
    import random
    repo = "/tmp/pts-b1-repo"
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(os.path.join(MODELS, MODEL), os.path.join(repo, MODEL))
    rnd = random.Random(1)
    image = bytes(rnd.getrandbits(8) & 0x3B for _ in range(301056))  # finite FP16 values
    rows = []
    for label, env in (("pinned bodies (default)", {}),
                       ("PTSERVE_PINNED_BODIES_MAX=0", {"PTSERVE_PINNED_BODIES_MAX": "0"}),
                       ("PTSERVE_INLINE_MAX_US=2000", {"PTSERVE_INLINE_MAX_US": "2000"})):
        server = h.Server(os.path.join(BUILD, "ptserve"),
                          ["--model-repository", repo, "--http-address", "127.0.0.1"],
                          os.path.join(out, "server.log"), env=env)
        try:
            for rnd_i in range(ROUNDS):
                for pad_to in [o for o in OFFSETS if o != 0]:
                    got = measure(server, image, pad_to)
                    rows.append((label, rnd_i + 1) + got)
                    h.log("%s round %d: tensor at %d: input %.1f us, client p50 %.0f us"
                          % ((label, rnd_i + 1) + got))
        finally:
            server.stop()
    return rows


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    md = ["# Batch 1 over HTTP: where the tensor starts in the body", "",
          "ptserve: %s" % os.path.join(BUILD, "ptserve"), ""]
    md += ["## Copies (PyTorch alone): one host-to-device copy, median µs (CUDA events)", "",
           "| bytes | host memory | offset | buffer's page offset | µs |", "|---:|---|---:|---:|---:|"]
    md += ["| %d | %s | %d | %d | %.1f |" % r for r in ([] if SKIP_COPIES else copies())]
    md += ["", "## Served: resnet50_fp16_graph, concurrency 1, one client thread", "",
           "| bodies | round | tensor's offset in the body | server compute input µs/request "
           "| client p50 µs |", "|---|---:|---:|---:|---:|"]
    md += ["| %s | %d | %d | %.1f | %.0f |" % r for r in served(out)]
    text = "\n".join(md) + "\n"
    open(os.path.join(out, "results.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
