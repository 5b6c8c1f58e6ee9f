"""Writes the seed corpus of tests/fuzz/fuzz_grpc_h2.c: what an HTTP/2
client sends after the preface (hyper-h2's frames) for a unary inference, a
stream, a gzip call with a deadline, health rpcs, an unknown method and a
PING; and two calls with large messages in large DATA frames, written by
hand (hyper-h2 keeps to 16 KiB frames), after the SETTINGS ACK that lets
the server take them.

    .venv/bin/python tests/fuzz/gen_grpc_h2_corpus.py tests/fuzz/corpus/grpc_h2
"""
import gzip, struct, sys, os
import numpy as np
import h2.config, h2.connection
from tritonclient.grpc import service_pb2

out = sys.argv[1]
SVC = "/inference.GRPCInferenceService/"

def infer(rid, a, b):
    r = service_pb2.ModelInferRequest(model_name="id", id=rid)
    r.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 2])
    r.raw_input_contents.append(np.array([[a, b]], dtype="<i4").tobytes())
    return r.SerializeToString()

def frame(m, compressed=False):
    return struct.pack(">BI", 1 if compressed else 0, len(m)) + m

def conn_bytes(calls, extra=b""):
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    for path, body, headers in calls:
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", path),
                             (":authority", "fuzz"), ("content-type", "application/grpc"),
                             ("te", "trailers")] + headers, end_stream=not body)
        if body:
            c.send_data(sid, body, end_stream=True)
    data = c.data_to_send()
    assert data.startswith(b"PRI * HTTP/2.0")
    return data[24:] + extra

seeds = {
    "unary": [(SVC + "ModelInfer", frame(infer("u", 1, 2)), [])],
    "stream": [(SVC + "ModelStreamInfer", frame(infer("s0", 1, 2)) + frame(infer("s1", 3, 4)),
                [("triton_grpc_error", "true")])],
    "gzip": [(SVC + "ModelInfer", frame(gzip.compress(infer("g", 5, 6)), True),
              [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip"),
               ("grpc-timeout", "5S")])],
    "health": [(SVC + "ServerLive", frame(b""), []), (SVC + "ModelReady", frame(b"\n\x02id"), []),
               ("/grpc.health.v1.Health/Check", frame(b""), [])],
    "unknown": [(SVC + "Nope", frame(b""), [])],
}
for name, calls in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(conn_bytes(calls))
# a ping and a window update after a call
with open(os.path.join(out, "ping"), "wb") as f:
    ping = struct.pack(">I", 8)[1:] + bytes([6, 0]) + struct.pack(">I", 0) + b"12345678"
    f.write(conn_bytes(seeds["unary"], ping))

# Two unary calls with 24 KB messages (more than the fuzz model takes: it
# answers an error, after reading them): one in a single DATA frame, one
# in a 20-byte frame (the prefix and a little) and a large one. The fuzz
# driver writes 4 KiB at a time, so the large frames arrive in pieces.
def big(rid, n):
    r = service_pb2.ModelInferRequest(model_name="id", id=rid)
    r.inputs.add(name="INPUT0", datatype="INT32", shape=[1, n])
    r.raw_input_contents.append(np.arange(n, dtype="<i4").tobytes())
    return frame(r.SerializeToString())

def raw_frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", ftype, flags, sid) + payload

c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
data = c.data_to_send()[24:] + raw_frame(4, 1, 0, b"")  # the server's SETTINGS acknowledged
for sid in (1, 3):
    c.send_headers(sid, [(":method", "POST"), (":scheme", "http"),
                         (":path", SVC + "ModelInfer"), (":authority", "fuzz"),
                         ("content-type", "application/grpc"), ("te", "trailers")])
data += c.data_to_send()
one, two = big("b1", 6000), big("b2", 6000)
data += raw_frame(0, 1, 1, one) + raw_frame(0, 0, 3, two[:20]) + raw_frame(0, 1, 3, two[20:])
with open(os.path.join(out, "large"), "wb") as f:
    f.write(data)
