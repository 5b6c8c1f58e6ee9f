"""Instance groups and the dynamic batcher, end to end (issue 3 parts 1, 2,
3, 6): batches really form (execution_count < inference_count, batch_stats
sizes as the config and the queue dictate), every client gets its own
result under concurrency (identity: the input; pytorch: torch's own
forward), BYTES batches are split per request, priorities, queue timeouts
(REJECT and DELAY), queue-full rejection and preserve_ordering.

Batch composition is made deterministic with the test hook
PTSERVE_DELAY_SCHEDULER=N (the scheduler holds its queue until N requests
are queued, like Triton's TRITONSERVER_DELAY_SCHEDULER); arrival order with
the pending-request gauge of /metrics. Expected batch sizes are worked out
by hand from Triton's batcher rules (triton-anchor §2.7)."""
import concurrent.futures as cf
import os
import shutil
import threading
import time

import numpy as np
import pytest
import requests

from conftest import need_module
from sched_util import (DELAY_ENV, batch_sizes, identity_model, infer_bytes, infer_fp32,
                        model_stats, output_fp32, wait_pending)


def run_parallel(fns):
    """Runs the callables in threads; returns their results in order."""
    with cf.ThreadPoolExecutor(max_workers=len(fns)) as pool:
        futures = [pool.submit(f) for f in fns]
        return [f.result(timeout=60) for f in futures]


def rows(batch, width=4, seed=0):
    return np.random.RandomState(seed).uniform(-100, 100, (batch, width)).astype(np.float32)


def check_echo(resp, arr):
    assert resp.status_code == 200, resp.text
    np.testing.assert_array_equal(output_fp32(resp), arr)


# ------------------------------------------------------------ batches form

@pytest.mark.parametrize("preferred,n_requests,want", [
    # max_batch_size 8; 8 single requests, preferred 4: two batches of 4.
    ("[ 4 ]", 8, {4: 2}),
    # preferred 2 and 4, 6 requests: the walk stops at the largest preferred
    # size (4); the 2 left go at once (no queue delay).
    ("[ 2, 4 ]", 6, {4: 1, 2: 1}),
    # no preferred size (completion makes it max_batch_size 8): all 5 at once.
    ("[ ]", 5, {5: 1}),
])
def test_batches_form_as_configured(start_server, tmp_path, preferred, n_requests, want):
    extra = "dynamic_batching { preferred_batch_size: %s }" % preferred
    identity_model(tmp_path, "m", extra=extra)
    server = start_server(tmp_path, env={DELAY_ENV: str(n_requests)})
    inputs = [rows(1, seed=i) for i in range(n_requests)]
    resps = run_parallel([lambda a=a: infer_fp32(server, "m", a) for a in inputs])
    for resp, a in zip(resps, inputs):
        check_echo(resp, a)
    st = model_stats(server, "m")
    assert st["inference_count"] == n_requests
    assert st["execution_count"] == sum(want.values())
    assert st["execution_count"] < st["inference_count"]
    assert batch_sizes(st) == want
    assert st["inference_stats"]["success"]["count"] == n_requests
    assert st["inference_stats"]["queue"]["count"] == n_requests


def test_request_batch_sizes_add_up_to_max(start_server, tmp_path):
    """Three requests of batch 3 with max_batch_size 8: 3+3 fit, 3+3+3 does
    not, so one batch of 6 (two requests) and one of 3."""
    identity_model(tmp_path, "m", extra="dynamic_batching { }")
    server = start_server(tmp_path, env={DELAY_ENV: "3"})
    inputs = [rows(3, seed=i) for i in range(3)]
    resps = run_parallel([lambda a=a: infer_fp32(server, "m", a) for a in inputs])
    for resp, a in zip(resps, inputs):
        check_echo(resp, a)
    st = model_stats(server, "m")
    assert batch_sizes(st) == {6: 1, 3: 1}
    assert st["inference_count"] == 9 and st["execution_count"] == 2


