"""NVIDIA's tritonclient.grpc (2.73, synchronous, callbacks and streams)
against ptserve: every call the client offers.

The hand-written protocol tests (test_grpc.py) check what this client never
sends; here the client builds every message and reads every answer itself.
The server answers inference responses compressed (the gRPC flag
--grpc-infer-response-compression-level high), so every test here also
reads compressed responses. Expected values come from torch running the
same model.pt in this process, the identity models' echo, the committed
config and label files (clients_util.py).
"""
import queue

import numpy as np
import pytest

from conftest import need_module

tritonclient_grpc = need_module("tritonclient.grpc")
from tritonclient.grpc.auth import BasicAuth  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from clients_util import (ADD_SUB, DTYPES, IDENTITY_REPO, LABELS, SLOW_MS,  # noqa: E402
                          TIMEOUT, add_sub_expected, add_sub_inputs, assert_classification,
                          assert_same, clients_server, identity_values, mlp_expected,
                          torch_model)

grpcclient = tritonclient_grpc

server = clients_server("client_grpc", "--grpc-infer-response-compression-level", "high")


@pytest.fixture(scope="module")
def client(server):
    c = grpcclient.InferenceServerClient(server.grpc_target)
    yield c
    c.close()


def expect_error(fn, code, *words):
    """fn() must raise InferenceServerException with gRPC status `code`
    (e.g. "NOT_FOUND") and a message containing every word."""
    with pytest.raises(InferenceServerException) as info:
        fn()
    e = info.value
    assert e.status() == "StatusCode." + code, (e.status(), e.message())
    for w in words:
        assert w in e.message(), e.message()
    return e


def infer_input(name, x, datatype):
    i = grpcclient.InferInput(name, list(x.shape), datatype)
    i.set_data_from_numpy(x)
    return i


def add_sub_inputs_of(suffix, a, b):
    datatype = ADD_SUB[suffix][0]
    return [infer_input("INPUT0", a, datatype), infer_input("INPUT1", b, datatype)]


# ---------------------------------------------------------------- health, metadata, config

def test_health(client):
    assert client.is_server_live(client_timeout=TIMEOUT)
    assert client.is_server_ready()
    assert client.is_model_ready("mlp")
    assert client.is_model_ready("id_all_versions", "3")
    # Unknown models are not ready, with no error (tritonserver r25.07's
    # ModelReady: OK and ready=false), so tritonclient returns False.
    assert client.is_model_ready("no_such_model") is False


def test_server_metadata(client):
    md = client.get_server_metadata()
    assert md.name == "ptserve"
    for ext in ("binary_tensor_data", "model_configuration", "model_repository", "statistics",
                "trace", "logging", "schedule_policy", "classification"):
        assert ext in md.extensions, md
    assert client.get_server_metadata(as_json=True)["version"] == md.version


def test_model_metadata(client):
    md = client.get_model_metadata("mlp_classifier", as_json=True)
    # int64 fields print as strings in protobuf's JSON
    assert md == {"name": "mlp_classifier", "versions": ["1"], "platform": "pytorch_libtorch",
                  "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": ["-1", "16"]}],
                  "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": ["-1", "4"]}]}
    md = client.get_model_metadata("text_upper")
    assert md.inputs[0].datatype == "BYTES" and list(md.inputs[0].shape) == [-1]
    assert list(client.get_model_metadata("id_all_versions").versions) == ["1", "2", "3"]
    assert list(client.get_model_metadata("id_all_versions", "2").versions) == ["2"]
    expect_error(lambda: client.get_model_metadata("no_such_model"), "NOT_FOUND",
                 "no_such_model")


def test_model_config(client):
    cfg = client.get_model_config("mlp_classifier").config
    assert cfg.name == "mlp_classifier" and cfg.backend == "pytorch"
    assert cfg.max_batch_size == 8
    assert list(cfg.input[0].dims) == [16]
    assert cfg.output[0].label_filename == "labels.txt"
    assert cfg.parameters["INTRA_OP_THREAD_COUNT"].string_value == "1"
    as_json = client.get_model_config("mlp_classifier", as_json=True)["config"]
    assert as_json["output"][0]["data_type"] == "TYPE_FP32"
    assert client.get_model_config("id_all_versions", "3").config.version_policy.HasField("all")
    expect_error(lambda: client.get_model_config("no_such_model"), "NOT_FOUND", "no_such_model")


