"""End-to-end test harness: starts the real ptserve binary on free ports.

Fixtures and helpers shared by every tests/e2e/test_*.py:

  start_server(repo, *args, env=None, expect_ready=True) -> Server
      Starts `ptserve --model-repository <repo> --http-port <free>
      --metrics-port <free> --grpc-port <free> *args`,
      waits until /v2/health/live answers (and /v2/health/ready when
      expect_ready), and returns a Server with .url ("http://127.0.0.1:N"),
      .metrics_url ("http://127.0.0.1:M/metrics"), .grpc_port and .grpc_target
      ("127.0.0.1:G", for grpc.insecure_channel),
      .port, .proc, .log() (everything the server printed so far) and .stop().
      Servers still running when a test ends are stopped by the fixture.

  launch_server(bin, repo, log_path, *args, metrics_port=, grpc_port=, ...):
      the same start-up for a server the caller owns (module-wide servers).
  free_port(): a port of 127.0.0.1 free now (tests/ports.py, shared with
      tests/deploy and bench/harness.py).
  assert_clean_exit(server): alive, SIGTERM -> exit 0, no sanitizer report.
  thread_stacks(pid): every thread's stack of a live process (gdb), for the
      report of a test that finds a client or the server stuck;
      one_line_per_thread(stacks) shortens it for a failure message.
  module_server(launch, log_dir): a module-scoped `server` fixture built on
      those two.
  bf16_bytes(values), bytes_encode(items): BF16 and BYTES wire encodings.

  ptserve_bin: path of the binary, from $PTSERVE_BIN or build/ptserve.
  model_repo(name): path of a committed test repository tests/e2e/repos/<name>.
  torch_models: path of a repository of generated TorchScript models
      (tests/models/gen_models.py, generated once per session into
      tests/e2e/.cache/torch_models with $PTS_MODELS_PYTHON, default the
      interpreter running pytest: the project venv).

  perf_analyzer_path(): NVIDIA's perf_analyzer ($PERF_ANALYZER, else the
      venv's), or missing_tool().
  perf_analyzer_data(rows, compute, out_dir): perf_analyzer's --input-data
      files for the given input rows: plain, checked (validation_data from
      compute) and wrong (one expected value off by one).
  perf_analyzer_count(label, text), perf_analyzer_counted(run, concurrency,
      minimum): a count in its report; the requests a clean run counted,
      once the server's read-back count is checked against them.

  need_module(name), missing_tool(what): for tests that need a tool beyond
      the harness (grpcio and a stub generator, tritonclient, perf_analyzer).
      scripts/setup.sh installs every one, so a missing one FAILS the test;
      a host that can not install them (the air-gapped GPU host:
      tests/gpu/run.sh sets PTS_SKIP_MISSING_TOOLS=1) skips those tests
      instead, each with the reason.
"""
import hashlib
import importlib
import inspect
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from ports import free_port  # noqa: E402,F401 (the tests import it from here)


class Server:
    def __init__(self, proc, port, log_path, metrics_port=None, grpc_port=None):
        self.proc = proc
        self.port = port
        self.url = "http://127.0.0.1:%d" % port
        self.log_path = log_path
        self.metrics_port = metrics_port
        self.metrics_url = "http://127.0.0.1:%d/metrics" % metrics_port if metrics_port else None
        self.grpc_port = grpc_port
        self.grpc_target = "127.0.0.1:%d" % grpc_port if grpc_port else None

    def log(self):
        with open(self.log_path, "r", errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=None, timeout=30):
        """Stops the server (SIGTERM by default) and returns its exit code."""
        if self.proc.poll() is None:
            if sig is None:
                self.proc.terminate()
            else:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("server did not stop within %ss\n%s" % (timeout, self.log()))
        return self.proc.returncode


# Wire encodings shared by the HTTP and gRPC protocol tests (protocol-facts §5).

def bf16_bytes(values):
    """BF16 = the upper 16 bits of the little-endian float32 (truncation)."""
    f32 = np.array(values, dtype="<f4").view(np.uint8).reshape(-1, 4)
    return f32[:, 2:4].tobytes()


def bytes_encode(items):
    """BYTES wire form: 4-byte little-endian length, then the raw bytes."""
    out = b""
    for it in items:
        raw = it.encode() if isinstance(it, str) else it
        out += struct.pack("<I", len(raw)) + raw
    return out


