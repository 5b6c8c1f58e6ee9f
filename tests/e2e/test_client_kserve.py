"""KServe's own Python SDK (the `kserve` package from PyPI, 0.21), unchanged,
against ptserve: InferenceRESTClient with the v2 protocol and
InferenceGRPCClient, both asyncio. The Open Inference Protocol is what
KServe speaks; where tritonserver's empty health bodies make this SDK's
REST health calls fail, ptserve sends the protocol's bodies.

What the SDK offers is covered: server liveness and readiness, model
readiness, inference with JSON and with binary tensors, BYTES tensors, and
errors (an unknown model, a wrong shape). Expected values come from torch
running the same model.pt in this process and from the identity models'
echo (clients_util.py).
"""
import asyncio

import numpy as np
import pytest

from conftest import need_module

kserve = need_module("kserve")
import grpc  # noqa: E402
import httpx  # noqa: E402
from kserve import (InferenceGRPCClient, InferenceRESTClient, InferInput,  # noqa: E402
                    InferRequest, RESTConfig)

from clients_util import TIMEOUT, add_sub_expected, clients_server  # noqa: E402

server = clients_server("client_kserve")


def rest():
    return InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=TIMEOUT))


def grpc_client(srv):
    return InferenceGRPCClient(srv.grpc_target, timeout=TIMEOUT)


def add_sub_request(a, b, binary):
    inputs = []
    for name, x in (("INPUT0", a), ("INPUT1", b)):
        i = InferInput(name, list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        inputs.append(i)
    return InferRequest(model_name="add_sub_fp32", infer_inputs=inputs, request_id="k1")


def outputs_by_name(resp):
    return {o.name: o.as_numpy() for o in resp.outputs}


def test_rest_health_with_the_protocols_bodies(server):
    async def main():
        c = rest()
        try:
            assert await c.is_server_live(server.url) is True
            assert await c.is_server_ready(server.url) is True
            assert await c.is_model_ready(server.url, "add_sub_fp32") is True
            assert await c.is_model_ready(server.url, "no_such_model") is False
        finally:
            await c.close()
    asyncio.run(main())


def test_grpc_health(server):
    async def main():
        c = grpc_client(server)
        try:
            assert await c.is_server_live() is True
            assert await c.is_server_ready() is True
            assert await c.is_model_ready("add_sub_fp32") is True
            with pytest.raises(grpc.RpcError) as e:
                await c.is_model_ready("no_such_model")
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
        finally:
            await c.close()
    asyncio.run(main())


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_rest_infer_matches_torch(server, binary):
    rng = np.random.default_rng(3)
    a = (rng.integers(-64, 64, (2, 4)) / 4).astype(np.float32)
    b = (rng.integers(-64, 64, (2, 4)) / 4).astype(np.float32)

    async def main():
        c = rest()
        try:
            return await c.infer(server.url, add_sub_request(a, b, binary),
                                 model_name="add_sub_fp32")
        finally:
            await c.close()
    resp = asyncio.run(main())
    got = outputs_by_name(resp)
    want = add_sub_expected(server, "fp32", a, b)
    assert resp.id == "k1" and resp.model_name == "add_sub_fp32"
    np.testing.assert_array_equal(got["OUTPUT0"], want[0])
    np.testing.assert_array_equal(got["OUTPUT1"], want[1])


def test_grpc_infer_matches_torch(server):
    rng = np.random.default_rng(4)
    a = (rng.integers(-64, 64, (3, 4)) / 4).astype(np.float32)
    b = (rng.integers(-64, 64, (3, 4)) / 4).astype(np.float32)

    async def main():
        c = grpc_client(server)
        try:
            return await c.infer(add_sub_request(a, b, True))
        finally:
            await c.close()
    got = outputs_by_name(asyncio.run(main()))
    want = add_sub_expected(server, "fp32", a, b)
    np.testing.assert_array_equal(got["OUTPUT0"], want[0])
    np.testing.assert_array_equal(got["OUTPUT1"], want[1])


@pytest.mark.parametrize("flavour", ["rest", "grpc"])
def test_bytes_tensors_echo(server, flavour):
    """dt_bytes (an identity model) echoes a BYTES batch, non-ASCII and an
    empty string included."""
    words = np.array([["héllo".encode(), b"", b"world \x00 end"]], dtype=np.object_)

    async def main():
        i = InferInput("INPUT0", [1, 3], "BYTES")
        i.set_data_from_numpy(words, binary_data=flavour == "rest")
        req = InferRequest(model_name="dt_bytes", infer_inputs=[i])
        if flavour == "rest":
            c = rest()
            try:
                return await c.infer(server.url, req, model_name="dt_bytes")
            finally:
                await c.close()
        c = grpc_client(server)
        try:
            return await c.infer(req)
        finally:
            await c.close()
    got = outputs_by_name(asyncio.run(main()))["OUTPUT0"]
    assert got.shape == (1, 3)
    assert [x if isinstance(x, bytes) else x.encode() for x in got.ravel()] == \
        list(words.ravel())


def test_errors_name_what_is_wrong(server):
    """An unknown model: REST 404 naming it, gRPC NOT_FOUND; a wrong shape:
    REST 400 and gRPC INVALID_ARGUMENT naming the input."""
    bad = np.zeros((2, 5), np.float32)  # add_sub_fp32 takes [-1, 4]

    async def main():
        c = rest()
        try:
            req = add_sub_request(np.zeros((1, 4), np.float32), np.zeros((1, 4), np.float32),
                                  False)
            with pytest.raises(httpx.HTTPStatusError) as e:
                await c.infer(server.url, req, model_name="no_such_model")
            assert e.value.response.status_code == 404
            assert "no_such_model" in e.value.response.text
            with pytest.raises(httpx.HTTPStatusError) as e:
                await c.infer(server.url, add_sub_request(bad, bad, True),
                              model_name="add_sub_fp32")
            assert e.value.response.status_code == 400
            assert "INPUT0" in e.value.response.text
        finally:
            await c.close()
        g = grpc_client(server)
        try:
            req = add_sub_request(bad, bad, True)
            with pytest.raises(grpc.RpcError) as e:
                await g.infer(req)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "INPUT0" in e.value.details()
            req.model_name = "no_such_model"
            with pytest.raises(grpc.RpcError) as e:
                await g.infer(req)
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
        finally:
            await g.close()
    asyncio.run(main())