# ---------------------------------------------------------------- inference

@pytest.mark.parametrize("datatype", list(DTYPES))
def test_infer_every_datatype_round_trip(client, datatype):
    x = identity_values(datatype, rows=2)
    model = "dt_" + datatype.lower()
    r = client.infer(model, [infer_input("INPUT0", x, datatype)],
                     outputs=[grpcclient.InferRequestedOutput("OUTPUT0")])
    assert_same(r.as_numpy("OUTPUT0"), x, datatype)
    o = r.get_output("OUTPUT0")
    assert o.datatype == datatype and list(o.shape) == [2, 4]
    assert r.get_response().model_name == model


@pytest.mark.parametrize("suffix", list(ADD_SUB))
def test_infer_add_sub_matches_torch(client, server, suffix):
    datatype = ADD_SUB[suffix][0]
    rng = np.random.default_rng(len(suffix) + 100)
    for batch in (1, 4, 8):
        a, b = add_sub_inputs(suffix, (batch, 4), rng)
        want = add_sub_expected(server, suffix, a, b)
        r = client.infer("add_sub_" + suffix, add_sub_inputs_of(suffix, a, b))
        for name, w in zip(("OUTPUT0", "OUTPUT1"), want):
            assert_same(r.as_numpy(name), w, datatype)


def test_infer_mlp_and_strings_match_torch(client, server):
    rng = np.random.default_rng(8)
    for batch in range(1, 9):
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        r = client.infer("mlp", [infer_input("INPUT__0", x, "FP32")])
        np.testing.assert_allclose(r.as_numpy("OUTPUT__0"), mlp_expected(server, "mlp", x),
                                   rtol=1e-5, atol=1e-6)
    words = ["grpc", "Strings", "", "\u00e9t\u00e9"]
    r = client.infer("strings", [infer_input("INPUT0", np.array([w.encode() for w in words],
                                                                 dtype=object), "BYTES")])
    assert [v.decode() for v in r.as_numpy("OUTPUT0")] == torch_model(server, "strings")(words)


def test_requested_outputs_and_classification(client, server):
    rng = np.random.default_rng(12)
    a, b = add_sub_inputs("fp64", (3, 4), rng)
    sum_, diff = add_sub_expected(server, "fp64", a, b)
    r = client.infer("add_sub_fp64", add_sub_inputs_of("fp64", a, b),
                     outputs=[grpcclient.InferRequestedOutput("OUTPUT1")])
    assert [o.name for o in r.get_response().outputs] == ["OUTPUT1"]
    assert_same(r.as_numpy("OUTPUT1"), diff, "FP64")
    r = client.infer("add_sub_fp64", add_sub_inputs_of("fp64", a, b), outputs=[
        grpcclient.InferRequestedOutput("OUTPUT1"),
        grpcclient.InferRequestedOutput("OUTPUT0", class_count=2)])
    assert [o.name for o in r.get_response().outputs] == ["OUTPUT1", "OUTPUT0"]
    assert r.get_output("OUTPUT0").datatype == "BYTES"
    assert_classification(r.as_numpy("OUTPUT0"), sum_, 2)
    assert_same(r.as_numpy("OUTPUT1"), diff, "FP64")

    x = rng.standard_normal((5, 16)).astype(np.float32)
    scores = mlp_expected(server, "mlp_classifier", x)
    for k in (1, 3, 4, 9):
        r = client.infer("mlp_classifier", [infer_input("INPUT__0", x, "FP32")],
                         outputs=[grpcclient.InferRequestedOutput("OUTPUT__0", class_count=k)])
        assert list(r.get_output("OUTPUT__0").shape) == [5, min(k, 4)]
        assert_classification(r.as_numpy("OUTPUT__0"), scores, k, LABELS)
    expect_error(lambda: client.infer(
        "strings", [infer_input("INPUT0", np.array([b"a"], dtype=object), "BYTES")],
        outputs=[grpcclient.InferRequestedOutput("OUTPUT0", class_count=1)]),
        "INVALID_ARGUMENT", "OUTPUT0", "BYTES")


