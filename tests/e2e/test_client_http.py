"""NVIDIA's tritonclient.http (2.73, synchronous) against ptserve: every call
the client offers.

The hand-written protocol tests (test_http_protocol.py, test_bad_inputs.py)
check what this client never sends; here the client builds every request and
parses every answer itself, so what passes here works for Triton's users.
Expected values come from torch running the same model.pt in this process,
from the identity models' echo and from the committed config and label files
(clients_util.py).
"""

import numpy as np
import pytest
import requests

from conftest import need_module

tritonclient_http = need_module("tritonclient.http")
from tritonclient.http.auth import BasicAuth  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from clients_util import (ADD_SUB, DTYPES, IDENTITY_REPO, JSON_DTYPES, LABELS,  # noqa: E402
                          TIMEOUT,
                          add_sub_expected, add_sub_inputs, assert_classification,
                          assert_same, clients_server, http_target, identity_values,
                          mlp_expected)

httpclient = tritonclient_http

server = clients_server("client_http")


@pytest.fixture(scope="module")
def client(server):
    c = httpclient.InferenceServerClient(http_target(server), connection_timeout=TIMEOUT,
                                         network_timeout=TIMEOUT)
    yield c
    c.close()


def expect_error(fn, status, *words):
    """fn() must raise InferenceServerException with HTTP `status` and a
    message containing every word."""
    with pytest.raises(InferenceServerException) as info:
        fn()
    e = info.value
    assert e.status() == str(status), (e.status(), e.message())
    for w in words:
        assert w in e.message(), e.message()
    return e


def infer_input(name, x, datatype, binary=True):
    i = httpclient.InferInput(name, list(x.shape), datatype)
    i.set_data_from_numpy(x, binary_data=binary)
    return i


def add_sub_call(client, suffix, a, b, binary=True, outputs=None, **kwargs):
    datatype = ADD_SUB[suffix][0]
    return client.infer("add_sub_" + suffix, [infer_input("INPUT0", a, datatype, binary),
                                              infer_input("INPUT1", b, datatype, binary)],
                        outputs=outputs, **kwargs)


# ---------------------------------------------------------------- health, metadata, config

