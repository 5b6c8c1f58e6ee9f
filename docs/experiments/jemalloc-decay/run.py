#!/usr/bin/python3
"""docs/experiments/jemalloc-decay/run.py — does jemalloc's page decay cost
ptserve throughput on large request bodies?

    /usr/bin/python3 docs/experiments/jemalloc-decay/run.py [BUILD_DIR] [OUT.md]

A model of the identity backend takes one FP32 [3, 224, 224] image per
request (602,112 bytes, a ResNet-50 input), batches up to 128 with a
200 us queue delay on 2 instances, and sleeps 10 ms per batch as a device
would. ptperf (HTTP, binary tensors, 1 thread) drives it at each
concurrency, after a warm-up pass of the same load, for each setting of
jemalloc's dirty_decay_ms: ptserve's (-1, main.c's malloc_conf) and
jemalloc's own default (10000, through MALLOC_CONF). Rounds alternate the
settings. For each run: throughput, p50 and p99, the server's CPU time per
request (ptperf --server-pid), the server's minor page faults per request
(/proc/PID/stat, field 10, over the measured pass), and its resident size
at the end of the load and 3 s after it.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
OUT = sys.argv[2] if len(sys.argv) > 2 else None
SETTINGS = [("ptserve (dirty_decay_ms -1)", None),
            ("jemalloc's default (dirty_decay_ms 10000)", "dirty_decay_ms:10000")]
LOADS = [int(c) for c in os.environ.get("DECAY_LOADS", "32,128").split(",")]
ROUNDS = int(os.environ.get("DECAY_ROUNDS", "3"))
PORT = 18310

CONFIG = """name: "big"
backend: "identity"
max_batch_size: 128
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
dynamic_batching { max_queue_delay_microseconds: 200 }
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "execute_delay_ms" value { string_value: "10" } }
"""


def proc_field(pid, path, pattern):
    with open("/proc/%d/%s" % (pid, path)) as f:
        return int(re.search(pattern, f.read()).group(1))


def minflt(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])  # field 10


def rss_mb(pid):
    return proc_field(pid, "status", r"VmRSS:\s+(\d+)") / 1024.0


def ptperf(c, interval, pid=None):
    cmd = [os.path.join(BUILD, "ptperf"), "-m", "big", "-u", "127.0.0.1:%d" % PORT,
           "--concurrency", str(c), "-p", str(interval), "-r", "5", "-q"]
    if pid:
        cmd += ["--server-pid", str(pid)]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == str(c):
            return f
    raise SystemExit("ptperf printed no row for concurrency %d:\n%s" % (c, out))


def one(repo, conf, c):
    env = dict(os.environ)
    env.pop("MALLOC_CONF", None)
    if conf:
        env["MALLOC_CONF"] = conf
    log = open(os.path.join(repo, "..", "server.log"), "w")
    srv = subprocess.Popen([os.path.join(BUILD, "ptserve"), "--model-repository", repo,
                            "--http-port", str(PORT), "--grpc-port", str(PORT + 1),
                            "--metrics-port", str(PORT + 2), "--http-address", "127.0.0.1"],
                           env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/v2/health/ready" % PORT, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        ptperf(c, 1000)  # warm: the pools grow to this load
        f0 = minflt(srv.pid)
        row = ptperf(c, 2000, srv.pid)
        f1 = minflt(srv.pid)
        # ptperf's columns: concurrency, infer/s, p50, p90, p95, p99, avg, errors,
        # windows, stable, |, queue, ..., then client cpu, server cpu, other%.
        rate, p50, p99 = float(row[1]), float(row[2]), float(row[5])
        cpu = float(row[-2])
        rss_end = rss_mb(srv.pid)
        time.sleep(3)
        rss_idle = rss_mb(srv.pid)
        # Requests in the measured pass: ptperf reports its windows; the
        # rate times their time is what it counted. Faults are over the
        # whole pass (its ramp-up included), so per request they are an
        # upper bound of the steady state's.
        windows = int(row[8])
        served = rate * windows * 2.0
        return dict(rate=rate, p50=p50, p99=p99, cpu=cpu, flt=(f1 - f0) / served,
                    rss_end=rss_end, rss_idle=rss_idle)
    finally:
        srv.terminate()
        srv.wait()
        log.close()


def main():
    tmp = tempfile.mkdtemp(prefix="pts-decay-")
    repo = os.path.join(tmp, "repo")
    os.makedirs(os.path.join(repo, "big", "1"))
    with open(os.path.join(repo, "big", "config.pbtxt"), "w") as f:
        f.write(CONFIG)
    runs = {}
    try:
        for r in range(ROUNDS):
            for c in LOADS:
                order = SETTINGS if r % 2 == 0 else SETTINGS[::-1]
                for name, conf in order:
                    res = one(repo, conf, c)
                    runs.setdefault((c, name), []).append(res)
                    print("round %d c=%d %s: %s" % (r + 1, c, name, res), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
           if l.startswith("model name")]
    lines = ["# jemalloc's page decay and large request bodies", "",
             "Produced by `/usr/bin/python3 docs/experiments/jemalloc-decay/run.py` at %s on "
             "%s (%d cores), %s; medians of %d rounds (the settings alternate)." % (
                 rev, cpu[0] if cpu else "?", os.cpu_count(),
                 time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), ROUNDS), "",
             "| concurrency | dirty_decay_ms | infer/s | p50 µs | p99 µs | server CPU µs/req "
             "| minor faults/req | RSS MB at the end | RSS MB 3 s later |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in LOADS:
        for name, _ in SETTINGS:
            rs = runs[(c, name)]
            m = {k: statistics.median(x[k] for x in rs) for k in rs[0]}
            lines.append("| %d | %s | %.0f | %.0f | %.0f | %.0f | %.1f | %.0f | %.0f |" % (
                c, name, m["rate"], m["p50"], m["p99"], m["cpu"], m["flt"], m["rss_end"],
                m["rss_idle"]))
    text = "\n".join(lines) + "\n"
    print(text)
    if OUT:
        with open(OUT, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
