"""NVIDIA's perf_analyzer (2.51.0, scripts/setup.sh) against ptserve, briefly:
HTTP, gRPC and gRPC streaming at concurrency 1 and 2; then, on add_sub, its
answers checked by perf_analyzer against torch's (--input-data with
validation_data; a wrong expected value must fail it), and its inputs and
outputs in system shared memory (--shared-memory system).

Each run measures windows of REQUESTS completed requests (count_windows)
and settles after three whose throughput and latency are within 11x of
each other (--stability-percentage 1000), so a busy machine can not make it
fail; it must end with exit status 0, no error and no warning but the four
about GPU metrics a server without GPUs does not export (tritonserver on a
CPU host gives the same). perf_analyzer reads the server's statistics
before and after each window (its "Server:" section): the counts it read
back must match the requests it counted, and the server's own statistics
must show every request successful. Times are printed by perf_analyzer and
never asserted.

Not --request-count: perf_analyzer 2.51.0 starts its workers, which send
at once, and only then empties its list of completed requests before it
begins to count; with --request-count the workers stop after that many
requests, so a request answered in between is never counted and the count
is never reached. It then waits forever (its main thread sleeps in
InferenceProfiler::Measure, the server has answered every request). The
faster the server and the busier the machine, the likelier: it hung here
three times. With perf_analyzer's main thread held for a second on entering
InferenceProfiler::ProfileHelper (gdb, non-stop mode; the workers run on)
it hung in 3 of 3 HTTP runs, 3 of 3 gRPC runs and 2 of 5 streaming runs at
concurrency 2, and count_windows, which does not cap what the workers
send, finished in 4 of 4.
"""
import csv
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import requests

from conftest import (assert_clean_exit, free_port, launch_server, missing_tool, need_module,
                      one_line_per_thread, perf_analyzer_count, perf_analyzer_counted,
                      perf_analyzer_data, perf_analyzer_path, thread_stacks)

TIMEOUT = 30
REQUESTS = 200
# How every run here measures (the module's docstring says why not
# --request-count).
MEASURE = ["--measurement-mode", "count_windows", "--measurement-request-count", str(REQUESTS),
           "--stability-percentage", "1000"]
MODEL = "mlp"
CHECKED = "add_sub_fp32"  # a + b, a - b on [4] FP32: exact, so perf_analyzer may compare bytes
# The metric families of GPUs (DCGM); a CPU-only server has none.
GPU_METRIC_WARNINGS = {"WARNING: Unable to parse '%s' metric." % m for m in (
    "nv_gpu_utilization", "nv_gpu_power_usage", "nv_gpu_memory_used_bytes",
    "nv_gpu_memory_total_bytes")}


@pytest.fixture(scope="module")
def perf_analyzer():
    return perf_analyzer_path()