def test_without_dynamic_batching_requests_run_alone(start_server, tmp_path):
    identity_model(tmp_path, "m")
    identity_model(tmp_path, "nobatch", max_batch_size=0)
    server = start_server(tmp_path, env={DELAY_ENV: "4"})
    inputs = [rows(2, seed=i) for i in range(4)]
    resps = run_parallel([lambda a=a: infer_fp32(server, "m", a) for a in inputs])
    for resp, a in zip(resps, inputs):
        check_echo(resp, a)
    st = model_stats(server, "m")
    assert batch_sizes(st) == {2: 4}
    assert st["inference_count"] == 8 and st["execution_count"] == 4
    # A model without batching counts one inference per request (shape [4]).
    plain = [np.arange(4, dtype=np.float32) + i for i in range(4)]
    resps = run_parallel([lambda a=a: infer_fp32(server, "nobatch", a) for a in plain])
    for resp, a in zip(resps, plain):
        check_echo(resp, a)
    st = model_stats(server, "nobatch")
    assert batch_sizes(st) == {1: 4}
    assert st["inference_count"] == 4 and st["execution_count"] == 4


def test_bytes_batches_split_per_request(start_server, tmp_path):
    """BYTES inputs of several requests are concatenated and the output split
    by each request's element count: every request gets its own strings."""
    identity_model(tmp_path, "s", dtype="TYPE_STRING", dims=(-1,), extra="dynamic_batching { }")
    server = start_server(tmp_path, env={DELAY_ENV: "4"})
    reqs = [
        [["alpha", ""]],
        [["b" * 300, "\u00e9t\u00e9"], ["x", "yy"]],
        [["one", "two"]],
        [["", ""], ["last", "request"], ["z", "\u4e2d\u6587"]],
    ]
    resps = run_parallel([lambda r=r: infer_bytes(server, "s", r) for r in reqs])
    for resp, r in zip(resps, reqs):
        assert resp.status_code == 200, resp.text
        out = resp.json()["outputs"][0]
        assert out["shape"] == [len(r), 2]
        assert out["data"] == [s for row in r for s in row]
    st = model_stats(server, "s")
    assert batch_sizes(st) == {7: 1}


def test_different_shapes_are_not_batched_together(start_server, tmp_path):
    identity_model(tmp_path, "v", dims=(-1,), extra="dynamic_batching { }")
    server = start_server(tmp_path, env={DELAY_ENV: "3"})
    inputs = [rows(1, width=3, seed=1), rows(2, width=5, seed=2), rows(1, width=3, seed=3)]
    fns = []
    for i, a in enumerate(inputs):
        fns.append(lambda a=a: infer_fp32(server, "v", a))
    # Queue them in this order: [1,3], [2,5], [1,3].
    results = [None] * 3
    threads = []
    for i, f in enumerate(fns):
        t = threading.Thread(target=lambda i=i, f=f: results.__setitem__(i, f()))
        t.start()
        threads.append(t)
        if i < 2:
            wait_pending(server, "v", i + 1)
    for t in threads:
        t.join(60)
    for resp, a in zip(results, inputs):
        check_echo(resp, a)
    # The batcher stops at the first request that does not fit the batch:
    # [1,3] alone, then [2,5] alone, then [1,3].
    st = model_stats(server, "v")
    assert st["execution_count"] == 3
    assert batch_sizes(st) == {1: 2, 2: 1}


# ------------------------------------------------------------- concurrency

def test_concurrent_clients_get_their_own_results(start_server, tmp_path):
    identity_model(tmp_path, "c", dims=(16,), max_batch_size=16,
                   extra="dynamic_batching { max_queue_delay_microseconds: 2000 }\n"
                         "instance_group [ { count: 2 kind: KIND_CPU } ]")
    server = start_server(tmp_path)
    total = [0]
    lock = threading.Lock()

    def client(seed):
        rng = np.random.RandomState(seed)
        session = requests.Session()
        for _ in range(30):
            b = int(rng.randint(1, 5))
            a = rng.standard_normal((b, 16)).astype(np.float32)
            body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [b, 16],
                                "data": a.flatten().tolist()}]}
            r = session.post(server.url + "/v2/models/c/infer", json=body, timeout=30)
            check_echo(r, a)
            with lock:
                total[0] += b
        return True

    assert all(run_parallel([lambda s=s: client(s) for s in range(8)]))
    st = model_stats(server, "c")
    assert st["inference_count"] == total[0]
    assert st["inference_stats"]["success"]["count"] == 8 * 30
    assert st["execution_count"] <= 8 * 30
    assert sum(b * n for b, n in batch_sizes(st).items()) == total[0]


