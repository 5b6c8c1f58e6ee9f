"""bench/harness.py — what every benchmark scenario does, once: build
ptserve into a bench build dir, start and stop servers on free ports, write
the meta block, run ptperf in rounds whose order turns, and write the
markdown table, the CSV and the plot.

A scenario (bench/<name>/run.py) imports it and declares the rest: its
models, servers, loads and tables. Run scenarios with the project venv's
interpreter (.venv/bin/python), which has torch, numpy and matplotlib, or
through this file:

    .venv/bin/python bench/harness.py cpu-set      # what `make bench` runs
    .venv/bin/python bench/harness.py SCENARIO...  # e.g. triton aoti

(the GPU host runs `python3 bench/harness.py gpu` with its own python3,
which has CUDA torch; bench/gpu/run.py says what it needs). Scenarios:
cpu, cache, trace, ensemble, overload, triton, aoti (the CPU set, in that
order) and gpu. Each writes bench/<name>/results/ (BENCH_RESULTS moves it).
"""
import csv
import glob
import os
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from ports import free_port  # noqa: E402 (the tests' own: tests/ports.py)
PY = sys.executable


def log(msg):
    print("== [%ds] %s" % (time.monotonic() - _T0, msg), file=sys.stderr, flush=True)


_T0 = time.monotonic()


def env(name, default):
    """BENCH_<NAME> from the environment, as the type of the default."""
    return type(default)(os.environ.get("BENCH_" + name, default))


def jobs():
    """JOBS from the environment, else every core: the GPU host has 16, and
    its device time counts while the build runs."""
    return os.environ.get("JOBS", str(os.cpu_count() or 2))


def build(build_dir, targets, *cmake_args):
    """ptserve's tree built Release (no tests) into build_dir; returns it."""
    log("build (Release) in %s" % build_dir)
    subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                    "-DPTS_BUILD_TESTS=OFF", "-DPTS_PYTHON=" + PY, *cmake_args],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "--target", *targets,
                    "-j" + jobs()], check=True, stdout=subprocess.DEVNULL)
    return build_dir


def http_get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read()


class Server:
    """One ptserve (or tritonserver: the same flags) on free ports of
    127.0.0.1, ready (every path of `ready` answers 200) when constructed;
    a context manager that stops it. grpc=False turns gRPC off; metrics:
    False turns them off, True gives them a port, None passes no flag (the
    binary's default); prefix runs it under a command (taskset, prlimit:
    both exec it, so pid is the server's); env adds to its environment.
    Its log goes to log_path (appended)."""

    def __init__(self, binary, args, log_path, grpc=False, prefix=(), metrics=False, env=None,
                 ready=("/v2/health/ready",)):
        self.port, self.log_path = free_port(), log_path
        self.grpc_port = free_port() if grpc else None
        self.args = ["--http-port", str(self.port)]
        self.args += {False: ["--allow-metrics", "false"], None: [],
                      True: ["--metrics-port", str(free_port())]}[metrics]
        self.args += ["--grpc-port", str(self.grpc_port)] if grpc else ["--allow-grpc", "false"]
        self.args += [str(a) for a in args]
        name = os.path.basename(binary)
        log(" ".join([*prefix, name, *self.args]))
        with open(log_path, "a") as out:
            self.proc = subprocess.Popen([*prefix, binary, *self.args], stdout=out,
                                         stderr=subprocess.STDOUT,
                                         env=dict(os.environ, **(env or {})))
        self.pid = self.proc.pid
        for path in ready:
            for _ in range(1200):
                if self.proc.poll() is not None:
                    sys.exit("%s exited (%d); its log: %s" % (name, self.proc.returncode, log_path))
                try:
                    http_get(self.url(path))
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                self.stop()
                sys.exit("%s did not become ready; its log: %s" % (name, log_path))

    def answers(self, path="/v2/health/ready", timeout=2):
        try:
            with urllib.request.urlopen(self.url(path), timeout=timeout) as r:
                return r.status == 200
        except OSError:
            return False

    def version(self):
        import json
        return json.loads(http_get(self.url("/v2")))["version"]

    def answered(self, model):
        """Requests the model has answered so far (success + fail), from
        the statistics endpoint."""
        import json
        s = json.loads(http_get(self.url("/v2/models/%s/stats" % model)))
        s = s["model_stats"][0]["inference_stats"]
        return s["success"]["count"] + s["fail"]["count"]

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
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


