"""NVIDIA's asyncio clients, tritonclient.http.aio (aiohttp) and
tritonclient.grpc.aio (2.73), against ptserve: every call they offer, many
requests in flight at once, and grpc.aio's bidirectional stream_infer.

Each test runs its own event loop (asyncio.run) with a client made inside
it; both flavours run the same test where their calls match. Expected values
come from torch running the same model.pt in this process, the identity
models' echo and the committed config and label files (clients_util.py).
"""
import asyncio
import json
import os

import numpy as np
import pytest

from conftest import need_module

aio_http = need_module("tritonclient.http.aio")
aio_grpc = need_module("tritonclient.grpc.aio")
shm = need_module("tritonclient.utils.shared_memory")
from tritonclient.utils import InferenceServerException  # noqa: E402

from clients_util import (DTYPES, IDENTITY_REPO, LABELS, TIMEOUT,  # noqa: E402
                          add_sub_expected, add_sub_inputs, assert_classification,
                          assert_same, clients_server, http_target, identity_values,
                          mlp_expected, torch_model)

server = clients_server("client_aio")

FLAVOURS = ["http", "grpc"]


class Flavour:
    """The bits where the two aio clients differ: module, address, error
    status spelling, and reading a JSON form of the answers."""

    def __init__(self, name, srv):
        self.name = name
        self.mod = aio_http if name == "http" else aio_grpc
        self.target = http_target(srv) if name == "http" else srv.grpc_target

    def client(self, **kwargs):
        return self.mod.InferenceServerClient(self.target, **kwargs)

    def input(self, name, x, datatype):
        i = self.mod.InferInput(name, list(x.shape), datatype)
        i.set_data_from_numpy(x)
        return i

    def output(self, name, **kwargs):
        return self.mod.InferRequestedOutput(name, **kwargs)

    def status(self, http, grpc):
        return str(http) if self.name == "http" else "StatusCode." + grpc

    async def json(self, coro_fn, **kwargs):
        """Calls a getter and returns its answer as JSON (gRPC: as_json)."""
        if self.name == "grpc":
            kwargs["as_json"] = True
        return await coro_fn(**kwargs)

    def response(self, result):
        return result.get_response(as_json=True) if self.name == "grpc" else result.get_response()


async def expect_error(coro, status, *words):
    with pytest.raises(InferenceServerException) as info:
        await coro
    e = info.value
    assert e.status() == status, (e.status(), e.message())
    for w in words:
        assert w in e.message(), e.message()


def run(coro_fn, *args):
    return asyncio.run(asyncio.wait_for(coro_fn(*args), TIMEOUT * 4))


@pytest.fixture(params=FLAVOURS)
def flavour(request, server):
    return Flavour(request.param, server)


# ---------------------------------------------------------------- health, metadata, config

def test_health_metadata_config(flavour):
    async def body():
        c = flavour.client()
        try:
            assert await c.is_server_live() and await c.is_server_ready()
            assert await c.is_model_ready("mlp_classifier")
            md = await flavour.json(c.get_server_metadata)
            assert md["name"] == "ptserve" and "classification" in md["extensions"]
            md = await flavour.json(c.get_model_metadata, model_name="mlp_classifier")
            assert md["inputs"][0]["name"] == "INPUT__0" and md["outputs"][0]["datatype"] == "FP32"
            cfg = await flavour.json(c.get_model_config, model_name="mlp_classifier")
            cfg = cfg.get("config", cfg)
            assert cfg["output"][0]["label_filename"] == "labels.txt"
            await expect_error(c.get_model_metadata("no_such_model"),
                               flavour.status(404, "NOT_FOUND"), "no_such_model")
        finally:
            await c.close()
    run(body)


# ---------------------------------------------------------------- inference

def test_infer_every_datatype(flavour):
    async def body():
        c = flavour.client()
        try:
            xs = {d: identity_values(d, rows=3) for d in DTYPES}
            results = await asyncio.gather(*[
                c.infer("dt_" + d.lower(), [flavour.input("INPUT0", x, d)], request_id=d)
                for d, x in xs.items()])
            for (d, x), r in zip(xs.items(), results):
                assert flavour.response(r)["id"] == d
                assert_same(r.as_numpy("OUTPUT0"), x, d)
        finally:
            await c.close()
    run(body)


