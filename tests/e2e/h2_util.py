"""One gRPC call over a raw HTTP/2 connection (hyper-h2), for tests that
look at what grpcio hides: response headers and trailers, the message
prefix's compressed flag, RST_STREAM, GOAWAY."""
import socket
import struct
import time
import types

import h2.config
import h2.connection
import h2.events


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
