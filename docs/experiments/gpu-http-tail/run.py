"""Where does FP32 ResNet-50 over HTTP lose ~40 ms for 1% of requests?
(issue 46: p99 2.9x p50 at c=128 and 2.6x at c=256 in the GPU table of
c187514, p90 only 1.23x; gRPC and shared memory with the same bytes do not.)

On the GPU host, after the gpu scenario's build and models
(BENCH_BUILD_DIR, BENCH_MODELS, as bench/gpu/run.py):

    python3 docs/experiments/gpu-http-tail/run.py OUT_DIR

Serves the whole model repository as the gpu scenario does, measures
resnet50_fp32 over HTTP (binary tensors, 4 client threads) at c=64,128,256
as its sweep does, then again at 128 and 256 with every request traced
(TIMESTAMPS, rate 1, switched on live). From the traces it prints, for
the requests above the server-side p99 and for all, where the time went
(the phases of docs/tracing.md), and when the slow ones happened (100 ms
bins), to tell a server stall from a client or network one: ptperf's p99
is the client's view, the trace the server's.
"""
import collections
import glob
import json
import os
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import harness as h  # noqa: E402

BUILD = os.environ.get("BENCH_BUILD_DIR", os.path.join(ROOT, "build-bench-gpu"))
MODELS = os.environ.get("BENCH_MODELS", "/tmp/pts-bench-gpu-models")
MODEL = os.environ.get("TAIL_MODEL", "resnet50_fp32")
# the loads measured again with tracing on, and ptperf's window (ms)
TRACED = [int(c) for c in os.environ.get("TAIL_TRACED", "128,256").split(",")]
WINDOW_MS = os.environ.get("TAIL_WINDOW_MS", "1000")
PHASES = [("HTTP receive", "HTTP_RECV_START", "HTTP_RECV_END"),
          ("to the core", "HTTP_RECV_END", "REQUEST_START"),
          ("to the queue", "REQUEST_START", "QUEUE_START"),
          ("queue", "QUEUE_START", "COMPUTE_START"),
          ("compute input", "COMPUTE_START", "COMPUTE_INPUT_END"),
          ("compute infer", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"),
          ("compute output", "COMPUTE_OUTPUT_START", "COMPUTE_END"),
          ("to the end", "COMPUTE_END", "REQUEST_END"),
          ("HTTP send", "HTTP_SEND_START", "HTTP_SEND_END")]


def ptperf(server, out, conc, tag):
    csv = os.path.join(out, "ptperf_%s_%s.csv" % (tag, conc))
    subprocess.run([os.path.join(BUILD, "ptperf"), "-u", "127.0.0.1:%d" % server.port, "-m",
                    MODEL, "--threads", "4", "--concurrency", str(conc), "-p", WINDOW_MS, "-r", "5",
                    "-q", "--server-pid", str(server.pid), "-f", csv])
    row = h.read_csv(csv)[-1]
    h.log("%s c=%s: %s/s p50 %s p90 %s p99 %s us" % (tag, conc, row["infer_per_sec"],
                                                      row["p50_us"], row["p90_us"],
                                                      row["p99_us"]))
    return row


def load_traces(pattern):
    stamps = collections.defaultdict(dict)
    for path in sorted(glob.glob(pattern)):
        if path.endswith(".chrome.json"):  # the Perfetto copy of the same traces
            continue
        for entry in json.load(open(path)):
            for t in entry.get("timestamps", []):
                stamps[entry["id"]].setdefault(t["name"], int(t["ns"]))
    return [s for s in stamps.values() if "HTTP_RECV_START" in s and "REQUEST_END" in s]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))] if xs else 0


def analyse(traces, lines):
    def total(s):
        return s.get("HTTP_SEND_END", s["REQUEST_END"]) - s["HTTP_RECV_START"]
    tot = [total(s) for s in traces]
    p50, p99 = pct(tot, 50), pct(tot, 99)
    slow = sorted(traces, key=total)[-max(1, len(traces) // 100):]  # the slowest 1%
    lines.append("%d traced requests; server-side p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, "
                 "max %.1f ms" % (len(traces), p50 / 1e6, pct(tot, 90) / 1e6, p99 / 1e6,
                                  max(tot) / 1e6))
    lines += ["", "| phase | median, all (ms) | p99, all (ms) | mean, slowest 1% (ms) |",
              "|---|---:|---:|---:|"]
    for name, a, b in PHASES:
        xs = [s[b] - s[a] for s in traces if a in s and b in s]
        ys = [s[b] - s[a] for s in slow if a in s and b in s]
        if xs:
            lines.append("| %s | %.2f | %.2f | %.2f |" % (
                name, pct(xs, 50) / 1e6, pct(xs, 99) / 1e6, sum(ys) / max(1, len(ys)) / 1e6))
    t0 = min(s["HTTP_RECV_START"] for s in traces)
    bins = collections.Counter(int((s["HTTP_RECV_START"] - t0) / 1e8) for s in slow)
    lines += ["", "slowest 1%% by 100 ms bin of arrival (bin: count): %s" % ", ".join(
        "%d: %d" % kv for kv in sorted(bins.items()))]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # the traces (hundreds of MB) go beside OUT_DIR's summary, not into it
    trace = os.path.join(os.environ.get("TAIL_TRACE_DIR", "/tmp/pts-tail-trace"), "trace.json")
    os.makedirs(os.path.dirname(trace), exist_ok=True)
    lines = ["# %s over HTTP: the tail, client and server side" % MODEL, ""]
    server = h.Server(os.path.join(BUILD, "ptserve"), [
        "--model-repository", MODELS, "--http-address", "127.0.0.1", "--http-thread-count", 16,
        "--allow-client-shm=true", "--trace-config", "triton,file=" + trace,
        "--trace-config", "level=OFF", "--trace-config", "rate=1"],
        os.path.join(out, "server.log"), grpc=True, metrics=True)
    with server:
        lines += ["| load | images/s | p50 ms | p90 ms | p99 ms | p99/p50 |",
                  "|---|---:|---:|---:|---:|---:|"]

        def row(tag, conc):
            r = ptperf(server, out, conc, tag)
            lines.append("| %s, c=%d | %s | %.1f | %.1f | %.1f | %.2f |" % (
                tag, conc, r["infer_per_sec"], float(r["p50_us"]) / 1e3,
                float(r["p90_us"]) / 1e3, float(r["p99_us"]) / 1e3,
                float(r["p99_us"]) / float(r["p50_us"])))
        for c in (1, 64, 128, 256):
            row("untraced", c)
        urllib.request.urlopen(server.url("/v2/trace/setting"),
                               data=b'{"trace_level": ["TIMESTAMPS"]}', timeout=10).read()
        spans = {}
        for c in TRACED:
            t0 = time.monotonic_ns()  # CLOCK_MONOTONIC, the traces' clock
            row("traced", c)
            spans[c] = (t0, time.monotonic_ns())
    traces = load_traces(trace + "*")
    for c, (t0, t1) in spans.items():
        lines += ["", "## Server side, every traced request at c=%d" % c, ""]
        mine = [s for s in traces if t0 <= s["HTTP_RECV_START"] < t1]
        if mine:
            analyse(mine, lines)
        else:
            lines.append("no traces were written")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
