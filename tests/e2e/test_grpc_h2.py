"""The gRPC service's HTTP/2 frames, read with a raw HTTP/2 client
(h2_util.py): what grpcio does not show."""
import gzip
import zlib

import numpy as np
import pytest

from conftest import assert_clean_exit
from h2_util import (FRAME_GOAWAY, FRAME_PING, RawClient, frame, grpc_frame, h2_call, messages,
                     raw_connection, read_frames)
from test_grpc import REPO, infer_request, launch, pb  # noqa: F401  (pb: a fixture)

SVC = "/inference.GRPCInferenceService/"


@pytest.fixture(scope="module")
def server(ptserve_bin, tmp_path_factory):
    s = launch(ptserve_bin, REPO, tmp_path_factory.mktemp("h2") / "server.log",
               "--grpc-infer-response-compression-level", "high")
    yield s
    assert_clean_exit(s)


def fp32_call(pb, n=1024, rid="h2"):  # noqa: F811
    values = np.linspace(-3, 3, n, dtype="<f4").reshape(1, n)
    req = infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, n], values.tobytes())], rid=rid)
    return values, req.SerializeToString()


def test_compressed_response(server, pb):  # noqa: F811
    """With --grpc-infer-response-compression-level high and a client that
    accepts gzip and deflate: the response names its grpc-encoding, its
    message carries the compressed flag, and decompressed it is the answer;
    the status comes in the trailers."""
    values, msg = fp32_call(pb)
    r = h2_call(server.grpc_target, SVC + "ModelInfer", grpc_frame(msg),
                headers=[("grpc-accept-encoding", "identity,deflate,gzip")])
    assert r.headers.get(":status") == "200", r
    enc = r.headers.get("grpc-encoding")
    assert enc in ("gzip", "deflate"), r.headers
    (flag, payload), = messages(r.data)
    assert flag == 1
    plain = gzip.decompress(payload) if enc == "gzip" else zlib.decompress(payload)
    resp = pb.svc.ModelInferResponse.FromString(plain)
    assert resp.id == "h2" and resp.raw_output_contents[0] == values.tobytes()
    assert r.trailers.get("grpc-status") == "0", r


def test_compressed_request(server, pb):  # noqa: F811
    """A gzip request message (grpc-encoding: gzip, flag 1) is inflated; a
    client that accepts only identity gets its response uncompressed."""
    values, msg = fp32_call(pb, 300, rid="gz")
    r = h2_call(server.grpc_target, SVC + "ModelInfer",
                grpc_frame(gzip.compress(msg), compressed=True),
                headers=[("grpc-encoding", "gzip"), ("grpc-accept-encoding", "identity")])
    (flag, payload), = messages(r.data)
    assert flag == 0 and r.headers.get("grpc-encoding", "identity") == "identity", r.headers
    resp = pb.svc.ModelInferResponse.FromString(payload)
    assert resp.id == "gz" and resp.raw_output_contents[0] == values.tobytes()
    assert r.trailers.get("grpc-status") == "0", r


def test_errors_are_trailers_only(server, pb):  # noqa: F811
    """An error before any message is one HEADERS frame that ends the stream
    (gRPC's Trailers-Only): the status and the percent-encoded message."""
    r = h2_call(server.grpc_target, SVC + "NoSuchMethod", grpc_frame(b""))
    assert r.data == b"" and r.trailers == {}, r
    assert r.headers.get("grpc-status") == "12", r.headers
    _, msg = fp32_call(pb)
    bad = pb.svc.ModelInferRequest.FromString(msg)
    bad.model_name = "no such model"
    r = h2_call(server.grpc_target, SVC + "ModelInfer", grpc_frame(bad.SerializeToString()))
    assert r.data == b"", r
    assert r.headers.get("grpc-status") == "5", r.headers
    assert "no%20such%20model" in r.headers.get("grpc-message", "") or \
        "no such model" in r.headers.get("grpc-message", ""), r.headers


