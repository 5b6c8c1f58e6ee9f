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
import re
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
# the model served alone again under other settings (variant_repo), ";"
# between them: "base;delay=2000;count=3;pipeline=1;p.KEY=VALUE"
VARIANTS = [v for v in os.environ.get("TAIL_VARIANTS", "").split(";") if v]
# TAIL_SKIP_REPO=1: only the variants, not the whole repository first
SKIP_REPO = os.environ.get("TAIL_SKIP_REPO") == "1"
# the loads traced in each variant
VARIANT_TRACED = [int(c) for c in os.environ.get("TAIL_VARIANT_TRACED", "64").split(",") if c]
# each variant's untraced loads, and how many times each is measured (its
# rows one after another: a 1 s window's p99 varies from run to run)
VARIANT_LOADS = [int(c) for c in os.environ.get("TAIL_VARIANT_LOADS", "64,128,256").split(",")]
REPEAT = int(os.environ.get("TAIL_REPEAT", "1"))
# the traces (hundreds of MB) go here, not into OUT_DIR
TRACE_DIR = os.environ.get("TAIL_TRACE_DIR", "/tmp/pts-tail-trace")
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


def analyse(traces, lines, repo):
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
    batch_view(traces, slow, lines, repo)


def batches_of(traces):
    """The batches, as (start, end, size) sorted by start: every request of
    a batch carries the batch's own COMPUTE_START (scheduler.c,
    trace_compute), so requests that share one ran together."""
    groups = collections.defaultdict(list)
    for s in traces:
        if "COMPUTE_START" in s and "COMPUTE_END" in s:
            groups[s["COMPUTE_START"]].append(s["COMPUTE_END"])
    return sorted((start, max(ends), len(ends)) for start, ends in groups.items())


def queue_view(s, batches, instances, max_batch):
    """What happened while request s waited in the queue: the time during
    which every instance ran a batch (it had to wait) and the time during
    which one was free (the batcher held it: the queue delay, or a wake-up
    that came late); the batches that began meanwhile without it, and of
    those the ones with room for it (passed over); how long before its
    arrival the last batch had begun (a request that just missed a batch
    waits out the next one)."""
    q0, q1 = s["QUEUE_START"], s["COMPUTE_START"]
    running = [(b0, b1) for b0, b1, _ in batches if b0 < q1 and b1 > q0 and b0 != q1]
    edges = sorted({q0, q1} | {t for b in running for t in b if q0 < t < q1})
    busy = sum(b - a for a, b in zip(edges, edges[1:])
               if sum(1 for b0, b1 in running if b0 <= (a + b) / 2 < b1) >= instances)
    # 50 us: from the batch's take to its stamp. A thread preempted between
    # the request's stamp and its push (pts_scheduler_enqueue) also shows as
    # passed over, on a host with fewer cores than threads.
    begun = [n for b0, _, n in batches if q0 + 50000 < b0 < q1]
    before = [b0 for b0, _, _ in batches if b0 <= q0]
    return {"queue (ms)": (q1 - q0) / 1e6,
            "every instance busy (ms)": busy / 1e6,
            "an instance free (ms)": (q1 - q0 - busy) / 1e6,
            "batches begun meanwhile": len(begun),
            "of them with room (passed over)": sum(1 for n in begun if n < max_batch),
            "since the last batch began, at arrival (ms)":
                (q0 - before[-1]) / 1e6 if before else 0.0}


