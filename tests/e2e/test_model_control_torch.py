"""Poll mode with real TorchScript files (pytorch backend): a model file
caught half-written is not loaded broken — the reload fails and the loaded
version serves on — and once the file is whole the next poll loads it.
Expected answers come from torch in this test, from the same modules.
"""
import os

import pytest
import requests
import torch

from conftest import assert_clean_exit, wait_for
from scale_model import Scale, scripted_bytes

TIMEOUT = 60

CONFIG = """name: "scale"
backend: "pytorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


WAIT_S = 120  # how long a state change may take here


def infer(server, rows):
    body = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [len(rows), 4],
                        "data": [v for row in rows for v in row]}]}
    r = requests.post(server.url + "/v2/models/scale/infer", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["outputs"][0]["data"]


def expected(k, rows):
    return Scale(k)(torch.tensor(rows, dtype=torch.float32)).flatten().tolist()


def reason(server):
    (e,) = requests.post(server.url + "/v2/repository/index", timeout=TIMEOUT).json()
    return e.get("reason", "")


def test_half_written_model_file_keeps_the_old_version(start_server, tmp_path):
    os.makedirs(tmp_path / "scale" / "1")
    (tmp_path / "scale" / "config.pbtxt").write_text(CONFIG)
    path = tmp_path / "scale" / "1" / "model.pt"
    path.write_bytes(scripted_bytes(2.0))
    s = start_server(tmp_path, "--model-control-mode=poll", "--repository-poll-secs=1")
    rows = [[1.0, 2.0, 3.0, -4.0]]
    assert infer(s, rows) == pytest.approx(expected(2.0, rows))

    new = scripted_bytes(3.0)
    path.write_bytes(new[: len(new) // 2])  # the writer is half-way
    wait_for("the failed reload", lambda: reason(s).startswith("the last load failed"),
             timeout=WAIT_S)
    assert infer(s, rows) == pytest.approx(expected(2.0, rows))  # the old version serves

    path.write_bytes(new)  # the writer is done
    wait_for("the reload", lambda: reason(s) == "", timeout=WAIT_S)
    assert infer(s, rows) == pytest.approx(expected(3.0, rows))
    assert_clean_exit(s)