@pytest.fixture(scope="session")
def ptserve_bin():
    path = os.environ.get("PTSERVE_BIN", os.path.join(ROOT, "build", "ptserve"))
    assert os.path.exists(path), "ptserve binary not found at %s (build first)" % path
    return path


def launch_server(bin_path, repo, log_path, *args, metrics_port, grpc_port, grpc_address=None,
                  env=None, expect_ready=True, timeout=60, prefix=()):
    """Starts `ptserve --model-repository <repo> --http-port <free>
    --http-address 127.0.0.1 --metrics-port <metrics_port> --grpc-port
    <grpc_port> [--grpc-address <grpc_address>] *args` (port 0: the server
    picks one the test does not need to know), output to log_path, and waits
    until /v2/health/ready (or /v2/health/live when not expect_ready)
    answers 200. env entries are added to this process's environment;
    `prefix`, a command that execs the server (e.g. prlimit), comes first.
    Returns the Server; the caller stops it. A server that exits or does not
    answer in time is stopped and reported with its log.

    Ports come from free_port(), so another process on this shared machine
    may take one before ptserve binds it: when start-up fails on a port in
    use, the server is started again on fresh ports (the non-zero ones),
    twice at most."""
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    for attempt in range(3):
        port = free_port()
        cmd = [bin_path, "--model-repository", str(repo), "--http-port", str(port),
               "--http-address", "127.0.0.1", "--metrics-port", str(metrics_port),
               "--grpc-port", str(grpc_port)]
        if grpc_address is not None:
            cmd += ["--grpc-address", grpc_address]
        cmd = list(prefix) + cmd + [str(a) for a in args]
        with open(log_path, "w") as logf:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=full_env)
        server = Server(proc, port, str(log_path), metrics_port, grpc_port)
        try:
            wait_until_answering(server, expect_ready, timeout)
            return server
        except BaseException:
            server.stop()
            if attempt == 2 or not port_taken(server):
                raise
        metrics_port = free_port() if metrics_port else 0
        grpc_port = free_port() if grpc_port else 0


def logged_http_port(proc, log_path, timeout=60):
    """The port of a server started with --http-port 0, from its log
    ("Started HTTPService at <address>:<port>"), once HTTP has started. For
    servers a test starts by hand: port 0 cannot be taken by another
    process before the server binds it, as a free_port() can."""
    def started():
        with open(log_path, errors="replace") as f:
            log = f.read()
        if proc.poll() is not None:
            raise AssertionError("ptserve exited with %s:\n%s" % (proc.returncode, log))
        m = re.search(r"Started HTTPService at \S+:(\d+)", log)
        return m and int(m.group(1))
    return wait_for("HTTP to start", started, timeout=timeout)


def port_taken(server):
    """Whether a server that exited during start-up could not bind a port."""
    log = server.log().lower()
    return server.proc.returncode not in (None, 0) and (
        "address already in use" in log or "address in use" in log)


def read_http_response(sock_file):
    """(status, headers with lower-case names, body) of one HTTP/1.1
    response read from a socket's file, for tests that speak raw HTTP."""
    status = sock_file.readline()
    assert status.startswith(b"HTTP/1.1 "), status
    headers = {}
    while True:
        line = sock_file.readline()
        if line in (b"\r\n", b""):
            break
        k, v = line.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = sock_file.read(int(headers.get("content-length", "0")))
    return int(status.split()[1]), headers, body


