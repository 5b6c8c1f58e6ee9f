"""KServe v2 HTTP protocol, end to end, against the identity backend.

One server serves tests/e2e/repos/identity for the whole module (it also
proves the server survives every request below); at the end it must stop on
SIGTERM with exit code 0 and without a sanitizer report.

Expected values never come from ptserve: the identity backend echoes input i
as output i, so the expected output is what the test sent, encoded here with
numpy and the protocol's rules (protocol-facts §1, §5).
"""
import gzip
import json
import socket
import zlib

import numpy as np
import pytest
import requests

from conftest import bf16_bytes, bytes_encode, launch_server, module_server, read_http_response

TIMEOUT = 10

# protocol datatype -> (model name, numpy dtype or None, values for the test)
DTYPES = {
    "BOOL": ("dt_bool", np.bool_, [True, False, True, True]),
    "UINT8": ("dt_uint8", np.uint8, [0, 1, 200, 255]),
    "UINT16": ("dt_uint16", np.uint16, [0, 1, 40000, 65535]),
    "UINT32": ("dt_uint32", np.uint32, [0, 1, 3000000000, 4294967295]),
    "UINT64": ("dt_uint64", np.uint64, [0, 1, 2**40 + 3, 2**62]),
    "INT8": ("dt_int8", np.int8, [-128, -1, 0, 127]),
    "INT16": ("dt_int16", np.int16, [-32768, -2, 7, 32767]),
    "INT32": ("dt_int32", np.int32, [-2**31, -3, 5, 2**31 - 1]),
    "INT64": ("dt_int64", np.int64, [-2**63, -4, 9, 2**63 - 1]),
    "FP16": ("dt_fp16", np.float16, [0.5, -2.0, 65504.0, 1.0 / 3.0]),
    "FP32": ("dt_fp32", np.float32, [1.5, -2.25, 3.0e38, 1.0 / 3.0]),
    "FP64": ("dt_fp64", np.float64, [1.0 / 3.0, -1e300, 5e-324, 0.1]),
    "BF16": ("dt_bf16", None, [1.0, -2.5, 3.140625, 1.0e30]),
    "BYTES": ("dt_bytes", None, ["hello", "", "\u00fcn\u00efcode", "a b"]),
}
JSON_DTYPES = [d for d in DTYPES if d not in ("FP16", "BF16")]


# ---------------------------------------------------------------- helpers

def launch(bin_path, repo, log_path, *args, expect_ready=True, timeout=60):
    return launch_server(bin_path, repo, log_path, *args, metrics_port=0, grpc_port=0,
                         expect_ready=expect_ready, timeout=timeout)


server = module_server(launch, "protocol")


def get(server, path, **kw):
    return requests.get(server.url + path, timeout=TIMEOUT, **kw)


def post(server, path, **kw):
    return requests.post(server.url + path, timeout=TIMEOUT, **kw)


def infer(server, model, body, version=None, headers=None):
    path = "/v2/models/%s%s/infer" % (model, "" if version is None else "/versions/%s" % version)
    data = body if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
    return post(server, path, data=data, headers=headers or {})


def ok_json(r):
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    return r.json()


def raw_bytes(dtype, values):
    if dtype == "BF16":
        return bf16_bytes(values)
    if dtype == "BYTES":
        return bytes_encode(values)
    return np.array(values, dtype=DTYPES[dtype][1]).astype(
        np.dtype(DTYPES[dtype][1]).newbyteorder("<")).tobytes()


def binary_request(header, chunks):
    """Body and headers of a binary-extension request."""
    js = json.dumps(header).encode()
    return js + b"".join(chunks), {"Inference-Header-Content-Length": str(len(js))}


def split_binary_response(r):
    """(JSON header, {output name: raw bytes}) of a binary-extension response."""
    assert r.status_code == 200, (r.status_code, r.text[:500])
    n = int(r.headers["Inference-Header-Content-Length"])
    head = json.loads(r.content[:n])
    chunks, off = {}, n
    for out in head["outputs"]:
        size = out.get("parameters", {}).get("binary_data_size")
        if size is None:
            continue
        assert "data" not in out, out
        chunks[out["name"]] = r.content[off:off + size]
        off += size
    assert off == len(r.content), "response has %d bytes after its chunks" % (len(r.content) - off)
    return head, chunks