def test_many_concurrent_requests_match_torch(flavour, server):
    """60 requests in flight on one client, to three TorchScript models,
    each with its own id and input."""
    async def body():
        c = flavour.client()
        try:
            rng = np.random.default_rng(21)
            calls, wants = [], []
            for i in range(60):
                if i % 3 == 0:
                    x = rng.standard_normal((1 + i % 8, 16)).astype(np.float32)
                    calls.append(c.infer("mlp", [flavour.input("INPUT__0", x, "FP32")],
                                         request_id="r%d" % i))
                    wants.append(("OUTPUT__0", mlp_expected(server, "mlp", x), None))
                elif i % 3 == 1:
                    a, b = add_sub_inputs("fp32", (2, 4), rng)
                    calls.append(c.infer("add_sub_fp32", [flavour.input("INPUT0", a, "FP32"),
                                                          flavour.input("INPUT1", b, "FP32")],
                                         request_id="r%d" % i))
                    wants.append(("OUTPUT1", add_sub_expected(server, "fp32", a, b)[1], "FP32"))
                else:
                    words = ["aio %d" % i, "x"]
                    calls.append(c.infer("strings", [flavour.input(
                        "INPUT0", np.array([w.encode() for w in words], dtype=object), "BYTES")],
                        request_id="r%d" % i))
                    want = [w.encode() for w in torch_model(server, "strings")(words)]
                    wants.append(("OUTPUT0", np.array(want, dtype=object), "BYTES"))
            results = await asyncio.gather(*calls)
            for i, (r, (name, want, datatype)) in enumerate(zip(results, wants)):
                assert flavour.response(r)["id"] == "r%d" % i
                if datatype is None:
                    np.testing.assert_allclose(r.as_numpy(name), want, rtol=1e-5, atol=1e-6)
                else:
                    assert_same(r.as_numpy(name), want, datatype)
        finally:
            await c.close()
    run(body)


def test_classification(flavour, server):
    async def body():
        c = flavour.client()
        try:
            x = np.random.default_rng(22).standard_normal((4, 16)).astype(np.float32)
            scores = mlp_expected(server, "mlp_classifier", x)
            r = await c.infer("mlp_classifier", [flavour.input("INPUT__0", x, "FP32")],
                              outputs=[flavour.output("OUTPUT__0", class_count=3)])
            assert_classification(r.as_numpy("OUTPUT__0"), scores, 3, LABELS)
        finally:
            await c.close()
    run(body)


def test_errors_and_compression(flavour, server):
    async def body():
        c = flavour.client()
        try:
            x = identity_values("FP32")
            await expect_error(c.infer("no_such_model", [flavour.input("INPUT0", x, "FP32")]),
                               flavour.status(404, "NOT_FOUND"), "no_such_model")
            await expect_error(c.infer("dt_int32", [flavour.input("INPUT0", x, "FP32")]),
                               flavour.status(400, "INVALID_ARGUMENT"), "INPUT0", "INT32")
            y = np.random.default_rng(23).standard_normal((2, 16)).astype(np.float32)
            want = mlp_expected(server, "mlp", y)
            for alg in ("gzip", "deflate"):
                inputs = [flavour.input("INPUT__0", y, "FP32")]
                if flavour.name == "http":
                    r = await c.infer("mlp", inputs, request_compression_algorithm=alg,
                                      response_compression_algorithm=alg)
                else:
                    r = await c.infer("mlp", inputs, compression_algorithm=alg)
                np.testing.assert_allclose(r.as_numpy("OUTPUT__0"), want, rtol=1e-5, atol=1e-6)
        finally:
            await c.close()
    run(body)


def test_custom_headers(flavour, start_server, server):
    """Inference restricted to requests with a header: headers= gets through."""
    flag = "--http-restricted-api" if flavour.name == "http" else "--grpc-restricted-protocol"
    s = start_server(server.repo, "--model-repository", IDENTITY_REPO, flag,
                     "inference:x-ptserve-key=s3cret")
    f = Flavour(flavour.name, s)

    async def body():
        c = f.client()
        try:
            x = identity_values("INT64")
            inputs = [f.input("INPUT0", x, "INT64")]
            await expect_error(c.infer("dt_int64", inputs), f.status(403, "UNAVAILABLE"),
                               "x-ptserve-key")
            r = await c.infer("dt_int64", inputs, headers={"x-ptserve-key": "s3cret"})
            assert_same(r.as_numpy("OUTPUT0"), x, "INT64")
        finally:
            await c.close()
    run(body)


