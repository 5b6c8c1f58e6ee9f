"""One gRPC call over a raw HTTP/2 connection (hyper-h2), for tests that
look at what grpcio hides: response headers and trailers, the message
prefix's compressed flag, RST_STREAM, GOAWAY."""
import socket
import struct
import time
import types

from conftest import need_module

# hyper-h2 (requirements.txt): a host without it fails, or skips under
# PTS_SKIP_MISSING_TOOLS=1, the files that need it, naming it.
need_module("h2")
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402


def grpc_frame(message, compressed=False):
    """gRPC's length-prefixed message."""
    return struct.pack(">BI", 1 if compressed else 0, len(message)) + message


def messages(data):
    """[(compressed flag, message bytes)] of a response body."""
    out = []
    while data:
        flag, n = struct.unpack(">BI", data[:5])
        out.append((flag, data[5:5 + n]))
        data = data[5 + n:]
    return out


def h2_call(target, path, body=b"", headers=(), content_type="application/grpc", timeout=10.0,
            request_headers=None):
    """POSTs `body` (already framed; b"" sends none) to `path` on `target`
    ("host:port") and reads until the stream ends, is reset or the
    connection goes. `request_headers`, when given, is the whole header
    list, sent as it is (hyper-h2's checks of outbound headers off: for
    malformed requests). Returns a namespace: headers and trailers (dicts,
    str), data (bytes), reset (the RST_STREAM code or None), goaway (the
    GOAWAY code or None), seconds (until the end)."""
    host, port = target.rsplit(":", 1)
    t0 = time.monotonic()
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    raw = request_headers is not None
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                  validate_outbound_headers=not raw,
                                  normalize_outbound_headers=not raw))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    hdrs = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", target),
            ("content-type", content_type), ("te", "trailers")] + list(headers)
    if raw:
        hdrs = list(request_headers)
    conn.send_headers(sid, hdrs, end_stream=not body)
    # Within the initial flow-control window: no WINDOW_UPDATE to wait for.
    assert len(body) < 65535, "h2_call sends at most 64 KiB"
    for at in range(0, len(body), conn.max_outbound_frame_size):
        chunk = body[at:at + conn.max_outbound_frame_size]
        conn.send_data(sid, chunk, end_stream=at + len(chunk) == len(body))
    sock.sendall(conn.data_to_send())
    r = types.SimpleNamespace(headers={}, trailers={}, data=b"", reset=None, goaway=None)
    done = False
    try:
        while not done:
            chunk = sock.recv(65536)
            if not chunk:
                break
            for ev in conn.receive_data(chunk):
                if isinstance(ev, h2.events.ResponseReceived):
                    r.headers = dict(ev.headers)
                elif isinstance(ev, h2.events.DataReceived):
                    r.data += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.TrailersReceived):
                    r.trailers = dict(ev.headers)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    done = True
                elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                    r.reset = int(ev.error_code)
                    done = True
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    r.goaway = int(ev.error_code)
                    done = True
            sock.sendall(conn.data_to_send())
    finally:
        sock.close()
    r.seconds = time.monotonic() - t0
    return r


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_PING, FRAME_GOAWAY = 6, 7


def frame(ftype, flags=0, stream=0, payload=b""):
    """One raw HTTP/2 frame."""
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", ftype, flags, stream) + payload


def raw_connection(target, timeout=10.0):
    """A connected socket that has sent the client preface and an empty
    SETTINGS frame (and nothing else: it acknowledges nothing)."""
    host, port = target.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.sendall(PREFACE + frame(4))
    return sock


