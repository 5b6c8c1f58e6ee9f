"""Graceful shutdown: on SIGTERM the server stops accepting inference, answers
every request it had accepted in full, and exits 0; with requests still
running after --exit-timeout-secs it exits at once with status 1 (as
tritonserver: "Exit timeout expired. Exiting immediately.").

The model is the identity backend with parameters.execute_delay_ms, so
requests are provably in flight when the signal arrives; its correct answer
is its input.
"""
import concurrent.futures
import signal
import threading
import time

import numpy as np
import requests

from conftest import need_module

CONFIG = """
backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT64 dims: [ -1 ] } ]
instance_group [ { count: %d kind: KIND_CPU } ]
parameters { key: "execute_delay_ms" value: { string_value: "%d" } }
"""


def slow_repo(root, delay_ms, instances=8):
    d = root / "slow"
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(CONFIG % (instances, delay_ms))
    return root


def body(values):
    return {"id": str(values[0]), "inputs": [{"name": "INPUT0", "datatype": "INT64",
                                              "shape": [len(values)], "data": values}]}


def post(server, values, timeout=60):
    return requests.post(server.url + "/v2/models/slow/infer", json=body(values), timeout=timeout)


def wait_in_model(server, n, timeout=60):
    """Waits until `n` requests have entered the model: with --log-verbose 1
    the scheduler logs "... runs 1 requests" before each execution."""
    deadline = time.time() + timeout
    while server.log().count("runs 1 requests") < n:
        assert server.alive(), server.log()
        assert time.time() < deadline, "%d requests never reached the model:\n%s" % (
            n, server.log())
        time.sleep(0.02)


def wait_refusing(server, timeout=60):
    """Waits until the signalled server refuses new inference: it logs
    "Waiting for in-flight requests to complete." once it does (or it is
    gone)."""
    deadline = time.time() + timeout
    while "Waiting for in-flight requests to complete." not in server.log():
        if not server.alive():
            return
        assert time.time() < deadline, server.log()
        time.sleep(0.02)


def check_answer(r, values):
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["id"] == str(values[0])
    assert out["outputs"][0]["shape"] == [len(values)]
    assert out["outputs"][0]["data"] == values


def test_in_flight_requests_finish_after_sigterm(start_server, tmp_path):
    server = start_server(slow_repo(tmp_path, delay_ms=1500), "--log-verbose", "1")
    inputs = [list(range(k * 100, k * 100 + 1 + k)) for k in range(8)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(post, server, v) for v in inputs]
        wait_in_model(server, 8)
        server.proc.send_signal(signal.SIGTERM)
        wait_refusing(server)
        # After the signal: new inference is refused (or the socket is gone).
        try:
            late = post(server, [1, 2, 3], timeout=10)
            assert late.status_code == 503, late.text
            assert "shutting down" in late.json()["error"]
        except requests.ConnectionError:
            pass
        for f, v in zip(futures, inputs):
            check_answer(f.result(), v)
    # Not the 30 s --exit-timeout-secs: the log would say it expired.
    assert server.proc.wait(timeout=60) == 0
    log = server.log()
    assert "Waiting for in-flight requests to complete." in log
    assert "Exit timeout expired" not in log


def classify(server, values):
    """One request's fate: "ok" (full correct answer), "refused" (503, or
    the connection was refused: never accepted), "closed" (the connection
    closed unanswered), or a description of anything else."""
    try:
        r = post(server, values, timeout=30)
    except requests.ConnectionError as e:
        return "refused" if "refused" in str(e).lower() else "closed"
    if r.status_code == 503:
        return "refused"
    if r.status_code != 200:
        return "unexpected %d: %s" % (r.status_code, r.text[:200])
    try:
        check_answer(r, values)
    except AssertionError as e:
        return "wrong answer: %s" % e
    return "ok"


def test_load_while_signalling_loses_nothing_accepted(start_server, tmp_path):
    server = start_server(slow_repo(tmp_path, delay_ms=50))
    per_thread = [[] for _ in range(6)]

    def client(k):
        n = 0
        # Until the server is gone for good (connections refused).
        while not per_thread[k] or per_thread[k][-1] != "refused" or server.alive():
            values = [k * 1000000 + n, n, -n]
            n += 1
            per_thread[k].append(classify(server, values))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    # Signal once the load is well under way (however slow the machine).
    deadline = time.time() + 60
    while sum(seq.count("ok") for seq in per_thread) <= 20:
        assert time.time() < deadline and server.alive(), server.log()
        time.sleep(0.02)
    server.proc.send_signal(signal.SIGTERM)
    code = server.proc.wait(timeout=30)
    for t in threads:
        t.join(timeout=60)
    assert code == 0
    outcomes = [o for seq in per_thread for o in seq]
    bad = [o for o in outcomes if o not in ("ok", "refused", "closed")]
    assert not bad, bad[:5]
    assert outcomes.count("ok") > 20
    # While draining the server answers every request it reads (503 for new
    # inference); a connection can close unanswered only at the very end,
    # when the process exits with requests still unread in its socket
    # buffers: at most once per client, and only as its last request before
    # connections are refused.
    for seq in per_thread:
        if "closed" in seq:
            i = seq.index("closed")
            assert all(o == "refused" for o in seq[i + 1:]), seq[i:]


