"""bench/grpc_transport/interop.py — the benchmark's servers against
NVIDIA's tritonclient, unchanged: a unary ModelInfer (with a deadline, so
grpc-timeout is sent), three messages on one ModelStreamInfer stream, and
a call for another model, which both servers must refuse with
INVALID_ARGUMENT. run.sh runs it against each server before measuring, so
the table compares two servers that real gRPC clients can use.

Usage: interop.py PORT
"""
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


def main(port):
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
    x = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    x.set_data_from_numpy(np.ones((1, 16), np.float32))
    # Both servers answer [[0, 0, 0, 0]] (transport.c: reply_message).
    want = np.zeros((1, 4), np.float32)

    r = client.infer("mlp", [x], client_timeout=5.0)
    assert np.array_equal(r.as_numpy("OUTPUT0"), want), r.as_numpy("OUTPUT0")
    assert r.get_response().model_name == "mlp"

    got = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    for _ in range(3):
        client.async_stream_infer("mlp", [x])
    for _ in range(3):
        result, error = got.get(timeout=5)
        assert error is None, error
        assert np.array_equal(result.as_numpy("OUTPUT0"), want)
    client.stop_stream()

    try:
        client.infer("other", [x])
    except InferenceServerException as e:
        assert e.status() == "StatusCode.INVALID_ARGUMENT", e.status()
    else:
        raise AssertionError("a call for another model was answered")
    print(f"interop: tritonclient unary, stream and error checks passed on port {port}")


if __name__ == "__main__":
    main(int(sys.argv[1]))