# ---------------------------------------------------------------- health, metadata

def test_health_live_and_ready(server):
    """The Open Inference Protocol's bodies: {"live": true}, {"ready":
    true}, and for a model {"name": ..., "ready": true} (tritonserver sends
    none; KServe's SDK reads them)."""
    for path, key in (("/v2/health/live", "live"), ("/v2/health/ready", "ready")):
        r = get(server, path)
        assert r.status_code == 200
        assert r.headers["Content-Type"] == "application/json"
        assert r.json() == {key: True}
    for path in ("/v2/models/id_fp32/ready", "/v2/models/id_fp32/versions/1/ready"):
        r = get(server, path)
        assert r.status_code == 200, r.text
        assert r.json() == {"name": "id_fp32", "ready": True}


def test_server_metadata(server):
    md = ok_json(get(server, "/v2"))
    assert isinstance(md["name"], str) and md["name"]
    assert isinstance(md["version"], str) and md["version"]
    assert isinstance(md["extensions"], list)
    assert all(isinstance(e, str) for e in md["extensions"])
    assert "binary_tensor_data" in md["extensions"]
    assert "model_configuration" in md["extensions"]


def test_model_metadata_batching(server):
    md = ok_json(get(server, "/v2/models/id_fp32"))
    assert md["name"] == "id_fp32"
    assert md["versions"] == ["1"]
    assert md["platform"] == "identity"  # no platform in the config: the backend
    assert md["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}]
    assert md["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 4]}]


def test_model_metadata_no_batching(server):
    md = ok_json(get(server, "/v2/models/id_nobatch"))
    assert md["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 2]}]
    assert md["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 2]}]


def test_model_metadata_multi_and_bytes(server):
    md = ok_json(get(server, "/v2/models/id_multi"))
    assert md["inputs"] == [{"name": "INPUT0", "datatype": "INT32", "shape": [-1, 3]},
                            {"name": "INPUT1", "datatype": "BYTES", "shape": [-1, -1]}]
    assert [o["datatype"] for o in md["outputs"]] == ["INT32", "BYTES"]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_model_metadata_datatypes(server, dtype):
    md = ok_json(get(server, "/v2/models/" + DTYPES[dtype][0]))
    assert md["inputs"][0]["datatype"] == dtype
    assert md["outputs"][0]["datatype"] == dtype


@pytest.mark.parametrize("model,versions", [
    ("id_versions", ["2"]),            # default policy: latest 1
    ("id_all_versions", ["1", "2", "3"]),
    ("id_specific", ["1"]),
])
def test_model_metadata_versions(server, model, versions):
    md = ok_json(get(server, "/v2/models/" + model))
    assert sorted(md["versions"], key=int) == versions


def test_versioned_metadata(server):
    md = ok_json(get(server, "/v2/models/id_all_versions/versions/2"))
    assert md["name"] == "id_all_versions"
    assert md["versions"] == ["2"]


def test_model_ready(server):
    assert get(server, "/v2/models/id_fp32/ready").status_code == 200
    assert get(server, "/v2/models/id_fp32/versions/1/ready").status_code == 200
    for v in ("1", "2", "3"):
        assert get(server, "/v2/models/id_all_versions/versions/%s/ready" % v).status_code == 200
    r = get(server, "/v2/models/no_such_model/ready")
    assert r.status_code == 404
    assert "error" in r.json()


# ---------------------------------------------------------------- /config

def test_config_batching(server):
    c = ok_json(get(server, "/v2/models/id_fp32/config"))
    assert c["name"] == "id_fp32"
    assert c["backend"] == "identity"
    assert c["max_batch_size"] == 8
    assert c["input"][0]["name"] == "INPUT0"
    assert c["input"][0]["data_type"] == "TYPE_FP32"
    assert c["input"][0]["dims"] == [4]  # numbers, without the batch dim
    assert c["output"][0]["dims"] == [4]
    assert c["version_policy"] == {"latest": {"num_versions": 1}}
    groups = c["instance_group"]
    assert len(groups) >= 1
    for g in groups:
        assert g["name"]
        assert g["count"] >= 1
        assert g["kind"] in ("KIND_CPU", "KIND_GPU")


def test_config_no_batching_and_strings(server):
    c = ok_json(get(server, "/v2/models/id_nobatch/config"))
    assert c["max_batch_size"] == 0
    assert c["input"][0]["dims"] == [-1, 2]
    c = ok_json(get(server, "/v2/models/dt_bytes/config"))
    assert c["input"][0]["data_type"] == "TYPE_STRING"


@pytest.mark.parametrize("model,policy", [
    ("id_all_versions", {"all": {}}),
    ("id_specific", {"specific": {"versions": [1]}}),
])
def test_config_version_policy(server, model, policy):
    c = ok_json(get(server, "/v2/models/%s/config" % model))
    assert c["version_policy"] == policy


def test_config_versioned_url(server):
    c = ok_json(get(server, "/v2/models/id_all_versions/versions/3/config"))
    assert c["name"] == "id_all_versions"


# ---------------------------------------------------------------- repository index

EXPECTED_READY = {("id_fp32", "1"), ("id_nobatch", "1"), ("id_multi", "1"),
                  ("id_versions", "2"), ("id_all_versions", "1"), ("id_all_versions", "2"),
                  ("id_all_versions", "3"), ("id_specific", "1")} | {
                      (m, "1") for m, _, _ in DTYPES.values()}


def test_repository_index(server):
    r = post(server, "/v2/repository/index")
    idx = ok_json(r)
    assert isinstance(idx, list)
    ready = set()
    for e in idx:
        assert set(e) <= {"name", "version", "state", "reason"}, e
        if e.get("state") == "READY":
            assert "reason" not in e or e["reason"] == "", e
            ready.add((e["name"], e["version"]))
    assert ready == EXPECTED_READY


def test_repository_index_ready_only(server):
    idx = ok_json(post(server, "/v2/repository/index", data=json.dumps({"ready": True})))
    assert all(e["state"] == "READY" for e in idx)
    assert {(e["name"], e["version"]) for e in idx} == EXPECTED_READY


# ---------------------------------------------------------------- inference, JSON

def check_output(out, name, dtype, shape):
    assert out["name"] == name
    assert out["datatype"] == dtype
    assert out["shape"] == shape


@pytest.mark.parametrize("dtype", JSON_DTYPES)
def test_infer_json_every_datatype(server, dtype):
    model, npt, values = DTYPES[dtype]
    body = {"inputs": [{"name": "INPUT0", "datatype": dtype, "shape": [1, len(values)],
                        "data": values}]}
    resp = ok_json(infer(server, model, body))
    assert resp["model_name"] == model
    assert resp["model_version"] == "1"
    assert len(resp["outputs"]) == 1
    out = resp["outputs"][0]
    check_output(out, "OUTPUT0", dtype, [1, len(values)])
    data = out["data"]
    # Python's 1 == True == 1.0: check the JSON types too.
    if dtype == "BOOL":
        assert all(isinstance(x, bool) for x in data), data
    elif dtype == "BYTES":
        assert all(isinstance(x, str) for x in data), data
    elif dtype.startswith(("INT", "UINT")):
        assert all(isinstance(x, int) and not isinstance(x, bool) for x in data), data
    if dtype == "FP32":
        # FP32 is printed widened to double: compare after rounding back.
        assert np.array_equal(np.array(data, dtype=np.float32), np.array(values, dtype=np.float32))
    else:
        assert data == values


def test_infer_json_uint64_full_range(server):
    values = [0, 2**63, 2**64 - 1]
    body = {"inputs": [{"name": "INPUT0", "datatype": "UINT64", "shape": [1, 3], "data": values}]}
    out = ok_json(infer(server, "dt_uint64", body))["outputs"][0]
    assert out["data"] == values


def test_infer_json_nested_data(server):
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2, 4],
                        "data": [[1, 2, 3, 4], [5, 6, 7, 8]]}]}
    out = ok_json(infer(server, "id_fp32", body))["outputs"][0]
    check_output(out, "OUTPUT0", "FP32", [2, 4])
    assert out["data"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]


