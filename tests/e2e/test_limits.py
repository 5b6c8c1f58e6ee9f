"""Limits: request body, decompressed body, header size, JSON nesting depth,
element counts, batch size, number of inputs, connection timeouts — and the
server goes on serving after each refusal.

Expected codes and texts: protocol-facts §1.2 (error object), Triton's
--http-max-input-size semantics (the decompressed size counts too), and
Triton's JSON depth limit of 100 for 'data'.
"""
import gzip
import json
import socket
import struct
import subprocess
import time

import pytest
import requests

GOOD = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                    "data": [1.0, 2.0, 3.0, 4.0]}]}


def infer(server, body, **kw):
    return requests.post(server.url + "/v2/models/id_fp32/infer", data=body, timeout=30, **kw)


def still_serving(server):
    r = requests.post(server.url + "/v2/models/id_fp32/infer", json=GOOD, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


def error_of(r):
    assert r.headers["Content-Type"] == "application/json", r.headers
    return r.json()["error"]


def test_body_above_max_input_size(start_server, model_repo):
    server = start_server(model_repo("identity"), "--http-max-input-size", 4096)
    body = json.dumps(GOOD).encode() + b" " * 5000  # valid JSON, just too long
    r = infer(server, body)
    assert r.status_code == 413
    assert "exceeds the maximum allowed input size of 4096 bytes" in error_of(r)
    # Far above the limit: refused while reading, never buffered.
    r = infer(server, b"x" * (8 << 20))
    assert r.status_code == 413
    still_serving(server)


def test_decompressed_body_counts_against_the_limit(start_server, model_repo):
    server = start_server(model_repo("identity"), "--http-max-input-size", 65536)
    bomb = gzip.compress(json.dumps(GOOD).encode() + b" " * (16 << 20))
    assert len(bomb) < 65536  # the compressed body itself is small
    r = infer(server, bomb, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 413
    assert "larger than the maximum allowed" in error_of(r)
    still_serving(server)


def send_raw(port, data, timeout=10):
    """Sends raw bytes and reads until the server closes. A server that
    refuses the request may close (or reset) before the client is done
    sending; that is an answer too, so it reads as what arrived."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        out = b""
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return out
                out += chunk
        except (BrokenPipeError, ConnectionResetError, OSError) as e:
            if isinstance(e, socket.timeout):
                raise
            return out


def test_header_size_limit(start_server, model_repo):
    server = start_server(model_repo("identity"), "--http-max-header-size", 2048)
    big = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 4096 + b"\r\n\r\n"
    reply = send_raw(server.port, big)
    # refused with a JSON error that names the limit
    assert reply.split(b"\r\n")[0] == b"HTTP/1.1 413 Payload Too Large", reply[:80]
    assert b"--http-max-header-size" in reply, reply
    small = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 512 + \
        b"\r\nConnection: close\r\n\r\n"
    assert send_raw(server.port, small).startswith(b"HTTP/1.1 200")
    still_serving(server)


def nested(depth, leaf):
    return "[" * depth + leaf + "]" * depth


def test_data_nesting_depth(start_server, model_repo):
    server = start_server(model_repo("identity"))
    body = '{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,1],"data":%s}]}'
    # 100 levels are fine for the decoder (the model then checks the shape).
    ok = requests.post(server.url + "/v2/models/dt_bytes/infer", data=body % nested(100, '"a"'))
    assert ok.status_code == 200, ok.text
    assert ok.json()["outputs"][0]["data"] == ["a"]
    r = requests.post(server.url + "/v2/models/dt_bytes/infer", data=body % nested(101, '"a"'))
    assert r.status_code == 400
    # Triton's words first (its QA's http_test.py matches them), then the input
    assert error_of(r).startswith("JSON nesting depth exceeds maximum allowed limit (100)")
    assert "input 'INPUT0': 'data' is nested deeper than 100 levels" in error_of(r)
    still_serving(server)


def test_json_document_depth(start_server, model_repo):
    server = start_server(model_repo("identity"))
    # Deep nesting anywhere in the document: a clear 400, never a stack overflow.
    for depth in (3000, 200000):
        doc = '{"inputs":[],"parameters":{"x":%s}}' % nested(depth, "1")
        r = infer(server, doc.encode())
        assert r.status_code == 400, (depth, r.text[:200])
        assert "failed to parse the request JSON" in error_of(r)
    still_serving(server)


def test_element_count_does_not_drive_allocation(start_server, model_repo):
    server = start_server(model_repo("identity"))
    # Shapes claiming 10^12 or 2^62 elements with tiny data: refused by count,
    # nothing of that size is ever allocated.
    for shape in ([1, 10 ** 12], [2 ** 31, 2 ** 31], [2 ** 62, 4]):
        body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape,
                            "data": [1.0]}]}
        r = infer(server, json.dumps(body))
        assert r.status_code == 400, r.text
        assert any(w in error_of(r) for w in ("elements", "causes total element count",
                                              "byte size overflow for input")), error_of(r)
    # Past INT64_MAX elements, or bytes: Triton's words (qa/L0_http
    # test_buffer_size_overflow matches them), then the shape.
    for shape, words in (([2 ** 4, 2 ** 60 + 2], "input 'INPUT0': shape [16,1152921504606846978] "
                          "causes total element count to exceed maximum size of "
                          "9223372036854775807"),
                         ([2 ** 2, 2 ** 60 + 2], "byte size overflow for input 'INPUT0': shape "
                          "[4,1152921504606846978] of FP32")):
        body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape,
                            "data": [1.0]}]}
        r = infer(server, json.dumps(body))
        assert r.status_code == 400, r.text
        assert words in error_of(r), error_of(r)
    # binary_data_size far beyond the body.
    hdr = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                  "parameters": {"binary_data_size": 2 ** 60}}]}).encode()
    r = infer(server, hdr + b"\0" * 16,
              headers={"Inference-Header-Content-Length": str(len(hdr))})
    assert r.status_code == 400
    assert "only 16 remain" in error_of(r)
    # A header length larger than the body.
    r = infer(server, json.dumps(GOOD), headers={"Inference-Header-Content-Length": str(2 ** 63)})
    assert r.status_code == 400
    # BYTES element lengths past the end.
    hdr = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1, 1],
                                  "parameters": {"binary_data_size": 8}}]}).encode()
    r = requests.post(server.url + "/v2/models/dt_bytes/infer",
                      data=hdr + struct.pack("<I", 0xFFFFFFF0) + b"abcd",
                      headers={"Inference-Header-Content-Length": str(len(hdr))})
    assert r.status_code == 400
    still_serving(server)


def test_batch_and_input_count_limits(start_server, model_repo):
    server = start_server(model_repo("identity"))
    # id_fp32 has max_batch_size 8 (its config.pbtxt).
    big = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [9, 4],
                       "data": [0.0] * 36}]}
    r = infer(server, json.dumps(big))
    assert r.status_code == 400
    assert "batch" in error_of(r)
    # Thousands of inputs: refused as unknown, without harm (within the
    # request's own timeout; no time is asserted).
    many = {"inputs": [{"name": "IN%d" % i, "datatype": "FP32", "shape": [1, 1], "data": [0.0]}
                       for i in range(20000)]}
    r = infer(server, json.dumps(many))
    assert r.status_code == 400
    # Thousands of requested outputs.
    outs = dict(GOOD, outputs=[{"name": "O%d" % i} for i in range(20000)])
    r = infer(server, json.dumps(outs))
    assert r.status_code == 400
    still_serving(server)


def test_silent_connection_is_closed(start_server, model_repo):
    server = start_server(model_repo("identity"), "--http-timeout-secs", 1)
    # The socket's own timeout (60 s) only bounds a server that never closes.
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
        s.sendall(b"POST /v2/models/id_fp32/infer HTTP/1.1\r\nHost: x\r\n")  # then nothing
        t0 = time.time()
        data = s.recv(4096)  # the server closes the connection
        waited = time.time() - t0
    assert not data.startswith(b"HTTP/1.1 200")
    # Closed by the 1 s timeout, not at once. Only a lower bound: a busy
    # machine can make the close later, never earlier.
    assert waited > 0.5, waited
    still_serving(server)


@pytest.mark.parametrize("flag,value", [
    ("--http-max-header-size", "10"),
    ("--http-max-header-size", "-1"),
    ("--http-timeout-secs", "-1"),
    ("--http-timeout-secs", "x"),
    ("--exit-timeout-secs", "-5"),
    ("--http-max-input-size", "0"),
])
def test_limit_flags_are_range_checked(ptserve_bin, model_repo, flag, value):
    p = subprocess.run([ptserve_bin, "--model-repository", model_repo("identity"),
                        flag + "=" + value], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "invalid value '%s' for %s" % (value, flag) in p.stderr
