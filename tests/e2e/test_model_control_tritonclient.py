"""Model control through NVIDIA's tritonclient (the venv's tritonclient[all]):
load_model / unload_model / get_model_repository_index / is_model_ready,
over HTTP and gRPC, against ptserve in explicit mode. The client is the
independent party here: it builds the requests and parses the answers the
way it does against tritonserver.

tritonclient.http's load_model cannot send `files` (it base64-encodes to
bytes, which json.dumps refuses), so file overrides go through the gRPC
client, which sends them as bytes_param.
"""
import json
import os

import numpy as np
import pytest

from conftest import assert_clean_exit, need_module

grpcclient = need_module("tritonclient.grpc")
httpclient = need_module("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

CONFIG = """name: "{name}"
backend: "identity"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
"""

OVERRIDE = json.dumps({
    "backend": "identity", "max_batch_size": 2,
    "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [2]}]})


def write_model(repo, name, versions=(1,)):
    for v in versions:
        os.makedirs(os.path.join(str(repo), name, str(v)), exist_ok=True)
    with open(os.path.join(str(repo), name, "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(name=name))


@pytest.fixture
def server(start_server, tmp_path):
    write_model(tmp_path, "a", versions=(1, 2))
    write_model(tmp_path, "b")
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=b")
    yield s
    assert_clean_exit(s)


def check_infer(client, module, model):
    values = np.array([[11, -7]], dtype=np.int32)
    inp = module.InferInput("INPUT0", [1, 2], "INT32")
    inp.set_data_from_numpy(values)
    res = client.infer(model, [inp])
    assert np.array_equal(res.as_numpy("OUTPUT0"), values)
    return res


def test_http_client_load_unload_index(server):
    c = httpclient.InferenceServerClient(server.url[len("http://"):])
    try:
        idx = {e["name"]: e for e in c.get_model_repository_index()}
        assert idx["a"] == {"name": "a"}
        assert idx["b"]["state"] == "READY"
        assert not c.is_model_ready("a")
        c.load_model("a")
        assert c.is_model_ready("a")
        assert c.is_model_ready("a", "2")
        check_infer(c, httpclient, "a")
        c.load_model("a", config=OVERRIDE)
        assert c.get_model_config("a")["max_batch_size"] == 2
        c.unload_model("a", unload_dependents=True)
        assert not c.is_model_ready("a")
        idx = {e["name"]: e for e in c.get_model_repository_index()}
        assert idx["a"] == {"name": "a", "version": "2", "state": "UNAVAILABLE",
                            "reason": "unloaded"}
        with pytest.raises(InferenceServerException) as info:
            check_infer(c, httpclient, "a")
        assert "UNAVAILABLE: unloaded" in info.value.message()
        with pytest.raises(InferenceServerException) as info:
            c.load_model("ghost")
        assert "no model repository holds a model named 'ghost'" in info.value.message()
    finally:
        c.close()


def test_grpc_client_load_unload_index(server):
    c = grpcclient.InferenceServerClient(server.grpc_target)
    try:
        idx = {m.name: m for m in c.get_model_repository_index().models}
        assert idx["a"].state == "" and idx["b"].state == "READY"
        c.load_model("a")
        assert c.is_model_ready("a")
        assert check_infer(c, grpcclient, "a").get_response().model_version == "2"
        c.load_model("a", config=OVERRIDE)
        assert c.get_model_config("a").config.max_batch_size == 2
        # A model no repository holds, from files (sent as bytes_param).
        c.load_model("fresh", config=OVERRIDE, files={"file:3/model.pt": b"\x00weights\xff"})
        assert check_infer(c, grpcclient, "fresh").get_response().model_version == "3"
        idx = c.get_model_repository_index(as_json=True)
        states = {(m["name"], m.get("version", "")): m.get("state", "") for m in idx["models"]}
        assert states[("fresh", "3")] == "READY"
        c.unload_model("fresh")
        c.unload_model("a")
        assert not c.is_model_ready("a")
        with pytest.raises(InferenceServerException) as info:
            check_infer(c, grpcclient, "a")
        assert info.value.status() == "StatusCode.NOT_FOUND"
        assert "'a' has no available versions" in info.value.message()
    finally:
        c.close()