# ---------------------------------------------------------------- statistics, settings, the rest

def test_statistics_and_settings(flavour):
    async def body():
        c = flavour.client()
        try:
            async def success():
                s = await flavour.json(c.get_inference_statistics, model_name="add_sub_int8")
                return int(s["model_stats"][0]["inference_stats"]["success"].get("count", 0))

            before = await success()
            rng = np.random.default_rng(24)
            await asyncio.gather(*[
                c.infer("add_sub_int8", [flavour.input("INPUT0", a, "INT8"),
                                         flavour.input("INPUT1", b, "INT8")])
                for a, b in (add_sub_inputs("int8", (1, 4), rng) for _ in range(5))])
            assert await success() == before + 5

            trace = await flavour.json(c.get_trace_settings)
            if flavour.name == "grpc":
                rate = lambda t: t["settings"]["trace_rate"]["value"][0]
            else:
                rate = lambda t: t["trace_rate"]
            got = await flavour.json(c.update_trace_settings, model_name="mlp",
                                     settings={"trace_rate": "4"})
            assert rate(got) == "4"
            got = await flavour.json(c.update_trace_settings, model_name="mlp",
                                     settings={"trace_rate": None})
            assert rate(got) == rate(trace)

            log = await flavour.json(c.get_log_settings)
            await c.update_log_settings({"log_verbose_level": 1})
            got = await flavour.json(c.get_log_settings)
            level = (got["settings"]["log_verbose_level"]["uint32_param"]
                     if flavour.name == "grpc" else got["log_verbose_level"])
            assert level == 1
            await c.update_log_settings({"log_verbose_level": 0})
            assert await flavour.json(c.get_log_settings) == log
        finally:
            await c.close()
    run(body)


def test_repository_and_shared_memory_calls(flavour):
    async def body():
        c = flavour.client()
        try:
            index = await flavour.json(c.get_model_repository_index)
            models = index["models"] if flavour.name == "grpc" else index
            assert {"mlp", "strings", "dt_fp16"} <= {m["name"] for m in models}
            # Model control mode NONE here (explicit: test_model_control below).
            refused = flavour.status(503, "UNAVAILABLE")
            for call in (c.load_model, c.unload_model):
                await expect_error(call("mlp"), refused,
                                   "explicit model load / unload is not allowed")
            # Shared memory is off unless --allow-client-shm (test_shared_memory).
            disabled = "client shared memory is disabled on this server"
            unsupported = flavour.status(501, "UNIMPLEMENTED")
            await expect_error(c.register_system_shared_memory("r", "/ptserve_shm", 8),
                               unsupported, disabled)
            await expect_error(c.register_cuda_shared_memory("c", b"aGFuZGxl", 0, 8),
                               unsupported, disabled)
        finally:
            await c.close()
    run(body)


def test_shared_memory(flavour, start_server):
    """--allow-client-shm: the asyncio clients register POSIX shared-memory
    regions made with tritonclient.utils.shared_memory, infer with the input
    read from one and the output written into another (the identity model:
    the output region must hold what the test wrote), list and unregister
    them. A CUDA registration of a bogus handle is refused with a message
    (no CUDA in a CPU build; an invalid handle in a CUDA one)."""
    s = start_server(IDENTITY_REPO, "--allow-client-shm=true")
    f = Flavour(flavour.name, s)
    x = identity_values("FP32", rows=2)
    prefix = "/ptserve_aio_%d_%s_" % (os.getpid(), f.name)
    h_in = shm.create_shared_memory_region("in", prefix + "in", x.nbytes)
    h_out = shm.create_shared_memory_region("out", prefix + "out", x.nbytes)

    async def body():
        c = f.client()
        try:
            shm.set_shared_memory_region(h_in, [x])
            await c.register_system_shared_memory("in", prefix + "in", x.nbytes)
            await c.register_system_shared_memory("out", prefix + "out", x.nbytes)
            status = await f.json(c.get_system_shared_memory_status)
            regions = status["regions"].values() if f.name == "grpc" else status
            assert sorted(r["name"] for r in regions) == ["in", "out"]
            i = f.mod.InferInput("INPUT0", list(x.shape), "FP32")
            i.set_shared_memory("in", x.nbytes)
            o = f.output("OUTPUT0")
            o.set_shared_memory("out", x.nbytes)
            r = await c.infer("dt_fp32", [i], outputs=[o], request_id="shm")
            assert f.response(r)["id"] == "shm"
            assert_same(shm.get_contents_as_numpy(h_out, np.float32, list(x.shape)), x, "FP32")
            await c.unregister_system_shared_memory("in")
            await c.unregister_system_shared_memory()
            status = await f.json(c.get_system_shared_memory_status)
            assert not (status.get("regions") if f.name == "grpc" else status)
            await expect_error(c.register_cuda_shared_memory("c", b"aGFuZGxl", 0, 8),
                               f.status(400, "INVALID_ARGUMENT"),
                               "failed to register CUDA shared memory region 'c'")
        finally:
            await c.close()
    try:
        run(body)
    finally:
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)