def test_malformed_request_headers(server, pb):  # noqa: F811
    """Requests whose headers are not a gRPC call's: a GET and a missing
    :path are never answered as calls that succeeded. The transport
    (which does HTTP's checks of a request itself) answers 415 to what is
    not a POST of application/grpc, which includes an upper-case
    content-type name (malformed in HTTP/2, RFC 9113 8.2.1; gRPC core's
    server read it as content-type and served the call), and UNIMPLEMENTED
    to a missing :path. A control character in the value of a header the server does
    not read is let through. No case closes the connection, and the server
    goes on serving a good call afterwards."""
    values, msg = fp32_call(pb, 8, rid="after-bad-headers")
    base = [(":method", "POST"), (":scheme", "http"), (":path", SVC + "ModelInfer"),
            (":authority", server.grpc_target), ("content-type", "application/grpc"),
            ("te", "trailers")]

    def swap(name, value):
        return [(n, value if n == name else v) for n, v in base if n != name or value is not None]

    cases = {
        "GET": (swap(":method", "GET"), "415"),
        "no :path": (swap(":path", None), "12"),
        "Content-Type": ([(n.title() if n == "content-type" else n, v) for n, v in base], "415"),
    }
    for what, (hdrs, expect) in cases.items():
        r = h2_call(server.grpc_target, "", grpc_frame(msg), request_headers=hdrs)
        status = r.headers.get("grpc-status") or r.trailers.get("grpc-status")
        answered_ok = r.headers.get(":status") == "200" and status == "0"
        assert r.goaway is None, (what, r)
        if what != "Content-Type":
            assert not answered_ok, (what, r)
        got = r.headers.get(":status") if expect == "415" else status
        assert got == expect, (what, r)
    r = h2_call(server.grpc_target, "", grpc_frame(msg),
                request_headers=base + [("x-note", "a\x01b")])
    assert r.goaway is None, r
    assert r.trailers.get("grpc-status") == "0", r
    r = h2_call(server.grpc_target, SVC + "ModelInfer", grpc_frame(msg),
                headers=[("grpc-accept-encoding", "identity")])
    (_, payload), = messages(r.data)
    assert pb.svc.ModelInferResponse.FromString(payload).raw_output_contents[0] == \
        values.tobytes()


def test_truncated_message_and_two_messages(server, pb):  # noqa: F811
    """A message cut short by the end of the stream fails with a status
    (not a crash). Two messages on a unary method: the call is refused
    (INVALID_ARGUMENT; gRPC core's server answered the first one). The
    server goes on."""
    values, msg = fp32_call(pb)
    r = h2_call(server.grpc_target, SVC + "ModelInfer", grpc_frame(msg)[:-10])
    status = r.headers.get("grpc-status") or r.trailers.get("grpc-status")
    assert status not in (None, "0") or r.reset is not None, r
    r = h2_call(server.grpc_target, SVC + "ModelInfer", grpc_frame(msg) + grpc_frame(msg),
                headers=[("grpc-accept-encoding", "identity")])
    status = r.headers.get("grpc-status") or r.trailers.get("grpc-status")
    assert status == "3", r
    values, msg = fp32_call(pb, 8, rid="after")
    r = h2_call(server.grpc_target, SVC + "ModelInfer", grpc_frame(msg),
                headers=[("grpc-accept-encoding", "identity")])
    (_, payload), = messages(r.data)
    assert pb.svc.ModelInferResponse.FromString(payload).raw_output_contents[0] == \
        values.tobytes()


def test_grpc_timeout_header(server, pb):  # noqa: F811
    """A call with a generous grpc-timeout is answered as usual (its timer
    goes with it: the sanitizer runs check for leaks); a malformed one is
    ignored."""
    for timeout in ("60S", "60000m", "bogus"):
        values, msg = fp32_call(pb, 16, rid=timeout)
        r = h2_call(server.grpc_target, SVC + "ModelInfer", grpc_frame(msg),
                    headers=[("grpc-timeout", timeout), ("grpc-accept-encoding", "identity")])
        assert r.trailers.get("grpc-status") == "0", (timeout, r)
        (_, payload), = messages(r.data)
        assert pb.svc.ModelInferResponse.FromString(payload).id == timeout


