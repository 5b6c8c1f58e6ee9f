"""bench/harness.py — what every benchmark scenario does, once: build
ptserve into a bench build dir, start and stop servers on free ports, write
the meta block, run ptperf in rounds whose order turns, and write the
markdown table, the CSV and the plot.

A scenario (bench/<name>/run.py) imports it and declares the rest: its
models, servers, loads and tables. Run scenarios with the project venv's
interpreter (.venv/bin/python), which has torch, numpy and matplotlib.
"""
import csv
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable


def log(msg):
    print("== [%ds] %s" % (time.monotonic() - _T0, msg), file=sys.stderr, flush=True)


_T0 = time.monotonic()


def env(name, default):
    """BENCH_<NAME> from the environment, as the type of the default."""
    return type(default)(os.environ.get("BENCH_" + name, default))


def build(build_dir, targets, *cmake_args):
    """ptserve's tree built Release (no tests) into build_dir; returns it."""
    log("build (Release) in %s" % build_dir)
    subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                    "-DPTS_BUILD_TESTS=OFF", "-DPTS_PYTHON=" + PY, *cmake_args],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "--target", *targets,
                    "-j" + os.environ.get("JOBS", "2")], check=True, stdout=subprocess.DEVNULL)
    return build_dir


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read()


class Server:
    """One ptserve on free ports of 127.0.0.1, ready when constructed; a
    context manager that stops it. grpc=False turns gRPC off; prefix runs
    it under a command (taskset). Its log goes to log_path (appended)."""

    def __init__(self, binary, args, log_path, grpc=False, prefix=()):
        self.port = free_port()
        self.grpc_port = free_port() if grpc else None
        self.args = ["--http-port", str(self.port), "--allow-metrics", "false"]
        self.args += ["--grpc-port", str(self.grpc_port)] if grpc else ["--allow-grpc", "false"]
        self.args += list(args)
        log(" ".join([*prefix, "ptserve", *self.args]))
        with open(log_path, "a") as out:
            self.proc = subprocess.Popen([*prefix, binary, *self.args], stdout=out,
                                         stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        for _ in range(600):
            if self.proc.poll() is not None:
                sys.exit("ptserve exited (%d); its log: %s" % (self.proc.returncode, log_path))
            try:
                http_get(self.url("/v2/health/ready"))
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        sys.exit("ptserve did not become ready; its log: %s" % log_path)

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ptperf's arguments for each protocol; the server breakdown always comes
# from the HTTP statistics endpoint (-u).
def proto_args(proto, server):
    grpc = ["-i", "grpc", "--grpc-url", "127.0.0.1:%d" % (server.grpc_port or 0)]
    return {"http": [], "grpc": grpc, "grpc_stream": grpc + ["--streaming"]}[proto]


def ptperf(build_dir, server, model, concurrency, csv_path, interval_ms, *extra, prefix=()):
    """One ptperf sweep into csv_path. Exit 2 (some requests failed) still
    counts: the tables have an errors column."""
    rc = subprocess.run([*prefix, os.path.join(build_dir, "ptperf"), "-u",
                         "127.0.0.1:%d" % server.port, "-p", str(interval_ms), "-q",
                         "--server-pid", str(server.pid), "-m", model, "--concurrency",
                         concurrency, "-f", csv_path, *extra]).returncode
    if rc not in (0, 2):
        sys.exit("ptperf %s failed (%d)" % (model, rc))


def rounds(n, modes):
    """(round, mode) for n rounds, each mode once a round, the order turning
    by one each round so that no mode always follows the same one."""
    for r in range(1, n + 1):
        for i in range(len(modes)):
            yield r, modes[(i + r) % len(modes)]


def cpu_busy_pct():
    """Percent of all CPU time that was busy over the next second."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return sum(v), v[3] + v[4]
    (t0, i0), _, (t1, i1) = sample(), time.sleep(1), sample()
    return round(100 * ((t1 - t0) - (i1 - i0)) / max(t1 - t0, 1))


def wait_quiet(max_s):
    """Waits up to max_s seconds for the machine to be at most 15% busy;
    returns how busy it was last."""
    deadline = time.monotonic() + max_s
    while True:
        busy = cpu_busy_pct()
        if busy <= 15 or time.monotonic() >= deadline:
            return busy
        log("machine %d%% busy; waiting for it to be quiet" % busy)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def meta(path, **extra):
    """Writes the meta block (key=value lines): when, which tree, which
    machine and how loaded, and the scenario's own keys. Returns it."""
    dirty = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD"]).returncode
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    m = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
         "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                  capture_output=True, text=True).stdout.strip()
         + ("+changes" if dirty else ""),
         "cpus": str(os.cpu_count()), "cpu_model": cpu, "load_before": loadavg(), **extra}
    add_meta(path, **m)
    return m


def produced_by(script, meta):
    """The line every results.md opens with: the script, the tree, the
    rounds and windows, the machine and how loaded it was."""
    return ("Produced by `%s` on %s, ptserve `%s`; %s rounds, %s ms windows; machine: %s CPUs "
            "(%s), load average before %s, after %s." % (
                script, meta["date"], meta["commit"], meta["rounds"], meta["interval_ms"],
                meta["cpus"], meta["cpu_model"], meta["load_before"], meta.get("load_after")))


def add_meta(path, **kv):
    with open(path, "a") as f:
        f.writelines("%s=%s\n" % i for i in kv.items())


def read_meta(path):
    with open(path) as f:
        return dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def median(rows, field):
    vals = [float(r[field]) for r in rows if r.get(field) not in ("", None)]
    return statistics.median(vals) if vals else float("nan")


def write_csv(path, rows, columns=None):
    columns = columns or list(rows[0])
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def table(columns, rows, left=(0,)):
    """A markdown table: columns are (title, cell) pairs, cell a function of
    a row giving its text; the columns whose indexes are in `left` align
    left, the rest (numbers) right."""
    out = ["| " + " | ".join(t for t, _ in columns) + " |",
           "|" + "|".join("---" if i in left else "---:" for i in range(len(columns))) + "|"]
    out += ["| " + " | ".join(cell(r) for _, cell in columns) + " |" for r in rows]
    return out


def write_md(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines))


def pyplot():
    """matplotlib's pyplot without a display, or None (no plot) when the
    venv lacks it."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("matplotlib is missing (scripts/setup.sh installs it); no plot", file=sys.stderr)
        return None
