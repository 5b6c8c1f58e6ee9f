"""gRPC under cancellation and abrupt clients (issue 52).

A real client's load: asyncio tritonclient.grpc.aio clients that open
channels in a loop, cancel about one call in five a moment after it
starts, break out of streams early, and close half of their channels and
drop the other half with calls still running; beside them, raw sockets
that disconnect in the middle of a message. Then a raw HTTP/2 client
(h2_util.RawClient) resets a call at every point of its life and sends
WINDOW_UPDATE and DATA on streams that are over.

What must hold: no GOAWAY other than NO_ERROR reaches any client (read on
the wire by h2_util.FrameWatch, whatever the transport, and on the
server's ptserve_grpc_goaway_total too); every call its
client did not cancel is answered, with torch's answer; the connection
that saw the resets goes on serving; and once the clients are gone the
server's gRPC connections, request bytes and resident memory return to
where they were.

Before issue 52's fix the nghttp2 transport sent GOAWAY INTERNAL_ERROR
after a client's 1000th reset (nghttp2's Rapid Reset limit), and with
that limit lifted, grpcio stalled for good on the server's
SETTINGS_MAX_CONCURRENT_STREAMS (docs/internals/grpc.md, "Cancelled
calls").
"""
import asyncio
import os
import socket
import struct
import time

import numpy as np
import pytest
import requests

from conftest import (assert_clean_exit, free_port, launch_server,
                      need_module, rss_kb, wait_for)
from clients_util import IDENTITY_REPO, clients_repo, mlp_expected
from h2_util import (FRAME_PING, PREFACE, FrameWatch, RawClient, frame, grpc_frame, messages,
                     raw_connection, read_frames)
from test_grpc import infer_request, pb  # noqa: F401  (pb: a fixture)
from test_grpc_h2 import goaways as frame_goaways
from test_grpc_h2 import ping_answered

aio_grpc = need_module("tritonclient.grpc.aio")

SVC = "/inference.GRPCInferenceService/"
# The load's length; PTS_GRPC_STRESS_SECONDS=40 is issue 52's measurement.
SECONDS = float(os.environ.get("PTS_GRPC_STRESS_SECONDS", "10"))
WORKERS = 32
# A call must be over this long after it started (answered or cancelled).
CALL_TIMEOUT = 30.0
RSS_GROWTH_LIMIT_KB = 48 * 1024
MODEL = "mlp_classifier"  # the example 16 -> 4 MLP


@pytest.fixture(scope="module")
def server(ptserve_bin, torch_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("grpc_stress")
    repo = clients_repo(root, torch_models)
    # ASan's quarantine would hold freed memory and read as growth (as
    # test_soak.py sets it).
    env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
           ":quarantine_size_mb=16:thread_local_quarantine_size_kb=256"}
    s = launch_server(ptserve_bin, repo, root / "server.log", "--model-repository",
                      IDENTITY_REPO, metrics_port=free_port(), grpc_port=free_port(),
                      grpc_address="127.0.0.1", env=env)
    s.repo = repo
    yield s
    assert_clean_exit(s)