def goaways(frames):
    """(error code, debug data) of each GOAWAY among read_frames' frames."""
    return [(int.from_bytes(p[4:8], "big"), p[8:]) for f in frames if f
            for t, _, p in [f] if t == FRAME_GOAWAY]


def test_max_connection_age(ptserve_bin, tmp_path):
    """--grpc-max-connection-age: an idle connection gets GOAWAY (NO_ERROR)
    at its age and is closed after the grace."""
    s = launch(ptserve_bin, REPO, tmp_path / "age.log", "--grpc-max-connection-age", "300",
               "--grpc-max-connection-age-grace", "300")
    try:
        sock = raw_connection(s.grpc_target)
        frames = read_frames(sock, 5.0, stop=lambda fs: fs and fs[-1] is None)
        sock.close()
        assert any(code == 0 for code, _ in goaways(frames)), frames
        assert frames[-1] is None, "the connection was not closed after the grace: %r" % frames
    finally:
        assert_clean_exit(s)


def test_keepalive_pings_and_their_timeout(ptserve_bin, tmp_path):
    """--grpc-keepalive-time/-timeout with pings permitted without calls:
    the server pings an idle connection, and closes it when the ping is not
    acknowledged."""
    s = launch(ptserve_bin, REPO, tmp_path / "ka.log", "--grpc-keepalive-time", "300",
               "--grpc-keepalive-timeout", "300", "--grpc-keepalive-permit-without-calls", "true",
               "--grpc-http2-max-pings-without-data", "0")
    try:
        sock = raw_connection(s.grpc_target)
        frames = read_frames(sock, 8.0, stop=lambda fs: fs and fs[-1] is None)
        sock.close()
        pings = [f for f in frames if f and f[0] == FRAME_PING and not f[1] & 1]
        assert pings, frames
        assert frames[-1] is None or goaways(frames), \
            "an unacknowledged keepalive did not end the connection: %r" % frames
    finally:
        assert_clean_exit(s)


def ping_answered(frames):
    """Whether the server answered a ping: its ACK, a GOAWAY, or the close."""
    return any(f is None or f[0] == FRAME_GOAWAY or (f[0] == FRAME_PING and f[1] & 1)
               for f in frames)


def test_ping_flood_gets_goaway_too_many_pings(server):
    """A client that pings more often than
    --grpc-http2-min-recv-ping-interval-without-data (default 5 min) with no
    call running gets more than --grpc-http2-max-ping-strikes (default 2)
    strikes: GOAWAY ENHANCE_YOUR_CALM "too_many_pings", as gRPC core."""
    sock = raw_connection(server.grpc_target)
    frames = []
    # One ping at a time, reading the answer to each: a connection closed
    # with our unread pings in its buffer would be reset, and the GOAWAY
    # lost with it.
    for k in range(6):
        sock.sendall(frame(FRAME_PING, 0, 0, bytes([k]) * 8))
        frames += read_frames(sock, 1.0, stop=ping_answered)
        if goaways(frames) or (frames and frames[-1] is None):
            break
    else:  # a busy machine may answer the last ping late
        frames += read_frames(sock, 10.0, stop=lambda fs: bool(goaways(fs)) or
                              (fs and fs[-1] is None))
    sock.close()
    assert (11, b"too_many_pings") in goaways(frames), frames