@pytest.fixture(scope="module")
def server(ptserve_bin, torch_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("perf_analyzer")
    repo = root / "repo"
    repo.mkdir()
    for name in (MODEL, CHECKED):
        os.symlink(os.path.join(torch_models, name), str(repo / name))
    s = launch_server(ptserve_bin, repo, root / "server.log", "--allow-client-shm=true",
                      metrics_port=free_port(), grpc_port=free_port(), grpc_address="127.0.0.1")
    yield s
    assert_clean_exit(s)


def server_stats(server, model=MODEL):
    r = requests.get(server.url + "/v2/models/%s/stats" % model, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["model_stats"][0]


# protocol -> perf_analyzer arguments, and extra runs' arguments per concurrency
PROTOCOLS = {
    "http": lambda s: ["-i", "http", "-u", s.url[len("http://"):]],
    "grpc": lambda s: ["-i", "grpc", "-u", s.grpc_target],
    "grpc_stream": lambda s: ["-i", "grpc", "--streaming", "-u", s.grpc_target],
}
# Beyond the defaults, one run of each protocol exercises more of the server:
# metrics collection (/metrics), JSON tensors over HTTP, gRPC compression.
EXTRA = {
    ("http", 1): lambda s: ["--collect-metrics", "--verbose-csv", "--metrics-interval", "100",
                            "--metrics-url", s.metrics_url[len("http://"):]],
    ("http", 2): lambda s: ["--input-tensor-format", "json", "--output-tensor-format", "json"],
    ("grpc", 2): lambda s: ["--grpc-compression-algorithm", "gzip"],
    ("grpc_stream", 2): lambda s: ["--grpc-compression-algorithm", "deflate"],
}


def socket_queues(server):
    """`ss` on the server's ports: whether bytes wait in a socket's queue
    (sent and not read, or not acknowledged) when a client is stuck."""
    ports = "( sport = :%d or dport = :%d or sport = :%d or dport = :%d )" % (
        server.grpc_port, server.grpc_port, server.port, server.port)
    try:
        run = subprocess.run(["ss", "-tni", ports], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "no socket list: %r" % e
    return run.stdout


def run_perf_analyzer(server, cmd, model=MODEL):
    """Runs perf_analyzer; when it does not end in time (it has no deadline
    of its own), fails with what the server says about the model at that
    moment — queued and answered requests — and where each thread of both
    processes waits (gdb; the whole stacks printed, one line per thread in
    the message), so that a lost request can be told apart from a stuck
    client."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=120)
        return subprocess.CompletedProcess(cmd, proc.returncode, out)
    except subprocess.TimeoutExpired:
        pass
    try:
        stats = json.dumps(server_stats(server, model))
    except Exception as err:  # the report must not hide the timeout
        stats = "statistics unavailable: %r" % err
    client_stacks = thread_stacks(proc.pid)
    server_stacks = thread_stacks(server.proc.pid)
    sockets = socket_queues(server)
    proc.kill()
    out, _ = proc.communicate()
    print("perf_analyzer's threads:\n%s\nptserve's threads:\n%s" % (client_stacks, server_stacks))
    pytest.fail("perf_analyzer did not finish in 120 s: %s\nits output:\n%s\n"
                "the server's statistics of '%s' now: %s\n"
                "the server's TCP connections (bytes not yet read, not yet acknowledged):\n%s\n"
                "perf_analyzer's threads:\n%s\nptserve's threads:\n%s\n"
                "the end of the server's log:\n%s"
                % (" ".join(cmd), out, model, stats, sockets,
                   one_line_per_thread(client_stacks), one_line_per_thread(server_stacks),
                   server.log()[-3000:]))


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_perf_analyzer(perf_analyzer, server, tmp_path, protocol):
    before = server_stats(server)
    sent = 0
    for concurrency in (1, 2):
        report = tmp_path / ("%s_%d.csv" % (protocol, concurrency))
        cmd = [perf_analyzer, "-m", MODEL, "--concurrency-range", str(concurrency)] + MEASURE + \
            ["-f", str(report)] + PROTOCOLS[protocol](server)
        cmd += EXTRA.get((protocol, concurrency), lambda s: [])(server)
        run = run_perf_analyzer(server, cmd)
        out = run.stdout
        # Exit 0, no error, and what the client sent against the server's
        # successful-request count it read back. Per window, perf_analyzer
        # counts the requests that ended between two instants and reads the
        # server's statistics just after each: the requests that end while a
        # statistics call is on its way fall on one side only. Those are a
        # small part of a window of at least a second (under load here, 68
        # of 40,834 at most), so the counts agree within 5%; a count read
        # wrong (0, a field mixed up, a cumulative total) does not. The
        # inference count read back must agree the same way.
        requests_sent = perf_analyzer_counted(run, concurrency, REQUESTS)
        read_back = perf_analyzer_count("Inference count", out.split("Server:", 1)[1])
        assert abs(read_back - requests_sent) <= requests_sent // 20 + 2 * concurrency, out
        lines = [ln.strip() for ln in out.splitlines()]
        assert {ln for ln in lines if ln.startswith("WARNING")} <= GPU_METRIC_WARNINGS, out
        sent += requests_sent
        rows = list(csv.DictReader(open(report)))
        assert len(rows) == 1, rows
        assert int(rows[0]["Concurrency"]) == concurrency
        assert float(rows[0]["Inferences/Second"]) > 0, rows
    after = server_stats(server)
    ok = after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"]
    assert ok >= sent
    assert after["inference_stats"]["fail"]["count"] == before["inference_stats"]["fail"]["count"]


# gdb, non-stop mode: holds perf_analyzer's main thread on entering
# InferenceProfiler::ProfileHelper, as a busy machine may deschedule it
# there, while its workers run on; then notes its pid and lets it go.
HOLD = """
import gdb, time
class Hold(gdb.Breakpoint):
    def stop(self):
        open(%r, "w").write(str(gdb.selected_inferior().pid))
        time.sleep(%r)
        gdb.post_event(lambda: (gdb.execute("detach"), gdb.execute("quit")))
        return False
Hold("triton::perfanalyzer::InferenceProfiler::ProfileHelper")
"""


@pytest.mark.parametrize("protocol", ["grpc", "grpc_stream"])
def test_a_late_main_thread_does_not_hang_the_measurement(perf_analyzer, server, tmp_path,
                                                           protocol):
    """Issue 49's hang, provoked: at concurrency 1 (sync ModelInfer)
    with its main thread held a second where its workers have started and
    it has not yet emptied its list of completed requests, perf_analyzer
    must still end, measuring as the tests here do (MEASURE). With
    --request-count 200 instead, the e2e test's measure until 129f03b, it
    hangs every time on unary gRPC: the server has answered all 200, and
    the main thread sleeps in InferenceProfiler::Measure, waiting for a
    200th record it threw away (docs/reliability.md)."""
    gdb = shutil.which("gdb") or missing_tool("gdb")
    pid_file, hold = tmp_path / "pid", tmp_path / "hold.py"
    hold.write_text(HOLD % (str(pid_file), 1.0))
    with open(perf_analyzer, "rb") as f:  # the venv's is a shell wrapper
        launcher = ["/bin/sh"] if f.read(2) == b"#!" else []
    cmd = [gdb, "-batch", "-nx", "-ex", "set non-stop on", "-ex", "set breakpoint pending on",
           "-ex", "set disable-randomization off", "-ex", "source %s" % hold, "-ex", "run",
           "--args"] + launcher + [perf_analyzer, "-m", MODEL, "--concurrency-range", "1"] + \
        MEASURE + PROTOCOLS[protocol](server)
    before = server_stats(server)["inference_stats"]["success"]["count"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # gdb quits once it lets go; perf_analyzer keeps the pipe to its end
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        pid = int(pid_file.read_text()) if pid_file.exists() else None
        stacks = thread_stacks(pid) if pid else "perf_analyzer was never held"
        answered = server_stats(server)["inference_stats"]["success"]["count"] - before
        if pid:
            os.kill(pid, 9)
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail("perf_analyzer did not finish in 60 s, the server having answered %d "
                    "requests: %s\nits output:\n%s\nits threads:\n%s"
                    % (answered, " ".join(cmd), out, one_line_per_thread(stacks)))
    if not pid_file.exists() and "ptrace" in out:
        missing_tool("gdb with ptrace allowed (%s)" % out.strip().splitlines()[-1])
    assert pid_file.exists(), "gdb never held perf_analyzer's main thread:\n" + out
    # gdb's own lines are in brackets; what is left is perf_analyzer's report
    report = "\n".join(ln for ln in out.splitlines() if not ln.startswith("[")
                       and not ln.startswith("Breakpoint ") and "libthread_db" not in ln)
    sent = perf_analyzer_counted(subprocess.CompletedProcess(cmd, proc.returncode, report), 1,
                                 REQUESTS)
    assert server_stats(server)["inference_stats"]["success"]["count"] - before >= sent


@pytest.fixture(scope="module")
def add_sub_data(torch_models, tmp_path_factory):
    """--input-data files for CHECKED (conftest.perf_analyzer_data), the
    expected outputs from torch running the same model file."""
    torch = need_module("torch")
    model = torch.jit.load(os.path.join(torch_models, CHECKED, "1", "model.pt"))
    rs = np.random.RandomState(5)
    rows = [{"INPUT0": rs.randn(4).astype(np.float32), "INPUT1": rs.randn(4).astype(np.float32)}
            for _ in range(4)]

    def compute(row):
        with torch.inference_mode():
            s, d = model(*(torch.from_numpy(row[k])[None] for k in ("INPUT0", "INPUT1")))
        return {"OUTPUT0": s[0].numpy(), "OUTPUT1": d[0].numpy()}
    return perf_analyzer_data(rows, compute, tmp_path_factory.mktemp("perf_analyzer_data"))


def checked_run(perf_analyzer, server, protocol, *args):
    """perf_analyzer on CHECKED at concurrency 2: the requests it counted,
    once conftest.perf_analyzer_counted has found the run clean."""
    cmd = [perf_analyzer, "-m", CHECKED, "--concurrency-range", "2"] + MEASURE + \
        PROTOCOLS[protocol](server) + list(args)
    return perf_analyzer_counted(run_perf_analyzer(server, cmd, CHECKED), 2, REQUESTS)


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_answers_checked_by_perf_analyzer(perf_analyzer, server, add_sub_data, protocol):
    checked_run(perf_analyzer, server, protocol, "--input-data", add_sub_data["checked"])
    cmd = [perf_analyzer, "-m", CHECKED, "--input-data", add_sub_data["wrong"]] + \
        PROTOCOLS[protocol](server)
    run = run_perf_analyzer(server, cmd, CHECKED)
    assert run.returncode != 0, run.stdout
    assert "Output doesn't match expected output" in run.stdout, run.stdout


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_system_shared_memory(perf_analyzer, server, add_sub_data, protocol):
    # perf_analyzer can not check outputs in shared memory (it finds no
    # data in the response, against any server); the server's statistics
    # say every request succeeded, and the regions are gone afterwards.
    before = server_stats(server, CHECKED)["inference_stats"]
    sent = checked_run(perf_analyzer, server, protocol, "--input-data", add_sub_data["plain"],
                       "--shared-memory", "system", "--output-shared-memory-size", "16")
    after = server_stats(server, CHECKED)["inference_stats"]
    assert after["success"]["count"] - before["success"]["count"] >= sent
    assert after["fail"]["count"] == before["fail"]["count"]
    r = requests.get(server.url + "/v2/systemsharedmemory/status", timeout=TIMEOUT)
    assert r.status_code == 200 and r.json() == [], r.text
