"""Where do gRPC requests wait at saturation on the GPU host? (issue 46:
the gRPC rows moved by a quarter between runs of one binary, with the batch
size the server forms; docs/gpu.md, "The client was the limit", found
ptperf's one client thread at a full core in every such run.)

On the GPU host, after a build of the gpu scenario (bench/gpu/run.py's
BENCH_BUILD_DIR, models in BENCH_MODELS):

    python3 docs/experiments/gpu-grpc-wait/run.py OUT_DIR

Serves resnet50_fp16 as the gpu scenario does and puts it under gRPC load
at concurrency 512 with several clients and server settings, one after
another: ptperf with 1 and 4 client threads in alternating rounds, 8 threads
on 16 channels, streaming, HTTP with 1 and 4 threads, perf_analyzer. During each run it samples, every 250 ms, the gRPC sockets of
both ends (/proc/net/tcp, as `ss` shows them: bytes waiting in the server's receive queues and in
the client's send queues), and over the middle of the run the CPU share of
every thread of the server and of the client (/proc/PID/task/*/stat); the
server's statistics give the mean batch. Writes OUT_DIR/summary.md and the
raw samples. Over HTTP the sockets sampled are the HTTP port's.
"""
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import harness as h  # noqa: E402

BUILD = os.environ.get("BENCH_BUILD_DIR", os.path.join(ROOT, "build-bench-gpu"))
MODELS = os.environ.get("BENCH_MODELS", "/tmp/pts-bench-gpu-models")
MODEL = os.environ.get("DIAG_MODEL", "resnet50_fp16")
TICK = os.sysconf("SC_CLK_TCK")


def threads_cpu(pid):
    """{tid: (name, cpu seconds)} of every thread of pid."""
    out = {}
    base = "/proc/%d/task" % pid
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            s = open("%s/%s/stat" % (base, tid)).read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        f = s[s.rindex(")") + 2:].split()
        out[tid] = (name, (int(f[11]) + int(f[12])) / TICK)
    return out


def busiest(a, b, secs, n=8):
    """The n busiest threads between samples a and b, as 'name NN%'."""
    rows = []
    for tid, (name, t1) in b.items():
        t0 = a.get(tid, (name, 0.0))[1]
        rows.append((100.0 * (t1 - t0) / secs, name))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    return "%.0f%% in all; " % total + ", ".join("%s %.0f%%" % (nm, p) for p, nm in rows[:n])


def ss_sample(port):
    """(server recv-q, server send-q, client recv-q, client send-q), summed
    over the established connections of `port`, and the raw lines. Read from
    /proc/net/tcp{,6} (tx_queue:rx_queue, what ss prints as Send-Q and
    Recv-Q), not from ss: the GPU host has no iproute2, and the first run
    lost every sample to that."""
    srv = [0, 0]
    cli = [0, 0]
    raw = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().split("\n")[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 5 or f[3] != "01":  # 01: ESTABLISHED
                continue
            local, peer = int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16)
            sq, rq = (int(x, 16) for x in f[4].split(":"))
            if local == port:
                srv[0] += rq
                srv[1] += sq
            elif peer == port:
                cli[0] += rq
                cli[1] += sq
            else:
                continue
            raw.append(line.strip())
    return srv + cli, "\n".join(raw)


def stats(server):
    s = json.loads(h.http_get(server.url("/v2/models/%s/stats" % MODEL)))["model_stats"][0]
    return int(s["inference_count"]), int(s["execution_count"])


def run_load(out, label, server, cmd, secs):
    """Runs cmd (the client) while sampling; returns the summary row."""
    h.log("%s: %s" % (label, " ".join(cmd)))
    port = server.grpc_port if "grpc" in cmd else server.port  # the sockets to sample
    i0, e0 = stats(server)
    log = open(os.path.join(out, "%s.client.txt" % label), "w")
    t0 = time.monotonic()
    client = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    samples, raw = [], []
    cpu = {}
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            el = time.monotonic() - t0
            q, txt = ss_sample(port)
            samples.append([el] + q)
            if 0.45 * secs < el < 0.45 * secs + 0.3:
                raw.append(txt)
            if "a" not in cpu and el > 0.3 * secs:
                cpu["a"] = (time.monotonic(), threads_cpu(server.pid), threads_cpu(client.pid))
            if "b" not in cpu and el > 0.7 * secs:
                cpu["b"] = (time.monotonic(), threads_cpu(server.pid), threads_cpu(client.pid))
            stop.wait(0.25)
    th = threading.Thread(target=sampler)
    th.start()
    try:
        client.wait(timeout=secs + 120)
    except subprocess.TimeoutExpired:
        client.kill()
        client.wait()
    stop.set()
    th.join()
    wall = time.monotonic() - t0
    i1, e1 = stats(server)
    with open(os.path.join(out, "%s.ss.csv" % label), "w") as f:
        f.write("t,srv_recvq,srv_sendq,cli_recvq,cli_sendq\n")
        for s in samples:
            f.write("%.2f,%d,%d,%d,%d\n" % tuple(s))
    with open(os.path.join(out, "%s.ss.txt" % label), "w") as f:
        f.write("\n".join(raw))
    mid = [s for s in samples if 0.3 * secs < s[0] < 0.8 * secs] or samples
    avg = [sum(s[k] for s in mid) / max(1, len(mid)) / 1e6 for k in range(1, 5)]
    srv_cpu = cli_cpu = "n/a"
    if "a" in cpu and "b" in cpu:
        dt = cpu["b"][0] - cpu["a"][0]
        srv_cpu = busiest(cpu["a"][1], cpu["b"][1], dt)
        cli_cpu = busiest(cpu["a"][2], cpu["b"][2], dt)
    n = i1 - i0
    return {"label": label, "infer_s": n / wall, "batch": n / max(1, e1 - e0),
            "srv_recvq_mb": avg[0], "srv_sendq_mb": avg[1], "cli_recvq_mb": avg[2],
            "cli_sendq_mb": avg[3], "srv_cpu": srv_cpu, "cli_cpu": cli_cpu,
            "rc": client.returncode}