def cpu_seconds(pid):
    """User + system CPU seconds of process pid so far (proc(5))."""
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def proc_status(pid, key):
    """A field of /proc/PID/status as a number (VmRSS in kB, Threads)."""
    with open("/proc/%d/status" % pid) as f:
        return next((int(l.split()[1]) for l in f if l.startswith(key + ":")), 0)


def rss_mb(pid):
    return proc_status(pid, "VmRSS") / 1024


def build_ref(ref, build_dir, targets, *cmake_args):
    """Like build(), of commit ref (a temporary git worktree), RelWithDebInfo;
    a build_dir that already has the targets is kept as it is."""
    if all(os.access(os.path.join(build_dir, t), os.X_OK) for t in targets):
        log("%s: the build in %s as it is" % (ref, build_dir))
        return build_dir
    src = subprocess.run(["mktemp", "-d", "/tmp/pts_bench_ref.XXXXXX"], capture_output=True,
                         text=True, check=True).stdout.strip()
    try:
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", src, ref], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log("build %s (RelWithDebInfo) in %s" % (ref, build_dir))
        subprocess.run(["cmake", "-S", src, "-B", build_dir, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DPTS_BUILD_TESTS=OFF", *cmake_args], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", build_dir, "--target", *targets,
                        "-j" + jobs()], check=True, stdout=subprocess.DEVNULL)
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", src],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return build_dir


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


def version_line(cmd):
    """The first line a program's --version writes, on stdout or stderr
    (perf_analyzer: stderr), or "missing"."""
    try:
        r = subprocess.run([cmd, "--version"], capture_output=True, text=True)
    except OSError:
        return "missing"
    return next((l.strip() for l in (r.stdout + r.stderr).split("\n") if l.strip()), "?")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def meta(path, **extra):
    """Writes the meta block (key=value lines): when, which tree, which
    machine and how loaded, and the scenario's own keys. Returns it."""
    # (results the scenarios write do not make the tree "+changes")
    dirty = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD", "--", ".",
                            ":(exclude)bench/*/results*"]).returncode
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


def reference_env():
    """(environment, note) for a CPU reference process, PyTorch itself: with
    jemalloc preloaded where the system has it, and ptserve's own jemalloc
    options (src/main.c's malloc_conf, unless MALLOC_CONF is set, which the
    server would read too). PyTorch's CPU performance tuning guide
    recommends jemalloc or tcmalloc for inference, and ptserve runs on
    jemalloc, so both sides allocate alike and a table compares the
    serving, not the allocators. The note says what was preloaded, for
    the meta block."""
    import ctypes.util
    env = dict(os.environ)
    lib = ctypes.util.find_library("jemalloc")
    if not lib:
        return env, "the system's malloc (no jemalloc found)"
    env["LD_PRELOAD"] = lib + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env.setdefault("MALLOC_CONF", "dirty_decay_ms:-1")
    return env, "%s preloaded, MALLOC_CONF=%s" % (lib, env["MALLOC_CONF"])


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


# The CPU set, in the order `make bench` runs it; gpu runs on the GPU host.
CPU_SET = ("cpu", "cache", "trace", "ensemble", "overload", "triton", "aoti")


def main(argv):
    """Runs each named scenario (bench/<name>/run.py) in this process, one
    after the other; cpu-set names the CPU set. Stops at the first failure."""
    import runpy
    import signal
    # A kill ends the scenario through its finally blocks: servers stop too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    names = [n for a in argv for n in (CPU_SET if a == "cpu-set" else (a,))]
    known = sorted(os.path.basename(os.path.dirname(p))
                   for p in glob.glob(os.path.join(ROOT, "bench", "*", "run.py")))
    if not names or any(n not in known for n in names):
        sys.exit("usage: bench/harness.py cpu-set | SCENARIO... (%s)" % ", ".join(known))
    for n in names:
        log("scenario %s" % n)
        for mod in ("run", "report", "gen_models", "attack"):  # each scenario its own
            sys.modules.pop(mod, None)
        path = os.path.join(ROOT, "bench", n, "run.py")
        sys.argv, sys.path[0] = [path], os.path.dirname(path)
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:  # sys.exit(0) ends the scenario, not the set
            if e.code not in (0, None):
                raise


if __name__ == "__main__":
    main(sys.argv[1:])
