"""tools/ptperf against a real ptserve and against scripted fake servers.

ptperf is built next to ptserve (same CMake build directory). Its counts are
checked against the server's own statistics (§1.11), over HTTP, gRPC
ModelInfer and gRPC ModelStreamInfer, and its error handling against fake
servers whose answers are written here by hand (HTTP with http.server, gRPC
with grpcio's generic handlers and protobuf bytes worked out from the field
numbers of protocol-facts §2). --shared-memory cuda runs on CPU-only hosts
through the build's stand-in CUDA runtime (tests/unit/ptperf/fake_cudart.c).
"""
import base64
import csv
import http.server
import json
import os
import struct
import subprocess
import threading
from concurrent import futures

import pytest
import requests

from conftest import need_module
from sched_util import identity_model


@pytest.fixture(scope="session")
def ptperf_bin(ptserve_bin):
    path = os.path.join(os.path.dirname(ptserve_bin), "ptperf")
    assert os.path.exists(path), "ptperf not found at %s (build the ptperf target)" % path
    return path


def run_ptperf(ptperf_bin, url, tmp_path, *args, env=None):
    out = tmp_path / "out.csv"
    proc = subprocess.run([ptperf_bin, "-u", url, "-f", str(out), "-q"] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))
    rows = []
    if out.exists():
        with open(out, newline="") as f:
            rows = list(csv.DictReader(f))
    return proc, rows


def inference_count(url, model):
    r = requests.get(url + "/v2/models/%s/stats" % model, timeout=5)
    if r.status_code != 200:
        return None
    return sum(s["inference_count"] for s in r.json()["model_stats"])


def test_sweep_counts_match_the_server(start_server, model_repo, ptperf_bin, tmp_path):
    server = start_server(model_repo("identity"))
    url = "127.0.0.1:%d" % server.port
    before = inference_count(server.url, "id_fp32")
    proc, rows = run_ptperf(ptperf_bin, url, tmp_path, "-m", "id_fp32", "--concurrency", "1,3",
                            "-p", "200", "-r", "4", "-b", "2")
    assert proc.returncode == 0, proc.stderr
    assert [int(r["concurrency"]) for r in rows] == [1, 3]
    for r in rows:
        assert r["model"] == "id_fp32"
        assert int(r["errors"]) == 0
        assert int(r["batch_size"]) == 2
        n = int(r["requests"])
        assert n > 0
        # Infer/s counts batch elements: 2 per request over the measured seconds.
        assert abs(float(r["infer_per_sec"]) - 2 * n / float(r["seconds"])) <= \
            0.01 * float(r["infer_per_sec"]) + 0.1
        assert float(r["p50_us"]) <= float(r["p90_us"]) <= float(r["p95_us"]) <= \
            float(r["p99_us"])
        assert 3 <= int(r["windows"]) <= 4
    assert "Concurrency" in proc.stdout and "id_fp32" in proc.stdout
    after = inference_count(server.url, "id_fp32")
    if before is not None:
        # The server saw at least every batch element ptperf counted (ptperf
        # also sent requests outside the reported windows).
        counted = sum(2 * int(r["requests"]) for r in rows)
        assert after - before >= counted
        assert all(r["server_request_us"] != "" for r in rows)
        # No dynamic batching: each execution is one request of 2 elements.
        assert all(float(r["server_avg_batch"]) == 2.0 for r in rows)