def metrics(server):
    """{sample name with its labels: value} of /metrics."""
    out = {}
    for line in requests.get(server.metrics_url, timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def goaways(server):
    """{code name: count} of ptserve_grpc_goaway_total, but NO_ERROR's."""
    return {k: v for k, v in metrics(server).items()
            if k.startswith("ptserve_grpc_goaway_total") and 'NO_ERROR' not in k and v}


def settle(server):
    """Waits until no gRPC connection is open and no request byte is held."""
    wait_for("the gRPC connections to close",
             lambda: metrics(server)["ptserve_grpc_connections"] == 0, timeout=30)
    wait_for("the request bytes to be released",
             lambda: metrics(server)["ptserve_request_memory_bytes"] == 0, timeout=30)


class Load:
    """Issue 52's clients, for `seconds`, against `target` (a FrameWatch in
    front of the server). Inputs come from a fixed set whose answers torch
    computed from the same model file."""

    def __init__(self, target, inputs, expected, seconds):
        self.target, self.seconds = target, seconds
        self.inputs, self.expected = inputs, expected
        self.answered = self.cancelled = self.streams = self.channels = 0
        self.failures = []  # (what, detail): wrong answers, errors, calls never over
        self.abandoned = []  # calls of dropped channels, left running

    def fail(self, what, detail):
        if len(self.failures) < 20:
            self.failures.append((what, str(detail)[:300]))
        else:
            self.failures[-1] = ("and more", "")

    def request(self, k):
        i = aio_grpc.InferInput("INPUT__0", [1, 16], "FP32")
        i.set_data_from_numpy(self.inputs[k])
        return [i]

    def check(self, result, k, what):
        got = result.as_numpy("OUTPUT__0")
        if got is None or not np.allclose(got, self.expected[k], rtol=1e-5, atol=1e-6):
            self.fail(what, "input %d: got %r, torch %r" % (k, got, self.expected[k]))
            return False
        return True

    async def call(self, client, rng):
        k = int(rng.integers(len(self.inputs)))
        task = asyncio.ensure_future(client.infer(MODEL, self.request(k)))
        if rng.random() < 0.2:
            await asyncio.sleep(rng.random() * 0.002)
            task.cancel()
        try:
            result = await asyncio.wait_for(asyncio.shield(task), CALL_TIMEOUT)
        except asyncio.CancelledError:
            self.cancelled += 1
            return
        except asyncio.TimeoutError:
            task.cancel()
            self.fail("unary call never answered", "after %.0f s" % CALL_TIMEOUT)
            return
        except Exception as e:  # noqa: BLE001 (any error of a call not cancelled fails)
            if task.cancelled():
                self.cancelled += 1
            else:
                self.fail("unary call failed", e)
            return
        if self.check(result, k, "unary answer"):
            self.answered += 1

    async def stream(self, client, rng):
        """A short stream_infer, left early about one time in three."""
        n = int(rng.integers(1, 10))
        ks = [int(rng.integers(len(self.inputs))) for _ in range(n)]

        async def requests_():
            for j, k in enumerate(ks):
                yield {"model_name": MODEL, "inputs": self.request(k), "request_id": str(j)}

        got = 0
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                async for result, error in client.stream_infer(requests_()):
                    if error is not None:
                        self.fail("stream answer was an error", error)
                        return
                    j = int(result.get_response().id)
                    if not self.check(result, ks[j], "stream answer"):
                        return
                    got += 1
                    if got == n or rng.random() < 0.3:
                        break
        except TimeoutError:
            self.fail("stream never answered", "%d of %d answers" % (got, n))
            return
        except Exception as e:  # noqa: BLE001
            self.fail("stream failed", e)
            return
        self.answered += got
        self.streams += 1

    async def worker(self, w, end):
        rng = np.random.default_rng(w)
        while time.monotonic() < end:
            client = aio_grpc.InferenceServerClient(self.target)
            self.channels += 1
            calls = [self.call(client, rng) for _ in range(int(rng.integers(1, 21)))]
            if rng.random() < 1 / 3:
                calls.append(self.stream(client, rng))
            if rng.random() < 0.5:
                await asyncio.gather(*calls)
                await client.close()
            else:
                # Dropped: never closed, a call still running on it (closed
                # only once the load is over, so that the test ends clean).
                last = asyncio.ensure_future(self.call(client, rng))
                await asyncio.gather(*calls)
                self.abandoned.append((client, last))

    async def run(self):
        end = time.monotonic() + self.seconds
        await asyncio.gather(*[self.worker(w, end) for w in range(WORKERS)])
        await asyncio.gather(*[t for _, t in self.abandoned])
        for client, _ in self.abandoned:
            await client.close()


def abrupt_clients(target, end, pb, stats):  # noqa: F811
    """Raw sockets that start a call and vanish: after the headers, in the
    message's prefix, or half-way through its bytes; closed or reset
    (SO_LINGER 0). Runs in a thread until `end`."""
    import hpack
    host, port = target.rsplit(":", 1)
    msg = grpc_frame(infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, 4096],
                                                    bytes(4 * 4096))]).SerializeToString())
    fields = [(":method", "POST"), (":scheme", "http"), (":path", SVC + "ModelInfer"),
              (":authority", target), ("content-type", "application/grpc"), ("te", "trailers")]
    k = 0
    while time.monotonic() < end:
        cut = (0, 3, len(msg) // 2)[k % 3]
        head = hpack.Encoder().encode(fields)  # a new connection, a new HPACK table
        try:
            s = socket.create_connection((host, int(port)), timeout=5)
            if k % 2:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.sendall(PREFACE + frame(4) + frame(1, 4, 1, head) + frame(0, 0, 1, msg[:cut]))
            s.close()
            stats["abrupt"] += 1
        except OSError as e:
            stats["abrupt_errors"].append(str(e))
        k += 1
        time.sleep(0.005)


def test_cancelling_clients_get_no_goaway_and_every_answer(server, pb):  # noqa: F811
    """Issue 52's load for PTS_GRPC_STRESS_SECONDS (10): no GOAWAY but
    NO_ERROR on the wire, every call not cancelled answered as torch
    answers it, none left waiting; then the server's connections, request
    bytes and resident memory back where they were."""
    rng = np.random.default_rng(52)
    inputs = [rng.standard_normal((1, 16)).astype(np.float32) for _ in range(64)]
    expected = [mlp_expected(server, MODEL, x) for x in inputs]
    before = goaways(server)
    pid = server.proc.pid

    async def main(seconds):
        watch = FrameWatch(server.grpc_target)
        port = await watch.start()
        load = Load("127.0.0.1:%d" % port, inputs, expected, seconds)
        stats = {"abrupt": 0, "abrupt_errors": []}
        loop = asyncio.get_running_loop()
        abrupt = loop.run_in_executor(None, abrupt_clients, server.grpc_target,
                                      time.monotonic() + seconds, pb, stats)
        await load.run()
        await abrupt
        await watch.stop()
        return load, watch, stats

    asyncio.run(main(min(3.0, SECONDS)))  # warm-up: allocator pools, the model's first runs
    settle(server)
    rss_warm = rss_kb(pid)
    load, watch, stats = asyncio.run(main(SECONDS))
    report = dict(answered=load.answered, cancelled=load.cancelled, streams=load.streams,
                  channels=load.channels, abrupt=stats["abrupt"], goaways=watch.goaways,
                  failures=load.failures)
    assert not load.failures, report
    assert not {c: n for c, n in watch.goaways.items() if c != 0}, report
    # The load was what it says: calls answered and cancelled, streams,
    # channels both closed and dropped, abrupt sockets.
    assert load.answered > 500 and load.cancelled > 50 and load.streams > 10, report
    assert load.abandoned and load.channels > len(load.abandoned), report
    assert stats["abrupt"] > 10 and not stats["abrupt_errors"], (report, stats)
    assert goaways(server) == before, report
    settle(server)
    growth = rss_kb(pid) - rss_warm
    assert growth < RSS_GROWTH_LIMIT_KB, (growth, report)


def dt_fp32_call(pb, n, rid):  # noqa: F811
    values = np.arange(n, dtype="<f4").reshape(1, n) * np.float32(0.5)
    msg = infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, n], values.tobytes())], rid=rid)
    return values, grpc_frame(msg.SerializeToString())