def test_compressed_request_beyond_the_budget(ptserve_bin, tmp_path, pb):  # noqa: F811
    """A small gzip message that inflates past --request-memory-budget is
    refused with RESOURCE_EXHAUSTED (the transport stops inflating at the
    budget's room); the server goes on."""
    s = launch(ptserve_bin, REPO, tmp_path / "bomb.log", "--request-memory-budget", str(8 << 20))
    try:
        n = 24 << 20 >> 2  # 24 MiB of float zeros: about 24 KiB compressed
        req = infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, n], bytes(4 * n))])
        body = gzip.compress(req.SerializeToString())
        assert len(body) < 1 << 20
        r = h2_call(s.grpc_target, SVC + "ModelInfer", grpc_frame(body, compressed=True),
                    headers=[("grpc-encoding", "gzip")])
        status = r.headers.get("grpc-status") or r.trailers.get("grpc-status")
        assert status == "8", r.headers
        values, msg = fp32_call(pb, 8, rid="after")
        r = h2_call(s.grpc_target, SVC + "ModelInfer", grpc_frame(msg),
                    headers=[("grpc-accept-encoding", "identity")])
        (_, payload), = messages(r.data)
        assert pb.svc.ModelInferResponse.FromString(payload).id == "after"
    finally:
        assert_clean_exit(s)


def test_connections_over_several_threads(ptserve_bin, tmp_path, pb):  # noqa: F811
    """--grpc-infer-thread-count 3: connections are dealt to three threads
    (the transport's loops); twelve at once, a call each, every answer its
    own."""
    import threading
    s = launch(ptserve_bin, REPO, tmp_path / "loops.log", "--grpc-infer-thread-count", "3")
    try:
        assert "3 loops" in s.log(), s.log()[-1500:]
        results, errors = {}, []

        def one(k):
            try:
                values, msg = fp32_call(pb, 64 + k, rid="c%d" % k)
                r = h2_call(s.grpc_target, SVC + "ModelInfer", grpc_frame(msg),
                            headers=[("grpc-accept-encoding", "identity")])
                (_, payload), = messages(r.data)
                resp = pb.svc.ModelInferResponse.FromString(payload)
                results[k] = resp.id == "c%d" % k and \
                    resp.raw_output_contents[0] == values.tobytes()
            except Exception as e:  # noqa: BLE001 — reported below
                errors.append(e)

        threads = [threading.Thread(target=one, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert results == {k: True for k in range(12)}, results
    finally:
        assert_clean_exit(s)


def _unary_frames(conn, sid, target, model, pb, rid):  # noqa: F811
    """Queues on hyper-h2 connection `conn` one ModelInfer call, whole, on
    stream `sid`, for identity model `model` (INPUT0: four FP32)."""
    values = np.arange(4, dtype="<f4").reshape(1, 4) + sid
    msg = infer_request(pb, model, [("INPUT0", "FP32", [1, 4], values.tobytes())], rid=rid)
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"),
                            (":path", SVC + "ModelInfer"), (":authority", target),
                            ("content-type", "application/grpc"), ("te", "trailers")])
    conn.send_data(sid, grpc_frame(msg.SerializeToString()), end_stream=True)
    return values