def test_torch_mlp_concurrent_batched_matches_torch(start_server, tmp_path, torch_models):
    """The pytorch backend under dynamic batching: every client's output is
    what torch computes for its own input."""
    torch = need_module("torch")
    src = os.path.join(torch_models, "mlp", "1", "model.pt")
    d = tmp_path / "mlp"
    (d / "1").mkdir(parents=True)
    shutil.copy(src, d / "1" / "model.pt")
    (d / "config.pbtxt").write_text(
        'name: "mlp"\nbackend: "pytorch"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'dynamic_batching { max_queue_delay_microseconds: 2000 }\n'
        'instance_group [ { count: 2 kind: KIND_CPU } ]\n')
    model = torch.jit.load(src)
    server = start_server(tmp_path)

    def client(seed):
        rng = np.random.RandomState(100 + seed)
        session = requests.Session()
        for _ in range(20):
            b = int(rng.randint(1, 4))
            a = rng.standard_normal((b, 16)).astype(np.float32)
            with torch.no_grad():
                want = model(torch.from_numpy(a)).numpy()
            body = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [b, 16],
                                "data": a.flatten().tolist()}]}
            r = session.post(server.url + "/v2/models/mlp/infer", json=body, timeout=30)
            assert r.status_code == 200, r.text
            out = r.json()["outputs"][0]
            assert out["shape"] == [b, 4]
            got = np.array(out["data"], dtype=np.float32).reshape(b, 4)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        return True

    assert all(run_parallel([lambda s=s: client(s) for s in range(6)]))
    st = model_stats(server, "mlp")
    assert st["inference_stats"]["success"]["count"] == 6 * 20


def test_instance_groups_run_concurrently(start_server, tmp_path):
    """Two groups (2 + 1 instances) of a model whose execution sleeps 3 s:
    three requests queued together (the scheduler holds them until all three
    are there) run one on each instance, at the same time, rather than one
    after another on one instance. The log says which instance ran what;
    no time is measured."""
    identity_model(tmp_path, "g", params={"execute_delay_ms": 3000},
                   extra="instance_group [ { name: \"a\" count: 2 kind: KIND_CPU },"
                         " { name: \"b\" count: 1 kind: KIND_CPU } ]")
    server = start_server(tmp_path, "--log-verbose", "1", env={DELAY_ENV: "3"})
    inputs = [rows(1, seed=i) for i in range(3)]
    resps = run_parallel([lambda a=a: infer_fp32(server, "g", a) for a in inputs])
    for resp, a in zip(resps, inputs):
        check_echo(resp, a)
    log = server.log()
    for name in ("a_0", "a_1", "b_0"):
        assert "creating instance '%s'" % name in log, log
        assert log.count("instance '%s' runs 1 requests" % name) == 1, log


# ------------------------------------------------------ priorities, timeouts

def send_in_order(server, model, calls):
    """Starts each call in its own thread, waiting until the previous ones
    are queued; returns (results, completion times) once all are done."""
    results = [None] * len(calls)
    done_at = [None] * len(calls)

    def run(i):
        results[i] = calls[i]()
        done_at[i] = time.monotonic()

    threads = []
    for i in range(len(calls)):
        t = threading.Thread(target=run, args=(i,))
        t.start()
        threads.append(t)
        if i < len(calls) - 1:
            wait_pending(server, model, i + 1)
    for t in threads:
        t.join(60)
    return results, done_at


def test_high_priority_runs_first(start_server, tmp_path):
    identity_model(tmp_path, "p", max_batch_size=1, params={"execute_delay_ms": 200},
                   extra="dynamic_batching { priority_levels: 2 default_priority_level: 2 }")
    server = start_server(tmp_path, env={DELAY_ENV: "3"})
    a = [rows(1, seed=i) for i in range(3)]
    calls = [lambda: infer_fp32(server, "p", a[0], priority=2),   # low
             lambda: infer_fp32(server, "p", a[1]),               # default = 2, low
             lambda: infer_fp32(server, "p", a[2], priority=1)]   # high, queued last
    results, done_at = send_in_order(server, "p", calls)
    for resp, x in zip(results, a):
        check_echo(resp, x)
    order = sorted(range(3), key=lambda i: done_at[i])
    assert order == [2, 0, 1], done_at


