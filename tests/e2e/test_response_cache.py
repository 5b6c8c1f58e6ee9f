"""The response cache (--cache-config local,size=N and a model's
response_cache { enable: true }; docs/response-cache.md), end to end with
NVIDIA's tritonclient on the TorchScript add_sub model: every answer is
checked against numpy's a + b and a - b (worked out here, not read from the
server), a hit is told from an execution by the statistics' execution_count
and cache_hit (Triton's counting rules), and the cache stays within its size.
"""
import os
import shutil
import subprocess

import numpy as np
import pytest
import requests

from conftest import need_module, wait_for
from sched_util import metric_value, model_stats

httpclient = need_module("tritonclient.http")
grpcclient = need_module("tritonclient.grpc")
prom_parser = need_module("prometheus_client.parser")

MODEL = "add_sub_fp32"  # OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1; FP32 [4]
CACHE = ("--cache-config", "local,size=1048576")


def repo_with(torch_models, root, *, cache=True, extra=""):
    """A repository holding add_sub_fp32, its config with response_cache on."""
    dst = os.path.join(str(root), MODEL)
    shutil.copytree(os.path.join(torch_models, MODEL), dst)
    with open(os.path.join(dst, "config.pbtxt"), "a") as f:
        if cache:
            f.write("\nresponse_cache { enable: true }\n")
        f.write(extra)
    return str(root)


def client(server):
    return httpclient.InferenceServerClient("127.0.0.1:%d" % server.port, connection_timeout=30,
                                            network_timeout=30)


def inputs(a, b, names=("INPUT0", "INPUT1"), binary=True):
    out = []
    for name, x in zip(names, (a, b)):
        i = httpclient.InferInput(name, list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        out.append(i)
    return out


def infer(c, a, b, **kw):
    r = c.infer(MODEL, inputs(a, b), **kw)
    return r.as_numpy("OUTPUT0"), r.as_numpy("OUTPUT1")


def infer_twice(server, a, b):
    c = client(server)
    try:
        infer(c, a, b)
        infer(c, a, b)
    finally:
        c.close()


def rows(seed, n=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 4)).astype(np.float32)


def counts(server):
    st = model_stats(server, MODEL)
    inf = st["inference_stats"]
    return {"success": inf["success"]["count"], "hit": inf["cache_hit"]["count"],
            "miss": inf["cache_miss"]["count"], "exec": st["execution_count"],
            "inferences": st["inference_count"], "queue": inf["queue"]["count"],
            "infer": inf["compute_infer"]["count"]}


def test_a_repeated_request_is_answered_without_running_the_model(start_server, torch_models,
                                                                   tmp_path):
    server = start_server(repo_with(torch_models, tmp_path), *CACHE)
    assert "Response cache: local, 1048576 bytes" in server.log()
    a, b, b2 = rows(1), rows(2), rows(3)
    c = client(server)
    try:
        for x, y in ((a, b), (a, b), (a, b2), (a, b)):
            s, d = infer(c, x, y)
            np.testing.assert_array_equal(s, x + y)
            np.testing.assert_array_equal(d, x - y)
    finally:
        c.close()
    # Two executions (a,b and a,b2), two hits; a hit counts as a success
    # with queue time, but no compute and no inference (Triton's rules).
    assert counts(server) == {"success": 4, "hit": 2, "miss": 2, "exec": 2, "inferences": 2,
                              "queue": 4, "infer": 2}
    assert metric_value(server, "nv_cache_num_hits_per_model", MODEL) == 2
    assert metric_value(server, "nv_cache_num_misses_per_model", MODEL) == 2
    assert metric_value(server, "nv_inference_count", MODEL) == 2
    assert metric_value(server, "nv_inference_request_success", MODEL) == 4