def test_shared_memory_mode(start_server, model_repo, ptperf_bin, tmp_path):
    """--shared-memory system (perf_analyzer's flag): every request names
    places in two regions ptperf registered, none fails, the server counts
    them, and the regions are gone afterwards. The server must allow client
    shared memory; without it ptperf stops with the server's answer."""
    server = start_server(model_repo("identity"), "--allow-client-shm=true")
    url = "127.0.0.1:%d" % server.port
    before = inference_count(server.url, "id_fp32")
    objects = {f for f in os.listdir("/dev/shm") if f.startswith("ptperf_")}
    proc, rows = run_ptperf(ptperf_bin, url, tmp_path, "-m", "id_fp32", "--shared-memory",
                            "system", "--concurrency", "2", "-p", "200", "-r", "3", "-s", "100")
    assert proc.returncode == 0, proc.stderr
    assert int(rows[0]["errors"]) == 0 and int(rows[0]["requests"]) > 0
    assert "system shared memory" in proc.stdout
    assert inference_count(server.url, "id_fp32") - before >= int(rows[0]["requests"])
    st = requests.get(server.url + "/v2/systemsharedmemory/status", timeout=5).json()
    assert st == []
    assert {f for f in os.listdir("/dev/shm") if f.startswith("ptperf_")} <= objects
    plain = start_server(model_repo("identity"))
    (tmp_path / "plain").mkdir()
    proc, rows = run_ptperf(ptperf_bin, "127.0.0.1:%d" % plain.port, tmp_path / "plain", "-m",
                            "id_fp32",
                            "--shared-memory", "system", "-p", "100")
    assert proc.returncode == 1
    assert "--allow-client-shm=true" in proc.stderr
    assert rows == []


def test_shared_memory_names_free_at_exit(start_server, ptperf_bin, tmp_path):
    """ptperf leaves requests in the server when its last window ends. A
    region those requests use stays registered, name and all, until they
    are answered, so ptperf waits for that before it exits: the server
    lists no region the moment it returns, and a second ptperf started at
    once registers the same names (the GPU bench's sweep after its warm
    pass found them taken on an H100). The model takes 50 ms a request
    and 8 are in flight: 400 ms of them still queued at exit."""
    identity_model(tmp_path / "repo", "slow", params={"execute_delay_ms": 50})
    server = start_server(tmp_path / "repo", "--allow-client-shm=true")
    url = "127.0.0.1:%d" % server.port
    for k in range(2):
        (tmp_path / str(k)).mkdir()
        proc, rows = run_ptperf(ptperf_bin, url, tmp_path / str(k), "-m", "slow",
                                "--shared-memory", "system", "--concurrency", "8", "-p", "300",
                                "-r", "3", "-s", "100")
        assert proc.returncode == 0, proc.stderr
        assert int(rows[0]["errors"]) == 0 and int(rows[0]["requests"]) > 0
        st = requests.get(server.url + "/v2/systemsharedmemory/status", timeout=5).json()
        assert st == []


def test_variable_dims_need_shape(start_server, model_repo, ptperf_bin, tmp_path):
    server = start_server(model_repo("identity"))
    url = "127.0.0.1:%d" % server.port
    proc, _ = run_ptperf(ptperf_bin, url, tmp_path, "-m", "dt_bytes", "-p", "100")
    assert proc.returncode == 1
    assert "--shape INPUT0" in proc.stderr
    proc, rows = run_ptperf(ptperf_bin, url, tmp_path, "-m", "dt_bytes", "--shape", "INPUT0:3",
                            "-p", "100", "-r", "3", "-s", "100")
    assert proc.returncode == 0, proc.stderr
    assert int(rows[0]["errors"]) == 0 and int(rows[0]["requests"]) > 0


def test_unknown_model_fails_cleanly(start_server, model_repo, ptperf_bin, tmp_path):
    server = start_server(model_repo("identity"))
    proc, rows = run_ptperf(ptperf_bin, "127.0.0.1:%d" % server.port, tmp_path, "-m", "nope")
    assert proc.returncode == 1
    assert "HTTP 404" in proc.stderr and "nope" in proc.stderr
    assert rows == []


