"""KServe's own Python SDK (the `kserve` package from PyPI, 0.21), unchanged,
against ptserve: InferenceRESTClient with the v2 protocol and
InferenceGRPCClient, both asyncio. The Open Inference Protocol is what
KServe speaks; where tritonserver's empty health bodies make this SDK's
REST health calls fail, ptserve sends the protocol's bodies.

The SDK runs in a process of its own (kserve_calls.py): its generated
protos and tritonclient's define the same `inference` messages, which one
Python process can not hold twice. What the SDK offers is covered: server
liveness and readiness, model readiness, inference with JSON and with
binary tensors, BYTES tensors, and errors (an unknown model, a wrong
shape); its clients have no metadata call, so server and model metadata go
through the SDK's own generated gRPC stub on its client's channel. Expected values come from torch running the same model.pt in this
process and from the identity models' echo (clients_util.py).
"""
import base64
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from clients_util import add_sub_expected, clients_server

server = clients_server("client_kserve")
CALLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kserve_calls.py")


def sdk(srv, scenario, **args):
    """The SDK's answer to `scenario` (kserve_calls.py), as JSON."""
    r = subprocess.run([sys.executable, CALLS, scenario, srv.url, srv.grpc_target,
                        json.dumps(args)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def array(t, dtype=np.float32):
    return np.array(t["data"], dtype=dtype).reshape(t["shape"])


def add_sub_args(a, b, **more):
    return dict(model="add_sub_fp32", INPUT0=a.tolist(), INPUT1=b.tolist(), **more)


def test_rest_health_with_the_protocols_bodies(server):
    got = sdk(server, "rest_health", model="add_sub_fp32")
    assert got == {"live": True, "ready": True, "model": True, "unknown": False}


def test_grpc_health(server):
    got = sdk(server, "grpc_health", model="add_sub_fp32")
    assert got["live"] is True and got["ready"] is True and got["model"] is True
    assert got["unknown"] == {"ok": False}, got  # tritonserver r25.07: OK, ready=false


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_rest_infer_matches_torch(server, binary):
    rng = np.random.default_rng(3)
    a = (rng.integers(-64, 64, (2, 4)) / 4).astype(np.float32)
    b = (rng.integers(-64, 64, (2, 4)) / 4).astype(np.float32)
    got = sdk(server, "rest_infer", **add_sub_args(a, b, binary=binary))["ok"]
    want = add_sub_expected(server, "fp32", a, b)
    assert got["id"] == "k1" and got["model_name"] == "add_sub_fp32"
    np.testing.assert_array_equal(array(got["outputs"]["OUTPUT0"]), want[0])
    np.testing.assert_array_equal(array(got["outputs"]["OUTPUT1"]), want[1])


def test_grpc_infer_matches_torch(server):
    rng = np.random.default_rng(4)
    a = (rng.integers(-64, 64, (3, 4)) / 4).astype(np.float32)
    b = (rng.integers(-64, 64, (3, 4)) / 4).astype(np.float32)
    got = sdk(server, "grpc_infer", **add_sub_args(a, b))["ok"]
    want = add_sub_expected(server, "fp32", a, b)
    np.testing.assert_array_equal(array(got["outputs"]["OUTPUT0"]), want[0])
    np.testing.assert_array_equal(array(got["outputs"]["OUTPUT1"]), want[1])


@pytest.mark.parametrize("flavour", ["rest", "grpc"])
def test_bytes_tensors_echo(server, flavour):
    """dt_bytes (an identity model) echoes a BYTES batch, non-ASCII, an
    empty string and a NUL byte included."""
    words = ["héllo".encode(), b"", b"world \x00 end"]
    got = sdk(server, flavour + "_bytes",
              words=[base64.b64encode(w).decode() for w in words])["ok"]
    out = got["outputs"]["OUTPUT0"]
    assert out["shape"] == [1, 3]
    assert [base64.b64decode(w) for w in out["b64"]] == words


def test_grpc_metadata_as_the_config_says(server):
    """ServerMetadata and ModelMetadata through the SDK's own generated stub
    (its clients have no metadata call): the model's inputs and outputs as
    its config.pbtxt declares them (read here with a regex, not through the
    server), its version directories, and NOT_FOUND for an unknown model."""
    import re
    got = sdk(server, "grpc_metadata", model="add_sub_fp32")
    assert got["server"]["name"] == "ptserve" and got["server"]["version"], got
    assert "binary_tensor_data" in got["server"]["extensions"], got
    cfg = open(os.path.join(server.repo, "add_sub_fp32", "config.pbtxt")).read()
    mbs = int(re.search(r"max_batch_size:\s*(\d+)", cfg).group(1))

    def declared(section):
        block = re.search(section + r"\s*\[(.*?)\n\]", cfg, re.S).group(1)
        return [{"name": n, "datatype": t.replace("TYPE_", "").replace("STRING", "BYTES"),
                 "shape": ([-1] if mbs > 0 else []) + [int(d) for d in dims.split(",")]}
                for n, t, dims in re.findall(
                    r'name:\s*"(\w+)"\s*data_type:\s*(\w+)\s*dims:\s*\[\s*([-\d,\s]+)\]',
                    block)]
    versions = sorted(d for d in os.listdir(os.path.join(server.repo, "add_sub_fp32"))
                      if d.isdigit())
    m = got["model"]
    assert m["name"] == "add_sub_fp32" and m["versions"] == versions, m
    assert m["platform"] == "pytorch_libtorch", m
    assert m["inputs"] == declared("input"), (m, cfg)
    assert m["outputs"] == declared("output"), (m, cfg)
    assert got["unknown"].get("grpc") == "NOT_FOUND", got
    assert "no_such_model" in got["unknown"]["text"], got


def test_errors_name_what_is_wrong(server):
    """An unknown model: REST 404 naming it, gRPC NOT_FOUND; a wrong shape
    (add_sub_fp32 takes [-1, 4]): REST 400 and gRPC INVALID_ARGUMENT
    naming the input."""
    good, bad = np.zeros((1, 4), np.float32), np.zeros((2, 5), np.float32)
    got = sdk(server, "rest_infer", **dict(add_sub_args(good, good, binary=False),
                                           model="no_such_model"))
    assert got.get("http") == 404 and "no_such_model" in got["text"], got
    got = sdk(server, "rest_infer", **add_sub_args(bad, bad, binary=True))
    assert got.get("http") == 400 and "INPUT0" in got["text"], got
    got = sdk(server, "grpc_infer", **add_sub_args(bad, bad))
    assert got.get("grpc") == "INVALID_ARGUMENT" and "INPUT0" in got["text"], got
    got = sdk(server, "grpc_infer", **dict(add_sub_args(good, good), model="no_such_model"))
    assert got.get("grpc") == "NOT_FOUND", got