def test_priority_out_of_range_uses_default_level(start_server, tmp_path):
    identity_model(tmp_path, "p", max_batch_size=1, params={"execute_delay_ms": 200},
                   extra="dynamic_batching { priority_levels: 2 default_priority_level: 1 }")
    server = start_server(tmp_path, env={DELAY_ENV: "2"})
    a = [rows(1, seed=i) for i in range(2)]
    # priority 2 is the low level; 9 is out of range, so default level 1 (high).
    calls = [lambda: infer_fp32(server, "p", a[0], priority=2),
             lambda: infer_fp32(server, "p", a[1], priority=9)]
    results, done_at = send_in_order(server, "p", calls)
    for resp, x in zip(results, a):
        check_echo(resp, x)
    assert done_at[1] < done_at[0]


@pytest.mark.parametrize("policy,timeout_param", [
    # the request shortens the (infinite) default timeout
    ("default_queue_policy { allow_timeout_override: true }", 100000),
    # the model's own timeout; the request's longer one may not extend it
    ("default_queue_policy { default_timeout_microseconds: 100000 "
     "allow_timeout_override: true }", 60000000),
])
def test_timeout_reject(start_server, tmp_path, policy, timeout_param):
    identity_model(tmp_path, "t", extra="dynamic_batching { %s }" % policy)
    server = start_server(tmp_path, env={DELAY_ENV: "2"})
    a, b = rows(1, seed=1), rows(1, seed=2)

    def late_b():
        time.sleep(0.4)  # a's 100 ms timeout passes while the queue is held
        return infer_fp32(server, "t", b)

    results, _ = send_in_order(server, "t", [
        lambda: infer_fp32(server, "t", a, timeout_us=timeout_param), late_b])
    assert results[0].status_code == 503, results[0].text
    assert results[0].json() == {"error": "Request timeout expired"}
    check_echo(results[1], b)
    st = model_stats(server, "t")
    assert st["inference_stats"]["fail"]["count"] == 1
    assert st["inference_stats"]["success"]["count"] == 1


def test_timeout_without_override_is_ignored(start_server, tmp_path):
    identity_model(tmp_path, "t", extra="dynamic_batching { }")
    server = start_server(tmp_path, env={DELAY_ENV: "2"})
    a, b = rows(1, seed=1), rows(1, seed=2)

    def late_b():
        time.sleep(0.3)
        return infer_fp32(server, "t", b)

    results, _ = send_in_order(server, "t", [
        lambda: infer_fp32(server, "t", a, timeout_us=1000), late_b])
    check_echo(results[0], a)
    check_echo(results[1], b)


def test_timeout_delay_runs_expired_request_last(start_server, tmp_path):
    # Only request 0 has a timeout (100 ms, its own): the others never expire.
    identity_model(tmp_path, "d", max_batch_size=1, params={"execute_delay_ms": 200},
                   extra="dynamic_batching { default_queue_policy { timeout_action: DELAY "
                         "allow_timeout_override: true } }")
    server = start_server(tmp_path, env={DELAY_ENV: "3"})
    a = [rows(1, seed=i) for i in range(3)]

    def late(i):
        def call():
            if i == 1:
                time.sleep(0.4)  # request 0 has expired by now
            return infer_fp32(server, "d", a[i], timeout_us=100000 if i == 0 else None)
        return call

    results, done_at = send_in_order(server, "d", [late(0), late(1), late(2)])
    for resp, x in zip(results, a):
        check_echo(resp, x)  # DELAY: late, but answered
    order = sorted(range(3), key=lambda i: done_at[i])
    assert order == [1, 2, 0], done_at


# Level 1 holds at most 2 requests; level 2 is unbounded.
QUEUE_LIMITED = ("dynamic_batching { priority_levels: 2 default_priority_level: 1 "
                 "priority_queue_policy { key: 1 value: { max_queue_size: 2 } } }")