def test_async_infer_many_with_ids(client, server):
    """40 callbacks in flight on one channel: each answer carries its own id
    and its own result."""
    rng = np.random.default_rng(13)
    xs = [rng.standard_normal((1 + i % 4, 16)).astype(np.float32) for i in range(40)]
    done = queue.Queue()
    for i, x in enumerate(xs):
        client.async_infer("mlp", [infer_input("INPUT__0", x, "FP32")],
                           callback=lambda result, error: done.put((result, error)),
                           request_id="cb-%d" % i, client_timeout=TIMEOUT)
    seen = set()
    for _ in xs:
        result, error = done.get(timeout=TIMEOUT)
        assert error is None, error
        rid = result.get_response().id
        i = int(rid.split("-")[1])
        np.testing.assert_allclose(result.as_numpy("OUTPUT__0"), mlp_expected(server, "mlp", xs[i]),
                                   rtol=1e-5, atol=1e-6)
        seen.add(rid)
    assert seen == {"cb-%d" % i for i in range(40)}


def test_infer_options(client):
    x = identity_values("INT32")
    for version in ("1", "2", "3"):
        r = client.infer("id_all_versions", [infer_input("INPUT0", x[:, :2], "INT32")],
                         model_version=version)
        assert r.get_response().model_version == version
    r = client.infer("dt_int32", [infer_input("INPUT0", x, "INT32")], priority=1,
                     timeout=10_000_000, client_timeout=TIMEOUT, request_id="opts",
                     parameters={"custom": "v", "n": 3, "f": True, "d": 0.5})
    assert r.get_response().id == "opts"
    assert_same(r.as_numpy("OUTPUT0"), x, "INT32")
    as_json = r.get_response(as_json=True)
    assert as_json["outputs"][0]["shape"] == ["1", "4"]


def test_client_deadline(client, server):
    """A deadline shorter than the model: the client gets DEADLINE_EXCEEDED,
    the server finishes the request on its own and goes on serving."""
    x = np.ones((1, 2), np.float32)
    expect_error(lambda: client.infer("slow", [infer_input("INPUT0", x, "FP32")],
                                      client_timeout=SLOW_MS / 1000 / 6),
                 "DEADLINE_EXCEEDED")
    r = client.infer("dt_fp32", [infer_input("INPUT0", x, "FP32")])
    assert_same(r.as_numpy("OUTPUT0"), x, "FP32")