def test_exit_timeout_expires(start_server, tmp_path):
    """A request that runs for 60 s and a 1 s exit timeout: the server gives
    up on it (status 1, tritonserver's message) rather than waiting."""
    server = start_server(slow_repo(tmp_path, delay_ms=60000, instances=1),
                          "--exit-timeout-secs", 1, "--log-verbose", "1")
    pool = concurrent.futures.ThreadPoolExecutor(1)
    pool.submit(lambda: post(server, [1], timeout=90))
    wait_in_model(server, 1)
    server.proc.send_signal(signal.SIGTERM)
    code = server.proc.wait(timeout=45)  # well before the request could end
    pool.shutdown(wait=False)
    assert code == 1
    assert "Exit timeout expired. Exiting immediately." in server.log()


def test_idle_server_exits_0_on_sigint_and_sigterm(start_server, tmp_path):
    for sig in (signal.SIGINT, signal.SIGTERM):
        server = start_server(slow_repo(tmp_path / sig.name, delay_ms=0))
        assert server.stop(sig) == 0
        assert "Exit timeout expired" not in server.log()


# ------------------------------------------------ --exit-drain-secs (ptserve)
#
# With a drain, a stop first fails readiness and goes on serving inference on
# old and new connections, so a load balancer's health check takes the
# replica out before anything is refused (docs/deploy.md). Every reply then
# carries "Connection: close". A second signal ends the drain.

def wait_not_ready(server, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = requests.get(server.url + "/v2/health/ready", timeout=5)
        if r.status_code != 200:
            return r
        time.sleep(0.05)
    raise AssertionError("still ready %ss after SIGTERM\n%s" % (timeout, server.log()))


def test_drain_fails_readiness_and_keeps_serving(start_server, tmp_path):
    grpcclient = need_module("tritonclient.grpc")
    server = start_server(slow_repo(tmp_path, delay_ms=0), "--exit-drain-secs", 600)
    keepalive = requests.Session()
    before = keepalive.post(server.url + "/v2/models/slow/infer", json=body([7, 8]), timeout=10)
    check_answer(before, [7, 8])
    assert before.headers.get("Connection", "").lower() != "close"
    gc = grpcclient.InferenceServerClient(server.grpc_target)
    assert gc.is_server_ready()

    server.proc.send_signal(signal.SIGTERM)
    not_ready = wait_not_ready(server)
    assert not_ready.status_code == 400  # tritonserver's "not ready" (protocol-facts §1.3)
    assert requests.get(server.url + "/v2/health/live", timeout=5).status_code == 200

    # The connection opened before the signal still gets answers, and is
    # told to close after each one.
    old = keepalive.post(server.url + "/v2/models/slow/infer", json=body([1, 2, 3]), timeout=10)
    check_answer(old, [1, 2, 3])
    assert old.headers.get("Connection", "").lower() == "close"
    # So does a new connection.
    new = post(server, [4, 5, 6], timeout=10)
    check_answer(new, [4, 5, 6])
    assert new.headers.get("Connection", "").lower() == "close"
    # gRPC: not ready (ServerReady and grpc.health.v1), inference answered.
    assert gc.is_server_ready() is False
    x = np.array([11, -12, 13], dtype=np.int64)
    inp = grpcclient.InferInput("INPUT0", [3], "INT64")
    inp.set_data_from_numpy(x)
    out = gc.infer("slow", [inp]).as_numpy("OUTPUT0")
    assert out.tolist() == x.tolist()
    gc.close()
    assert server.alive()

    # A second signal ends the drain; the server then stops as usual.
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0
    log = server.log()
    assert "Draining: not ready, still serving inference for 600 s" in log
    assert "Drain ended by a second signal." in log
    assert "Waiting for in-flight requests to complete." in log


def test_drain_ends_by_itself_and_answers_in_flight(start_server, tmp_path):
    server = start_server(slow_repo(tmp_path, delay_ms=1500), "--exit-drain-secs", 1,
                          "--log-verbose", "1")
    inputs = [list(range(k, k + 3)) for k in range(4)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(post, server, v) for v in inputs]
        wait_in_model(server, 4)
        server.proc.send_signal(signal.SIGTERM)
        for f, v in zip(futures, inputs):
            check_answer(f.result(), v)
    assert server.proc.wait(timeout=30) == 0
    log = server.log()
    assert "Draining: not ready, still serving inference for 1 s" in log
    assert "Drain ended by a second signal." not in log
    assert "Exit timeout expired" not in log