def answer_of(cl, sid, pb):  # noqa: F811
    assert cl.headers[sid].get("grpc-status") == "0", (sid, cl.headers.get(sid))
    (_, payload), = messages(cl.data[sid])
    return pb.svc.ModelInferResponse.FromString(payload).raw_output_contents[0]


def test_resets_at_every_point_of_a_call(server, pb):  # noqa: F811
    """One connection, one call reset (RST_STREAM CANCEL) at each point of
    its life: after its HEADERS; in the middle of its DATA; after its
    END_STREAM, its answer not yet read; and while the answer is being
    written (the client's window holds the server part-way through a
    256 KiB answer). After each, a WINDOW_UPDATE and a DATA frame on the
    stream that is over. Then a call on the same connection is answered
    with its own values: the connection never got a GOAWAY (RawClient
    fails on one) nor a reset of a stream that was not reset."""
    before = goaways(server)
    # 16 KiB of window: the 256 KiB answer stops after its first 16 KiB.
    cl = RawClient(server.grpc_target, window=16384)
    try:
        small_values, small = dt_fp32_call(pb, 1000, "small")
        big_values, big = dt_fp32_call(pb, 65536, "big")
        sid = 1

        def after(sid):
            cl.window_update(sid, 1 << 16)
            cl.stray_data(sid, small[:100], end=True)

        # after HEADERS
        cl.open(sid, SVC + "ModelInfer")
        cl.reset(sid)
        after(sid)
        sid += 2
        # in the middle of DATA: the prefix and half the message
        cl.open(sid, SVC + "ModelInfer")
        cl.send_data(sid, small[:len(small) // 2])
        cl.reset(sid)
        after(sid)
        sid += 2
        # after END_STREAM: the request is whole and may be running
        cl.open(sid, SVC + "ModelInfer")
        cl.send_data(sid, small, end=True)
        cl.reset(sid)
        after(sid)
        sid += 2
        # while the answer is being written: wait for its first DATA
        cl.open(sid, SVC + "ModelInfer")
        for at in range(0, len(big), cl.max_frame()):
            piece = big[at:at + cl.max_frame()]
            cl.send_data(sid, piece, end=at + len(piece) == len(big))
        while not cl.data.get(sid):
            cl.read()
        assert len(cl.data[sid]) < len(big), "the answer came whole past a 16 KiB window"
        cl.reset(sid)
        after(sid)
        held = sid
        sid += 2
        # The connection goes on: a call answered whole (its window opened).
        cl.open(sid, SVC + "ModelInfer")
        cl.send_data(sid, small, end=True)
        cl.window_update(sid, 1 << 20)
        cl.wait([sid])
        assert answer_of(cl, sid, pb) == small_values.tobytes()
        # and one more, after the stray frames of all four have been read
        sid += 2
        cl.open(sid, SVC + "ModelInfer")
        cl.send_data(sid, small, end=True)
        cl.wait([sid])
        assert answer_of(cl, sid, pb) == small_values.tobytes()
        assert not {s: c for s, c in cl.resets.items() if s > held}, cl.resets
    finally:
        cl.close()
    assert goaways(server) == before
    settle(server)


def reset_burst(cl, body, n):
    """n ModelInfer calls on RawClient `cl` in one write, each whole (its
    message `body` ends the stream) and then reset (CANCEL): each may be in
    the core when its reset comes. Returns the next stream id, opened with
    one more call sending `body`, whose answer the caller waits for."""
    fields = [(":method", "POST"), (":scheme", "http"), (":path", SVC + "ModelInfer"),
              (":authority", "raw"), ("content-type", "application/grpc"), ("te", "trailers")]
    burst, sid = b"", 1
    for _ in range(n):
        burst += (frame(1, 4, sid, cl.enc.encode(fields)) + frame(0, 1, sid, body) +
                  frame(3, 0, sid, struct.pack(">I", 8)))
        cl.ended.add(sid)
        sid += 2
    cl.sock.sendall(burst)
    cl.conn_window -= n * len(body)
    cl.open(sid, SVC + "ModelInfer")
    cl.windows[sid] = cl.settings.get(4, 65535)
    cl.send_data(sid, body, end=True)
    return sid


def test_a_flood_of_cancelled_calls_on_one_connection(server, pb):  # noqa: F811
    """3000 calls opened and reset at once on one connection, their
    requests whole (so each may be running when its reset comes): far past
    the 1000 resets plus 33 a second after which nghttp2's Rapid Reset
    limit would end the connection. The connection stays; the calls'
    work ends; a call after them is answered."""
    before = goaways(server)
    cl = RawClient(server.grpc_target)
    try:
        values, body = dt_fp32_call(pb, 16, "flood")
        sid = reset_burst(cl, body, 3000)
        cl.wait([sid])
        assert answer_of(cl, sid, pb) == values.tobytes()
    finally:
        cl.close()
    assert goaways(server) == before
    settle(server)


def test_goaways_are_counted_and_logged(server):
    """A GOAWAY other than NO_ERROR is a warning in the log, with its code
    and reason, and counted in ptserve_grpc_goaway_total by code: here a
    ping flood's ENHANCE_YOUR_CALM "too_many_pings" (gRPC core's own
    policing; its GOAWAYs are neither logged nor counted by ptserve)."""
    key = 'ptserve_grpc_goaway_total{code="ENHANCE_YOUR_CALM"}'
    before = metrics(server).get(key)
    sock = raw_connection(server.grpc_target)
    frames = []
    for k in range(8):  # one at a time, as test_grpc_h2's ping flood
        sock.sendall(frame(FRAME_PING, 0, 0, bytes([k]) * 8))
        frames += read_frames(sock, 1.0, stop=ping_answered)
        if frame_goaways(frames) or (frames and frames[-1] is None):
            break
    sock.close()
    assert (11, b"too_many_pings") in frame_goaways(frames), frames
    assert metrics(server)[key] == before + 1
    line = wait_for("the GOAWAY's log line", lambda: [
        ln for ln in server.log().splitlines()
        if ln.startswith("W") and "sent GOAWAY ENHANCE_YOUR_CALM (11" in ln])
    assert "'too_many_pings'" in line[-1], line


def test_no_stream_limit_is_advertised(server):
    """The server's SETTINGS name no SETTINGS_MAX_CONCURRENT_STREAMS, as
    tritonserver's gRPC core names none: grpcio's client stops opening
    streams at the server's limit by a count of its own that cancellations
    leave too high, and stalls for good (docs/internals/grpc.md)."""
    cl = RawClient(server.grpc_target)
    try:
        assert 3 not in cl.settings, cl.settings
    finally:
        cl.close()


# An identity model that holds requests in the core: its batcher waits up
# to HOLD_MS for a batch to fill, and the one execution that takes them all
# lasts HOLD_MS more. Requests sent at once are all still in the core for
# HOLD_MS, and all done within 2 * HOLD_MS.
HOLD_MS = 3000
HOLD_CONFIG = """name: "hold"
backend: "identity"
max_batch_size: 8192
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
dynamic_batching { max_queue_delay_microseconds: %d }
parameters: { key: "execute_delay_ms" value: { string_value: "%d" } }
""" % (HOLD_MS * 1000, HOLD_MS)


def test_reset_calls_still_running_count_against_the_connection(ptserve_bin, tmp_path, pb):  # noqa: F811
    """4096 calls on one connection (h2_priv.h's CONN_CALLS_MAX), each
    reset once its request is whole, while their requests wait in the
    core (HOLD_CONFIG): the next stream is refused with REFUSED_STREAM, which gRPC
    clients retry, and the connection stays. Once their work is done, a
    stream is served again. Without the bound a client resetting what it
    opens (Rapid Reset) would have any number of requests in the core."""
    os.makedirs(tmp_path / "repo" / "hold" / "1")
    (tmp_path / "repo" / "hold" / "config.pbtxt").write_text(HOLD_CONFIG)
    s = launch_server(ptserve_bin, tmp_path / "repo", tmp_path / "server.log", metrics_port=0,
                      grpc_port=free_port(), grpc_address="127.0.0.1")
    try:
        values = np.ones((1, 4), dtype="<f4")
        body = grpc_frame(infer_request(pb, "hold", [("INPUT0", "FP32", [1, 4],
                                                     values.tobytes())]).SerializeToString())
        cl = RawClient(s.grpc_target)
        sid = reset_burst(cl, body, 4096)
        t0 = time.monotonic()
        cl.wait([sid])
        assert cl.resets.get(sid) == 7, (cl.resets.get(sid), cl.headers.get(sid))  # REFUSED_STREAM
        # Once the batch has run, a stream is served again, on the same
        # connection.
        time.sleep(max(0.0, 2.5 * HOLD_MS / 1000 - (time.monotonic() - t0)))
        sid += 2
        cl.open(sid, SVC + "ModelInfer")
        cl.send_data(sid, body, end=True)
        cl.wait([sid])
        assert answer_of(cl, sid, pb) == values.tobytes()
        cl.close()
    finally:
        assert_clean_exit(s)
