"""KServe's Python SDK calls of test_client_kserve.py, run in a process of
their own:

    python kserve_calls.py SCENARIO HTTP_URL GRPC_TARGET [ARGS_JSON]

prints one JSON object with what the SDK returned (tensors as
{"shape", "data"} lists, errors as their status and text). Why a process of
its own: kserve's generated protos and tritonclient's both define the
package `inference` (ServerLiveRequest and the rest), and one Python
process can hold only one of them in protobuf's descriptor pool; the e2e
suite imports tritonclient's.
"""
import asyncio
import base64
import json
import sys

import grpc
import httpx
import numpy as np
from kserve import (InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest,
                    RESTConfig)

TIMEOUT = 30


def rest():
    return InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=TIMEOUT))


def tensor(a):
    if a.dtype == np.object_:
        return {"shape": list(a.shape),
                "b64": [base64.b64encode(x if isinstance(x, bytes) else x.encode()).decode()
                        for x in a.ravel()]}
    return {"shape": list(a.shape), "data": a.ravel().tolist()}


def outputs(resp):
    return {"id": resp.id, "model_name": resp.model_name,
            "outputs": {o.name: tensor(o.as_numpy()) for o in resp.outputs}}


def fp32_request(model, args, binary):
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        x = np.array(args[name], dtype=np.float32)
        i = InferInput(name, list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        inputs.append(i)
    return InferRequest(model_name=model, infer_inputs=inputs, request_id="k1")


def bytes_request(args, binary):
    words = np.array([[base64.b64decode(w) for w in args["words"]]], dtype=np.object_)
    i = InferInput("INPUT0", list(words.shape), "BYTES")
    i.set_data_from_numpy(words, binary_data=binary)
    return InferRequest(model_name="dt_bytes", infer_inputs=[i])


async def rest_call(url, fn):
    c = rest()
    try:
        return await fn(c, url)
    finally:
        await c.close()


async def grpc_call(target, fn):
    c = InferenceGRPCClient(target, timeout=TIMEOUT)
    try:
        return await fn(c)
    finally:
        await c.close()


async def caught(coro):
    """The call's result, or its error: {"http": status, "text"} or
    {"grpc": code name, "text"}."""
    try:
        return {"ok": await coro}
    except httpx.HTTPStatusError as e:
        return {"http": e.response.status_code, "text": e.response.text}
    except grpc.RpcError as e:
        return {"grpc": e.code().name, "text": e.details()}


async def main(scenario, url, target, args):
    if scenario == "rest_health":
        async def fn(c, u):
            return {"live": await c.is_server_live(u), "ready": await c.is_server_ready(u),
                    "model": await c.is_model_ready(u, args["model"]),
                    "unknown": await c.is_model_ready(u, "no_such_model")}
        return await rest_call(url, fn)
    if scenario == "grpc_health":
        async def fn(c):
            return {"live": await c.is_server_live(), "ready": await c.is_server_ready(),
                    "model": await c.is_model_ready(args["model"]),
                    "unknown": await caught(c.is_model_ready("no_such_model"))}
        return await grpc_call(target, fn)
    if scenario == "rest_infer":
        req = fp32_request(args["model"], args, args["binary"])
        return await rest_call(url, lambda c, u: caught(c.infer(u, req, model_name=args["model"])))
    if scenario == "grpc_infer":
        req = fp32_request(args["model"], args, True)
        return await grpc_call(target, lambda c: caught(c.infer(req)))
    if scenario == "rest_bytes":
        req = bytes_request(args, True)
        return await rest_call(url, lambda c, u: caught(c.infer(u, req, model_name="dt_bytes")))
    if scenario == "grpc_bytes":
        req = bytes_request(args, False)
        return await grpc_call(target, lambda c: caught(c.infer(req)))
    if scenario == "grpc_metadata":
        # The SDK's client has no metadata call; its generated stub (the
        # package's own grpc_predict_v2 protos, on the client's channel) has.
        from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb

        async def fn(c):
            sm = await c._client_stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=TIMEOUT)
            mm = await c._client_stub.ModelMetadata(pb.ModelMetadataRequest(name=args["model"]),
                                                    timeout=TIMEOUT)
            unknown = await caught(c._client_stub.ModelMetadata(
                pb.ModelMetadataRequest(name="no_such_model"), timeout=TIMEOUT))
            io = [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)}
                  for t in mm.inputs]
            oo = [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)}
                  for t in mm.outputs]
            return {"server": {"name": sm.name, "version": sm.version,
                               "extensions": list(sm.extensions)},
                    "model": {"name": mm.name, "versions": list(mm.versions),
                              "platform": mm.platform, "inputs": io, "outputs": oo},
                    "unknown": unknown}
        return await grpc_call(target, fn)
    raise SystemExit("unknown scenario " + scenario)


def to_json(x):
    if isinstance(x, dict):
        return {k: to_json(v) for k, v in x.items()}
    if hasattr(x, "outputs") and hasattr(x, "model_name"):
        return outputs(x)
    return x


if __name__ == "__main__":
    scenario, url, target = sys.argv[1:4]
    args = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    print(json.dumps(to_json(asyncio.run(main(scenario, url, target, args)))))
