"""Custom operators (needs the pytorch backend and the built example library).

examples/custom_op builds libsoftshrink.so (ptserve_ops::softshrink, a
TORCH_LIBRARY operator); examples/custom_op/gen_model.py writes a model that
calls it. The served results are compared with torch's own
torch.nn.functional.softshrink computed here. A bad library path, a path
leaving the model directory and a missing operator each make only that model
UNAVAILABLE, with the reason, while the server goes on.
"""
import os
import sys
import subprocess

import numpy as np
import pytest
import requests
import torch

from conftest import ROOT

GEN = os.path.join(ROOT, "examples", "custom_op", "gen_model.py")
TIMEOUT = 30


@pytest.fixture
def library(ptserve_bin):
    path = os.path.join(os.path.dirname(ptserve_bin), "examples", "custom_op", "libsoftshrink.so")
    assert os.path.exists(path), "build the example custom operator first (%s)" % path
    return path


def generate(library, repo, name, *extra):
    subprocess.run([os.environ.get("PTS_MODELS_PYTHON", sys.executable), GEN, library, str(repo), "--name", name] + list(extra),
                   check=True, capture_output=True)
    return repo / name


def set_library(model_dir, value):
    cfg = model_dir / "config.pbtxt"
    text = cfg.read_text().replace('string_value: "libsoftshrink.so"',
                                   'string_value: "%s"' % value)
    cfg.write_text(text)


def infer(server, model, x):
    r = requests.post(server.url + "/v2/models/%s/infer" % model, timeout=TIMEOUT, json={
        "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": list(x.shape),
                    "data": x.flatten().tolist()}]})
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    return np.array(out["data"], dtype=np.float32).reshape(out["shape"])


def index(server):
    r = requests.post(server.url + "/v2/repository/index", json={}, timeout=TIMEOUT)
    return {m["name"]: m for m in r.json()}


def test_torch_custom_op_served(start_server, tmp_path, library):
    repo = tmp_path / "repo"
    generate(library, repo, "softshrink")
    generate(library, repo, "softshrink_ops", "--model-operations")
    set_library(generate(library, repo, "missing_file"), "nothere.so")
    set_library(generate(library, repo, "escapes"), "../softshrink/libsoftshrink.so")
    server = start_server(repo, "--exit-on-error=false", "--strict-readiness=false")

    rng = np.random.default_rng(7)
    x = np.concatenate([rng.normal(0, 1, (3, 64)).astype(np.float32),
                        np.array([[-0.5, 0.5, -0.50001, 0.50001] * 16], dtype=np.float32)])
    want = torch.nn.functional.softshrink(torch.from_numpy(x), 0.5).numpy()
    for model in ("softshrink", "softshrink_ops"):
        np.testing.assert_array_equal(infer(server, model, x), want)

    models = index(server)
    assert models["missing_file"]["state"] == "UNAVAILABLE"
    assert "nothere.so" in models["missing_file"]["reason"]
    assert models["escapes"]["state"] == "UNAVAILABLE"
    assert "'..'" in models["escapes"]["reason"]
    assert requests.get(server.url + "/v2/health/live", timeout=TIMEOUT).status_code == 200
    assert server.stop() == 0


def test_torch_custom_op_missing_operator(start_server, tmp_path, library):
    # The model calls ptserve_ops::softshrink, but its config lists no library
    # (and nothing else in this server loads it).
    repo = tmp_path / "repo"
    model_dir = generate(library, repo, "no_library")
    cfg = model_dir / "config.pbtxt"
    cfg.write_text("\n".join(l for l in cfg.read_text().splitlines()
                             if "CUSTOM_OP_LIBRARIES" not in l) + "\n")
    server = start_server(repo, "--exit-on-error=false", "--strict-readiness=false")
    m = index(server)["no_library"]
    assert m["state"] == "UNAVAILABLE"
    assert "softshrink" in m["reason"], m["reason"]
    r = requests.post(server.url + "/v2/models/no_library/infer", timeout=TIMEOUT, json={
        "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]})
    assert r.status_code in (400, 404, 503), r.text
    assert server.stop() == 0