def test_queue_full_rejected(start_server, tmp_path):
    identity_model(tmp_path, "q", extra=QUEUE_LIMITED)
    # Held until 3 are queued: two on level 1, the third must come on level 2.
    server = start_server(tmp_path, env={DELAY_ENV: "3"})
    a = [rows(1, seed=i) for i in range(4)]
    results = [None] * 4
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(
        i, infer_fp32(server, "q", a[i]))) for i in range(2)]
    for i, t in enumerate(threads):
        t.start()
        wait_pending(server, "q", i + 1)
    r = infer_fp32(server, "q", a[2])
    assert r.status_code == 503, r.text
    assert r.json() == {"error": "model 'q' version 1: Exceeds maximum queue size: priority "
                                 "level 1 is full at 2 (max_queue_size)"}
    r = infer_fp32(server, "q", a[2], priority=1)  # level 1 explicitly: still full
    assert r.status_code == 503, r.text
    st = model_stats(server, "q")
    assert st["inference_stats"]["fail"]["count"] == 2
    results[3] = infer_fp32(server, "q", a[3], priority=2)  # releases the hold
    for t in threads:
        t.join(30)
    for i in (0, 1, 3):
        check_echo(results[i], a[i])


@pytest.mark.parametrize("switch", ["1", "0"])
def test_pipelined_instances_answer_every_client(start_server, tmp_path, switch):
    """Identity's test hook `pipelined` takes the scheduler's pipeline
    (execute_begin/execute_end; the delay stands for the device's time) in
    the real server: every client still gets its own rows, the statistics
    add up, and PTSERVE_PIPELINE=0 gives the same answers."""
    identity_model(tmp_path, "p", dims=(16,), max_batch_size=8,
                   params={"pipelined": "true", "execute_delay_ms": 3},
                   extra="dynamic_batching { }\n"
                         "instance_group [ { count: 2 kind: KIND_CPU } ]")
    server = start_server(tmp_path, "--log-verbose=1", env={"PTSERVE_PIPELINE": switch})
    assert ("pipelines its batches" in server.log()) == (switch == "1")
    total = [0]
    lock = threading.Lock()

    def client(seed):
        rng = np.random.RandomState(seed)
        session = requests.Session()
        for _ in range(20):
            b = int(rng.randint(1, 4))
            a = rng.standard_normal((b, 16)).astype(np.float32)
            body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [b, 16],
                                "data": a.flatten().tolist()}]}
            r = session.post(server.url + "/v2/models/p/infer", json=body, timeout=30)
            check_echo(r, a)
            with lock:
                total[0] += b
        return True

    assert all(run_parallel([lambda s=s: client(s) for s in range(8)]))
    st = model_stats(server, "p")
    assert st["inference_count"] == total[0]
    assert st["inference_stats"]["success"]["count"] == 8 * 20
    assert st["inference_stats"]["queue"]["count"] == 8 * 20
    assert sum(b * n for b, n in batch_sizes(st).items()) == total[0]


@pytest.mark.parametrize("ordered", [False, True])
def test_preserve_ordering(start_server, tmp_path, ordered):
    """A batch of 4 (1 s) then a batch of 1 (250 ms) on two instances: the
    small one finishes first, but with preserve_ordering its response waits
    for the earlier request."""
    identity_model(tmp_path, "o", params={"execute_delay_ms_per_item": 250},
                   extra="dynamic_batching { preferred_batch_size: [ 4 ] "
                         "preserve_ordering: %s }\n"
                         "instance_group [ { count: 2 kind: KIND_CPU } ]"
                         % ("true" if ordered else "false"))
    server = start_server(tmp_path, env={DELAY_ENV: "2"})
    big, small = rows(4, seed=1), rows(1, seed=2)
    sent_small = [None]

    def send_small():
        sent_small[0] = time.monotonic()
        return infer_fp32(server, "o", small)

    results, done_at = send_in_order(server, "o", [
        lambda: infer_fp32(server, "o", big), send_small])
    check_echo(results[0], big)
    check_echo(results[1], small)
    st = model_stats(server, "o")
    assert batch_sizes(st) == {4: 1, 1: 1}
    small_latency = done_at[1] - sent_small[0]
    if ordered:
        assert done_at[1] >= done_at[0] - 0.05, done_at
        assert small_latency > 0.8, small_latency
    else:
        assert done_at[1] < done_at[0] - 0.4, done_at
        assert small_latency < 0.8, small_latency
