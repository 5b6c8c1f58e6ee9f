"""Reloads and unloads under load drop nothing.

Clients send a steady stream of inference requests over HTTP and gRPC
while a controller changes the model through the repository API (explicit
mode). The model is the identity backend with a small execute delay and
dynamic batching, so requests are queued and running on the version being
replaced at every swap.

- The reload soak (issue 11): 4 clients (2 HTTP, 2 gRPC) infer against
  model A while A is reloaded 100 times and, at the same time, a second
  model B is loaded and unloaded 100 times. Zero failed requests on A,
  correct answers throughout, every B load answers and every B unload
  refuses with its state, no leak (the server exits cleanly; under ASan,
  LeakSanitizer checks at exit) and resident memory flat: VmRSS after a
  warm-up of RSS_WARMUP cycles and at the end differ by less than
  RSS_GROWTH_LIMIT_KB (not asserted on a sanitizer build, whose quarantine
  and shadow memory grow by design).
- Unloads and loads under load: every request is answered or refused with
  a 4xx naming the state.

Asserted, per request (the clients and their tally are traffic_util's,
shared with test_model_poll_load.py): an accepted request is answered
correctly (its output is exactly its input, an independent expectation); a
refused one gets a 4xx (HTTP 404 / gRPC NOT_FOUND) whose message names the model and
its state; nothing gets a 5xx, a transport error or a hang (every request
has a deadline). While the model is only reloaded, nothing is refused at
all: the new version is READY before the old one stops taking requests.
The server must then stop cleanly, with no sanitizer report (this file
runs under ASan+UBSan in `make asan`).

Nothing is timed: between two control operations the controllers wait
until the clients have completed a few more requests, so every operation
overlaps traffic however slow the machine is.
"""
import json
import os
import threading

import pytest
import requests

from conftest import assert_clean_exit, rss_kb
from traffic_util import TIMEOUT, grpcclient, identity_target, run_phase as traffic_phase


def sanitized(path):
    """Whether `path` is an AddressSanitizer build (make asan): it links
    libasan, whose name is in its dynamic section."""
    with open(path, "rb") as f:
        return b"libasan.so" in f.read()

# The figures: 100 reloads of A while B is loaded and unloaded 100
# times. A few seconds on the normal build, a few more under ASan, so the
# sanitizer run does the same number.
RELOADS = 100
B_CYCLES = 100
CYCLES = 30                 # unloads and loads of the other test
CLIENTS_PER_PROTOCOL = 2    # 4 clients: 2 HTTP, 2 gRPC
# Resident memory is read after this many reloads and B cycles (allocator
# arenas, thread caches and the clients' connections have settled), and at
# the end; growth above the limit fails the non-sanitizer run. Generous,
# because resident memory moves with the allocator's arenas: small leaks
# are LeakSanitizer's to find (the ASan run), this catches growth that
# scales with the cycles or the traffic.
RSS_WARMUP = 10
RSS_GROWTH_LIMIT_KB = 32 * 1024

CONFIG = """name: "m"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
dynamic_batching { max_queue_delay_microseconds: %d }
parameters { key: "execute_delay_ms" value { string_value: "2" } }
"""


def run_phase(server, control):
    """Runs the clients (traffic_util: 2 HTTP, 2 gRPC; output must echo
    input; a refusal must be a 4xx naming 'm' and its state) while
    control(tally) changes the model. Some clients ask for the latest
    version, some for version 1."""
    return traffic_phase(server, identity_target("m"), control,
                         clients_per_protocol=CLIENTS_PER_PROTOCOL,
                         version=lambda i: 1 if i % 2 else None)


def write_config(repo, delay_us):
    with open(os.path.join(repo, "m", "config.pbtxt"), "w") as f:
        f.write(CONFIG % delay_us)


def control_post(server, path, body=None):
    r = requests.post(server.url + path, data=json.dumps(body) if body else None,
                      timeout=TIMEOUT)
    assert r.status_code == 200, (path, r.status_code, r.text)


B_CONFIG = """name: "b"
backend: "identity"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
"""


@pytest.fixture
def reload_server(start_server, tmp_path):
    os.makedirs(tmp_path / "m" / "1")
    write_config(str(tmp_path), 500)
    os.makedirs(tmp_path / "b" / "1")
    with open(tmp_path / "b" / "config.pbtxt", "w") as f:
        f.write(B_CONFIG)
    # A small ASan quarantine (as test_soak), so a sanitizer run's memory
    # stays moderate over hundreds of model versions.
    env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
           ":quarantine_size_mb=16:thread_local_quarantine_size_kb=256"}
    return start_server(tmp_path, "--model-control-mode=explicit", "--load-model=m",
                        "--model-load-thread-count=2", env=env), str(tmp_path)