def wait_for(what, predicate, timeout=30.0):
    """Polls predicate() until it returns something true and returns that;
    after `timeout` seconds fails naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def wait_until_answering(server, expect_ready, timeout):
    path = "/v2/health/ready" if expect_ready else "/v2/health/live"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if server.proc.poll() is not None:
            raise AssertionError("ptserve exited with %s during start-up:\n%s"
                                 % (server.proc.returncode, server.log()))
        try:
            if requests.get(server.url + path, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass  # not listening yet, or slow to answer on a busy machine
        time.sleep(0.05)
    raise AssertionError("ptserve did not answer %s within %ss:\n%s" % (path, timeout, server.log()))


# What ASan, LSan and UBSan print when they find something (the suites run
# under those builds too).
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def assert_no_sanitizer_report(text):
    for marker in SANITIZER_MARKERS:
        assert marker not in text, text


def run_cli(ptserve_bin, *args, timeout=30):
    """Runs ptserve to completion (a command line that stops the start,
    --help, ...): (exit code, stdout + stderr); fails on a sanitizer
    report."""
    p = subprocess.run([ptserve_bin] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    assert_no_sanitizer_report(out)
    return p.returncode, out


def assert_clean_exit(server):
    """The server must still be running, stop on SIGTERM with 0, and have
    logged no sanitizer report (ASan/LSan/UBSan builds run these tests)."""
    assert server.alive(), "ptserve died during the tests:\n" + server.log()
    rc = server.stop()
    log = server.log()
    assert_no_sanitizer_report(log)
    assert rc == 0, "exit code %s\n%s" % (rc, log)


def module_server(launch, log_dir, repo="identity"):
    """A module-scoped `server` fixture (assign it to `server` in the test
    module): launch(ptserve_bin, <tests/e2e/repos/repo>, <log>) once for the
    module, and assert_clean_exit when the module is done."""
    @pytest.fixture(scope="module")
    def server(ptserve_bin, model_repo, tmp_path_factory):
        log = tmp_path_factory.mktemp(log_dir) / "server.log"
        s = launch(ptserve_bin, model_repo(repo), log)
        yield s
        assert_clean_exit(s)
    return server


@pytest.fixture
def start_server(ptserve_bin, tmp_path):
    started = []

    def start(repo, *args, env=None, expect_ready=True, timeout=60):
        log_path = str(tmp_path / ("server-%d.log" % len(started)))
        server = launch_server(ptserve_bin, repo, log_path, *args,
                               metrics_port=free_port(), grpc_port=free_port(), env=env,
                               expect_ready=expect_ready, timeout=timeout)
        started.append(server)
        return server

    yield start
    for s in started:
        if s.alive():
            s.stop()


@pytest.fixture(scope="session")
def model_repo():
    def path(name):
        p = os.path.join(ROOT, "tests", "e2e", "repos", name)
        assert os.path.isdir(p), p
        return p
    return path


def thread_stacks(pid, timeout=60):
    """The stack of every thread of process `pid`, as gdb prints them
    (scripts/setup.sh installs gdb), or a line saying why there are none.
    For a hang's report: which side waits, and on what."""
    try:
        run = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                              "-ex", "thread apply all bt"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace", timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "no stacks of process %d: %r" % (pid, e)
    return run.stdout


def one_line_per_thread(stacks):
    """thread_stacks' text as one line per thread: its frames' function
    names, innermost first (the whole text when it holds no frames)."""
    lines, frames = [], []
    for ln in stacks.splitlines():
        if ln.startswith("Thread "):
            if frames:
                lines.append(" < ".join(frames))
            frames = []
            continue
        m = re.match(r"#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", ln)
        if m:
            frames.append(m.group(1))
    if frames:
        lines.append(" < ".join(frames))
    return "\n".join(lines) or stacks[-2000:]


def missing_tool(what):
    """Fails the current test (or, at import time, its module) because `what`
    is missing; skips instead under PTS_SKIP_MISSING_TOOLS=1. The message
    names the test file that needs it."""
    who = next((os.path.basename(f.filename) for f in inspect.stack()[1:]
                if not f.filename.endswith("conftest.py")), "?")
    if os.environ.get("PTS_SKIP_MISSING_TOOLS") == "1":
        pytest.skip("%s: %s is not available on this host (PTS_SKIP_MISSING_TOOLS=1)"
                    % (who, what), allow_module_level=True)
    pytest.fail("%s: %s is missing: scripts/setup.sh installs it" % (who, what), pytrace=False)


def perf_analyzer_path():
    """$PERF_ANALYZER, else the project venv's (scripts/setup.sh puts it
    there on Linux x86_64, the one platform NVIDIA builds it for;
    tests/gpu/run.sh sets $PERF_ANALYZER to the offline bundle's)."""
    venv = os.environ.get("PTS_VENV", os.path.join(ROOT, ".venv"))
    path = os.environ.get("PERF_ANALYZER", os.path.join(venv, "bin", "perf_analyzer"))
    if os.access(path, os.X_OK):
        return path
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        pytest.skip("perf_analyzer is installed on Linux x86_64 only (scripts/setup.sh)")
    missing_tool("perf_analyzer (%s)" % path)


def perf_analyzer_count(label, text):
    """The number after '<label>: ' on a line of perf_analyzer's report."""
    m = re.search(r"^\s*%s: (\d+)$" % re.escape(label), text, re.M)
    assert m, "no '%s' in perf_analyzer's output:\n%s" % (label, text)
    return int(m.group(1))