def test_health(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("mlp")
    assert client.is_model_ready("id_versions", "2")
    assert client.is_model_ready("id_specific", "1")
    # Unknown model or version: the client turns the 4xx into False.
    assert not client.is_model_ready("no_such_model")
    assert not client.is_model_ready("id_specific", "2")  # on disk, not in the policy


def test_server_metadata(client, ptserve_bin):
    import subprocess
    md = client.get_server_metadata()
    assert md["name"] == "ptserve"
    version = subprocess.run([ptserve_bin, "--version"], capture_output=True, text=True).stdout
    assert md["version"] in version
    for ext in ("binary_tensor_data", "model_configuration", "model_repository", "statistics",
                "trace", "logging", "schedule_policy", "classification"):
        assert ext in md["extensions"], md


def test_model_metadata(client):
    # examples/models/mlp_classifier/config.pbtxt: INPUT__0 FP32 [16] -> OUTPUT__0 FP32 [4],
    # max_batch_size 8 (so -1 leads every shape).
    md = client.get_model_metadata("mlp_classifier")
    assert md == {"name": "mlp_classifier", "versions": ["1"], "platform": "pytorch_libtorch",
                  "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [-1, 16]}],
                  "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [-1, 4]}]}
    md = client.get_model_metadata("text_upper")  # max_batch_size 0: no batch dimension
    assert md["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    md = client.get_model_metadata("id_all_versions")
    assert md["versions"] == ["1", "2", "3"]
    assert client.get_model_metadata("id_all_versions", "2")["versions"] == ["2"]
    expect_error(lambda: client.get_model_metadata("no_such_model"), 404, "no_such_model")


def test_model_config(client):
    cfg = client.get_model_config("mlp_classifier")
    assert cfg["name"] == "mlp_classifier"
    assert cfg["backend"] == "pytorch"
    assert cfg["max_batch_size"] == 8
    assert cfg["input"][0]["dims"] == [16] and cfg["input"][0]["data_type"] == "TYPE_FP32"
    assert cfg["output"][0]["label_filename"] == "labels.txt"
    assert cfg["parameters"]["INTRA_OP_THREAD_COUNT"] == {"string_value": "1"}
    assert cfg["instance_group"][0]["kind"] == "KIND_CPU"
    assert client.get_model_config("id_all_versions", "3")["version_policy"] == {"all": {}}
    expect_error(lambda: client.get_model_config("no_such_model"), 404, "no_such_model")


# ---------------------------------------------------------------- inference

@pytest.mark.parametrize("datatype", list(DTYPES))
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_every_datatype_round_trip(client, datatype, binary):
    """Each dt_<type> identity model echoes what the client encoded; the
    client decodes it back (binary or JSON both ways)."""
    x = identity_values(datatype, rows=2)
    model = "dt_" + datatype.lower()
    out = httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)
    if not binary and datatype == "BF16":
        # The client itself refuses: BF16 has no JSON form.
        with pytest.raises(InferenceServerException, match="binary"):
            infer_input("INPUT0", x, datatype, False)
        return
    if not binary and datatype not in JSON_DTYPES:
        # FP16 the client sends; the server refuses it as Triton does.
        expect_error(lambda: client.infer(model, [infer_input("INPUT0", x, datatype, False)]),
                     400, "INPUT0", datatype, "binary")
        return
    r = client.infer(model, [infer_input("INPUT0", x, datatype, binary)], outputs=[out])
    got = r.as_numpy("OUTPUT0")
    if not binary and datatype == "BYTES":
        got = np.array([v.encode() for v in got.ravel()], dtype=object).reshape(got.shape)
    assert_same(got, x, datatype)
    o = r.get_output("OUTPUT0")
    assert o["datatype"] == datatype and o["shape"] == [2, 4]
    assert ("binary_data_size" in o.get("parameters", {})) == binary
    assert r.get_response()["model_name"] == model


@pytest.mark.parametrize("suffix", list(ADD_SUB))
def test_infer_add_sub_matches_torch(client, server, suffix):
    datatype = ADD_SUB[suffix][0]
    rng = np.random.default_rng(len(suffix))
    for batch in (1, 3, 8):
        a, b = add_sub_inputs(suffix, (batch, 4), rng)
        want = add_sub_expected(server, suffix, a, b)
        for binary in (True, False):
            if not binary and datatype in ("FP16", "BF16"):
                continue
            outs = [httpclient.InferRequestedOutput(n, binary_data=binary)
                    for n in ("OUTPUT0", "OUTPUT1")]
            r = add_sub_call(client, suffix, a, b, binary, outs)
            for name, w in zip(("OUTPUT0", "OUTPUT1"), want):
                assert_same(r.as_numpy(name), w, datatype)


def test_infer_mlp_matches_torch(client, server):
    rng = np.random.default_rng(5)
    for batch in range(1, 9):
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        want = mlp_expected(server, "mlp", x)
        for binary in (True, False):
            r = client.infer("mlp", [infer_input("INPUT__0", x, "FP32", binary)],
                             outputs=[httpclient.InferRequestedOutput("OUTPUT__0", binary)])
            np.testing.assert_allclose(r.as_numpy("OUTPUT__0"), want, rtol=1e-5, atol=1e-6)


def test_infer_strings(client, server):
    from clients_util import torch_model
    words = ["hello", "World", "", "mIxEd 123", "\u00fcml\u00e4ut"]
    want = torch_model(server, "strings")(words)
    x = np.array([w.encode() for w in words], dtype=object)
    for binary in (True, False):
        r = client.infer("strings", [infer_input("INPUT0", x, "BYTES", binary)],
                         outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary)])
        got = [v.decode() if isinstance(v, bytes) else v for v in r.as_numpy("OUTPUT0")]
        assert got == want