def test_model_control(flavour, start_server):
    """--model-control-mode explicit: the asyncio clients load a model (also
    with a config override), see it ready and serving, and unload it."""
    s = start_server(IDENTITY_REPO, "--model-control-mode=explicit", "--load-model=dt_fp32")
    f = Flavour(flavour.name, s)

    async def ready_in_index(c, name):
        index = await f.json(c.get_model_repository_index)
        models = index["models"] if f.name == "grpc" else index
        return any(m["name"] == name and m.get("state") == "READY" for m in models)

    async def body():
        c = f.client()
        try:
            x = identity_values("INT32")
            assert await ready_in_index(c, "dt_fp32")
            assert not await ready_in_index(c, "dt_int32")
            await c.load_model("dt_int32")
            assert await c.is_model_ready("dt_int32") and await ready_in_index(c, "dt_int32")
            r = await c.infer("dt_int32", [f.input("INPUT0", x, "INT32")])
            assert_same(r.as_numpy("OUTPUT0"), x, "INT32")
            # A config override: the same model with max_batch_size 2.
            cfg = await f.json(c.get_model_config, model_name="dt_int32")
            cfg = dict(cfg.get("config", cfg))
            cfg["max_batch_size"] = 2
            await c.load_model("dt_int32", config=json.dumps(cfg))
            cfg = await f.json(c.get_model_config, model_name="dt_int32")
            assert int(cfg.get("config", cfg)["max_batch_size"]) == 2
            await c.unload_model("dt_int32")
            assert not await ready_in_index(c, "dt_int32")
            await expect_error(c.infer("dt_int32", [f.input("INPUT0", x, "INT32")]),
                               f.status(404, "NOT_FOUND"), "dt_int32", "no available versions")
            assert await c.is_model_ready("dt_fp32")
        finally:
            await c.close()
    run(body)


# ---------------------------------------------------------------- grpc.aio streaming

def test_grpc_stream_infer_many_with_ids(server):
    """One bidirectional stream, 50 requests (some to an unknown model):
    every request gets one answer; successes carry their id and torch's
    values, failures the server's message; the stream ends when the
    requests do."""
    rng = np.random.default_rng(25)
    xs = {"st-%d" % i: rng.standard_normal((1 + i % 3, 16)).astype(np.float32)
          for i in range(50)}

    async def body():
        c = aio_grpc.InferenceServerClient(server.grpc_target)

        async def requests():
            for i, (rid, x) in enumerate(xs.items()):
                i_ = aio_grpc.InferInput("INPUT__0", list(x.shape), "FP32")
                i_.set_data_from_numpy(x)
                yield {"model_name": "mlp" if i % 10 else "no_such_model", "inputs": [i_],
                       "request_id": rid}

        answers, errors = {}, []
        try:
            async for result, error in c.stream_infer(requests(), compression_algorithm="gzip"):
                if error is not None:
                    errors.append(error.message())
                else:
                    answers[result.get_response().id] = result.as_numpy("OUTPUT__0")
        finally:
            await c.close()
        return answers, errors

    answers, errors = run(body)
    assert len(errors) == 5 and all("no_such_model" in e for e in errors), errors
    assert set(answers) == {rid for i, rid in enumerate(xs) if i % 10}
    for rid, got in answers.items():
        np.testing.assert_allclose(got, mlp_expected(server, "mlp", xs[rid]), rtol=1e-5,
                                   atol=1e-6)