def test_an_answer_leaves_before_the_requests_read_after_it(ptserve_bin, tmp_path, pb):  # noqa: F811
    """Of calls that arrive in one read, the first answered leaves at once:
    a fast call's answer is not held back until a slow call sent right
    after it on the same connection has run (the transport hands nghttp2
    the read's frames one at a time until an answer is ready; both calls
    run to completion on the loop thread, the slow one holding it for
    600 ms). The connection's first call comes a byte at a time, so that
    reads cut the preface and the frame headers: the frames are still
    followed after it."""
    import socket
    import time
    import h2.config
    import h2.connection
    import h2.events
    from sched_util import identity_model, infer_fp32
    repo = tmp_path / "repo"
    identity_model(repo, "fast")
    identity_model(repo, "slow", params={"execute_delay_ms": 600})
    # Inline (run to completion) for batches of up to 10 s on average.
    s = launch(ptserve_bin, repo, tmp_path / "order.log",
               env={"PTSERVE_INLINE_MAX_US": "10000000"})
    try:
        for m in ("fast", "slow"):  # an average of execution for each
            assert infer_fp32(s, m, np.zeros((1, 4), "float32")).status_code == 200
        host, port = s.grpc_target.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=10)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        expected = {1: _unary_frames(conn, 1, s.grpc_target, "fast", pb, "first")}
        for b in conn.data_to_send():  # a byte per send: reads cut everything
            sock.sendall(bytes([b]))
            time.sleep(0.002)
        data, ended = {}, {}
        sent = None
        deadline = time.monotonic() + 20
        while len(ended) < 3 and time.monotonic() < deadline:
            if 1 in ended and sent is None:  # the pair, in one write
                expected[3] = _unary_frames(conn, 3, s.grpc_target, "fast", pb, "quick")
                expected[5] = _unary_frames(conn, 5, s.grpc_target, "slow", pb, "slow")
                sock.sendall(conn.data_to_send())
                sent = time.monotonic()
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            for ev in conn.receive_data(chunk):
                if isinstance(ev, h2.events.DataReceived):
                    data[ev.stream_id] = data.get(ev.stream_id, b"") + ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.TrailersReceived):
                    ended[ev.stream_id] = (time.monotonic(), dict(ev.headers))
            out = conn.data_to_send()  # acknowledgements
            if out and len(ended) < 3:
                sock.sendall(out)
        sock.close()
        assert sorted(ended) == [1, 3, 5], ended
        for sid, values in expected.items():
            assert ended[sid][1].get(b"grpc-status") == b"0", ended[sid]
            (_, payload), = messages(data[sid])
            resp = pb.svc.ModelInferResponse.FromString(payload)
            assert resp.raw_output_contents[0] == values.tobytes(), sid
        quick, slow = ended[3][0] - sent, ended[5][0] - sent
        assert slow >= 0.55, (quick, slow)
        assert quick < 0.3, (quick, slow)
    finally:
        assert_clean_exit(s)


def test_default_threads(ptserve_bin, tmp_path):
    """Without --grpc-infer-thread-count, one loop per core, 2 to 8, as the
    HTTP loops do (the loops share nothing a connection touches)."""
    import os
    cores = os.sysconf("SC_NPROCESSORS_ONLN")
    loops = min(8, max(2, cores))
    s = launch(ptserve_bin, REPO, tmp_path / "threads.log")
    try:
        want = "gRPC: serving on nghttp2, %d loops" % loops
        assert want in s.log(), s.log()[-2000:]
    finally:
        assert_clean_exit(s)


def test_a_large_message_in_large_frames(server, pb):  # noqa: F811
    """A 5.2 MB ModelInfer request, sent in DATA frames as large as the
    server's SETTINGS allow and as fast as its flow-control windows let
    it, is answered whole. The transport allows 1 MiB frames (HTTP/2's
    default is 16 KiB) and reads 256 KiB at a time, at most 4 MiB a turn
    of its loop: this request takes more than one turn, each of several
    full reads."""
    import socket
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings
    n = 1_300_000
    values, msg = fp32_call(pb, n, rid="large")
    body = grpc_frame(msg)
    host, port = server.grpc_target.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    # Room for the 5.2 MB answer without a WINDOW_UPDATE per 64 KiB.
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
    conn.increment_flow_control_window(1 << 24)
    sock.sendall(conn.data_to_send())
    try:
        settings = None
        while settings is None:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            for ev in conn.receive_data(chunk):
                if isinstance(ev, h2.events.RemoteSettingsChanged):
                    settings = ev.changed_settings
        assert conn.max_outbound_frame_size == 1 << 20, settings
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"),
                                (":path", SVC + "ModelInfer"), (":authority", server.grpc_target),
                                ("content-type", "application/grpc"), ("te", "trailers")])
        sent, largest, data, trailers = 0, 0, b"", None
        while trailers is None:
            room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            while sent < len(body) and room > 0:
                piece = body[sent:sent + room]
                sent += len(piece)
                largest = max(largest, len(piece))
                conn.send_data(sid, piece, end_stream=sent == len(body))
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
            chunk = sock.recv(1 << 20)
            assert chunk, "the server closed the connection"
            for ev in conn.receive_data(chunk):
                if isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    data += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.TrailersReceived) and ev.stream_id == sid:
                    trailers = dict(ev.headers)
                elif isinstance(ev, h2.events.StreamReset):
                    raise AssertionError("stream reset: %s" % ev.error_code)
    finally:
        sock.close()
    assert sent == len(body)
    assert largest == 1 << 20, largest
    assert trailers.get(b"grpc-status") == b"0", trailers
    (_, payload), = messages(data)
    resp = pb.svc.ModelInferResponse.FromString(payload)
    assert resp.id == "large"
    assert resp.raw_output_contents[0] == values.tobytes()