def test_a_hit_serves_any_outputs_asked_for_in_any_form(start_server, torch_models, tmp_path):
    server = start_server(repo_with(torch_models, tmp_path), *CACHE)
    a, b = rows(4), rows(5)
    c = client(server)
    try:
        infer(c, a, b)  # stores both outputs
        # Only OUTPUT1, as JSON: the stored answer is cut and encoded anew.
        r = c.infer(MODEL, inputs(a, b, binary=False),
                    outputs=[httpclient.InferRequestedOutput("OUTPUT1", binary_data=False)])
        assert r.get_output("OUTPUT0") is None
        np.testing.assert_allclose(r.as_numpy("OUTPUT1"), a - b, rtol=1e-6)
        # Top-2 classification of OUTPUT0 from the stored tensor.
        r = c.infer(MODEL, inputs(a, b),
                    outputs=[httpclient.InferRequestedOutput("OUTPUT0", class_count=2)])
        got = [x.decode() for x in r.as_numpy("OUTPUT0").reshape(-1)]
        s = (a + b)[0]
        best = np.argsort(-s, kind="stable")[:2]
        assert [int(g.split(":")[1]) for g in got] == [int(i) for i in best], got
        for g, i in zip(got, best):
            assert float(g.split(":")[0]) == pytest.approx(float(s[i]), rel=1e-6)
    finally:
        c.close()
    assert counts(server)["hit"] == 2 and counts(server)["exec"] == 1


def test_the_key_is_every_input_by_name(start_server, torch_models, tmp_path):
    """The same two arrays under swapped names are another request (b - a,
    not a - b); a batch of two rows is another key than each row alone."""
    server = start_server(repo_with(torch_models, tmp_path), *CACHE)
    a, b = rows(6), rows(7)
    c = client(server)
    try:
        infer(c, a, b)
        r = c.infer(MODEL, inputs(a, b, names=("INPUT1", "INPUT0")))
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), b - a)
        ab = np.concatenate([a, b])
        s, d = infer(c, ab, ab[::-1].copy())
        np.testing.assert_array_equal(s, ab + ab[::-1])
        # The inputs in the other order in the request: the same key.
        r = c.infer(MODEL, inputs(b, a, names=("INPUT1", "INPUT0")))
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
    finally:
        c.close()
    assert counts(server)["exec"] == 3 and counts(server)["hit"] == 1


def test_grpc_and_http_share_the_answers(start_server, torch_models, tmp_path):
    server = start_server(repo_with(torch_models, tmp_path), *CACHE)
    a, b = rows(8), rows(9)
    c = client(server)
    try:
        infer(c, a, b)
    finally:
        c.close()
    g = grpcclient.InferenceServerClient("127.0.0.1:%d" % server.grpc_port)
    try:
        ins = []
        for name, x in (("INPUT0", a), ("INPUT1", b)):
            i = grpcclient.InferInput(name, list(x.shape), "FP32")
            i.set_data_from_numpy(x)
            ins.append(i)
        r = g.infer(MODEL, ins)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
        inf = g.get_inference_statistics(MODEL).model_stats[0].inference_stats
        assert inf.cache_hit.count == 1 and inf.cache_miss.count == 1
    finally:
        g.close()


def test_the_cache_keeps_within_its_size(start_server, torch_models, tmp_path):
    """A cache with room for a few answers: the oldest make room, the bytes
    held never pass the size, and an evicted answer is computed again."""
    size = 4096
    server = start_server(repo_with(torch_models, tmp_path), "--cache-config",
                          "local,size=%d" % size)
    c = client(server)
    try:
        for i in range(40):
            x = rows(100 + i, n=8)
            s, _ = infer(c, x, x)
            np.testing.assert_array_equal(s, x + x)
        text = requests.get(server.metrics_url, timeout=10).text
        fams = {f.name: f for f in prom_parser.text_string_to_metric_families(text)}
        held = fams["ptserve_response_cache_bytes"].samples[0].value
        assert 0 < held <= size
        assert fams["ptserve_response_cache_capacity_bytes"].samples[0].value == size
        entries = fams["ptserve_response_cache_entries"].samples[0].value
        assert 1 <= entries < 40
        evicted = [s for s in fams["ptserve_response_cache_evictions"].samples
                   if s.name.endswith("_total")][0].value
        assert evicted == 40 - entries
        # The first answer was evicted: asked again, the model runs again.
        before = counts(server)["exec"]
        x = rows(100, n=8)
        infer(c, x, x)
        assert counts(server)["exec"] == before + 1
        # The latest is still there.
        x = rows(139, n=8)
        infer(c, x, x)
        assert counts(server)["exec"] == before + 1
    finally:
        c.close()


