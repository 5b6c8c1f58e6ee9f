"""The HTTP/1.1 transport itself (src/frontend/http/conn.c): what a client
sees of request parsing, keep-alive and bodies, spoken in raw bytes where a
client library would hide it. Expected values are HTTP's (RFC 9110/9112)
and the identity model's echo of the input."""
import json
import os
import signal
import socket
import struct

import requests

from conftest import launch_server, module_server

TIMEOUT = 10


def infer_body(values):
    """A JSON inference request for id_fp32 with four FP32 values."""
    return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                   "data": values}]}).encode()


BODY = infer_body([1, 2, 3, 4])


def infer_request(values, keep_alive=True):
    body = infer_body(values)
    return (b"POST /v2/models/id_fp32/infer HTTP/1.1\r\nHost: x\r\n"
            + (b"" if keep_alive else b"Connection: close\r\n")
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def launch(bin_path, repo, log_path, *args, expect_ready=True, timeout=60):
    return launch_server(bin_path, repo, log_path, *args, metrics_port=0, grpc_port=0,
                         expect_ready=expect_ready, timeout=timeout)


server = module_server(launch, "protocol")


def read_head(sock, buf=b""):
    """(status line, headers with lower-case names, bytes after the head)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, buf
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("ascii").split("\r\n")
    headers = {ln.split(":", 1)[0].lower(): ln.split(":", 1)[1].strip() for ln in lines[1:]}
    return lines[0], headers, rest


def read_reply(sock, buf=b""):
    """(status line, headers, body, bytes after the body) of one reply."""
    status, headers, rest = read_head(sock, buf)
    n = int(headers["content-length"])
    while len(rest) < n:
        chunk = sock.recv(65536)
        assert chunk, rest
        rest += chunk
    return status, headers, rest[:n], rest[n:]


def read_to_close(sock):
    out = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return out
        out += chunk


def still_serving(server):
    assert requests.get(server.url + "/v2/health/ready", timeout=TIMEOUT).status_code == 200


def test_chunked_request_body_is_read_whole(server):
    """A body sent with Transfer-Encoding: chunked, in pieces that split the
    JSON anywhere, reaches the model as if sent in one piece."""
    pieces = [BODY[i:i + 7] for i in range(0, len(BODY), 7)]
    r = requests.post(server.url + "/v2/models/id_fp32/infer", data=iter(pieces),
                      timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


def test_chunked_with_a_content_length_is_read_by_chunks_then_closed(server):
    """Both Transfer-Encoding: chunked and a Content-Length (what requests
    sends when a caller sets the chunked header, as Triton's QA does): RFC
    9112 §6.3 reads the body by its chunks and closes the connection after
    the reply, so bytes a length-reading proxy would take for a second
    request are never served as one."""
    chunked = b"%X\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
    smuggled = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        s.sendall(b"POST /v2/models/id_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n" % len(chunked)
                  + chunked + smuggled)
        reply = read_to_close(s)  # answered once, then closed
    status, headers, body, rest = read_reply(None, reply)
    assert status == "HTTP/1.1 200 OK", (status, body)
    assert headers["connection"].lower() == "close"
    assert json.loads(body)["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]
    assert rest == b"", rest  # the request after the body was not answered
    still_serving(server)


def test_malformed_request_is_400_naming_the_parse_error(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        s.sendall(b"G\x01T /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = read_to_close(s)  # answered, then closed
    head, rest = reply.split(b"\r\n\r\n", 1)
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 400 Bad Request", head
    assert b"connection: close" in head.lower()
    msg = json.loads(rest)["error"]
    assert msg.startswith("malformed HTTP request: ") and "HPE_INVALID_METHOD" in msg, msg
    still_serving(server)


def test_http10_closes_after_the_reply_unless_kept_alive(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.0\r\n\r\n")
        reply = read_to_close(s)
    assert reply.startswith(b"HTTP/1.0 200 OK\r\n"), reply
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        rest = b""
        for _ in range(2):  # the same connection twice
            s.sendall(b"GET /v2/health/live HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            status, headers, body, rest = read_reply(s, rest)
            assert status == "HTTP/1.0 200 OK"
            assert headers["connection"].lower() == "keep-alive"
            assert body == b'{"live":true}' and rest == b""


def test_head_reply_has_no_body(server):
    """A HEAD request is answered (405, as every method the route does not
    take) with a Content-Length but no body bytes: the next reply on the
    connection starts right after the head."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        s.sendall(b"HEAD /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, rest = read_head(s)
        assert status == "HTTP/1.1 405 Method Not Allowed"
        assert int(headers["content-length"]) > 0
        status2, _, body2, _ = read_reply(s, rest)
        assert status2 == "HTTP/1.1 200 OK", (status2, rest)
        assert body2 == b'{"live":true}'


def test_expect_continue_is_not_sent_for_a_refused_body(server):
    """A client that waits for 100 Continue before sending a body gets the
    refusal instead, and sends nothing it would have to throw away."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        s.sendall(b"POST /v2/models/id_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (1 << 40))
        reply = read_to_close(s)
    assert reply.startswith(b"HTTP/1.1 413 "), reply[:80]
    assert b"100 Continue" not in reply
    assert b"--http-max-input-size" in reply
    still_serving(server)


def test_pipelined_requests_answered_in_order(server):
    """Three requests in one send: three replies, in the order asked."""
    infer = infer_request([1, 2, 3, 4])
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        s.sendall(infer + b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n" + infer)
        rest = b""
        bodies = []
        for _ in range(3):
            status, _, body, rest = read_reply(s, rest)
            assert status == "HTTP/1.1 200 OK"
            bodies.append(body)
    assert json.loads(bodies[0])["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]
    assert json.loads(bodies[1]) == {"ready": True}
    assert json.loads(bodies[2])["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


class Stopped:
    """The server stopped (SIGSTOP) for the block, so that everything sent
    meanwhile is waiting on its sockets when it resumes: its loops find the
    requests of several connections ready in the same epoll_wait."""

    def __init__(self, server):
        self.pid = server.proc.pid

    def __enter__(self):
        os.kill(self.pid, signal.SIGSTOP)

    def __exit__(self, *exc):
        os.kill(self.pid, signal.SIGCONT)


def test_requests_ready_together_on_many_connections_each_get_their_answer(server):
    """Eight connections whose requests are all waiting when the server
    looks (answers of one turn of a loop leave together, conn.c's
    conn_flush_soon): each connection gets its own answer, then, kept
    alive, answers a second request and a pipelined pair."""
    n = 8
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
             for _ in range(n)]
    try:
        with Stopped(server):
            for i, s in enumerate(socks):
                s.sendall(infer_request([i, i + 1, i + 2, i + 3]))
        for i, s in enumerate(socks):
            status, _, body, rest = read_reply(s)
            assert status == "HTTP/1.1 200 OK"
            assert rest == b""
            assert json.loads(body)["outputs"][0]["data"] == [float(i + k) for k in range(4)]
        with Stopped(server):
            for i, s in enumerate(socks):
                s.sendall(infer_request([-i, 0, 0, 1]) + infer_request([i * 10, 1, 2, 3]))
        for i, s in enumerate(socks):
            rest = b""
            for want in ([-i, 0, 0, 1], [i * 10, 1, 2, 3]):
                status, _, body, rest = read_reply(s, rest)
                assert status == "HTTP/1.1 200 OK"
                assert json.loads(body)["outputs"][0]["data"] == [float(v) for v in want]
    finally:
        for s in socks:
            s.close()


def test_connections_closing_among_ready_requests_leave_the_others_answered(server):
    """Among requests waiting together, one client resets its connection
    and another asks for Connection: close: the reset one gets nothing,
    the closing one its answer then the end of the stream, the rest their
    answers, and the server keeps serving."""
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
             for _ in range(4)]
    try:
        with Stopped(server):
            for i, s in enumerate(socks):
                s.sendall(infer_request([i, 2 * i, 3 * i, 4 * i], keep_alive=(i != 2)))
            # A reset (RST, not FIN) of connection 1 after its request.
            socks[1].setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            socks[1].close()
        for i in (0, 2, 3):
            status, headers, body, rest = read_reply(socks[i])
            assert status == "HTTP/1.1 200 OK"
            assert json.loads(body)["outputs"][0]["data"] == [float(i * k) for k in (1, 2, 3, 4)]
            if i == 2:
                assert headers.get("connection") == "close"
                assert rest + read_to_close(socks[i]) == b""
    finally:
        for s in socks:
            s.close()
    still_serving(server)


def test_request_target_forms_route_by_their_path(server):
    """The path routes, whatever comes after it or before it (RFC 9112 §3.2):
    an origin-form target's query and fragment are dropped, an absolute-form
    target's scheme and authority too; a target with no path finds no
    route."""
    infer_q = (b"POST /v2/models/id_fp32/infer?trace=1&x=%%2F#frag HTTP/1.1\r\nHost: x\r\n"
               b"Content-Length: %d\r\n\r\n" % len(BODY)) + BODY
    infer_abs = (b"POST http://example.com:8000/v2/models/id_fp32/infer?q HTTP/1.1\r\n"
                 b"Host: x\r\nContent-Length: %d\r\n\r\n" % len(BODY)) + BODY
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as s:
        rest = b""
        for req in (infer_q, infer_abs):
            s.sendall(req)
            status, _, body, rest = read_reply(s, rest)
            assert status == "HTTP/1.1 200 OK", body
            assert json.loads(body)["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]
        s.sendall(b"GET /v2/health/ready#top HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, _, rest = read_reply(s, rest)
        assert status == "HTTP/1.1 200 OK"
        s.sendall(b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, _, rest = read_reply(s, rest)
        assert status.split()[1] == "404", status
    still_serving(server)
