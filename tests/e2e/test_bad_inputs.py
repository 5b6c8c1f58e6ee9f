"""Bad input over HTTP: each case gets the right status and an
{"error": "..."} message that names the problem, and the server goes on.

After every test the shared server must still be ready and still answer a
valid inference; at the end it must still be alive, and stop on SIGTERM with
exit code 0 and no sanitizer report. Status codes and message contents come
from protocol-facts §1 (Triton's behaviour) and ptserve's design (messages
name the model/input/field; out-of-range JSON integers are refused rather
than wrapped as Triton does).
"""
import gzip
import json
import struct

import numpy as np
import pytest
import requests

from conftest import assert_clean_exit, launch_server, module_server

TIMEOUT = 10
GOOD_FP32 = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                         "data": [1, 2, 3, 4]}]}


# ---------------------------------------------------------------- helpers

def launch(bin_path, repo, log_path, *args, expect_ready=True, timeout=60):
    return launch_server(bin_path, repo, log_path, *args, metrics_port=0, grpc_port=0,
                         expect_ready=expect_ready, timeout=timeout)


def assert_serving(server, model="id_fp32"):
    assert server.alive(), server.log()
    assert requests.get(server.url + "/v2/health/live", timeout=TIMEOUT).status_code == 200
    r = requests.post(server.url + "/v2/models/%s/infer" % model, data=json.dumps(GOOD_FP32),
                      timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


server = module_server(launch, "bad_inputs")


@pytest.fixture(autouse=True)
def still_serving(request):
    yield
    if "server" in request.fixturenames:
        s = request.getfixturevalue("server")
        assert_serving(s)
        assert requests.get(s.url + "/v2/health/ready", timeout=TIMEOUT).status_code == 200


def post(server, path, data, headers=None):
    if not isinstance(data, (bytes, bytearray)):
        data = json.dumps(data).encode()
    return requests.post(server.url + path, data=data, headers=headers or {}, timeout=TIMEOUT)


def infer(server, model, body, headers=None):
    return post(server, "/v2/models/%s/infer" % model, body, headers)


def expect_error(r, status, *words):
    """Status, a JSON {"error": str} body, and each word (or any word of a
    tuple) in the message, case-insensitively. Returns the message."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    body = r.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str), body
    msg = body["error"]
    low = msg.lower()
    for w in words:
        alts = w if isinstance(w, tuple) else (w,)
        assert any(a.lower() in low for a in alts), "%r not in error %r" % (alts, msg)
    return msg


def one_input(name="INPUT0", datatype="FP32", shape=(1, 4), data=(1, 2, 3, 4), **extra):
    inp = {"name": name, "datatype": datatype, "shape": list(shape)}
    if data is not None:
        inp["data"] = list(data)
    inp.update(extra)
    return {"inputs": [inp]}


def binary_body(header, chunks):
    js = json.dumps(header).encode()
    return js + b"".join(chunks), len(js)


# ---------------------------------------------------------------- body structure

def test_malformed_json(server):
    expect_error(infer(server, "id_fp32", b'{"inputs": [ {"name": "INPUT0", '), 400, "json")


def test_json_not_an_object(server):
    expect_error(infer(server, "id_fp32", b"[1, 2, 3]"), 400, "object")


def test_empty_body(server):
    expect_error(infer(server, "id_fp32", b""), 400, ("json", "empty", "body"))


def test_inputs_not_an_array(server):
    expect_error(infer(server, "id_fp32", {"inputs": {"name": "INPUT0"}}), 400, "inputs")


def test_missing_inputs(server):
    expect_error(infer(server, "id_fp32", {"id": "x"}), 400, "inputs")


@pytest.mark.parametrize("field", ["name", "datatype", "shape"])
def test_input_missing_field(server, field):
    body = one_input()
    del body["inputs"][0][field]
    expect_error(infer(server, "id_fp32", body), 400, field)


def test_shape_not_integers(server):
    expect_error(infer(server, "id_fp32", one_input(shape=[1, "4"])), 400, "shape")


def test_outputs_not_an_array(server):
    body = one_input()
    body["outputs"] = {"name": "OUTPUT0"}
    expect_error(infer(server, "id_fp32", body), 400, "outputs")


# ---------------------------------------------------------------- datatypes and shapes

def test_unknown_datatype(server):
    expect_error(infer(server, "id_fp32", one_input(datatype="FLOAT32")), 400, "FLOAT32")


def test_lowercase_datatype(server):
    # Protocol strings are case-sensitive.
    expect_error(infer(server, "id_fp32", one_input(datatype="fp32")), 400, "fp32")


def test_datatype_mismatch(server):
    msg = expect_error(infer(server, "id_fp32", one_input(datatype="INT32")), 400,
                       "INPUT0", "INT32")
    assert "FP32" in msg


def test_wrong_rank(server):
    body = one_input(shape=[1, 2, 2])
    expect_error(infer(server, "id_fp32", body), 400, "INPUT0", ("shape", "dims"))


def test_wrong_dim(server):
    body = one_input(shape=[1, 5], data=[1, 2, 3, 4, 5])
    expect_error(infer(server, "id_fp32", body), 400, "INPUT0", ("shape", "dims"))


def test_wrong_rank_no_batching(server):
    body = one_input(shape=[6], data=[1, 2, 3, 4, 5, 6])
    expect_error(infer(server, "id_nobatch", body), 400, "INPUT0", ("shape", "dims"))


def test_negative_dim(server):
    # A -1 in a request shape is never valid (it is only a config wildcard).
    body = one_input(shape=[-1, 4])
    expect_error(infer(server, "id_fp32", body), 400, ("shape", "-1"))


def test_element_count_not_shape_product(server):
    body = one_input(shape=[1, 4], data=[1, 2, 3])
    expect_error(infer(server, "id_fp32", body), 400, "INPUT0")


def test_nested_data_ragged(server):
    body = one_input(shape=[2, 4], data=[[1, 2, 3, 4], [5, 6, 7]])
    expect_error(infer(server, "id_fp32", body), 400, "INPUT0")


@pytest.mark.parametrize("model,datatype,value", [
    ("id_fp32", "FP32", "1.0"),     # string for a number
    ("dt_bool", "BOOL", 1),         # BOOL must be true/false
    ("dt_int32", "INT32", 1.5),     # INT* must be integers
    ("dt_int32", "INT32", True),
    ("dt_bytes", "BYTES", 7),       # BYTES must be strings
])
def test_json_element_wrong_type(server, model, datatype, value):
    shape = [1, 4] if model == "id_fp32" else [1, 1]
    data = [1, 2, 3, value] if model == "id_fp32" else [value]
    body = one_input(datatype=datatype, shape=shape, data=data)
    expect_error(infer(server, model, body), 400, "INPUT0")


def test_int8_out_of_range(server):
    body = one_input(datatype="INT8", shape=[1, 2], data=[1, 300])
    expect_error(infer(server, "dt_int8", body), 400, "INPUT0", "300")


def test_uint8_negative(server):
    body = one_input(datatype="UINT8", shape=[1, 2], data=[5, -1])
    expect_error(infer(server, "dt_uint8", body), 400, "INPUT0", "-1")


@pytest.mark.parametrize("model,datatype", [("dt_fp16", "FP16"), ("dt_bf16", "BF16")])
def test_half_precision_in_json(server, model, datatype):
    body = one_input(datatype=datatype, shape=[1, 2], data=[1.0, 2.0])
    expect_error(infer(server, model, body), 400, datatype)


def test_fp16_output_as_json(server):
    raw = np.array([1, 2], dtype="<f2").tobytes()
    header = one_input(datatype="FP16", shape=[1, 2], data=None,
                       parameters={"binary_data_size": len(raw)})
    header["outputs"] = [{"name": "OUTPUT0", "parameters": {"binary_data": False}}]
    body, n = binary_body(header, [raw])
    r = infer(server, "dt_fp16", body, {"Inference-Header-Content-Length": str(n)})
    expect_error(r, 400, "FP16")


# ---------------------------------------------------------------- inputs and outputs

def test_unknown_input_name(server):
    expect_error(infer(server, "id_fp32", one_input(name="NOPE")), 400, "NOPE")


def test_missing_input(server):
    body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 3],
                        "data": [1, 2, 3]}]}
    expect_error(infer(server, "id_multi", body), 400, "INPUT1")


def test_duplicate_input(server):
    body = one_input()
    body["inputs"].append(dict(body["inputs"][0]))
    expect_error(infer(server, "id_fp32", body), 400, "INPUT0")


def test_unknown_requested_output(server):
    body = one_input()
    body["outputs"] = [{"name": "NOPE_OUT"}]
    expect_error(infer(server, "id_fp32", body), 400, "NOPE_OUT")


def test_batch_above_max_batch_size(server):
    body = one_input(shape=[9, 4], data=list(range(36)))
    expect_error(infer(server, "id_fp32", body), 400, "batch", "8")


def test_batch_mismatch_between_inputs(server):
    body = {"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]},
        {"name": "INPUT1", "datatype": "BYTES", "shape": [1, 1], "data": ["a"]}]}
    expect_error(infer(server, "id_multi", body), 400, "batch")


def test_triton_request_parameter(server):
    body = one_input()
    body["parameters"] = {"triton_enable_empty_final_response": True}
    expect_error(infer(server, "id_fp32", body), 400, "triton_enable_empty_final_response")


# ---------------------------------------------------------------- binary extension

def fp32_binary(size_param, chunk, **extra):
    header = one_input(data=None, parameters={"binary_data_size": size_param}, **extra)
    return binary_body(header, [chunk])


def test_binary_truncated_body(server):
    raw = np.arange(4, dtype="<f4").tobytes()
    body, n = fp32_binary(16, raw[:10])
    r = infer(server, "id_fp32", body, {"Inference-Header-Content-Length": str(n)})
    expect_error(r, 400, ("INPUT0", "byte", "size"))


def test_binary_leftover_bytes(server):
    raw = np.arange(4, dtype="<f4").tobytes()
    body, n = fp32_binary(16, raw + b"\x00\x01\x02")
    r = infer(server, "id_fp32", body, {"Inference-Header-Content-Length": str(n)})
    expect_error(r, 400, ("additional", "extra", "leftover", "trailing", "unexpected",
                          "unused", "byte"))


def test_binary_size_not_matching_shape(server):
    raw = np.arange(3, dtype="<f4").tobytes()  # 12 bytes for a [1,4] FP32 tensor
    body, n = fp32_binary(12, raw)
    r = infer(server, "id_fp32", body, {"Inference-Header-Content-Length": str(n)})
    expect_error(r, 400, "INPUT0")


@pytest.mark.parametrize("value", ["abc", "-5", "99999999", "12x"])
def test_header_length_invalid(server, value):
    raw = np.arange(4, dtype="<f4").tobytes()
    body, _ = fp32_binary(16, raw)
    r = infer(server, "id_fp32", body, {"Inference-Header-Content-Length": value})
    expect_error(r, 400, "Inference-Header-Content-Length")


def test_binary_without_header(server):
    raw = np.arange(4, dtype="<f4").tobytes()
    body, _ = fp32_binary(16, raw)
    expect_error(infer(server, "id_fp32", body), 400, ("json", "Inference-Header-Content-Length"))


def test_data_and_binary_data_size(server):
    raw = np.arange(4, dtype="<f4").tobytes()
    header = one_input(parameters={"binary_data_size": 16})  # keeps "data" too
    body, n = binary_body(header, [raw])
    r = infer(server, "id_fp32", body, {"Inference-Header-Content-Length": str(n)})
    expect_error(r, 400, "INPUT0")


@pytest.mark.parametrize("size", [-4, "16", 1.5])
def test_binary_data_size_not_unsigned_int(server, size):
    raw = np.arange(4, dtype="<f4").tobytes()
    body, n = fp32_binary(size, raw)
    r = infer(server, "id_fp32", body, {"Inference-Header-Content-Length": str(n)})
    expect_error(r, 400, "binary_data_size")


def test_bytes_binary_wrong_element_count(server):
    raw = struct.pack("<I", 2) + b"ab" + struct.pack("<I", 1) + b"c"  # 2 elements
    header = one_input(datatype="BYTES", shape=[1, 3], data=None,
                       parameters={"binary_data_size": len(raw)})
    body, n = binary_body(header, [raw])
    r = infer(server, "dt_bytes", body, {"Inference-Header-Content-Length": str(n)})
    expect_error(r, 400, "INPUT0")


def test_bytes_binary_length_past_end(server):
    raw = struct.pack("<I", 1000) + b"short"
    header = one_input(datatype="BYTES", shape=[1, 1], data=None,
                       parameters={"binary_data_size": len(raw)})
    body, n = binary_body(header, [raw])
    r = infer(server, "dt_bytes", body, {"Inference-Header-Content-Length": str(n)})
    expect_error(r, 400, "INPUT0")


# ---------------------------------------------------------------- compression

def test_bad_gzip_body(server):
    body = b"\x1f\x8b\x08\x00" + b"this is not a gzip stream"
    r = infer(server, "id_fp32", body, {"Content-Encoding": "gzip"})
    expect_error(r, 400, ("gzip", "decompress", "inflate", "compress"))


def test_bad_deflate_body(server):
    r = infer(server, "id_fp32", b"plain text, not zlib", {"Content-Encoding": "deflate"})
    expect_error(r, 400, ("deflate", "decompress", "inflate", "compress"))


def test_unsupported_content_encoding(server):
    r = infer(server, "id_fp32", json.dumps(GOOD_FP32).encode(), {"Content-Encoding": "br"})
    expect_error(r, 501, ("compression", "encoding", "br"))
    accepted = r.headers.get("Accept-Encoding", "")
    assert "gzip" in accepted and "deflate" in accepted, r.headers


# ---------------------------------------------------------------- URLs and methods

def test_unknown_model(server):
    expect_error(infer(server, "nosuchmodel", GOOD_FP32), 404, "nosuchmodel")
    for suffix in ("", "/config", "/ready"):
        r = requests.get(server.url + "/v2/models/nosuchmodel" + suffix, timeout=TIMEOUT)
        expect_error(r, 404, "nosuchmodel")


def test_unknown_version(server):
    r = infer(server, "id_fp32/versions/7", GOOD_FP32)
    expect_error(r, 404, "id_fp32")
    r = requests.get(server.url + "/v2/models/id_fp32/versions/7", timeout=TIMEOUT)
    expect_error(r, 404, "id_fp32")


def test_version_not_served_by_policy(server):
    # id_versions has a directory 1/, but the default policy serves only 2.
    body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 2], "data": [1, 2]}]}
    r = infer(server, "id_versions/versions/1", body)
    assert r.status_code in (404, 503), r.text
    assert "id_versions" in r.json()["error"]


@pytest.mark.parametrize("version", ["abc", "-1", "1.0"])
def test_non_numeric_version(server, version):
    r = infer(server, "id_fp32/versions/%s" % version, GOOD_FP32)
    expect_error(r, 404, "not found")


@pytest.mark.parametrize("method,path", [
    ("GET", "/v2/models/id_fp32/infer"),
    ("PUT", "/v2/models/id_fp32/infer"),
    ("POST", "/v2/models/id_fp32"),
    ("DELETE", "/v2"),
    ("GET", "/v2/repository/index"),
])
def test_wrong_method(server, method, path):
    r = requests.request(method, server.url + path, timeout=TIMEOUT)
    expect_error(r, 405, "method")


@pytest.mark.parametrize("path", ["/v3", "/v2/nothing", "/v2/models/id_fp32/infer/extra", "/"])
def test_unknown_path(server, path):
    expect_error(requests.get(server.url + path, timeout=TIMEOUT), 404, "not found")


# ---------------------------------------------------------------- limits (own server)

def test_oversized_body(ptserve_bin, model_repo, tmp_path):
    s = launch(ptserve_bin, model_repo("identity"), tmp_path / "small.log",
               "--http-max-input-size", "1024")
    try:
        big = dict(GOOD_FP32, id="x" * 4096)
        r = infer(s, "id_fp32", big)
        expect_error(r, 413, ("size", "large", "1024", "limit", "exceed"))
        # The limit applies to the decompressed body too.
        r = infer(s, "id_fp32", gzip.compress(json.dumps(big).encode()),
                  {"Content-Encoding": "gzip"})
        assert len(gzip.compress(json.dumps(big).encode())) < 1024
        expect_error(r, 413, ("size", "large", "1024", "limit", "exceed"))
        assert_serving(s)
    finally:
        assert_clean_exit(s)


# ---------------------------------------------------------------- models that are not ready

def test_model_not_ready(ptserve_bin, model_repo, tmp_path):
    s = launch(ptserve_bin, model_repo("broken"), tmp_path / "broken.log",
               "--exit-on-error=false", expect_ready=False)
    try:
        # Strict readiness (the default): one failed model makes the server not ready.
        r = requests.get(s.url + "/v2/health/ready", timeout=TIMEOUT)
        assert r.status_code == 400 and r.json() == {"ready": False}
        assert requests.get(s.url + "/v2/models/good/ready", timeout=TIMEOUT).status_code == 200
        # Known to the repository (they are in its index) but not ready.
        for model in ("unknown_backend", "name_mismatch", "syntax_error"):
            r = requests.get(s.url + "/v2/models/%s/ready" % model, timeout=TIMEOUT)
            expect_error(r, 400, "not ready")
        r = infer(s, "unknown_backend", GOOD_FP32)
        assert r.status_code in (503, 404), r.text
        assert "unknown_backend" in r.json()["error"]
        r = infer(s, "unknown_backend/versions/1", GOOD_FP32)
        assert r.status_code in (503, 404), r.text
        assert "unknown_backend" in r.json()["error"]
        assert_serving(s, model="good")
    finally:
        assert_clean_exit(s)


def test_server_still_alive_at_end(server):
    """Runs last in this file: everything above went to one process."""
    assert server.alive(), server.log()