def ptperf_cmd(server, channels, secs, streaming=False, threads=1, http=False):
    proto = [] if http else ["-i", "grpc", "--grpc-url", "127.0.0.1:%d" % server.grpc_port,
                             "--grpc-channels", str(channels)]
    return [os.path.join(BUILD, "ptperf"), "-u", "127.0.0.1:%d" % server.port, "-m", MODEL,
            *proto, "--threads", str(threads), "--concurrency", "512", "-p",
            str(int(secs * 1000 / 4)), "-r", "4", "-s", "100", "--server-pid",
            str(server.pid)] + (["--streaming"] if streaming else [])


def pa_cmd(server, secs):
    pa = os.environ.get("PERF_ANALYZER", os.path.join(ROOT, ".bundle/perf_analyzer/bin/"
                                                      "perf_analyzer"))
    if not os.access(pa, os.X_OK):
        return None
    return [pa, "-m", MODEL, "-i", "grpc", "-u", "127.0.0.1:%d" % server.grpc_port,
            "--concurrency-range", "512", "--measurement-interval", str(int(secs * 1000 / 4)),
            "--max-trials", "4", "--stability-percentage", "1000"]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    secs = float(os.environ.get("DIAG_SECS", "10"))
    rows = []
    for loops in (None, 16):  # the server's gRPC loops: its default (one per core, 2-8), 16
        args = ["--model-repository", MODELS, "--http-address", "127.0.0.1",
                "--http-thread-count", 16, "--allow-client-shm=true"]
        tag = "default loops"
        if loops:
            args += ["--grpc-infer-thread-count", loops]
            tag = "%d loops" % loops
        with h.Server(os.path.join(BUILD, "ptserve"), args,
                      os.path.join(out, "server-%s.log" % tag.replace(" ", "_")), grpc=True,
                      metrics=True) as server:
            # warm-up: every padded graph size once over gRPC
            subprocess.run(ptperf_cmd(server, 4, 4), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            loads = [("ptperf 4 ch, 1 thread, round 1", ptperf_cmd(server, 4, secs)),
                     ("ptperf 4 ch, 4 threads, round 1", ptperf_cmd(server, 4, secs, threads=4)),
                     ("ptperf 4 ch, 1 thread, round 2", ptperf_cmd(server, 4, secs)),
                     ("ptperf 4 ch, 4 threads, round 2", ptperf_cmd(server, 4, secs, threads=4)),
                     ("ptperf 16 ch, 8 threads", ptperf_cmd(server, 16, secs, threads=8))]
            if not loops:
                loads += [("ptperf 4 ch streaming, 4 threads",
                           ptperf_cmd(server, 4, secs, True, threads=4)),
                          ("ptperf HTTP, 1 thread", ptperf_cmd(server, 0, secs, http=True)),
                          ("ptperf HTTP, 4 threads",
                           ptperf_cmd(server, 0, secs, threads=4, http=True))]
                if pa_cmd(server, secs):
                    loads.append(("perf_analyzer", pa_cmd(server, secs)))
            for label, cmd in loads:
                r = run_load(out, "%s - %s" % (tag, label), server, cmd, secs)
                h.log("  %.0f/s, batch %.1f, server recv-q %.1f MB, client send-q %.1f MB" % (
                    r["infer_s"], r["batch"], r["srv_recvq_mb"], r["cli_sendq_mb"]))
                rows.append(r)
    lines = ["# gRPC at concurrency 512, %s (%s)" % (MODEL, time.strftime(
        "%Y-%m-%d %H:%M UTC", time.gmtime())), "",
        "| run | images/s | batch | server recv-q MB | server send-q MB | client recv-q MB"
        " | client send-q MB |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f |" % (
            r["label"], r["infer_s"], r["batch"], r["srv_recvq_mb"], r["srv_sendq_mb"],
            r["cli_recvq_mb"], r["cli_sendq_mb"]))
    lines += ["", "## CPU of the busiest threads, middle of each run", ""]
    for r in rows:
        lines += ["- **%s** (client exit %s)" % (r["label"], r["rc"]),
                  "  - server: " + r["srv_cpu"], "  - client: " + r["cli_cpu"]]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