def test_large_messages_cut_anywhere(server, pb):  # noqa: F811
    """Large request messages on one connection, their DATA frames
    interleaved, cut at every kind of place and written in pieces: a
    unary call whose message comes in one frame, one cut inside its 5-byte
    prefix and again just after it, one in padded frames, and a stream
    whose two messages share a frame (the first's end, the second's prefix
    and start). Each call gets exactly its own values back. The transport
    reads most of such a payload straight into its message (h2.c,
    direct_room): where a read ends, padding and where the next message
    begins must not move a byte. Padded DATA frames are taken, as RFC 9113
    says (gRPC core's server refused them with RST_STREAM PROTOCOL_ERROR)."""
    cl = RawClient(server.grpc_target)
    try:
        top = cl.max_frame()
        plan = {}  # stream -> (method, {request id: values}, [DATA payloads], padding)

        def cut(body, at):
            at = [0] + [a for a in at if 0 < a < len(body)] + [len(body)]
            pieces = []
            for a, b in zip(at, at[1:]):  # and no frame above the server's limit
                pieces += [body[x:min(x + top, b)] for x in range(a, b, top)]
            return pieces

        va, ma = fp32_call(pb, 60_000, rid="one-frame")
        vb, mb = fp32_call(pb, 50_000, rid="cut-prefix")
        vc, mc = fp32_call(pb, 40_000, rid="padded")
        v1, m1 = fp32_call(pb, 30_000, rid="s1")
        v2, m2 = fp32_call(pb, 45_000, rid="s2")
        bs = grpc_frame(m1) + grpc_frame(m2)
        seam = len(grpc_frame(m1))
        calls = [
            (1, "ModelInfer", {"one-frame": va}, cut(grpc_frame(ma), []), None),
            (3, "ModelInfer", {"cut-prefix": vb}, cut(grpc_frame(mb), [3, 5, 105]), None),
            (5, "ModelInfer", {"padded": vc}, cut(grpc_frame(mc), [70_000]), 7),
            (7, "ModelStreamInfer", {"s1": v1, "s2": v2},
             cut(bs, [seam - 60_000, seam + 50_000]), None),
        ]
        for sid, method, expected, pieces, pad in calls:
            cl.open(sid, SVC + method)
            plan[sid] = (method, expected, pieces, pad)
        # Round robin over the calls, a frame each, each frame written in
        # three pieces: the cuts fall inside its header and its payload.
        # Padded frames alternate between some padding and none.
        turn = 0
        while any(p[2] for p in plan.values()):
            for sid, (method, expected, pieces, pad) in plan.items():
                if not pieces:
                    continue
                payload = pieces.pop(0)
                cl.send_data(sid, payload, end=not pieces,
                             pad=None if pad is None else pad * (turn % 2),
                             cuts=[4, 9 + len(payload) // 3 + turn % 7])
                turn += 1
        cl.wait(plan)
    finally:
        cl.close()
    assert not cl.resets, cl.resets
    for sid, (method, expected, _, _) in plan.items():
        assert cl.headers[sid].get("grpc-status") == "0", (sid, cl.headers[sid])
        got = {}
        for _, payload in messages(cl.data.get(sid, b"")):
            if method == "ModelInfer":
                r = pb.svc.ModelInferResponse.FromString(payload)
            else:
                s = pb.svc.ModelStreamInferResponse.FromString(payload)
                assert not s.error_message, s.error_message
                r = s.infer_response
            got[r.id] = r.raw_output_contents[0]
        assert got == {rid: v.tobytes() for rid, v in expected.items()}, sid
