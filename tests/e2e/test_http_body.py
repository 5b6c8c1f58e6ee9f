"""Large HTTP request bodies, end to end, against the identity backend.

The transport reads the rest of an admitted body with large reads straight
into its buffer (conn.c, read_body_direct; under evhttp libevent 2.1 read
4096 bytes a loop turn;
docs/internals/http.md, "Large bodies"). These tests pin down what that
must not change: every byte of a body arrives in order however the client
cuts it up, a body is never read past its Content-Length (the next request
on the connection is left intact), and a client that goes away mid-body
costs nothing lasting.

Expected values never come from ptserve: the identity backend echoes
INPUT0 as OUTPUT0, so the expected output is the input, made here with
numpy.
"""
import json
import socket
import struct
import time

import numpy as np
import pytest
import requests

from conftest import free_port, launch_server, module_server, read_http_response, wait_for

TIMEOUT = 20
MODEL = "dt_uint8"  # identity, UINT8, dims [-1], max_batch_size 8


def launch(bin_path, repo, log_path):
    return launch_server(bin_path, repo, log_path, metrics_port=free_port(), grpc_port=0)


server = module_server(launch, "http_body")


def data_of(n, seed):
    return np.random.default_rng(seed).integers(0, 256, size=n, dtype=np.uint8)


def infer_request(x, extra_headers=b""):
    """One complete binary-extension request (head and body) for MODEL."""
    header = json.dumps({
        "inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [1, len(x)],
                    "parameters": {"binary_data_size": len(x)}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    body = header + x.tobytes()
    head = (b"POST /v2/models/%s/infer HTTP/1.1\r\nHost: t\r\n"
            b"Content-Type: application/octet-stream\r\n"
            b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n%s\r\n"
            % (MODEL.encode(), len(header), len(body), extra_headers))
    return head, body


def assert_echo(response, x):
    code, headers, body = response
    assert code == 200, body[:500]
    n = int(headers["inference-header-content-length"])
    out = json.loads(body[:n])["outputs"][0]
    assert out["name"] == "OUTPUT0" and out["datatype"] == "UINT8", out
    assert out["shape"] == [1, len(x)], out
    assert out["parameters"]["binary_data_size"] == len(x), out
    assert len(body) == n + len(x)
    got = np.frombuffer(body[n:], dtype=np.uint8)
    assert np.array_equal(got, x), "first difference at byte %d" % int(np.argmax(got != x))


def connect(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
    return s, s.makefile("rb")


def memory_held(server):
    for line in requests.get(server.metrics_url, timeout=TIMEOUT).text.splitlines():
        if line.startswith("ptserve_request_memory_bytes "):
            return float(line.split()[1])
    raise AssertionError("no ptserve_request_memory_bytes in /metrics")


# ---------------------------------------------------------------- whole bodies

@pytest.mark.parametrize("n", [300_000, 6 << 20])
def test_large_body_in_one_send(server, n):
    """Head and body written at once; 6 MiB is more than the frontend
    reads in one go (4 MiB), so the rest comes with later read events."""
    x = data_of(n, n)
    head, body = infer_request(x)
    s, f = connect(server)
    with s:
        s.sendall(head + body)
        assert_echo(read_http_response(f), x)


def test_large_body_in_slow_pieces(server):
    """The head in two pieces, the body in uneven pieces with pauses: each
    piece reaches the server on its own, so the body is read a piece at a
    time, with reads that find the socket empty in between."""
    x = data_of(300_000, 7)
    head, body = infer_request(x)
    s, f = connect(server)
    with s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(head[:40])
        time.sleep(0.05)
        s.sendall(head[40:] + body[:1000])
        cuts = [1000, 5000, 5001, 70_000, 200_000, len(body) - 1, len(body)]
        for a, b in zip(cuts, cuts[1:]):
            time.sleep(0.05)
            s.sendall(body[a:b])
        assert_echo(read_http_response(f), x)


def test_body_lengths_around_one_libevent_read(server):
    """Bodies whose remainder after the first read is just below, at and
    just above what libevent reads at once (4096), one after the other on a
    keep-alive connection, each sent after its head."""
    s, f = connect(server)
    with s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i, n in enumerate([4000, 4095, 4096, 4097, 4200, 65_537]):
            x = data_of(n, 100 + i)
            head, body = infer_request(x)
            s.sendall(head)
            time.sleep(0.02)
            s.sendall(body)
            assert_echo(read_http_response(f), x)


def test_expect_100_continue_with_a_large_body(server):
    """The client waits for 100 Continue before it sends the body (curl
    does so for large bodies): when the head is read, none of the body is
    there yet."""
    x = data_of(500_000, 9)
    head, body = infer_request(x, b"Expect: 100-continue\r\n")
    s, f = connect(server)
    with s:
        s.sendall(head)
        code, _, _ = read_http_response(f)
        assert code == 100
        s.sendall(body)
        assert_echo(read_http_response(f), x)


# ---------------------------------------------------------------- keep-alive, pipelining

def test_pipelined_requests_after_a_large_body(server):
    """Three requests written at once on one connection: a large body, a
    small JSON request, another large body. Reading the first body must
    stop at its Content-Length: the next requests are answered, in order."""
    x1, x3 = data_of(300_000, 1), data_of(200_000, 3)
    h1, b1 = infer_request(x1)
    h3, b3 = infer_request(x3)
    small = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [1, 3],
                                    "data": [1, 2, 250]}]}).encode()
    req2 = (b"POST /v2/models/%s/infer HTTP/1.1\r\nHost: t\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (MODEL.encode(), len(small))) + small
    s, f = connect(server)
    with s:
        s.sendall(h1 + b1 + req2 + h3 + b3)
        assert_echo(read_http_response(f), x1)
        code, _, payload = read_http_response(f)
        assert code == 200, payload
        out = json.loads(payload)["outputs"][0]
        assert out["shape"] == [1, 3] and out["data"] == [1, 2, 250], out
        assert_echo(read_http_response(f), x3)


def test_large_body_then_get_in_the_same_segment(server):
    """The last bytes of a large body and a whole GET in one write."""
    x = data_of(150_000, 11)
    head, body = infer_request(x)
    s, f = connect(server)
    with s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(head + body[:-10])
        time.sleep(0.05)
        s.sendall(body[-10:] + b"GET /v2/health/ready HTTP/1.1\r\nHost: t\r\n\r\n")
        assert_echo(read_http_response(f), x)
        code, _, _ = read_http_response(f)
        assert code == 200


# ---------------------------------------------------------------- clients that go away

@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
def test_client_closing_mid_body(server, reset):
    """Clients announce 1 MB and close (or reset) after part of it, some
    after a pause: the server keeps serving others, large bodies included,
    and what the abandoned bodies held of the memory budget comes back."""
    x = data_of(1_000_000, 5)
    head, body = infer_request(x)
    socks = []
    for sent in (0, 3000, 100_000, 600_000, len(body) - 1):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
        s.sendall(head + body[:sent])
        socks.append(s)
    time.sleep(0.2)
    for s in socks:
        if reset:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    # Meanwhile and afterwards, others are served.
    y = data_of(400_000, 6)
    h2, b2 = infer_request(y)
    s, f = connect(server)
    with s:
        s.sendall(h2 + b2)
        assert_echo(read_http_response(f), y)
    r = requests.get(server.url + "/v2/health/ready", timeout=TIMEOUT)
    assert r.status_code == 200
    wait_for("the abandoned bodies' budget to return", lambda: memory_held(server) == 0,
             timeout=15.0)
