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


def check_answer(r, values):
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["id"] == str(values[0])
    assert out["outputs"][0]["shape"] == [len(values)]
    assert out["outputs"][0]["data"] == values


def test_in_flight_requests_finish_after_sigterm(start_server, tmp_path):
    server = start_server(slow_repo(tmp_path, delay_ms=1500))
    inputs = [list(range(k * 100, k * 100 + 1 + k)) for k in range(8)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(post, server, v) for v in inputs]
        time.sleep(0.5)  # all 8 are now inside the model (1.5 s each)
        t0 = time.time()
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        # After the signal: new inference is refused (or the socket is gone).
        try:
            late = post(server, [1, 2, 3], timeout=10)
            assert late.status_code == 503, late.text
            assert "shutting down" in late.json()["error"]
        except requests.ConnectionError:
            pass
        for f, v in zip(futures, inputs):
            check_answer(f.result(), v)
    assert server.proc.wait(timeout=30) == 0
    assert time.time() - t0 < 10
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
    time.sleep(1.5)
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
    server = start_server(slow_repo(tmp_path, delay_ms=20000, instances=1),
                          "--exit-timeout-secs", 1)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    pool.submit(lambda: post(server, [1], timeout=60))
    time.sleep(0.5)
    t0 = time.time()
    server.proc.send_signal(signal.SIGTERM)
    code = server.proc.wait(timeout=15)
    waited = time.time() - t0
    pool.shutdown(wait=False)
    assert code == 1
    assert 0.8 < waited < 6, waited
    assert "Exit timeout expired. Exiting immediately." in server.log()


def test_idle_server_exits_0_on_sigint_and_sigterm(start_server, tmp_path):
    for sig in (signal.SIGINT, signal.SIGTERM):
        server = start_server(slow_repo(tmp_path / sig.name, delay_ms=0))
        t0 = time.time()
        assert server.stop(sig) == 0
        assert time.time() - t0 < 5