def perf_analyzer_counted(run, concurrency, minimum):
    """The requests a perf_analyzer run (a CompletedProcess, its output in
    stdout) counted, after asserting it ended cleanly: exit 0, no error
    line, at least `minimum` requests, and the server's successful-request
    count it read back within 5% of them. A request that ends while the
    statistics are read falls on one side of a window only (see
    test_perf_analyzer.py); a count read wrong does not come that close."""
    out = run.stdout
    assert run.returncode == 0, "%s\n%s" % (" ".join(map(str, run.args)), out)
    assert not [ln for ln in out.splitlines() if "error" in ln.lower()], out
    assert "Server:" in out, out
    client, server_part = out.split("Server:", 1)
    sent = perf_analyzer_count("Request count", client)
    assert sent >= minimum, out
    read_back = perf_analyzer_count("Successful request count", server_part)
    assert abs(read_back - sent) <= sent // 20 + 2 * concurrency, out
    return sent


def perf_analyzer_data(rows, compute, out_dir):
    """Writes perf_analyzer --input-data files into out_dir for `rows`, a
    list of {input name: 1-D numpy array}: 'plain' (the inputs), 'checked'
    (with validation_data, compute(row) -> {output name: array}, which
    perf_analyzer compares byte for byte with every answer) and 'wrong'
    (the first output of the middle row off by one in its last value).
    Returns {kind: path}."""
    inputs = [{k: v.tolist() for k, v in row.items()} for row in rows]
    expected = [{k: v.tolist() for k, v in compute(row).items()} for row in rows]
    wrong = json.loads(json.dumps(expected))
    first = next(iter(wrong[len(rows) // 2]))
    wrong[len(rows) // 2][first][-1] += 1.0
    files = {}
    for kind, body in (("plain", {"data": inputs}),
                       ("checked", {"data": inputs, "validation_data": expected}),
                       ("wrong", {"data": inputs, "validation_data": wrong})):
        files[kind] = os.path.join(str(out_dir), kind + ".json")
        with open(files[kind], "w") as f:
            json.dump(body, f)
    return files


def rss_kb(pid):
    """A process's resident memory (VmRSS), in KiB; 0 once it is gone."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


EXAMPLES = os.path.join(ROOT, "examples", "models")
# What examples/gen_models.py, examples/export_aoti.py and `make run` write
# into an example's version folder: never part of what a test copies.
GENERATED_MODEL_FILES = ("model.pt", "model.pt2")


def copy_example(name, dst):
    """examples/models/<name> as committed (config.pbtxt, labels, version
    folders), into `dst`: without the model files `make run` may have
    written there, which a test writes itself, for its own torch."""
    shutil.copytree(os.path.join(EXAMPLES, name), dst,
                    ignore=shutil.ignore_patterns(*GENERATED_MODEL_FILES))


def need_module(name):
    """import `name`, or missing_tool(). tritonclient raises RuntimeError,
    not ImportError, when the extra a module needs (gevent, rapidjson,
    grpcio) is not installed: that is a missing tool too."""
    try:
        return importlib.import_module(name)
    except (ImportError, RuntimeError) as e:
        missing_tool("Python module %s (%s)" % (name, e))


def models_python():
    """The interpreter that writes TorchScript models: $PTS_MODELS_PYTHON
    (make sets the project venv's; a GPU host names its own), else the one
    running the tests (the venv's, whose torch ptserve links)."""
    return os.environ.get("PTS_MODELS_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def torch_models():
    """tests/models/gen_models.py's models, kept between runs (a minute of
    work) under a key of what makes them: the generator's text and the
    version of the torch that writes them. Nothing else of the checkout
    decides whether they are reused; a run that dies half-way leaves no
    key, so the next one writes them again."""
    out = os.path.join(ROOT, "tests", "e2e", ".cache", "torch_models")
    stamp = os.path.join(out, ".generated")
    gen = os.path.join(ROOT, "tests", "models", "gen_models.py")
    torch_version = subprocess.run(
        [models_python(), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        check=True, capture_output=True, text=True).stdout.strip()
    with open(gen, "rb") as f:
        key = hashlib.sha256(f.read() + torch_version.encode()).hexdigest()
    try:
        with open(stamp) as f:
            if f.read() == key:
                return out
    except FileNotFoundError:
        pass
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([models_python(), gen, out], check=True)
    with open(stamp, "w") as f:
        f.write(key)
    return out