def test_server_ends_a_call_past_its_grpc_timeout(server, client):
    """The server's side of a deadline: a raw HTTP/2 call to the slow model
    with grpc-timeout well under the model's time ends with
    DEADLINE_EXCEEDED (status 4) or a RST_STREAM, not with the answer, by
    the time the model is done; the server goes on."""
    from tritonclient.grpc import service_pb2
    from h2_util import grpc_frame, h2_call
    req = service_pb2.ModelInferRequest(model_name="slow")
    t = req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 2])
    del t  # the tensor's data goes in raw_input_contents
    req.raw_input_contents.append(np.ones((1, 2), np.float32).tobytes())
    r = h2_call(server.grpc_target, "/inference.GRPCInferenceService/ModelInfer",
                grpc_frame(req.SerializeToString()),
                headers=[("grpc-timeout", "%dm" % (SLOW_MS // 6))],
                timeout=SLOW_MS / 1000 + 10)
    status = r.trailers.get("grpc-status") or r.headers.get("grpc-status")
    assert status == "4" or r.reset is not None, r
    assert r.seconds < SLOW_MS / 1000 + 5, r
    assert client.is_server_ready()


def test_errors_are_exceptions(client):
    x = identity_values("FP32")
    expect_error(lambda: client.infer("no_such_model", [infer_input("INPUT0", x, "FP32")]),
                 "NOT_FOUND", "no_such_model")
    expect_error(lambda: client.infer("dt_int32", [infer_input("INPUT0", x, "FP32")]),
                 "INVALID_ARGUMENT", "INPUT0", "FP32", "INT32")
    expect_error(lambda: client.infer("dt_fp32", [infer_input("INPUT0", x[0], "FP32")]),
                 "INVALID_ARGUMENT", "INPUT0", "shape")
    assert client.is_server_ready()


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_request_compression(client, server, algorithm):
    x = np.random.default_rng(14).standard_normal((3, 16)).astype(np.float32)
    r = client.infer("mlp", [infer_input("INPUT__0", x, "FP32")], compression_algorithm=algorithm)
    np.testing.assert_allclose(r.as_numpy("OUTPUT__0"), mlp_expected(server, "mlp", x),
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- streaming

def test_stream_many_requests_with_ids(server):
    """One stream, 60 requests to three models, some failing: every request
    gets exactly one answer carrying its id, the failures in-band with the
    server's message, and the stream stays open throughout."""
    c = grpcclient.InferenceServerClient(server.grpc_target)
    answers = queue.Queue()
    c.start_stream(callback=lambda result, error: answers.put((result, error)),
                   compression_algorithm="gzip")
    try:
        rng = np.random.default_rng(15)
        expected = {}
        for i in range(60):
            rid = "s-%d" % i
            if i % 3 == 0:
                x = rng.standard_normal((1 + i % 5, 16)).astype(np.float32)
                c.async_stream_infer("mlp", [infer_input("INPUT__0", x, "FP32")], request_id=rid)
                expected[rid] = ("mlp", mlp_expected(server, "mlp", x))
            elif i % 3 == 1:
                a, b = add_sub_inputs("int16", (2, 4), rng)
                c.async_stream_infer("add_sub_int16", add_sub_inputs_of("int16", a, b),
                                     request_id=rid, enable_empty_final_response=i % 2 == 0)
                expected[rid] = ("add_sub", add_sub_expected(server, "int16", a, b))
            elif i % 6 == 2:
                c.async_stream_infer("no_such_model",
                                     [infer_input("INPUT0", identity_values("INT16"), "INT16")],
                                     request_id=rid)
                expected[rid] = ("error", "no_such_model")
            else:
                x = np.array([("w%d" % i).encode()], dtype=object)
                c.async_stream_infer("strings", [infer_input("INPUT0", x, "BYTES")],
                                     request_id=rid)
                expected[rid] = ("strings", [("W%d" % i).encode()])
        for _ in range(60):
            result, error = answers.get(timeout=TIMEOUT)
            if error is not None:
                # tritonclient hands in-band errors over as an exception with
                # the server's message but without the response (so without
                # the id; test_grpc.py checks that the id is there).
                kind = [k for k, v in expected.items() if v[0] == "error"]
                assert kind and "no_such_model" in error.message(), error.message()
                expected.pop(kind[0])
                continue
            response = result.get_response()
            assert response.parameters["triton_final_response"].bool_param is True
            kind, want = expected.pop(response.id)
            if kind == "mlp":
                np.testing.assert_allclose(result.as_numpy("OUTPUT__0"), want, rtol=1e-5,
                                           atol=1e-6)
            elif kind == "add_sub":
                assert_same(result.as_numpy("OUTPUT0"), want[0], "INT16")
                assert_same(result.as_numpy("OUTPUT1"), want[1], "INT16")
            else:
                assert list(result.as_numpy("OUTPUT0")) == want
        assert expected == {}
        assert answers.empty()
    finally:
        c.stop_stream()
        c.close()


def test_stream_error_ends_stream_with_triton_grpc_error(server):
    """With the triton_grpc_error header, the first error ends the stream
    with its gRPC status; a new stream works."""
    c = grpcclient.InferenceServerClient(server.grpc_target)
    answers = queue.Queue()
    x = identity_values("FP32")
    try:
        c.start_stream(callback=lambda result, error: answers.put((result, error)),
                       headers={"triton_grpc_error": "true"})
        c.async_stream_infer("dt_fp32", [infer_input("INPUT0", x, "FP32")], request_id="ok")
        result, error = answers.get(timeout=TIMEOUT)
        assert error is None and result.get_response().id == "ok"
        c.async_stream_infer("no_such_model", [infer_input("INPUT0", x, "FP32")])
        result, error = answers.get(timeout=TIMEOUT)
        assert result is None
        assert error.status() == "StatusCode.NOT_FOUND" and "no_such_model" in error.message()
        c.stop_stream()
        c.start_stream(callback=lambda result, error: answers.put((result, error)))
        c.async_stream_infer("dt_fp32", [infer_input("INPUT0", x, "FP32")], request_id="again")
        result, error = answers.get(timeout=TIMEOUT)
        assert error is None and result.get_response().id == "again"
    finally:
        c.stop_stream()
        c.close()


# ---------------------------------------------------------------- headers, plugins, channel

def test_custom_headers_and_plugin(start_server, server):
    """Inference restricted to calls carrying a metadata key, metadata to
    Basic authentication: headers= (unary, callbacks and streams) and the
    BasicAuth plugin get through; without them the server's UNAVAILABLE
    comes back."""
    s = start_server(server.repo, "--model-repository", IDENTITY_REPO,
                     "--grpc-restricted-protocol", "inference:x-ptserve-key=s3cret",
                     "--grpc-restricted-protocol", "metadata:authorization=Basic dXNlcjpwYXNz")
    c = grpcclient.InferenceServerClient(s.grpc_target)
    try:
        x = identity_values("FP32")
        inp = [infer_input("INPUT0", x, "FP32")]
        expect_error(lambda: c.infer("dt_fp32", inp), "UNAVAILABLE", "x-ptserve-key")
        r = c.infer("dt_fp32", inp, headers={"x-ptserve-key": "s3cret"})
        assert_same(r.as_numpy("OUTPUT0"), x, "FP32")
        done = queue.Queue()
        c.async_infer("dt_fp32", inp, callback=lambda result, error: done.put((result, error)),
                      headers={"x-ptserve-key": "s3cret"})
        result, error = done.get(timeout=TIMEOUT)
        assert error is None
        c.start_stream(callback=lambda result, error: done.put((result, error)),
                       headers={"x-ptserve-key": "s3cret"})
        c.async_stream_infer("dt_fp32", inp, request_id="h")
        result, error = done.get(timeout=TIMEOUT)
        assert error is None and result.get_response().id == "h"
        c.stop_stream()
        expect_error(lambda: c.get_server_metadata(), "UNAVAILABLE", "authorization")
        c.register_plugin(BasicAuth("user", "pass"))
        assert c.get_server_metadata().name == "ptserve"
        c.unregister_plugin()
        expect_error(lambda: c.get_model_metadata("dt_fp32"), "UNAVAILABLE", "authorization")
    finally:
        c.close()


def test_channel_options(server):
    """keepalive options and channel arguments as the client documents them."""
    ka = grpcclient.KeepAliveOptions(keepalive_time_ms=60_000, keepalive_timeout_ms=20_000,
                                     keepalive_permit_without_calls=False,
                                     http2_max_pings_without_data=2)
    c = grpcclient.InferenceServerClient(server.grpc_target, keepalive_options=ka)
    try:
        assert c.is_server_ready()
    finally:
        c.close()
    c = grpcclient.InferenceServerClient(
        server.grpc_target, channel_args=[("grpc.max_receive_message_length", 1 << 20)])
    try:
        x = identity_values("FP64", rows=8)
        assert_same(c.infer("dt_fp64", [infer_input("INPUT0", x, "FP64")]).as_numpy("OUTPUT0"),
                    x, "FP64")
    finally:
        c.close()


# ---------------------------------------------------------------- statistics, settings

def test_statistics(client):
    def stats():
        s = client.get_inference_statistics("add_sub_uint8").model_stats
        assert [(m.name, m.version) for m in s] == [("add_sub_uint8", "1")]
        return s[0]

    before = stats()
    rng = np.random.default_rng(16)
    batches = [2, 1, 7, 3]
    for n in batches:
        a, b = add_sub_inputs("uint8", (n, 4), rng)
        client.infer("add_sub_uint8", add_sub_inputs_of("uint8", a, b))
    after = stats()
    assert after.inference_stats.success.count == before.inference_stats.success.count + 4
    assert after.inference_stats.fail.count == before.inference_stats.fail.count
    assert after.inference_count == before.inference_count + sum(batches)
    assert after.execution_count == before.execution_count + len(batches)
    assert after.inference_stats.compute_infer.ns > before.inference_stats.compute_infer.ns
    as_json = client.get_inference_statistics("add_sub_uint8", as_json=True)
    assert as_json["model_stats"][0]["inference_count"] == str(after.inference_count)
    names = {m.name for m in client.get_inference_statistics().model_stats}
    assert names == {m.name for m in client.get_model_repository_index().models
                     if m.state == "READY"}
    expect_error(lambda: client.get_inference_statistics("no_such_model"), "INVALID_ARGUMENT",
                 "no_such_model")


def test_trace_settings(client):
    def rate(settings):
        return list(settings.settings["trace_rate"].value)

    base = client.get_trace_settings(as_json=True)
    try:
        got = client.update_trace_settings(settings={"trace_rate": "9", "trace_level": ["OFF"]})
        assert rate(got) == ["9"]
        assert rate(client.get_trace_settings(model_name="mlp")) == ["9"]
        assert rate(client.update_trace_settings(model_name="mlp",
                                                 settings={"trace_rate": "2"})) == ["2"]
        assert rate(client.get_trace_settings()) == ["9"]
        assert rate(client.update_trace_settings(model_name="mlp",
                                                 settings={"trace_rate": None})) == ["9"]
        expect_error(lambda: client.update_trace_settings(settings={"trace_rate": "x"}),
                     "INVALID_ARGUMENT", "trace_rate")
        expect_error(lambda: client.get_trace_settings(model_name="no_such_model"),
                     "INVALID_ARGUMENT", "no_such_model")
    finally:
        client.update_trace_settings(
            settings={"trace_rate": base["settings"]["trace_rate"]["value"][0]})
    assert client.get_trace_settings(as_json=True) == base


def test_log_settings(client):
    base = client.get_log_settings(as_json=True)["settings"]
    assert base["log_verbose_level"] == {"uint32_param": 0}
    try:
        got = client.update_log_settings({"log_verbose_level": 2, "log_info": False},
                                         as_json=True)["settings"]
        assert got["log_verbose_level"] == {"uint32_param": 2}
        assert got["log_info"] == {"bool_param": False}
        expect_error(lambda: client.update_log_settings({"log_file": "/tmp/x.log"}),
                     "UNIMPLEMENTED", "log_file")
        expect_error(lambda: client.update_log_settings({"log_format": "json"}),
                     "INVALID_ARGUMENT", "log_format")
    finally:
        client.update_log_settings({"log_verbose_level": 0, "log_info": True})
    assert client.get_log_settings(as_json=True)["settings"] == base


# ---------------------------------------------------------------- repository, shared memory

def test_repository_calls(client):
    index = client.get_model_repository_index(as_json=True)["models"]
    by_name = {m["name"]: m for m in index}
    for name in ("mlp", "mlp_classifier", "text_upper", "dt_uint64", "slow"):
        assert by_name[name]["state"] == "READY", name
    # Model control mode NONE: tritonserver's UNAVAILABLE.
    for call in (client.load_model, client.unload_model):
        expect_error(lambda: call("mlp"), "UNAVAILABLE", "explicit model load / unload is not allowed",
                     "--model-control-mode=explicit")
    assert client.is_model_ready("mlp")


def test_shared_memory_calls_while_disabled(client):
    """Without --allow-client-shm (the default): no regions, and
    UNIMPLEMENTED saying how to enable it (test_shm.py and
    test_client_aio.py use shared memory with it on)."""
    assert list(client.get_system_shared_memory_status().regions) == []
    assert list(client.get_cuda_shared_memory_status().regions) == []
    for fn in (lambda: client.register_system_shared_memory("r0", "/ptserve_shm", 64),
               lambda: client.unregister_system_shared_memory("r0"),
               lambda: client.unregister_system_shared_memory(),
               lambda: client.register_cuda_shared_memory("c0", b"aGFuZGxl", 0, 64),
               lambda: client.unregister_cuda_shared_memory()):
        expect_error(fn, "UNIMPLEMENTED", "client shared memory is disabled on this server; start it with --allow-client-shm=true")