def test_without_the_server_flag_nothing_is_cached(start_server, torch_models, tmp_path):
    server = start_server(repo_with(torch_models, tmp_path))
    wait_for("the warning", lambda: "enables response_cache, but the server has no response "
             "cache (--cache-config local,size=<bytes>)" in server.log())
    infer_twice(server, rows(10), rows(11))
    assert counts(server)["exec"] == 2 and counts(server)["hit"] == 0
    assert "nv_cache_num_hits_per_model" not in requests.get(server.metrics_url, timeout=10).text


def test_a_model_that_does_not_enable_it_is_not_cached(start_server, torch_models, tmp_path):
    server = start_server(repo_with(torch_models, tmp_path, cache=False), *CACHE)
    infer_twice(server, rows(12), rows(13))
    st = counts(server)
    assert st["exec"] == 2 and st["hit"] == 0 and st["miss"] == 0
    assert metric_value(server, "nv_cache_num_misses_per_model", MODEL) == 0


def test_a_reloaded_model_never_gets_the_old_answers(start_server, torch_models, tmp_path):
    """A reload is a new load of the same name and version: the answers of
    the one before are not its own (its file may have changed)."""
    server = start_server(repo_with(torch_models, tmp_path), *CACHE,
                          "--model-control-mode", "explicit", "--load-model", MODEL)
    a, b = rows(14), rows(15)
    c = client(server)
    try:
        infer(c, a, b)
        infer(c, a, b)
        assert counts(server)["hit"] == 1
        c.load_model(MODEL)
        s, _ = infer(c, a, b)
        np.testing.assert_array_equal(s, a + b)
    finally:
        c.close()
    st = counts(server)  # the new load's statistics
    assert st["exec"] == 1 and st["hit"] == 0 and st["miss"] == 1


def test_response_cache_on_a_sequence_model_is_refused(start_server, torch_models, tmp_path):
    extra = ("sequence_batching { control_input [ { name: \"START\" control [ { kind: "
             "CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] } ] }\n")
    server = start_server(repo_with(torch_models, tmp_path, extra=extra), *CACHE,
                          "--exit-on-error", "false", expect_ready=False)
    r = requests.post(server.url + "/v2/repository/index", json={}, timeout=10)
    assert r.status_code == 200, r.text
    [entry] = [e for e in r.json() if e["name"] == MODEL]
    assert entry["state"] == "UNAVAILABLE", entry
    assert ("'response_cache.enable with sequence_batching' is not supported by ptserve"
            in entry["reason"]), entry


@pytest.mark.parametrize("value, words", [
    ("redis,host=localhost", "cache 'redis' is not supported by ptserve"),
    ("local", "expected <cache>,<key>=<value>"),
    ("local,bytes=10", "the local cache has no key 'bytes'"),
    ("local,size=lots", "size must be a number of bytes, not 'lots'"),
])
def test_a_bad_cache_config_stops_start_up_naming_it(ptserve_bin, torch_models, tmp_path, value,
                                                    words):
    p = subprocess.run([ptserve_bin, "--model-repository", repo_with(torch_models, tmp_path),
                        "--cache-config", value], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert words in p.stderr, p.stderr
    assert "--cache-config '%s'" % value in p.stderr, p.stderr