@pytest.mark.parametrize("batch", range(1, 9))
def test_infer_batch_sizes(server, batch):
    values = np.arange(batch * 4, dtype=np.float32) * 0.5 - 3
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [batch, 4],
                        "data": values.tolist()}]}
    out = ok_json(infer(server, "id_fp32", body))["outputs"][0]
    check_output(out, "OUTPUT0", "FP32", [batch, 4])
    assert np.array_equal(np.array(out["data"], dtype=np.float32), values)


def test_infer_no_batching(server):
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [3, 2],
                        "data": [1, 2, 3, 4, 5, 6]}]}
    out = ok_json(infer(server, "id_nobatch", body))["outputs"][0]
    check_output(out, "OUTPUT0", "FP32", [3, 2])
    assert out["data"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_infer_zero_sized_variable_dim(server):
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [0, 2], "data": []}]}
    out = ok_json(infer(server, "id_nobatch", body))["outputs"][0]
    check_output(out, "OUTPUT0", "FP32", [0, 2])
    assert out.get("data", []) == []


def multi_body(**extra):
    body = {"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [2, 3], "data": [1, -2, 3, 4, 5, -6]},
        {"name": "INPUT1", "datatype": "BYTES", "shape": [2, 2], "data": ["a", "bc", "", "d e"]},
    ]}
    body.update(extra)
    return body