class FakeServer(http.server.BaseHTTPRequestHandler):
    """Metadata and config of a one-input model; every inference answers 500;
    no statistics endpoint (404)."""
    protocol_version = "HTTP/1.1"
    infer_calls = 0

    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v2/models/fake":
            self.reply(200, {"name": "fake", "versions": ["1"], "platform": "x",
                             "inputs": [{"name": "X", "datatype": "INT32", "shape": [-1, 2]}],
                             "outputs": []})
        elif self.path == "/v2/models/fake/config":
            self.reply(200, {"name": "fake", "max_batch_size": 4})
        else:
            self.reply(404, {"error": "Not Found"})

    def do_POST(self):
        n = int(self.headers["Content-Length"])
        body = self.rfile.read(n)
        hl = int(self.headers["Inference-Header-Content-Length"])
        header = json.loads(body[:hl])
        # What ptperf must send (§1.7): [batch] + dims, binary, 4 bytes per INT32.
        ok = (header["inputs"][0]["shape"] == [1, 2] and
              header["inputs"][0]["parameters"]["binary_data_size"] == 8 and
              len(body) - hl == 8 and self.path == "/v2/models/fake/infer")
        FakeServer.infer_calls += 1
        self.reply(500, {"error": "fake failure" if ok else "unexpected request"})


