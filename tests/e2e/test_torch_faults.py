"""Model faults: a model whose forward throws fails only that request, with
the exception's message; a model whose load throws is UNAVAILABLE with the
reason; the server never aborts and goes on serving.

The models come from tests/models/gen_fault_models.py; expected messages are
the ones written into the models there, and correct answers are computed
with torch from the same model.pt files.
"""
import concurrent.futures
import os
import sys
import subprocess

import pytest
import requests
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 60


@pytest.fixture(scope="module")
def fault_models(tmp_path_factory):
    out = tmp_path_factory.mktemp("fault_models")
    python = os.environ.get("PTS_MODELS_PYTHON", sys.executable)  # as conftest.models_python
    subprocess.run([python, os.path.join(ROOT, "tests", "models", "gen_fault_models.py"), str(out)],
                   check=True)
    return out


def infer(server, model, rows):
    body = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [len(rows), 4],
                        "data": [v for row in rows for v in row]}]}
    return requests.post(server.url + "/v2/models/%s/infer" % model, json=body, timeout=TIMEOUT)


def expected(fault_models, model, rows):
    m = torch.jit.load(os.path.join(str(fault_models), model, "1", "model.pt"))
    return m(torch.tensor(rows, dtype=torch.float32)).flatten().tolist()


def test_forward_exception_fails_only_that_request(start_server, fault_models):
    server = start_server(fault_models, "--exit-on-error=false", "--strict-readiness=false")
    good, bad = [[1.0, 2.0, 3.0, 4.0]], [[-5.0, 1.0, 1.0, 1.0]]
    r = infer(server, "raises", bad)
    assert r.status_code in (400, 500), r.text
    assert "input sum must be non-negative" in r.json()["error"]
    r = infer(server, "raises", good)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == expected(fault_models, "raises", good)

    r = infer(server, "asserts", [[1.0, 2.0, 300.0, 4.0]])
    assert r.status_code in (400, 500), r.text
    assert "values must stay below 100" in r.json()["error"]

    r = infer(server, "index_error", good)
    assert r.status_code in (400, 500), r.text
    assert "index" in r.json()["error"].lower() or "out of" in r.json()["error"].lower()
    assert server.alive()


def test_faults_under_concurrency(start_server, fault_models):
    server = start_server(fault_models, "--exit-on-error=false", "--strict-readiness=false")
    cases = []
    for i in range(200):
        sign = -1.0 if i % 3 == 0 else 1.0
        cases.append([[sign * (i + 1), 1.0, 2.0, 3.0]])
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda rows: infer(server, "raises", rows), cases))
    for rows, r in zip(cases, results):
        if sum(rows[0]) < 0:
            assert r.status_code in (400, 500), r.text
            assert "input sum must be non-negative" in r.json()["error"]
        else:
            assert r.status_code == 200, r.text
            assert r.json()["outputs"][0]["data"] == [2 * v for v in rows[0]]
    assert server.alive()


@pytest.mark.parametrize("model,reason", [
    ("truncated", "model.pt"),
    ("not_a_model", "model.pt"),
])
def test_load_exception_makes_the_model_unavailable(start_server, fault_models, model, reason):
    server = start_server(fault_models, "--exit-on-error=false", "--strict-readiness=false")
    index = {e["name"]: e for e in requests.post(server.url + "/v2/repository/index",
                                                 timeout=TIMEOUT).json()}
    assert index[model]["state"] == "UNAVAILABLE", index[model]
    assert reason in index[model]["reason"]
    assert os.path.join(model, "1", "model.pt") in index[model]["reason"]
    r = infer(server, model, [[1.0, 2.0, 3.0, 4.0]])
    # Triton's answer for a model without a READY version (protocol-facts §1.2),
    # then the state.
    assert r.status_code == 404, r.text
    assert r.json()["error"].startswith(
        "Request for unknown model: '%s' has no available versions (version 1 is UNAVAILABLE: "
        % model), r.text
    assert requests.get(server.url + "/v2/models/%s/ready" % model,
                        timeout=TIMEOUT).status_code == 400
    # The other models serve.
    assert index["raises"]["state"] == "READY"
    assert infer(server, "raises", [[1.0, 1.0, 1.0, 1.0]]).status_code == 200


def test_failed_load_with_exit_on_error_exits_cleanly(ptserve_bin, fault_models):
    p = subprocess.run([ptserve_bin, "--model-repository", str(fault_models),
                        "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    out = p.stdout + p.stderr
    assert "failed to load all models" in out
    assert "Aborted" not in out and "terminate called" not in out