def test_infer_multi_all_outputs(server):
    resp = ok_json(infer(server, "id_multi", multi_body()))
    outs = {o["name"]: o for o in resp["outputs"]}
    assert set(outs) == {"OUTPUT0", "OUTPUT1"}
    check_output(outs["OUTPUT0"], "OUTPUT0", "INT32", [2, 3])
    assert outs["OUTPUT0"]["data"] == [1, -2, 3, 4, 5, -6]
    check_output(outs["OUTPUT1"], "OUTPUT1", "BYTES", [2, 2])
    assert outs["OUTPUT1"]["data"] == ["a", "bc", "", "d e"]


def test_infer_requested_output_subset(server):
    resp = ok_json(infer(server, "id_multi", multi_body(outputs=[{"name": "OUTPUT1"}])))
    assert [o["name"] for o in resp["outputs"]] == ["OUTPUT1"]
    assert resp["outputs"][0]["data"] == ["a", "bc", "", "d e"]


def test_infer_id_echoed(server):
    body = {"id": "req-42", "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                        "data": [1, 2, 3, 4]}]}
    assert ok_json(infer(server, "id_fp32", body))["id"] == "req-42"
    del body["id"]
    assert "id" not in ok_json(infer(server, "id_fp32", body))


def test_infer_versioned(server):
    body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 2], "data": [7, 8]}]}
    for v in ("1", "2", "3"):
        resp = ok_json(infer(server, "id_all_versions", body, version=v))
        assert resp["model_version"] == v
        assert resp["outputs"][0]["data"] == [7, 8]
    assert ok_json(infer(server, "id_all_versions", body))["model_version"] == "3"
    assert ok_json(infer(server, "id_versions", body))["model_version"] == "2"
    assert ok_json(infer(server, "id_specific", body))["model_version"] == "1"