def batch_view(traces, slow, lines, repo):
    """Why the slow ones waited: the batches (size, duration) and, for the
    slowest 1% against every request, what went on while they queued
    (queue_view)."""
    batches = batches_of(traces)
    if not batches:
        return
    instances, max_batch = model_shape(repo)
    sizes = [n for _, _, n in batches]
    durs = [b1 - b0 for b0, b1, _ in batches]
    lines += ["", "%d batches on %d instances: size p10 %d, p50 %d, p90 %d, mean %.1f; duration "
              "p50 %.1f ms, p90 %.1f ms" % (len(batches), instances, pct(sizes, 10),
                                            pct(sizes, 50), pct(sizes, 90),
                                            sum(sizes) / len(sizes), pct(durs, 50) / 1e6,
                                            pct(durs, 90) / 1e6)]
    every = traces[::max(1, len(traces) // 2000)]  # a sample: the sweep is quadratic
    views = [[queue_view(s, batches, instances, max_batch) for s in group if "QUEUE_START" in s]
             for group in (every, slow)]
    lines += ["", "| while queued (mean) | all (sample of %d) | slowest 1%% |" % len(views[0]),
              "|---|---:|---:|"]
    for key in views[0][0] if views[0] else []:
        lines.append("| %s | %.2f | %.2f |" % (
            key, *(sum(v[key] for v in vs) / max(1, len(vs)) for vs in views)))
    overlap_view(batches, slow, lines)


def overlap_view(batches, slow, lines):
    """How batches ran: all of them, the slowest 1%'s own, and those that
    ran while the slowest 1% queued; their size, duration, time per image,
    and the share of their duration during which another batch ran too
    (the instances share one GPU, so a batch that overlaps another takes
    longer)."""
    def shared(b):
        b0, b1, _ = b
        both = sum(max(0, min(b1, c1) - max(b0, c0)) for c0, c1, _ in batches
                   if c0 < b1 and c1 > b0 and (c0, c1) != (b0, b1))
        return both / max(1, b1 - b0)
    by_start = {b[0]: b for b in batches}
    own = list({by_start[s["COMPUTE_START"]] for s in slow if s.get("COMPUTE_START") in by_start})
    waited = list({b for s in slow if "QUEUE_START" in s for b in batches
                   if b[0] < s["COMPUTE_START"] and b[1] > s["QUEUE_START"]
                   and b[0] != s["COMPUTE_START"]})
    lines += ["", "| batches | count | mean size | mean duration (ms) | µs per image | "
              "share of it with another batch running |", "|---|---:|---:|---:|---:|---:|"]
    for name, group in (("all", batches), ("the slowest 1%'s own", own),
                        ("running while the slowest 1% queued", waited)):
        if not group:
            continue
        size = sum(n for _, _, n in group) / len(group)
        dur = sum(b1 - b0 for b0, b1, _ in group) / len(group)
        lines.append("| %s | %d | %.1f | %.2f | %.0f | %.2f |" % (
            name, len(group), size, dur / 1e6, dur / 1e3 / max(size, 1),
            sum(shared(b) for b in group) / len(group)))


def model_shape(repo):
    """(instances, max_batch_size) from the served model's config.pbtxt."""
    text = open(os.path.join(repo, MODEL, "config.pbtxt")).read()
    count = re.search(r"count:\s*(\d+)", text)
    mbs = re.search(r"max_batch_size:\s*(\d+)", text)
    return int(count.group(1)) if count else 1, int(mbs.group(1)) if mbs else 0


def slug(spec):
    """A variant's name in paths: its CSVs' tag and its directory."""
    return re.sub(r"[^a-z0-9]+", "-", spec.lower())


def variant_repo(spec):
    """A repository of MODEL alone with its config edited by `spec`
    ("delay=2000,count=3,preferred=64,pipeline=1,p.KEY=VALUE":
    max_queue_delay_microseconds, the instance count, a preferred batch
    size, PTSERVE_PIPELINE=1, a model parameter KEY set to VALUE; and
    e.NAME=VALUE, an environment variable of the server); returns (repo,
    server env)."""
    edits = dict(kv.split("=", 1) for kv in spec.split(",") if kv and kv != "base")
    repo = os.path.join(TRACE_DIR, "variant-" + slug(spec), "repo")
    model = os.path.join(repo, MODEL)
    os.makedirs(model, exist_ok=True)
    if not os.path.exists(os.path.join(model, "1")):
        os.symlink(os.path.join(MODELS, MODEL, "1"), os.path.join(model, "1"))
    text = open(os.path.join(MODELS, MODEL, "config.pbtxt")).read()
    if "delay" in edits:
        text = re.sub(r"max_queue_delay_microseconds:\s*\d+",
                      "max_queue_delay_microseconds: " + edits["delay"], text)
    if "preferred" in edits:
        text = text.replace("dynamic_batching {", "dynamic_batching { preferred_batch_size: [ %s ]"
                            % edits["preferred"], 1)
    if "count" in edits:
        text = re.sub(r"count:\s*\d+", "count: " + edits["count"], text)
    for key in sorted(k for k in edits if k.startswith("p.")):
        text += ('parameters { key: "%s" value: { string_value: "%s" } }\n'
                 % (key[2:], edits[key]))
    with open(os.path.join(model, "config.pbtxt"), "w") as f:
        f.write(text)
    env = {k[2:]: v for k, v in edits.items() if k.startswith("e.")}
    if edits.get("pipeline") == "1":
        env["PTSERVE_PIPELINE"] = "1"
    return repo, env


def measure(repo, env, out, tag, untraced, traced, lines):
    """Serves `repo`, measures MODEL over HTTP at each of `untraced`, then
    with every request traced at each of `traced`; appends the table and
    the traced loads' analysis to `lines`."""
    trace = os.path.join(TRACE_DIR, tag, "trace.json")
    os.makedirs(os.path.dirname(trace), exist_ok=True)
    for old in glob.glob(trace + "*"):
        os.remove(old)
    server = h.Server(os.path.join(BUILD, "ptserve"), [
        "--model-repository", repo, "--http-address", "127.0.0.1", "--http-thread-count", 16,
        "--allow-client-shm=true", "--trace-config", "triton,file=" + trace,
        "--trace-config", "level=OFF", "--trace-config", "rate=1"],
        os.path.join(out, "server.log"), grpc=True, metrics=True, env=env)
    spans = {}
    with server:
        lines += ["| load | images/s | p50 ms | p90 ms | p99 ms | p99/p50 |",
                  "|---|---:|---:|---:|---:|---:|"]

        def row(kind, conc):
            r = ptperf(server, out, conc, tag + "_" + kind)
            lines.append("| %s, c=%d | %s | %.1f | %.1f | %.1f | %.2f |" % (
                kind, conc, r["infer_per_sec"], float(r["p50_us"]) / 1e3,
                float(r["p90_us"]) / 1e3, float(r["p99_us"]) / 1e3,
                float(r["p99_us"]) / float(r["p50_us"])))
        for c in untraced:
            for _ in range(REPEAT):
                row("untraced", c)
        urllib.request.urlopen(server.url("/v2/trace/setting"),
                               data=b'{"trace_level": ["TIMESTAMPS"]}', timeout=10).read()
        for c in traced:
            t0 = time.monotonic_ns()  # CLOCK_MONOTONIC, the traces' clock
            row("traced", c)
            spans[c] = (t0, time.monotonic_ns())
    traces = load_traces(trace + "*")
    for c, (t0, t1) in spans.items():
        lines += ["", "### Server side, every traced request at c=%d" % c, ""]
        mine = [s for s in traces if t0 <= s["HTTP_RECV_START"] < t1]
        if mine:
            analyse(mine, lines, repo)
        else:
            lines.append("no traces were written")
        lines.append("")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lines = ["# %s over HTTP: the tail, client and server side" % MODEL, "",
             "## The gpu scenario's repository, as bench/gpu/run.py serves it", ""]
    if not SKIP_REPO:
        measure(MODELS, {}, out, "repo", (1, 64, 128, 256), TRACED, lines)
    for spec in VARIANTS:
        lines += ["## %s alone, %s" % (MODEL, spec), ""]
        repo, env = variant_repo(spec)
        measure(repo, env, out, slug(spec), VARIANT_LOADS, VARIANT_TRACED, lines)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
