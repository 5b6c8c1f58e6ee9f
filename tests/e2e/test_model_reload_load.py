"""Reloads and unloads under load drop nothing.

Clients send a steady stream of inference requests over HTTP and gRPC
while a controller reloads the model many times, then unloads and loads it
many times (explicit mode, the repository API). The model is the identity
backend with a small execute delay and dynamic batching, so requests are
queued and running on the version being replaced at every swap.

Asserted, per request: an accepted request is answered correctly (its
output is exactly its input, an independent expectation); a refused one
gets a 4xx (HTTP 404 / gRPC NOT_FOUND) whose message names the model and
its state; nothing gets a 5xx, a transport error or a hang (every request
has a deadline). While the model is only reloaded, nothing is refused at
all: the new version is READY before the old one stops taking requests.
The server must then stop cleanly, with no sanitizer report (this file
runs under ASan+UBSan in `make asan`).

Nothing is timed: between two control operations the controller waits
until the clients have completed a few more requests, so every operation
overlaps traffic however slow the machine is.
"""
import json
import os
import re
import threading

import numpy as np
import pytest
import requests

from conftest import assert_clean_exit, need_module

grpcclient = need_module("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

TIMEOUT = 60
CYCLES = 30
CLIENTS_PER_PROTOCOL = 3

CONFIG = """name: "m"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
dynamic_batching { max_queue_delay_microseconds: %d }
parameters { key: "execute_delay_ms" value { string_value: "2" } }
"""

# What a refusal must say: the model, and a state that is not READY.
REFUSAL = re.compile(r"'m'.*(UNLOADING|UNAVAILABLE|LOADING|not loaded)")


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.ok = 0
        self.refused = 0
        self.problems = []

    def add(self, ok=False, refused=False, problem=None):
        with self.cond:
            self.ok += ok
            self.refused += refused
            if problem:
                self.problems.append(problem)
            self.cond.notify_all()

    def done(self):
        with self.lock:
            return self.ok + self.refused + len(self.problems)

    def wait_for_more(self, n):
        target = self.done() + n
        with self.cond:
            ok = self.cond.wait_for(lambda: self.ok + self.refused + len(self.problems) >= target,
                                    timeout=TIMEOUT)
        assert ok, "the clients stopped making progress"


def http_client(server, seed, stop, tally, version):
    rng = np.random.default_rng(seed)
    url = server.url + "/v2/models/m%s/infer" % ("/versions/1" if version else "")
    with requests.Session() as session:
        while not stop.is_set():
            values = [int(v) for v in rng.integers(-2**31, 2**31 - 1, size=2)]
            body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 2],
                                "data": values}]}
            try:
                r = session.post(url, data=json.dumps(body), timeout=TIMEOUT)
            except requests.RequestException as e:
                tally.add(problem="HTTP transport error: %r" % e)
                continue
            if r.status_code == 200:
                out = r.json()["outputs"][0]["data"]
                if out == values:
                    tally.add(ok=True)
                else:
                    tally.add(problem="HTTP wrong answer %s for %s" % (out, values))
            elif r.status_code == 404 and REFUSAL.search(r.json().get("error", "")):
                tally.add(refused=True)
            else:
                tally.add(problem="HTTP %d: %s" % (r.status_code, r.text))


def grpc_client(server, seed, stop, tally, version):
    rng = np.random.default_rng(seed)
    client = grpcclient.InferenceServerClient(server.grpc_target)
    try:
        while not stop.is_set():
            values = rng.integers(-2**31, 2**31 - 1, size=(1, 2)).astype(np.int32)
            inp = grpcclient.InferInput("INPUT0", [1, 2], "INT32")
            inp.set_data_from_numpy(values)
            try:
                res = client.infer("m", [inp], model_version="1" if version else "",
                                   client_timeout=TIMEOUT)
            except InferenceServerException as e:
                if e.status() == "StatusCode.NOT_FOUND" and REFUSAL.search(e.message() or ""):
                    tally.add(refused=True)
                else:
                    tally.add(problem="gRPC %s: %s" % (e.status(), e.message()))
                continue
            out = res.as_numpy("OUTPUT0")
            if out is not None and np.array_equal(out, values):
                tally.add(ok=True)
            else:
                tally.add(problem="gRPC wrong answer %s for %s" % (out, values))
    finally:
        client.close()


def run_phase(server, control):
    """Runs the clients while control(tally) changes the model."""
    tally = Tally()
    stop = threading.Event()
    threads = []
    for i in range(CLIENTS_PER_PROTOCOL):
        for target in (http_client, grpc_client):
            # Some clients ask for the latest version, some for version 1.
            t = threading.Thread(target=target,
                                 args=(server, len(threads), stop, tally, i % 2 == 1))
            t.start()
            threads.append(t)
    try:
        tally.wait_for_more(20)
        control(tally)
        tally.wait_for_more(20)
    finally:
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a client hung"
    return tally


def write_config(repo, delay_us):
    with open(os.path.join(repo, "m", "config.pbtxt"), "w") as f:
        f.write(CONFIG % delay_us)


def control_post(server, path, body=None):
    r = requests.post(server.url + path, data=json.dumps(body) if body else None,
                      timeout=TIMEOUT)
    assert r.status_code == 200, (path, r.status_code, r.text)


@pytest.fixture
def reload_server(start_server, tmp_path):
    os.makedirs(tmp_path / "m" / "1")
    write_config(str(tmp_path), 500)
    return start_server(tmp_path, "--model-control-mode=explicit", "--load-model=m",
                        "--model-load-thread-count=2"), str(tmp_path)


def test_reloads_under_load_refuse_nothing(reload_server):
    server, repo = reload_server

    def reload_many(tally):
        for i in range(CYCLES):
            if i % 3 == 0:
                control_post(server, "/v2/repository/models/m/load")
            elif i % 3 == 1:
                # A changed config.pbtxt, picked up by the reload.
                write_config(repo, 100 * i)
                control_post(server, "/v2/repository/models/m/load")
            else:
                # A config override (protocol-facts §1.12).
                cfg = {"backend": "identity", "max_batch_size": 4,
                       "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
                       "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
                       "parameters": {"execute_delay_ms": {"string_value": "2"}}}
                control_post(server, "/v2/repository/models/m/load",
                             {"parameters": {"config": json.dumps(cfg)}})
            tally.wait_for_more(6)

    tally = run_phase(server, reload_many)
    assert tally.problems == [], tally.problems[:10]
    assert tally.refused == 0  # no downtime while reloading
    assert tally.ok > 0
    assert "successfully unloaded 'm' version 1" in server.log()  # the old ones did go
    assert_clean_exit(server)


def test_unloads_and_loads_under_load_answer_every_request(reload_server):
    server, _ = reload_server
    grpc = grpcclient.InferenceServerClient(server.grpc_target)

    def cycle(tally):
        for i in range(CYCLES):
            # HTTP and tritonclient's gRPC control calls, in turn.
            if i % 2:
                grpc.unload_model("m", unload_dependents=True)
            else:
                control_post(server, "/v2/repository/models/m/unload")
            tally.wait_for_more(6)
            if i % 2:
                grpc.load_model("m")
            else:
                control_post(server, "/v2/repository/models/m/load")
            tally.wait_for_more(6)

    try:
        tally = run_phase(server, cycle)
    finally:
        grpc.close()
    assert tally.problems == [], tally.problems[:10]
    assert tally.ok > 0
    assert tally.refused > 0  # the unloads did take the model away
    assert_clean_exit(server)