def test_infer_request_parameters_accepted(server):
    body = {"parameters": {"custom_s": "x", "custom_i": 3, "custom_b": True},
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                        "data": [1, 2, 3, 4]}]}
    assert ok_json(infer(server, "id_fp32", body))["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


# ---------------------------------------------------------------- inference, binary

@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_infer_binary_every_datatype(server, dtype):
    model, _, values = DTYPES[dtype]
    if dtype == "BYTES":
        values = values + [b"\x00\xff\xfe binary"]  # not UTF-8: binary only
    raw = raw_bytes(dtype, values)
    header = {"inputs": [{"name": "INPUT0", "datatype": dtype, "shape": [1, len(values)],
                          "parameters": {"binary_data_size": len(raw)}}],
              "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    body, headers = binary_request(header, [raw])
    r = infer(server, model, body, headers=headers)
    assert r.headers["Content-Type"].startswith("application/octet-stream"), r.headers
    head, chunks = split_binary_response(r)
    out = head["outputs"][0]
    check_output(out, "OUTPUT0", dtype, [1, len(values)])
    assert out["parameters"]["binary_data_size"] == len(raw)
    assert chunks["OUTPUT0"] == raw


def test_infer_binary_uint64_full_range(server):
    raw = np.array([0, 2**63, 2**64 - 1], dtype="<u8").tobytes()
    header = {"inputs": [{"name": "INPUT0", "datatype": "UINT64", "shape": [1, 3],
                          "parameters": {"binary_data_size": len(raw)}}],
              "parameters": {"binary_data_output": True}}
    body, headers = binary_request(header, [raw])
    _, chunks = split_binary_response(infer(server, "dt_uint64", body, headers=headers))
    assert chunks["OUTPUT0"] == raw


def test_infer_binary_input_json_output(server):
    values = np.array([[0.25, -1, 2, 1e-3], [9, 8, 7, 6]], dtype="<f4")
    header = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2, 4],
                          "parameters": {"binary_data_size": values.nbytes}}]}
    body, headers = binary_request(header, [values.tobytes()])
    out = ok_json(infer(server, "id_fp32", body, headers=headers))["outputs"][0]
    check_output(out, "OUTPUT0", "FP32", [2, 4])
    assert np.array_equal(np.array(out["data"], dtype=np.float32), values.ravel())


def test_infer_binary_mixed_inputs(server):
    """INPUT0 as JSON, INPUT1 binary: the one chunk belongs to INPUT1."""
    raw1 = bytes_encode([b"x", b"\x01\x02", b"", b"last"])
    header = {"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]},
        {"name": "INPUT1", "datatype": "BYTES", "shape": [2, 2],
         "parameters": {"binary_data_size": len(raw1)}}],
        "parameters": {"binary_data_output": True}}
    body, headers = binary_request(header, [raw1])
    head, chunks = split_binary_response(infer(server, "id_multi", body, headers=headers))
    assert [o["name"] for o in head["outputs"]] == ["OUTPUT0", "OUTPUT1"]
    assert chunks["OUTPUT0"] == np.arange(1, 7, dtype="<i4").tobytes()
    assert chunks["OUTPUT1"] == raw1


def test_binary_data_output_parameter(server):
    head, chunks = split_binary_response(
        infer(server, "id_multi", multi_body(parameters={"binary_data_output": True})))
    assert [o["name"] for o in head["outputs"]] == ["OUTPUT0", "OUTPUT1"]
    assert chunks["OUTPUT0"] == np.array([1, -2, 3, 4, 5, -6], dtype="<i4").tobytes()
    assert chunks["OUTPUT1"] == bytes_encode(["a", "bc", "", "d e"])
    assert head["outputs"][0]["parameters"]["binary_data_size"] == 24


def test_binary_data_per_output(server):
    """OUTPUT1 binary, OUTPUT0 JSON, in the order requested."""
    body = multi_body(outputs=[{"name": "OUTPUT1", "parameters": {"binary_data": True}},
                               {"name": "OUTPUT0", "parameters": {"binary_data": False}}])
    head, chunks = split_binary_response(infer(server, "id_multi", body))
    assert [o["name"] for o in head["outputs"]] == ["OUTPUT1", "OUTPUT0"]
    assert head["outputs"][1]["data"] == [1, -2, 3, 4, 5, -6]
    assert set(chunks) == {"OUTPUT1"}
    assert chunks["OUTPUT1"] == bytes_encode(["a", "bc", "", "d e"])


# ---------------------------------------------------------------- connection, compression