def read_frames(sock, seconds, stop=None):
    """[(type, flags, payload)] the server sends within `seconds`, until it
    closes the connection (then the last item is None) or `stop(frames)`
    is true."""
    out, buf = [], b""
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (stop and stop(out)):
        sock.settimeout(max(0.01, end - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            out.append(None)
            break
        buf += chunk
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            out.append((buf[3], buf[4], buf[9:9 + n]))
            buf = buf[9 + n:]
    return out


class RawClient:
    """A client connection that writes frames as they are given (padded,
    cut, interleaved: what hyper-h2 would not send) and keeps within the
    server's flow-control windows. It takes answers of any size (it opens
    its own windows wide) and reads frames with a buffer of its own, so
    none is lost between reads."""

    def __init__(self, target, timeout=30.0, window=1 << 30):
        """`window`: the initial stream window the client gives the server
        (SETTINGS_INITIAL_WINDOW_SIZE); below an answer's size the server
        must wait for a WINDOW_UPDATE part-way through writing it."""
        import hpack
        host, port = target.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        # Each piece leaves when written (no Nagle): the cuts are the reads'.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.buf = b""
        self.settings = {}
        self.conn_window = 65535
        self.windows = {}  # stream -> the server's window for it
        self.data, self.headers, self.ended, self.resets = {}, {}, set(), {}
        big = 1 << 30
        self.sock.sendall(PREFACE + frame(4, payload=struct.pack(">HI", 4, window)) +
                          frame(8, payload=struct.pack(">I", big - 65535)))
        while not self.settings:
            self.read()

    def _frames(self):
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + n:
                return
            ftype, flags = self.buf[3], self.buf[4]
            sid = int.from_bytes(self.buf[5:9], "big") & 0x7fffffff
            yield ftype, flags, sid, self.buf[9:9 + n]
            self.buf = self.buf[9 + n:]

    def read(self):
        """Reads what the server sends next and takes in its frames."""
        chunk = self.sock.recv(1 << 20)
        assert chunk, "the server closed the connection"
        self.buf += chunk
        for ftype, flags, sid, payload in self._frames():
            if ftype == 4 and not flags & 1:  # SETTINGS: taken, acknowledged
                for at in range(0, len(payload), 6):
                    key, value = struct.unpack(">HI", payload[at:at + 6])
                    if key == 4:
                        for s in self.windows:
                            self.windows[s] += value - self.settings.get(4, 65535)
                    self.settings[key] = value
                self.sock.sendall(frame(4, flags=1))
            elif ftype == 8:  # WINDOW_UPDATE
                inc = struct.unpack(">I", payload)[0] & 0x7fffffff
                if sid == 0:
                    self.conn_window += inc
                else:
                    self.windows[sid] = self.windows.get(sid, 0) + inc
            elif ftype == 0:
                self.data[sid] = self.data.get(sid, b"") + payload
            elif ftype == 1:
                fields = {k: v for k, v in self.dec.decode(payload)}
                self.headers.setdefault(sid, {}).update(fields)
            elif ftype == 3:  # RST_STREAM: its error code kept, the stream over
                self.resets[sid] = struct.unpack(">I", payload)[0]
                self.ended.add(sid)
            elif ftype == 7:
                raise AssertionError("GOAWAY: %r" % payload)
            if ftype in (0, 1) and flags & 1:
                self.ended.add(sid)

    def open(self, sid, path, headers=()):
        fields = [(":method", "POST"), (":scheme", "http"), (":path", path),
                  (":authority", "raw"), ("content-type", "application/grpc"),
                  ("te", "trailers")] + list(headers)
        self.windows.setdefault(sid, self.settings.get(4, 65535))
        self.sock.sendall(frame(1, 4, sid, self.enc.encode(fields)))

    def max_frame(self):
        return self.settings.get(5, 16384)

    def send_data(self, sid, payload, end=False, pad=None, cuts=()):
        """One DATA frame, padded with `pad` bytes when pad is not None,
        written in pieces cut `cuts` bytes into it (a pause after each, so
        that the server's reads end there). Not sent on a stream the server
        has reset."""
        flags = (1 if end else 0) | (8 if pad is not None else 0)
        body = payload if pad is None else bytes([pad]) + payload + bytes(pad)
        assert len(body) <= self.max_frame()
        while self.conn_window < len(body) or self.windows[sid] < len(body):
            if sid in self.resets:
                return
            self.read()
        if sid in self.resets:
            return
        self.conn_window -= len(body)
        self.windows[sid] -= len(body)
        raw = frame(0, flags, sid, body)
        at = 0
        for cut in sorted(cuts) + [len(raw)]:
            self.sock.sendall(raw[at:cut])
            at = cut
            time.sleep(0.002)

    def wait(self, sids):
        while not set(sids) <= self.ended:
            self.read()

    def reset(self, sid, code=8):
        """RST_STREAM (CANCEL by default, as gRPC clients cancel)."""
        self.sock.sendall(frame(3, 0, sid, struct.pack(">I", code)))
        self.ended.add(sid)

    def window_update(self, sid, increment):
        self.sock.sendall(frame(8, 0, sid, struct.pack(">I", increment)))

    def stray_data(self, sid, payload, end=False):
        """A DATA frame on a stream that is over, with no look at its
        window (the server's connection window is still charged)."""
        self.conn_window -= len(payload)
        self.sock.sendall(frame(0, 1 if end else 0, sid, payload))

    def close(self):
        self.sock.close()


class FrameWatch:
    """An asyncio TCP proxy in front of a server (for clients that hide
    HTTP/2, as grpcio does): it passes bytes both ways untouched and reads
    the HTTP/2 frame headers of what the server sends, counting GOAWAY
    frames by error code. Run it on the clients' event loop:
    `port = await watch.start()`, then `await watch.stop()`."""

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.goaways = {}  # error code -> frames
        self.connections = 0
        self._server = None
        self._tasks = set()

    async def start(self):
        import asyncio
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def stop(self):
        import asyncio
        self._server.close()
        await self._server.wait_closed()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, cr, cw):
        import asyncio
        self.connections += 1
        try:
            sr, sw = await asyncio.open_connection(*self.target)
        except OSError:
            cw.close()
            return
        up = asyncio.ensure_future(self._pipe(cr, sw, False))
        down = asyncio.ensure_future(self._pipe(sr, cw, True))
        self._tasks |= {up, down}
        await asyncio.gather(up, down, return_exceptions=True)
        self._tasks -= {up, down}

    async def _pipe(self, r, w, from_server):
        buf = b""
        try:
            while True:
                data = await r.read(1 << 16)
                if not data:
                    break
                w.write(data)
                if from_server:
                    buf += data
                    while len(buf) >= 9:
                        n = int.from_bytes(buf[:3], "big")
                        if len(buf) < 9 + n:
                            break
                        if buf[3] == FRAME_GOAWAY:
                            code = struct.unpack(">I", buf[13:17])[0]
                            self.goaways[code] = self.goaways.get(code, 0) + 1
                        buf = buf[9 + n:]
                await w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            w.close()
