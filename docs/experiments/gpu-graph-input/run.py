"""A/B: a batch bound for a CUDA graph copied straight into the graph's
static input (the change, exp/graph-direct-input) against the build before
it, which copied the batch to a new device tensor, reordered it to
channels-last with a kernel and an allocation, and copied that into the
static input with another kernel before the replay (issue 46, part 4).

On the GPU host, after bench/gpu/gen_models.py wrote BENCH_MODELS and both
trees were built (README.md beside this file):

    python3 docs/experiments/gpu-graph-input/run.py OUT old=/tmp/old/build-bench-gpu \\
        new=build-bench-gpu

Each round starts a fresh server of each build in turn (the builds
alternate, so drift in the host's clocks falls on both), serving
resnet50_fp16_graph alone; one client thread sends B1_WARM requests, then
B1_REQUESTS timed ones over one keep-alive HTTP connection (binary tensor,
binary output). Per round: the client's p50 and p90, and the server's own
queue, compute_input, compute_infer and compute_output per request (its
statistics endpoint, read before and after the timed requests). The copy
moves from the infer phase to the input phase with the change, so the two
are also given summed.
"""
import http.client
import json
import os
import random
import shutil
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import harness as h  # noqa: E402

MODELS = os.environ.get("BENCH_MODELS", "/tmp/pts-bench-gpu-models")
MODEL = os.environ.get("B1_MODEL", "resnet50_fp16_graph")
REQUESTS = int(os.environ.get("B1_REQUESTS", "1500"))
WARM = int(os.environ.get("B1_WARM", "200"))
ROUNDS = int(os.environ.get("B1_ROUNDS", "4"))
PHASES = ("queue", "compute_input", "compute_infer", "compute_output")


def model_input():
    cfg = open(os.path.join(MODELS, MODEL, "config.pbtxt")).read()
    dtype = "FP16" if "TYPE_FP16" in cfg else "FP32"
    return dtype, [1, 3, 224, 224]


def request(dtype, shape):
    n = 2 if dtype == "FP16" else 4
    for d in shape:
        n *= d
    rnd = random.Random(1)
    if dtype == "FP16":  # finite FP16 values: the exponent's top bit clear
        image = bytes(rnd.getrandbits(8) & 0x3B for _ in range(n))
    else:
        import struct
        image = b"".join(struct.pack("<f", rnd.uniform(-1, 1)) for _ in range(n // 4))
    head = {"inputs": [{"name": "INPUT__0", "shape": shape, "datatype": dtype,
                        "parameters": {"binary_data_size": len(image)}}],
            "parameters": {"binary_data_output": True}}
    text = json.dumps(head, separators=(",", ":")).encode()
    return text, text + image


def phases(server):
    s = json.loads(h.http_get(server.url("/v2/models/%s/stats" % MODEL)))
    st = s["model_stats"][0]["inference_stats"]
    return {p: (st[p]["count"], st[p]["ns"]) for p in PHASES}


def one_round(build, repo, log, text, body):
    server = h.Server(os.path.join(build, "ptserve"),
                      ["--model-repository", repo, "--http-address", "127.0.0.1"], log)
    try:
        headers = {"Content-Type": "application/octet-stream",
                   "Inference-Header-Content-Length": str(len(text))}
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        path = "/v2/models/%s/infer" % MODEL
        lat = []
        for i in range(WARM + REQUESTS):
            if i == WARM:
                before = phases(server)
            t = time.perf_counter()
            conn.request("POST", path, body, headers)
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                sys.exit("HTTP %d from %s" % (r.status, build))
            if i >= WARM:
                lat.append((time.perf_counter() - t) * 1e6)
        conn.close()
        after = phases(server)
    finally:
        server.stop()
    us = {p: (after[p][1] - before[p][1]) / 1000 / max(1, after[p][0] - before[p][0])
          for p in PHASES}
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.9)], us


def main():
    out = sys.argv[1]
    builds = [a.split("=", 1) for a in sys.argv[2:]]
    os.makedirs(out, exist_ok=True)
    repo = "/tmp/pts-graph-input-repo"
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(os.path.join(MODELS, MODEL), os.path.join(repo, MODEL))
    text, body = request(*model_input())
    rows = []
    for rnd_i in range(ROUNDS):
        for label, build in builds:
            p50, p90, us = one_round(build, repo, os.path.join(out, "server-%s.log" % label),
                                     text, body)
            rows.append((label, rnd_i + 1, p50, p90, us))
            h.log("%s round %d: p50 %.0f us p90 %.0f us, input %.1f infer %.1f output %.1f"
                  % (label, rnd_i + 1, p50, p90, us["compute_input"], us["compute_infer"],
                     us["compute_output"]))
    md = ["# CUDA graph input staged directly: A/B, %s over HTTP, concurrency 1" % MODEL, "",
          "%d timed requests per round after %d warm-up, one client thread, a fresh server "
          "per round; the builds alternate." % (REQUESTS, WARM), "",
          "| build | round | client p50 µs | client p90 µs | queue µs | input µs | infer µs "
          "| output µs | input + infer µs |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, r, p50, p90, us in rows:
        md.append("| %s | %d | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f |" % (
            label, r, p50, p90, us["queue"], us["compute_input"], us["compute_infer"],
            us["compute_output"], us["compute_input"] + us["compute_infer"]))
    md += ["", "Medians over the rounds:", "",
           "| build | client p50 µs | input + infer µs |", "|---|---:|---:|"]
    for label, _ in builds:
        mine = [x for x in rows if x[0] == label]
        md.append("| %s | %.0f | %.1f |" % (
            label, statistics.median(x[2] for x in mine),
            statistics.median(x[4]["compute_input"] + x[4]["compute_infer"] for x in mine)))
    text_md = "\n".join(md) + "\n"
    open(os.path.join(out, "results.md"), "w").write(text_md)
    print(text_md)


if __name__ == "__main__":
    main()