def test_errors_are_counted_and_stats_absence_is_tolerated(ptperf_bin, tmp_path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        proc, rows = run_ptperf(ptperf_bin, "127.0.0.1:%d" % httpd.server_address[1], tmp_path,
                                "-m", "fake", "-p", "100", "-r", "3")
    finally:
        httpd.shutdown()
    assert proc.returncode == 2, proc.stderr
    assert "no server-side breakdown" in proc.stderr
    assert "HTTP 500" not in proc.stdout  # the table has counts, not messages
    r = rows[0]
    assert int(r["requests"]) == 0
    assert int(r["errors"]) > 0
    assert float(r["infer_per_sec"]) == 0.0
    assert r["server_request_us"] == ""
    assert FakeServer.infer_calls >= int(r["errors"])


def test_first_error_is_shown(ptperf_bin, tmp_path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        proc = subprocess.run([ptperf_bin, "-u", "127.0.0.1:%d" % httpd.server_address[1],
                               "-m", "fake", "-p", "100", "-r", "3"],
                              capture_output=True, text=True, timeout=60)
    finally:
        httpd.shutdown()
    assert proc.returncode == 2
    assert "HTTP 500" in proc.stderr and "fake failure" in proc.stderr


# ------------------------------------------------------ CUDA shared memory

@pytest.fixture
def fake_cudart(ptperf_bin, tmp_path):
    """The build's stand-in for libcudart.so (tests/unit/ptperf/fake_cudart.c)
    and the environment that makes ptperf use it, with its call log."""
    lib = os.path.join(os.path.dirname(ptperf_bin), "libfake_cudart.so")
    assert os.path.exists(lib), "the build makes %s (CMake target fake_cudart)" % lib
    log = tmp_path / "cudart.log"
    return {"PTPERF_CUDART": lib, "FAKE_CUDART_LOG": str(log)}, log


def cudart_calls(log):
    """The fake runtime's log: {pointer: bytes} still allocated, and the
    copies as (pointer, bytes)."""
    live, copies = {}, []
    for line in log.read_text().splitlines() if log.exists() else []:
        f = line.split()
        if f[0] == "malloc":
            live[f[1]] = int(f[2])
        elif f[0] == "free":
            del live[f[1]]
        elif f[0] == "memcpy":
            copies.append((f[1], int(f[2])))
    return live, copies


def test_shared_memory_cuda_needs_the_runtime(start_server, model_repo, ptperf_bin, tmp_path):
    """--shared-memory cuda loads the CUDA runtime at run time: when it is
    not there ptperf stops before any load, naming what it tried, and
    leaves no region registered."""
    server = start_server(model_repo("identity"), "--allow-client-shm=true")
    missing = str(tmp_path / "no" / "libcudart.so.12")
    proc, rows = run_ptperf(ptperf_bin, "127.0.0.1:%d" % server.port, tmp_path, "-m", "id_fp32",
                            "--shared-memory", "cuda", "-p", "100",
                            env={"PTPERF_CUDART": missing})
    assert proc.returncode == 1
    assert "can not load the CUDA runtime PTPERF_CUDART=%s" % missing in proc.stderr
    assert rows == []
    assert requests.get(server.url + "/v2/cudasharedmemory/status", timeout=5).json() == []
    for args, says in [(["--cuda-device", "1"], "--cuda-device needs --shared-memory cuda"),
                       (["--shared-memory", "cuda", "-i", "grpc"],
                        "--shared-memory cuda is HTTP only"),
                       (["--shared-memory", "gpu"], "expected none, system or cuda")]:
        proc, _ = run_ptperf(ptperf_bin, "127.0.0.1:1", tmp_path, "-m", "x", *args)
        assert proc.returncode == 1 and says in proc.stderr, (args, proc.stderr)


class CudaShmFakeServer(FakeServer):
    """FakeServer's model, with the CUDA shared-memory endpoints: it records
    each registration body and unregistration, and answers every inference
    (recorded too) with 200."""
    calls = []

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        CudaShmFakeServer.calls.append((self.path, json.loads(body) if body else None))
        self.reply(200, {"model_name": "fake", "outputs": []}
                   if self.path.endswith("/infer") else {})


def test_shared_memory_cuda_through_a_fake_runtime(ptperf_bin, tmp_path, fake_cudart):
    """The whole --shared-memory cuda path, with the fake runtime: two device
    allocations on --cuda-device, the inputs copied in once, each registered
    with Triton's body (its 64-byte IPC handle in base64), requests naming
    places in them as the system mode does, and at the end both unregistered
    and then freed."""
    env, log = fake_cudart
    env["FAKE_CUDART_DEVICES"] = "2"
    CudaShmFakeServer.calls = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CudaShmFakeServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        proc, rows = run_ptperf(ptperf_bin, "127.0.0.1:%d" % httpd.server_address[1], tmp_path,
                                "-m", "fake", "--shared-memory", "cuda", "--cuda-device", "1",
                                "--output-shared-memory-size", "64", "--concurrency", "2",
                                "-p", "100", "-r", "3", "-s", "100", env=env)
    finally:
        httpd.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert "CUDA shared memory" in proc.stdout
    assert int(rows[0]["errors"]) == 0 and int(rows[0]["requests"]) > 0
    calls = CudaShmFakeServer.calls
    paths = [p for p, _ in calls if "/infer" not in p]
    assert paths == ["/v2/cudasharedmemory/region/ptperf_in/register",
                     "/v2/cudasharedmemory/region/ptperf_out/register",
                     "/v2/cudasharedmemory/region/ptperf_in/unregister",
                     "/v2/cudasharedmemory/region/ptperf_out/unregister"]
    # 16 request slots of one INT32 [1, 2] input; one 64-byte output region.
    regs = {p.split("/")[4]: b for p, b in calls if p.endswith("/register")}
    sizes = {"ptperf_in": 16 * 8, "ptperf_out": 64}
    mallocs = {}
    for line in log.read_text().splitlines():
        if line.startswith("malloc"):
            mallocs[int(line.split()[1], 16)] = int(line.split()[2])
    for name, body in regs.items():
        assert set(body) == {"raw_handle", "device_id", "byte_size"}
        assert body["device_id"] == 1 and body["byte_size"] == sizes[name]
        handle = base64.b64decode(body["raw_handle"]["b64"], validate=True)
        assert len(handle) == 64 and handle[8:] == b"\xab" * 56
        # The fake's handle holds the allocation's address: it is this size.
        assert mallocs[struct.unpack("<Q", handle[:8])[0]] == sizes[name]
    live, copies = cudart_calls(log)
    assert live == {}
    assert [n for _, n in copies] == [16 * 8]
    infers = [b for p, b in calls if p == "/v2/models/fake/infer"]
    assert infers
    for b in infers:
        p = b["inputs"][0]["parameters"]
        assert p["shared_memory_region"] == "ptperf_in" and p["shared_memory_byte_size"] == 8
        assert p["shared_memory_offset"] % 8 == 0 and p["shared_memory_offset"] < 16 * 8
        assert "data" not in b["inputs"][0]


def test_shared_memory_cuda_register_refused(start_server, model_repo, ptperf_bin, tmp_path,
                                             fake_cudart):
    """Against ptserve, the fake runtime's handle is refused (a build without
    CUDA says so; a CUDA build can not open it) after the server parsed the
    body: ptperf stops with the server's answer and frees what it made."""
    env, log = fake_cudart
    server = start_server(model_repo("identity"), "--allow-client-shm=true")
    proc, rows = run_ptperf(ptperf_bin, "127.0.0.1:%d" % server.port, tmp_path, "-m", "id_fp32",
                            "--shared-memory", "cuda", "-p", "100", env=env)
    assert proc.returncode == 1
    assert "POST /v2/cudasharedmemory/region/ptperf_in/register: HTTP 400" in proc.stderr
    assert "failed to register CUDA shared memory region 'ptperf_in'" in proc.stderr
    assert " must be " not in proc.stderr  # the body itself was understood
    assert rows == []
    live, copies = cudart_calls(log)
    assert live == {} and len(copies) == 1
    assert requests.get(server.url + "/v2/cudasharedmemory/status", timeout=5).json() == []


# ---------------------------------------------------------------- gRPC

GRPC_MODES = {"grpc": ["-i", "grpc"], "grpc_stream": ["-i", "grpc", "--streaming"]}


@pytest.mark.parametrize("mode", sorted(GRPC_MODES))
def test_grpc_counts_match_the_server(start_server, model_repo, ptperf_bin, tmp_path, mode):
    server = start_server(model_repo("identity"))
    before = inference_count(server.url, "id_fp32")
    proc, rows = run_ptperf(ptperf_bin, "127.0.0.1:%d" % server.port, tmp_path,
                            *GRPC_MODES[mode], "--grpc-url", server.grpc_target,
                            "-m", "id_fp32", "--concurrency", "1,3", "-p", "200", "-r", "4",
                            "-b", "2")
    assert proc.returncode == 0, proc.stderr
    assert "grpc" in proc.stderr and server.grpc_target in proc.stderr
    assert [int(r["concurrency"]) for r in rows] == [1, 3]
    for r in rows:
        assert r["protocol"] == mode
        assert int(r["errors"]) == 0
        n = int(r["requests"])
        assert n > 0
        assert abs(float(r["infer_per_sec"]) - 2 * n / float(r["seconds"])) <= \
            0.01 * float(r["infer_per_sec"]) + 0.1
        # The breakdown still comes from the HTTP statistics endpoint, which
        # counts gRPC requests too (statistics live in the core).
        assert r["server_request_us"] != ""
        assert float(r["server_avg_batch"]) == 2.0
    after = inference_count(server.url, "id_fp32")
    assert after - before >= sum(2 * int(r["requests"]) for r in rows)


def test_grpc_load_goes_over_grpc(start_server, model_repo, ptperf_bin, tmp_path):
    """With gRPC off, the HTTP side still answers (metadata, stats) but the
    load can not connect: so the load really is gRPC."""
    server = start_server(model_repo("identity"), "--allow-grpc", "false")
    before = inference_count(server.url, "id_fp32")
    dead = "127.0.0.1:%d" % server.grpc_port
    proc, rows = run_ptperf(ptperf_bin, "127.0.0.1:%d" % server.port, tmp_path, "-i", "grpc",
                            "--grpc-url", dead, "-m", "id_fp32", "-p", "100")
    assert proc.returncode == 1
    assert "can not connect to the gRPC server at %s" % dead in proc.stderr
    assert rows == []
    assert inference_count(server.url, "id_fp32") == before


def established_to(pid, port):
    """TCP connections of process pid established to `port` (Linux /proc:
    the socket inodes among its descriptors, looked up in /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                # remote address "HEX:PORT", state 01 = ESTABLISHED, inode
                if (int(cols[2].split(":")[1], 16) == port and cols[3] == "01" and
                        cols[9] in inodes):
                    n += 1
    return n


def load_shape_while_running(cmd, port):
    """Runs ptperf (cmd) to its end; while it measures, samples its thread
    count and its established connections to `port`. Returns the process
    and the largest of each seen."""
    import time
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    threads = conns = 0
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            threads = max(threads, len(os.listdir("/proc/%d/task" % proc.pid)))
            conns = max(conns, established_to(proc.pid, port))
        except OSError:  # it ended between poll() and here
            break
        time.sleep(0.02)
    out, err = proc.communicate(timeout=60)
    proc.stdout_text, proc.stderr_text = out, err
    return proc, threads, conns


@pytest.mark.parametrize("threads,concurrency,want_load_threads", [(1, 7, 1), (3, 7, 3),
                                                                    (4, 2, 2)])
def test_threads_split_the_http_load(start_server, model_repo, ptperf_bin, tmp_path, threads,
                                     concurrency, want_load_threads):
    """--threads N: N load threads (no more than the requests in flight)
    beside the main one, each on connections of its own; every request is
    counted once, as the server counts them."""
    server = start_server(model_repo("identity"))
    before = inference_count(server.url, "id_fp32")
    out = tmp_path / "t.csv"
    proc, seen_threads, seen_conns = load_shape_while_running(
        [ptperf_bin, "-u", "127.0.0.1:%d" % server.port, "-m", "id_fp32", "-q", "-f", str(out),
         "--threads", str(threads), "--concurrency", str(concurrency), "-p", "300", "-r", "4",
         "-s", "100"], server.port)
    assert proc.returncode == 0, proc.stderr_text
    # The main thread and the load threads: HTTP starts no others.
    assert seen_threads == 1 + want_load_threads
    # The metadata and statistics GETs use short connections of their own,
    # so the load's are at least as many as the requests in flight.
    assert seen_conns >= concurrency
    with open(out, newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert int(row["errors"]) == 0 and int(row["requests"]) > 0
    assert inference_count(server.url, "id_fp32") - before >= int(row["requests"])


@pytest.mark.parametrize("mode", sorted(GRPC_MODES))
def test_threads_deal_the_grpc_channels(start_server, model_repo, ptperf_bin, tmp_path, mode):
    """gRPC with --threads: each thread has channels of its own, at least
    one, the requested ones dealt among them."""
    server = start_server(model_repo("identity"))
    for threads, channels, want in ((3, 1, 3), (2, 5, 5), (1, 2, 2)):
        before = inference_count(server.url, "id_fp32")
        out = tmp_path / ("t%d_%d.csv" % (threads, channels))
        proc, _, seen_conns = load_shape_while_running(
            [ptperf_bin, "-u", "127.0.0.1:%d" % server.port, *GRPC_MODES[mode], "--grpc-url",
             server.grpc_target, "-m", "id_fp32", "-q", "-f", str(out), "--threads",
             str(threads), "--grpc-channels", str(channels), "--concurrency", "6", "-p", "300",
             "-r", "4", "-s", "100"], server.grpc_port)
        assert proc.returncode == 0, proc.stderr_text
        assert seen_conns == want, (threads, channels)
        with open(out, newline="") as f:
            (row,) = list(csv.DictReader(f))
        assert int(row["errors"]) == 0 and int(row["requests"]) > 0
        assert inference_count(server.url, "id_fp32") - before >= int(row["requests"])


def test_threads_must_be_positive(ptperf_bin, tmp_path):
    for bad in ("0", "65", "x"):
        proc, _ = run_ptperf(ptperf_bin, "127.0.0.1:1", tmp_path, "-m", "x", "--threads", bad)
        assert proc.returncode == 1
        assert "--threads '%s': expected 1..64" % bad in proc.stderr


def test_streaming_needs_grpc(ptperf_bin, tmp_path):
    proc, _ = run_ptperf(ptperf_bin, "127.0.0.1:1", tmp_path, "-m", "x", "--streaming")
    assert proc.returncode == 1
    assert "--streaming needs --protocol grpc" in proc.stderr
    proc, _ = run_ptperf(ptperf_bin, "127.0.0.1:1", tmp_path, "-m", "x", "-i", "soap")
    assert proc.returncode == 1
    assert "expected http or grpc" in proc.stderr


def pb_len(field, payload):
    """A length-delimited protobuf field (wire type 2), length < 128."""
    assert len(payload) < 128
    return bytes([field << 3 | 2, len(payload)]) + payload


# What ptperf must send for model "fake" (one INT32 input X of shape [-1, 2],
# batch 1): ModelInferRequest model_name (1), inputs (5) with name (1),
# datatype (2) and packed shape (3), then raw_input_contents (7) of 8 bytes.
FAKE_REQUEST_HEAD = (pb_len(1, b"fake") +
                     pb_len(5, pb_len(1, b"X") + pb_len(2, b"INT32") + pb_len(3, b"\x01\x02")) +
                     bytes([7 << 3 | 2, 8]))
# ModelInferResponse: model_name, one output (5) named Y, its raw bytes (6).
FAKE_RESPONSE = pb_len(1, b"fake") + pb_len(5, pb_len(1, b"Y")) + pb_len(6, b"\x00" * 8)


class FakeGrpc:
    """ModelInfer: every other call fails with INVALID_ARGUMENT.
    ModelStreamInfer: every other request gets an in-band error_message."""

    def __init__(self):
        import grpc
        self.grpc = grpc
        self.lock = threading.Lock()
        self.ok = self.failed = self.bad = self.streams = 0

    def well_formed(self, req):
        ok = (len(req) == len(FAKE_REQUEST_HEAD) + 8 and req.startswith(FAKE_REQUEST_HEAD) and
              all(0 <= v <= 99 for v in struct.unpack("<2i", req[-8:])))
        if not ok:
            with self.lock:
                self.bad += 1
        return ok

    def turn(self):
        with self.lock:
            fail = (self.ok + self.failed) % 2 == 1
            if fail:
                self.failed += 1
            else:
                self.ok += 1
        return fail

    def infer(self, req, context):
        if not self.well_formed(req):
            context.abort(self.grpc.StatusCode.INTERNAL, "unexpected request")
        if self.turn():
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT, "fake failure")
        return FAKE_RESPONSE

    def stream(self, it, context):
        with self.lock:
            self.streams += 1
        for req in it:
            if not self.well_formed(req):
                yield pb_len(1, b"unexpected request")
            elif self.turn():
                yield pb_len(1, b"fake stream failure") + pb_len(2, b"")
            else:
                yield pb_len(2, FAKE_RESPONSE)

    def serve(self):
        grpc = self.grpc
        handler = grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {
            "ModelInfer": grpc.unary_unary_rpc_method_handler(self.infer),
            "ModelStreamInfer": grpc.stream_stream_rpc_method_handler(self.stream),
        })
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        return server, port


@pytest.mark.parametrize("mode", sorted(GRPC_MODES))
def test_grpc_errors_are_counted(ptperf_bin, tmp_path, mode):
    need_module("grpc")
    fake = FakeGrpc()
    gserver, gport = fake.serve()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    out = tmp_path / "out.csv"
    try:
        proc = subprocess.run(
            [ptperf_bin, "-u", "127.0.0.1:%d" % httpd.server_address[1], "-f", str(out),
             "--grpc-url", "127.0.0.1:%d" % gport, "-m", "fake", "-p", "200", "-r", "3",
             "--concurrency", "1,3"] + GRPC_MODES[mode],
            capture_output=True, text=True, timeout=120)
    finally:
        httpd.shutdown()
        gserver.stop(None)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert proc.returncode == 2, proc.stderr
    assert fake.bad == 0
    if mode == "grpc":
        assert "INVALID_ARGUMENT" in proc.stderr and "fake failure" in proc.stderr
    else:
        assert "error_message: fake stream failure" in proc.stderr
        # One stream per request in flight, kept open across the errors: 1,
        # then 3.
        assert fake.streams == 4
    assert [r["protocol"] for r in rows] == [mode, mode]
    for r in rows:
        n, e = int(r["requests"]), int(r["errors"])
        # Every other answer was a failure (one-request slack per slot at the
        # edges of the measured windows).
        assert n > 0 and abs(n - e) <= int(r["concurrency"]) + 1, r
    assert fake.ok >= sum(int(r["requests"]) for r in rows)
    assert fake.failed >= sum(int(r["errors"]) for r in rows)
