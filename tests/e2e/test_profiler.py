"""The operator profiler, end to end (needs the pytorch backend).

The MLP example (examples/models/mlp_classifier: Linear(16, 32), ReLU,
Linear(32, 4), softmax) is profiled for N executions, switched on at run
time (the per-model trace setting "profile_executions") and at load (the
PROFILE_EXECUTIONS parameter). Expected operator counts come from torch
itself: the same model.pt run once under torch's own profiler gives the calls
per execution (2 Linear layers: 2 aten::linear), times N.
"""
import csv
import json
import os
import sys
import subprocess
import shutil
import time

import numpy as np
import pytest
import requests
import torch

from conftest import EXAMPLES, GENERATED_MODEL_FILES, ROOT

MLP = None  # examples/models/mlp_classifier with its model.pt, set by _example_mlp


@pytest.fixture(scope="module", autouse=True)
def _example_mlp(tmp_path_factory):
    """The example repository with its TorchScript files written for this
    run (they are generated, not committed: `make run` writes them too)."""
    global MLP
    repo = tmp_path_factory.mktemp("examples")
    # The TorchScript models only: the AOTInductor example's package is
    # exported by examples/export_aoti.py (a minute of C++ compiling).
    shutil.copytree(EXAMPLES, str(repo), dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*_aoti", *GENERATED_MODEL_FILES))
    python = os.environ.get("PTS_MODELS_PYTHON", sys.executable)  # as conftest.models_python
    subprocess.run([python, os.path.join(ROOT, "examples", "gen_models.py"), str(repo)],
                   check=True, stdout=subprocess.DEVNULL)
    MLP = os.path.join(str(repo), "mlp_classifier")
TIMEOUT = 30


def torch_calls_per_execution(names, batch):
    """How often each operator runs in one forward(), by torch's profiler."""
    model = torch.jit.load(os.path.join(MLP, "1", "model.pt"))
    x = torch.rand(batch, 16)
    with torch.no_grad():
        for _ in range(3):  # let the profiling executor settle, as ptserve's would
            model(x)
        with torch.autograd.profiler.profile(record_shapes=True) as prof:
            model(x)
    return {n: sum(1 for e in prof.function_events if e.name == n) for n in names}


def infer(server, batch):
    data = np.random.default_rng(batch).random((batch, 16), dtype=np.float32)
    r = requests.post(server.url + "/v2/models/mlp_classifier/infer", timeout=TIMEOUT, json={
        "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [batch, 16],
                    "data": data.flatten().tolist()}]})
    assert r.status_code == 200, r.text


def wait_for(server, prefix, timeout=60):
    """Waits for the profile `prefix` to be complete: the server logs
    "operator profile of N executions written: <3 paths>" once all three
    files are written and closed (the files alone may still be growing)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any("executions written" in line and prefix + ".ops.csv" in line
               for line in server.log().splitlines()):
            return
        time.sleep(0.05)
    raise AssertionError("%s was not written:\n%s" % (prefix, server.log()))


def table(csv_path):
    """operator -> total calls (over every input-shape row)."""
    calls = {}
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        calls[row["operator"]] = calls.get(row["operator"], 0) + int(row["calls"])
        assert float(row["cpu_total_us"]) >= 0
    return rows, calls


def check_profile(prefix, n, batch):
    rows, calls = table(prefix + ".ops.csv")
    want = torch_calls_per_execution(["aten::linear", "aten::addmm", "aten::relu"], batch)
    assert want["aten::linear"] == 2  # the model's two Linear layers
    for op, per_exec in want.items():
        assert calls.get(op) == per_exec * n, (op, calls.get(op), per_exec, n)
    # Shapes and dtypes per row: the first layer sees [batch, 16] float32.
    first = [r for r in rows if r["operator"] == "aten::linear" and
             r["input_shapes"].startswith("[[%d, 16]" % batch)]
    assert first and first[0]["input_dtypes"] == "[float, float, float]"
    with open(prefix + ".ops.md") as f:
        md = f.read()
    assert "| aten::linear |" in md and "executions recorded: %d" % n in md
    with open(prefix + ".trace.json") as f:
        chrome = json.load(f)
    slices = [e for e in chrome["traceEvents"] if e.get("ph") == "X"]
    assert sum(1 for e in slices if e["name"] == "aten::linear") == 2 * n


def test_torch_profiler_runtime_switch(start_server, tmp_path):
    server = start_server(os.path.dirname(MLP), "--profile-dir", str(tmp_path))
    url = server.url + "/v2/models/mlp_classifier/trace/setting"
    r = requests.post(url, json={"profile_executions": "4"}, timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["profile_executions"] == "4", r.text
    for _ in range(2):
        infer(server, 3)
    assert requests.get(url, timeout=TIMEOUT).json()["profile_executions"] == "2"
    for _ in range(3):  # one more than asked for: it is not recorded
        infer(server, 3)
    prefix = str(tmp_path / "mlp_classifier.profile1")
    wait_for(server, prefix)
    check_profile(prefix, 4, 3)
    assert requests.get(url, timeout=TIMEOUT).json()["profile_executions"] == "0"
    r = requests.post(url, json={"profile_executions": "-1"}, timeout=TIMEOUT)
    assert r.status_code == 400 and "profile_executions" in r.json()["error"]
    assert server.stop() == 0


def test_torch_profiler_config_parameter(start_server, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(MLP, repo / "mlp_classifier")
    cfg = repo / "mlp_classifier" / "config.pbtxt"
    cfg.write_text(cfg.read_text() + 'parameters: { key: "PROFILE_EXECUTIONS" value: '
                                     '{ string_value: "2" } }\n')
    out = tmp_path / "profiles"
    out.mkdir()
    server = start_server(repo, "--profile-dir", str(out))
    for _ in range(2):
        infer(server, 5)
    prefix = str(out / "mlp_classifier.profile1")
    wait_for(server, prefix)
    check_profile(prefix, 2, 5)
    assert server.stop() == 0