def test_keep_alive_one_connection(server):
    """Several requests on one TCP connection, each answered in full."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                   "data": [1, 2, 3, 4]}]}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        f = s.makefile("rb")
        for i in range(5):
            if i % 2:
                req = b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
            else:
                req = (b"POST /v2/models/id_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                       % len(body)) + body
            s.sendall(req)
            code, headers, payload = read_http_response(f)
            assert code == 200, payload
            assert headers.get("connection", "").lower() != "close"
            if i % 2 == 0:
                assert json.loads(payload)["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("binary,accept", [(False, None), (True, None), (True, "gzip")])
def test_infer_reply_headers_on_the_wire(server, binary, accept):
    """An inference reply's header block, byte by byte: every header on a
    line of its own, each exactly once, lengths that match the body (the
    server pieces the head together itself, conn.c)."""
    outputs = [{"name": "OUTPUT0", "parameters": {"binary_data": binary}}]
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                   "data": [1, 2, 3, 4]}], "outputs": outputs}).encode()
    extra = b"Accept-Encoding: %s\r\n" % accept.encode() if accept else b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        s.sendall(b"POST /v2/models/id_fp32/infer HTTP/1.1\r\nHost: x\r\n" + extra +
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) +
                  body)
        raw = b""
        while b"\r\n\r\n" not in raw:
            chunk = s.recv(65536)
            assert chunk, raw
            raw += chunk
        head, rest = raw.split(b"\r\n\r\n", 1)
        lines = head.decode("ascii").split("\r\n")
        assert lines[0] == "HTTP/1.1 200 OK", lines
        names = [ln.split(":", 1)[0].lower() for ln in lines[1:]]
        assert all(":" in ln and "\r" not in ln and "\n" not in ln for ln in lines[1:]), lines
        headers = {ln.split(":", 1)[0].lower(): ln.split(":", 1)[1].strip() for ln in lines[1:]}
        want = {"content-length", "content-type", "date"}
        if binary:
            want.add("inference-header-content-length")
        if accept:
            want.add("content-encoding")
        assert sorted(names) == sorted(want), lines
        n = int(headers["content-length"])
        while len(rest) < n:
            rest += s.recv(65536)
        assert len(rest) == n
    if accept:
        assert headers["content-encoding"] == "gzip"
        rest = gzip.decompress(rest)
    json_len = int(headers.get("inference-header-content-length", len(rest)))
    assert headers["content-type"] == ("application/octet-stream" if binary else "application/json")
    reply = json.loads(rest[:json_len])
    assert reply["model_name"] == "id_fp32"
    if binary:
        assert np.frombuffer(rest[json_len:], dtype=np.float32).tolist() == [1, 2, 3, 4]
    else:
        assert len(rest) == json_len and reply["outputs"][0]["data"] == [1, 2, 3, 4]
    # RFC 7231 IMF-fixdate, e.g. "Thu, 26 Nov 2026 23:40:00 GMT"
    assert len(headers["date"]) == 29 and headers["date"].endswith(" GMT"), headers


def test_keep_alive_session(server):
    with requests.Session() as sess:
        for i in range(10):
            body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                "data": [i, i + 1, i + 2, i + 3]}]}
            r = sess.post(server.url + "/v2/models/id_fp32/infer", data=json.dumps(body),
                          timeout=TIMEOUT)
            assert ok_json(r)["outputs"][0]["data"] == [float(i + k) for k in range(4)]


@pytest.mark.parametrize("encoding,compress", [("gzip", gzip.compress), ("deflate", zlib.compress)])
def test_compressed_request_json(server, encoding, compress):
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                        "data": [4, 3, 2, 1]}]}
    r = infer(server, "id_fp32", compress(json.dumps(body).encode()),
              headers={"Content-Encoding": encoding})
    assert ok_json(r)["outputs"][0]["data"] == [4.0, 3.0, 2.0, 1.0]


@pytest.mark.parametrize("encoding,compress", [("gzip", gzip.compress), ("deflate", zlib.compress)])
def test_compressed_request_binary(server, encoding, compress):
    """Inference-Header-Content-Length counts the decompressed JSON."""
    raw = np.array([1.5, 2.5, 3.5, 4.5], dtype="<f4").tobytes()
    header = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                          "parameters": {"binary_data_size": len(raw)}}],
              "parameters": {"binary_data_output": True}}
    body, headers = binary_request(header, [raw])
    headers["Content-Encoding"] = encoding
    _, chunks = split_binary_response(infer(server, "id_fp32", compress(body), headers=headers))
    assert chunks["OUTPUT0"] == raw


@pytest.mark.parametrize("length_name,encoding_name,accept_name", [
    ("inference-header-content-length", "content-encoding", "accept-encoding"),
    ("INFERENCE-HEADER-CONTENT-LENGTH", "CONTENT-ENCODING", "ACCEPT-ENCODING"),
    ("iNfErEnCe-HeAdEr-CoNtEnT-lEnGtH", "cOnTeNt-EnCoDiNg", "AcCePt-EnCoDiNg"),
])
def test_inference_headers_any_case(server, length_name, encoding_name, accept_name):
    """HTTP header names are case-insensitive (RFC 9110 §5.1): the three an
    inference reads count in any case."""
    raw = np.array([1.5, -2.5, 3.25, 0.0], dtype="<f4").tobytes()
    header = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                          "parameters": {"binary_data_size": len(raw)}}],
              "parameters": {"binary_data_output": True}}
    body, _ = binary_request(header, [raw])
    n = len(json.dumps(header).encode())
    r = infer(server, "id_fp32", gzip.compress(body),
              headers={length_name: str(n), encoding_name: "gzip", accept_name: "gzip"})
    # requests sends our header in place of its own Accept-Encoding, and
    # undoes the gzip (r.content is the plain body).
    assert r.headers.get("Content-Encoding") == "gzip", r.headers
    plain = r.content
    m = int(r.headers["Inference-Header-Content-Length"])
    assert json.loads(plain[:m])["outputs"][0]["parameters"]["binary_data_size"] == len(raw)
    assert plain[m:] == raw


@pytest.mark.parametrize("name", ["Inference-Header-Content-Lenxth",
                                  "Inference_Header_Content_Length"])
def test_a_near_miss_header_name_is_not_the_header(server, name):
    """A header of the same length but another name is not
    Inference-Header-Content-Length: the body is then JSON, and this one is
    not."""
    raw = np.array([1.0, 2.0, 3.0, 4.0], dtype="<f4").tobytes()
    header = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                          "parameters": {"binary_data_size": len(raw)}}]}
    body, _ = binary_request(header, [raw])
    r = infer(server, "id_fp32", body, headers={name: str(len(json.dumps(header)))})
    assert r.status_code == 400, (r.status_code, r.text)
    assert "error" in r.json()


@pytest.mark.parametrize("accept,expected,decompress", [
    ("gzip", "gzip", gzip.decompress),
    ("deflate", "deflate", zlib.decompress),
    ("gzip;q=0.5, deflate;q=0.9", "deflate", zlib.decompress),
    ("identity", None, None),
])
def test_compressed_response(server, accept, expected, decompress):
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                        "data": [1, 2, 3, 4]}]}
    r = requests.post(server.url + "/v2/models/id_fp32/infer", data=json.dumps(body),
                      headers={"Accept-Encoding": accept}, timeout=TIMEOUT, stream=True)
    assert r.status_code == 200
    wire = r.raw.read(decode_content=False)
    assert r.headers.get("Content-Encoding") == expected
    plain = decompress(wire) if decompress else wire
    assert json.loads(plain)["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


def test_compressed_binary_response_header_counts_plain_json(server):
    raw = np.array([9, 8, 7, 6], dtype="<f4").tobytes()
    header = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                          "parameters": {"binary_data_size": len(raw)}}],
              "parameters": {"binary_data_output": True}}
    body, headers = binary_request(header, [raw])
    headers["Accept-Encoding"] = "gzip"
    r = requests.post(server.url + "/v2/models/id_fp32/infer", data=body, headers=headers,
                      timeout=TIMEOUT, stream=True)
    assert r.status_code == 200
    assert r.headers.get("Content-Encoding") == "gzip"
    plain = gzip.decompress(r.raw.read(decode_content=False))
    n = int(r.headers["Inference-Header-Content-Length"])
    head = json.loads(plain[:n])
    assert head["outputs"][0]["parameters"]["binary_data_size"] == len(raw)
    assert plain[n:] == raw