def test_requested_outputs(client, server):
    a, b = add_sub_inputs("fp32", (2, 4), np.random.default_rng(1))
    sum_, diff = add_sub_expected(server, "fp32", a, b)
    # Only OUTPUT1 asked for: only OUTPUT1 comes back.
    r = add_sub_call(client, "fp32", a, b, outputs=[httpclient.InferRequestedOutput("OUTPUT1")])
    assert [o["name"] for o in r.get_response()["outputs"]] == ["OUTPUT1"]
    assert r.as_numpy("OUTPUT0") is None
    assert_same(r.as_numpy("OUTPUT1"), diff, "FP32")
    # One binary, one JSON, in the order asked for.
    r = add_sub_call(client, "fp32", a, b, outputs=[
        httpclient.InferRequestedOutput("OUTPUT1", binary_data=False),
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    outs = {o["name"]: o for o in r.get_response()["outputs"]}
    assert "data" in outs["OUTPUT1"] and "data" not in outs["OUTPUT0"]
    assert outs["OUTPUT0"]["parameters"]["binary_data_size"] == sum_.nbytes
    assert_same(r.as_numpy("OUTPUT0"), sum_, "FP32")
    assert_same(r.as_numpy("OUTPUT1"), diff, "FP32")
    expect_error(lambda: add_sub_call(client, "fp32", a, b,
                                      outputs=[httpclient.InferRequestedOutput("NOPE")]),
                 400, "NOPE")


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_classification(client, server, binary):
    """class_count=k: the top k of each row as "value:index:label", labels
    from the model's labels.txt (protocol-facts §1.9)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 16)).astype(np.float32)
    scores = mlp_expected(server, "mlp_classifier", x)
    for k in (1, 2, 4, 10):
        r = client.infer("mlp_classifier", [infer_input("INPUT__0", x, "FP32", binary)],
                         outputs=[httpclient.InferRequestedOutput("OUTPUT__0", binary,
                                                                  class_count=k)])
        out = r.get_output("OUTPUT__0")
        assert out["datatype"] == "BYTES" and out["shape"] == [3, min(k, 4)]
        assert_classification(r.as_numpy("OUTPUT__0"), scores, k, LABELS)
    # Without labels: "value:index"; other outputs unchanged beside it.
    a, b = add_sub_inputs("int32", (2, 4), rng)
    sum_, diff = add_sub_expected(server, "int32", a, b)
    r = add_sub_call(client, "int32", a, b, binary, outputs=[
        httpclient.InferRequestedOutput("OUTPUT0", binary, class_count=3),
        httpclient.InferRequestedOutput("OUTPUT1", binary)])
    assert_classification(r.as_numpy("OUTPUT0"), sum_, 3)
    assert_same(r.as_numpy("OUTPUT1"), diff, "INT32")


def test_classification_errors(client):
    x = np.array([b"a", b"b"], dtype=object)
    expect_error(lambda: client.infer("strings", [infer_input("INPUT0", x, "BYTES")], outputs=[
        httpclient.InferRequestedOutput("OUTPUT0", class_count=1)]), 400, "OUTPUT0", "BYTES")


def test_async_infer_many_with_ids(server):
    """40 requests in flight on 4 connections, each with its own id and
    input; every answer carries its id and its own result."""
    c = httpclient.InferenceServerClient(http_target(server), concurrency=4,
                                         network_timeout=TIMEOUT)
    try:
        rng = np.random.default_rng(2)
        xs = [rng.standard_normal((1 + i % 3, 16)).astype(np.float32) for i in range(40)]
        pending = [c.async_infer("mlp", [infer_input("INPUT__0", x, "FP32")],
                                 request_id="req-%d" % i) for i, x in enumerate(xs)]
        for i, p in enumerate(pending):
            r = p.get_result(timeout=TIMEOUT)
            assert r.get_response()["id"] == "req-%d" % i
            np.testing.assert_allclose(r.as_numpy("OUTPUT__0"), mlp_expected(server, "mlp", xs[i]),
                                       rtol=1e-5, atol=1e-6)
    finally:
        c.close()


def test_infer_options(client):
    x = identity_values("INT32")
    # version, priority, queue timeout, custom parameters, sequence fields
    # (accepted, ignored), query parameters
    for version in ("1", "2", "3"):
        r = client.infer("id_all_versions", [infer_input("INPUT0", x[:, :2], "INT32")],
                         model_version=version)
        assert r.get_response()["model_version"] == version
    r = client.infer("dt_int32", [infer_input("INPUT0", x, "INT32")], priority=1,
                     timeout=10_000_000, parameters={"custom": "v", "n": 3, "f": True},
                     query_params={"q": "1"}, request_id="opts")
    assert r.get_response()["id"] == "opts"
    assert_same(r.as_numpy("OUTPUT0"), x, "INT32")


def test_generate_and_parse_body(client, server):
    """The client's offline encoder and decoder, with the transport done here."""
    x = identity_values("FP32", rows=2)
    body, json_len = client.generate_request_body([infer_input("INPUT0", x, "FP32")],
                                                  request_id="offline")
    r = requests.post(server.url + "/v2/models/dt_fp32/infer", data=body, timeout=TIMEOUT,
                      headers={"Inference-Header-Content-Length": str(json_len)})
    assert r.status_code == 200, r.text
    res = client.parse_response_body(
        r.content, header_length=int(r.headers["Inference-Header-Content-Length"]))
    assert res.get_response()["id"] == "offline"
    assert_same(res.as_numpy("OUTPUT0"), x, "FP32")


def test_errors_are_exceptions(client):
    x = identity_values("FP32")
    expect_error(lambda: client.infer("no_such_model", [infer_input("INPUT0", x, "FP32")]),
                 404, "no_such_model")
    expect_error(lambda: client.infer("dt_int32", [infer_input("INPUT0", x, "FP32")]),
                 400, "INPUT0", "FP32", "INT32")
    expect_error(lambda: client.infer("dt_fp32", [infer_input("INPUT0", x[0], "FP32")]),
                 400, "INPUT0", "shape")
    # The server goes on.
    assert client.is_server_ready()


# ---------------------------------------------------------------- compression

@pytest.mark.parametrize("request_alg", [None, "gzip", "deflate"])
@pytest.mark.parametrize("response_alg", [None, "gzip", "deflate"])
def test_compression(server, capsys, request_alg, response_alg):
    # verbose: the client prints each response with its headers.
    c = httpclient.InferenceServerClient(http_target(server), verbose=True)
    try:
        x = np.random.default_rng(4).standard_normal((2, 16)).astype(np.float32)
        capsys.readouterr()
        r = c.infer("mlp", [infer_input("INPUT__0", x, "FP32")],
                    request_compression_algorithm=request_alg,
                    response_compression_algorithm=response_alg)
        printed = capsys.readouterr().out
        np.testing.assert_allclose(r.as_numpy("OUTPUT__0"), mlp_expected(server, "mlp", x),
                                   rtol=1e-5, atol=1e-6)
        if request_alg:
            assert "'Content-Encoding': '%s'" % request_alg in printed.split("\n")[0]
        response_line = [ln for ln in printed.split("\n") if "HTTPSocketPoolResponse" in ln][0]
        if response_alg:
            assert "'Content-Encoding': '%s'" % response_alg in response_line, response_line
        else:
            assert "Content-Encoding" not in response_line, response_line
    finally:
        c.close()


# ---------------------------------------------------------------- headers and plugins

def test_custom_headers_and_plugin(start_server, server):
    """A server that restricts inference to requests carrying a header, and
    metadata to Basic authentication: the client's headers= and its
    BasicAuth plugin get through; without them the server's 403 comes back
    as an exception."""
    s = start_server(server.repo, "--model-repository", IDENTITY_REPO,
                     "--http-restricted-api", "inference:x-ptserve-key=s3cret",
                     "--http-restricted-api", "metadata:Authorization=Basic dXNlcjpwYXNz")
    c = httpclient.InferenceServerClient(http_target(s))
    try:
        x = identity_values("FP32")
        inp = [infer_input("INPUT0", x, "FP32")]
        expect_error(lambda: c.infer("dt_fp32", inp), 403, "x-ptserve-key")
        r = c.infer("dt_fp32", inp, headers={"x-ptserve-key": "s3cret"})
        assert_same(r.as_numpy("OUTPUT0"), x, "FP32")
        pending = c.async_infer("dt_fp32", inp, headers={"X-Ptserve-Key": "s3cret"})
        assert_same(pending.get_result(timeout=TIMEOUT).as_numpy("OUTPUT0"), x, "FP32")
        expect_error(lambda: c.get_server_metadata(), 403, "Authorization")
        c.register_plugin(BasicAuth("user", "pass"))
        assert c.get_server_metadata()["name"] == "ptserve"
        assert c.get_model_metadata("dt_fp32")["name"] == "dt_fp32"
        c.unregister_plugin()
        expect_error(lambda: c.get_model_metadata("dt_fp32"), 403, "Authorization")
    finally:
        c.close()


# ---------------------------------------------------------------- statistics

def test_statistics(client):
    def stats():
        s = client.get_inference_statistics("add_sub_int64")["model_stats"]
        assert [(m["name"], m["version"]) for m in s] == [("add_sub_int64", "1")]
        return s[0]

    before = stats()
    rng = np.random.default_rng(6)
    batches = [1, 2, 5]
    for n in batches:
        a, b = add_sub_inputs("int64", (n, 4), rng)
        add_sub_call(client, "int64", a, b)
    after = stats()
    ok, fail = after["inference_stats"]["success"], after["inference_stats"]["fail"]
    assert ok["count"] == before["inference_stats"]["success"]["count"] + len(batches)
    assert ok["ns"] > before["inference_stats"]["success"]["ns"]
    assert fail["count"] == before["inference_stats"]["fail"]["count"]
    assert after["inference_count"] == before["inference_count"] + sum(batches)
    assert after["execution_count"] == before["execution_count"] + len(batches)
    assert after["last_inference"] > 0
    for k in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert after["inference_stats"][k]["count"] == ok["count"], k
    # Every model, and errors.
    everything = client.get_inference_statistics()["model_stats"]
    names = {m["name"] for m in everything}
    index = {m["name"] for m in client.get_model_repository_index() if m["state"] == "READY"}
    assert names == index
    expect_error(lambda: client.get_inference_statistics("no_such_model"), 400, "no_such_model")
    expect_error(lambda: client.get_inference_statistics("id_specific", "2"), 400, "id_specific")


# ---------------------------------------------------------------- trace and log settings

def test_trace_settings(client):
    base = client.get_trace_settings()
    assert base["trace_level"] == ["OFF"]
    try:
        got = client.update_trace_settings(settings={"trace_rate": "7", "trace_count": "5"})
        assert got["trace_rate"] == "7" and got["trace_count"] == "5"
        # A model without its own settings follows the global ones.
        assert client.get_trace_settings(model_name="mlp")["trace_rate"] == "7"
        got = client.update_trace_settings(model_name="mlp", settings={"trace_rate": "3"})
        assert got["trace_rate"] == "3"
        assert client.get_trace_settings()["trace_rate"] == "7"
        # None clears the model's own setting: back to the global one.
        got = client.update_trace_settings(model_name="mlp", settings={"trace_rate": None})
        assert got["trace_rate"] == "7"
        expect_error(lambda: client.update_trace_settings(settings={"trace_rate": "abc"}),
                     400, "trace_rate")
        expect_error(lambda: client.get_trace_settings(model_name="no_such_model"), 400,
                     "no_such_model")
    finally:
        client.update_trace_settings(settings={"trace_rate": base["trace_rate"],
                                               "trace_count": base["trace_count"]})
    assert client.get_trace_settings() == base


def test_log_settings(client):
    base = client.get_log_settings()
    assert base["log_verbose_level"] == 0 and base["log_info"] is True
    assert base["log_format"] == "default" and base["log_file"] == ""
    try:
        got = client.update_log_settings({"log_verbose_level": 1, "log_warning": False})
        assert got["log_verbose_level"] == 1 and got["log_warning"] is False
        assert client.get_log_settings() == got
        expect_error(lambda: client.update_log_settings({"log_file": "/tmp/x.log"}), 501,
                     "log file")
        expect_error(lambda: client.update_log_settings({"log_info": "yes"}), 400, "log_info")
    finally:
        client.update_log_settings({"log_verbose_level": 0, "log_warning": True})
    assert client.get_log_settings() == base


# ---------------------------------------------------------------- repository, shared memory

def test_repository_calls(client):
    index = client.get_model_repository_index()
    by_name = {m["name"]: m for m in index}
    for name in ("mlp", "mlp_classifier", "strings", "dt_bf16", "add_sub_fp16"):
        assert by_name[name]["state"] == "READY" and by_name[name]["version"] == "1", name
    # The model control mode is NONE: load and unload get tritonserver's 503
    # (test_client_aio.py and test_model_control_tritonclient.py load and
    # unload in explicit mode).
    for call in (client.load_model, client.unload_model):
        expect_error(lambda: call("mlp"), 503, "explicit model load / unload is not allowed", "--model-control-mode=explicit")
    assert client.is_model_ready("mlp")


def test_shared_memory_calls_while_disabled(client):
    """Without --allow-client-shm (the default) the status calls list no
    region and the others get the server's clear 501 saying how to enable
    it. test_shm.py and test_client_aio.py use shared memory with it on."""
    assert client.get_system_shared_memory_status() == []
    assert client.get_cuda_shared_memory_status() == []
    for fn in (lambda: client.register_system_shared_memory("r0", "/ptserve_shm", 64),
               lambda: client.unregister_system_shared_memory("r0"),
               lambda: client.unregister_system_shared_memory(),
               lambda: client.register_cuda_shared_memory("c0", "aGFuZGxl", 0, 64),
               lambda: client.unregister_cuda_shared_memory("c0")):
        expect_error(fn, 501, "client shared memory is disabled on this server; start it with --allow-client-shm=true")
