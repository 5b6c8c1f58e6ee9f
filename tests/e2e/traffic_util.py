"""Steady inference traffic against one model while a test changes it
(test_model_reload_load.py, test_model_poll_load.py).

  Tally: what the clients saw — answers correct (`ok`, and by model
      version in `versions`), refusals with a 4xx naming the state
      (`refused`), anything else (`problems`, as text). wait_for_more(n)
      blocks until the clients have completed n more requests, so a
      controller's next step overlaps traffic however slow the machine is.
  Target: the model the clients talk to, what they send and how an answer
      is checked against an expectation computed in the test (never read
      back from ptserve): identity_target(model) for an identity model
      (output i echoes input i).
  http_client, grpc_client: one client each (requests, tritonclient.grpc),
      looping until `stop` is set; every request has a deadline.
  run_phase(server, target, control, ...): starts the clients (half HTTP,
      half gRPC), waits for some traffic, runs control(tally), waits for some
      more, stops the clients and returns the Tally.
"""
import json
import re
import threading
from collections import Counter

import numpy as np
import requests

from conftest import need_module

grpcclient = need_module("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

TIMEOUT = 60


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.ok = 0
        self.refused = 0
        self.problems = []
        self.versions = Counter()  # model_version of the correct answers

    def add(self, ok=False, refused=False, problem=None, version=None):
        with self.cond:
            self.ok += ok
            self.refused += refused
            if ok and version is not None:
                self.versions[version] += 1
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


class Target:
    """What the clients send to `model` and how they check an answer.

    values(rng) -> the input, a numpy array of shape `shape` and numpy
    dtype of `datatype`; expect(values, version) -> the output the answer
    of model version `version` (a string) must hold, compared exactly;
    refusal: a regex a 4xx refusal's message must match (the model and a
    state that is not READY)."""

    def __init__(self, model, values, expect, refusal, datatype="INT32", shape=(1, 2),
                 input_name="INPUT0", output_name="OUTPUT0"):
        self.model = model
        self.values = values
        self.expect = expect
        self.refusal = re.compile(refusal)
        self.datatype = datatype
        self.shape = list(shape)
        self.input_name = input_name
        self.output_name = output_name

    def right(self, values, out, version):
        want = self.expect(values, version)
        return out is not None and np.array_equal(np.asarray(out).reshape(want.shape), want)


def identity_target(model):
    """An identity model of INT32 [2] (-> [1, 2] with the batch): output
    echoes input, whatever the version."""
    return Target(
        model,
        values=lambda rng: rng.integers(-2**31, 2**31 - 1, size=(1, 2)).astype(np.int32),
        expect=lambda values, version: values,
        refusal=r"'%s'.*(UNLOADING|UNAVAILABLE|LOADING|not loaded)" % re.escape(model))


def http_client(server, target, seed, stop, tally, version=None):
    """Asks for `version` (an int), or the latest when None."""
    rng = np.random.default_rng(seed)
    url = server.url + "/v2/models/%s%s/infer" % (
        target.model, "/versions/%d" % version if version else "")
    with requests.Session() as session:
        while not stop.is_set():
            values = target.values(rng)
            body = {"inputs": [{"name": target.input_name, "datatype": target.datatype,
                                "shape": target.shape, "data": values.flatten().tolist()}]}
            try:
                r = session.post(url, data=json.dumps(body), timeout=TIMEOUT)
            except requests.RequestException as e:
                tally.add(problem="HTTP transport error: %r" % e)
                continue
            if r.status_code == 200:
                res = r.json()
                out = res["outputs"][0]["data"]
                got = res.get("model_version")
                if target.right(values, out, got):
                    tally.add(ok=True, version=got)
                else:
                    tally.add(problem="HTTP wrong answer %s for %s from version %s"
                              % (out, values.tolist(), got))
            elif r.status_code == 404 and target.refusal.search(r.json().get("error", "")):
                tally.add(refused=True)
            else:
                tally.add(problem="HTTP %d: %s" % (r.status_code, r.text))


def grpc_client(server, target, seed, stop, tally, version=None):
    """Asks for `version` (an int), or the latest when None."""
    rng = np.random.default_rng(seed)
    client = grpcclient.InferenceServerClient(server.grpc_target)
    try:
        while not stop.is_set():
            values = target.values(rng)
            inp = grpcclient.InferInput(target.input_name, target.shape, target.datatype)
            inp.set_data_from_numpy(values)
            try:
                res = client.infer(target.model, [inp],
                                   model_version=str(version) if version else "",
                                   client_timeout=TIMEOUT)
            except InferenceServerException as e:
                if e.status() == "StatusCode.NOT_FOUND" and \
                        target.refusal.search(e.message() or ""):
                    tally.add(refused=True)
                else:
                    tally.add(problem="gRPC %s: %s" % (e.status(), e.message()))
                continue
            out = res.as_numpy(target.output_name)
            got = res.get_response().model_version
            if target.right(values, out, got):
                tally.add(ok=True, version=got)
            else:
                tally.add(problem="gRPC wrong answer %s for %s from version %s"
                          % (out, values.tolist(), got))
    finally:
        client.close()


def run_phase(server, target, control, clients_per_protocol=2, version=lambda i: None):
    """Runs 2 * clients_per_protocol clients (HTTP and gRPC in turn) while
    control(tally) changes the model; version(i) is the version the i-th
    client of each protocol asks for (None: the latest)."""
    tally = Tally()
    stop = threading.Event()
    threads = []
    for i in range(clients_per_protocol):
        for fn in (http_client, grpc_client):
            t = threading.Thread(target=fn,
                                 args=(server, target, len(threads), stop, tally, version(i)))
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