def b_infer(server, values):
    body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 2], "data": values}]}
    return requests.post(server.url + "/v2/models/b/infer", data=json.dumps(body),
                         timeout=TIMEOUT)


class Controllers:
    """Runs the controllers of the soak on their own threads: counts their
    cycles, keeps the first failure of each, and lets the main thread wait
    until both have done a number of cycles."""

    def __init__(self):
        self.cond = threading.Condition()
        self.done = {"a": 0, "b": 0}
        self.errors = []

    def step(self, name):
        with self.cond:
            self.done[name] += 1
            self.cond.notify_all()

    def wait_until(self, n):
        with self.cond:
            ok = self.cond.wait_for(
                lambda: self.errors or min(self.done.values()) >= n, timeout=TIMEOUT * 5)
        assert ok, "the controllers stopped making progress: %s" % self.done

    def run(self, name, fn):
        def body():
            try:
                fn()
            except BaseException as e:  # reported by the main thread
                with self.cond:
                    self.errors.append("%s: %r" % (name, e))
                    self.cond.notify_all()
        t = threading.Thread(target=body)
        t.start()
        return t


def test_reload_soak(reload_server, ptserve_bin):
    server, repo = reload_server
    asan = sanitized(ptserve_bin)
    grpc = grpcclient.InferenceServerClient(server.grpc_target)
    ctl = Controllers()
    rss = {}

    def reload_a(tally):
        override = {"backend": "identity", "max_batch_size": 4,
                    "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
                    "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
                    "parameters": {"execute_delay_ms": {"string_value": "2"}}}
        for i in range(RELOADS):
            kind = i % 4
            if kind == 0:
                control_post(server, "/v2/repository/models/m/load")
            elif kind == 1:
                # A changed config.pbtxt, picked up by the reload.
                write_config(repo, 100 * (i % 10))
                control_post(server, "/v2/repository/models/m/load")
            elif kind == 2:
                # A config override (protocol-facts §1.12), over HTTP.
                control_post(server, "/v2/repository/models/m/load",
                             {"parameters": {"config": json.dumps(override)}})
            else:
                # The same through tritonclient's gRPC.
                grpc.load_model("m", config=json.dumps(override))
            ctl.step("a")
            tally.wait_for_more(8)

    def cycle_b(tally):
        for i in range(B_CYCLES):
            if i % 2:
                grpc.load_model("b")
            else:
                control_post(server, "/v2/repository/models/b/load")
            r = b_infer(server, [i, -i])
            assert r.status_code == 200, (i, r.status_code, r.text)
            assert r.json()["outputs"][0]["data"] == [i, -i]
            if i % 2:
                grpc.unload_model("b")
            else:
                control_post(server, "/v2/repository/models/b/unload")
            r = b_infer(server, [i, i])
            assert r.status_code == 404, (i, r.status_code, r.text)
            assert "'b' has no available versions (version 1 is UNAVAILABLE: unloaded)" \
                in r.json()["error"]
            ctl.step("b")
            tally.wait_for_more(2)

    def control(tally):
        threads = [ctl.run("a", lambda: reload_a(tally)), ctl.run("b", lambda: cycle_b(tally))]
        try:
            ctl.wait_until(RSS_WARMUP)
            rss["warm"] = rss_kb(server.proc.pid)
        finally:
            for t in threads:
                t.join(TIMEOUT * 10)
        assert not any(t.is_alive() for t in threads), "a controller hung"
        rss["end"] = rss_kb(server.proc.pid)

    try:
        tally = run_phase(server, control)
    finally:
        grpc.close()
    assert ctl.errors == [], ctl.errors
    assert ctl.done == {"a": RELOADS, "b": B_CYCLES}
    # Model A: every request answered, correctly; none refused.
    assert tally.problems == [], tally.problems[:10]
    assert tally.refused == 0  # no downtime while reloading
    assert tally.ok > 0
    # Every reload replaced version 1, and the old one did go each time;
    # every load of B was undone by its unload.
    log = server.log()
    assert log.count("successfully unloaded 'm' version 1") == RELOADS
    assert log.count("successfully loaded 'b' version 1") == B_CYCLES
    assert log.count("successfully unloaded 'b' version 1") == B_CYCLES
    growth = rss["end"] - rss["warm"]
    print("\nreload soak: %d reloads of A, %d load/unload cycles of B, %d requests answered, "
          "VmRSS %d kB after warm-up, %d kB at the end (%+d kB)%s"
          % (RELOADS, B_CYCLES, tally.ok, rss["warm"], rss["end"], growth,
             " [sanitizer build: not asserted]" if asan else ""))
    if not asan:
        assert growth < RSS_GROWTH_LIMIT_KB, rss
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
