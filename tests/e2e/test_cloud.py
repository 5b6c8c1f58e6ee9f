"""The cloud platforms' listeners (issue 48, part 2), with tritonserver's
routes, environment and refusals.

SageMaker: --allow-sagemaker opens a second listener (--sagemaker-port)
where GET /ping is health (200 or 400, no body) and POST /invocations an
inference on the model named by SAGEMAKER_TRITON_DEFAULT_MODEL_NAME, in
the KServe v2 body, or in Triton's generate form when
SAGEMAKER_TRITON_INFERENCE_TYPE says so.

Vertex AI: --allow-vertex-ai (or AIP_MODE=PREDICTION, which also turns
HTTP and gRPC off) serves $AIP_HEALTH_ROUTE and $AIP_PREDICT_ROUTE on
--vertex-ai-port ($AIP_HTTP_PORT), inference on --vertex-ai-default-model
or the repository's one model, or on the KServe endpoint that the
X-Vertex-Ai-Triton-Redirect header names; $AIP_STORAGE_URI is the
repository when none is given.

A binary body gives its JSON header's size in the Content-Type, and so does
a binary reply. Requests are made as the platforms make them (plain HTTP);
binary bodies are built and read by NVIDIA's tritonclient; answers are
checked against torch running the same model file."""
import json
import os
import socket
import subprocess
import time

import numpy as np
import pytest
import requests
import torch

from conftest import free_port, need_module

TIMEOUT = 30
MIME = "application/vnd.sagemaker-triton.binary+json;json-header-size="
VERTEX_MIME = "application/vnd.vertex-ai-triton.binary+json;json-header-size="
MODELS = ("add_sub_fp32", "text_gen")


@pytest.fixture(scope="module")
def repo(torch_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("sagemaker")
    for name in MODELS:
        os.symlink(os.path.join(torch_models, name), str(root / name))
    return root


def serve(start_server, repo, model, *args, **env):
    port = free_port()
    env.setdefault("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", model)
    s = start_server(repo, "--allow-sagemaker=true", "--sagemaker-port", port,
                     "--sagemaker-thread-count", 2, *args, env=env)
    s.sm_url = "http://127.0.0.1:%d" % port
    return s


def add_sub(repo, a, b):
    m = torch.jit.load(os.path.join(str(repo), "add_sub_fp32", "1", "model.pt"))
    s, d = m(torch.from_numpy(a), torch.from_numpy(b))
    return s.numpy(), d.numpy()


def rows():
    rs = np.random.RandomState(11)
    return rs.randn(2, 4).astype(np.float32), rs.randn(2, 4).astype(np.float32)


def test_ping_and_json_invocations(start_server, repo):
    s = serve(start_server, repo, "add_sub_fp32")
    r = requests.get(s.sm_url + "/ping", timeout=TIMEOUT)
    assert (r.status_code, r.content) == (200, b"")
    assert requests.post(s.sm_url + "/ping", timeout=TIMEOUT).status_code == 405
    a, b = rows()
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2, 4],
                        "data": a.flatten().tolist()},
                       {"name": "INPUT1", "datatype": "FP32", "shape": [2, 4],
                        "data": b.flatten().tolist()}]}
    r = requests.post(s.sm_url + "/invocations", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/json"
    got = {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"])
           for o in r.json()["outputs"]}
    want_sum, want_diff = add_sub(repo, a, b)
    np.testing.assert_array_equal(got["OUTPUT0"], want_sum)
    np.testing.assert_array_equal(got["OUTPUT1"], want_diff)
    assert r.json()["model_name"] == "add_sub_fp32"
    # Only SageMaker's paths: KServe's, and multi-model endpoints, are 400
    # with no body, as tritonserver answers them; the KServe listener is
    # unaffected.
    for path in ("/v2/health/ready", "/models", "/models/add_sub_fp32/invoke", "/"):
        r = requests.get(s.sm_url + path, timeout=TIMEOUT)
        assert (r.status_code, r.content) == (400, b""), path
    assert requests.get(s.url + "/v2/health/ready", timeout=TIMEOUT).status_code == 200


def test_binary_invocations(start_server, repo):
    """tritonclient builds the binary body; its JSON header's size goes in
    the Content-Type, and the reply says its own the same way."""
    httpclient = need_module("tritonclient.http")
    s = serve(start_server, repo, "add_sub_fp32")
    a, b = rows()
    inputs = [httpclient.InferInput("INPUT0", [2, 4], "FP32"),
              httpclient.InferInput("INPUT1", [2, 4], "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=True)
    inputs[1].set_data_from_numpy(b, binary_data=True)
    outputs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in ("OUTPUT0", "OUTPUT1")]
    body, json_size = httpclient.InferenceServerClient.generate_request_body(inputs, outputs)
    r = requests.post(s.sm_url + "/invocations", data=body,
                      headers={"Content-Type": MIME + str(json_size)}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    ctype = r.headers["Content-Type"]
    assert ctype.startswith(MIME), ctype
    assert "Inference-Header-Content-Length" not in r.headers
    result = httpclient.InferenceServerClient.parse_response_body(
        r.content, header_length=int(ctype[len(MIME):]))
    want_sum, want_diff = add_sub(repo, a, b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), want_sum)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), want_diff)
    # The type anywhere but first is refused, in Triton's words.
    r = requests.post(s.sm_url + "/invocations", data=body,
                      headers={"Content-Type": "text/plain; " + MIME + str(json_size)},
                      timeout=TIMEOUT)
    assert r.status_code == 400
    assert "expect MIME type for binary data starts with" in r.json()["error"], r.text


@pytest.mark.parametrize("kind", ["generate", "generate_stream"])
def test_generate_invocations(start_server, repo, kind):
    s = serve(start_server, repo, "text_gen", SAGEMAKER_TRITON_INFERENCE_TYPE=kind)
    r = requests.post(s.sm_url + "/invocations", timeout=TIMEOUT,
                      json={"text_input": "sagemaker sends text", "max_tokens": 2})
    assert r.status_code == 200, r.text
    m = torch.jit.load(os.path.join(str(repo), "text_gen", "1", "model.pt"))
    text, count = m(["sagemaker sends text"], torch.tensor([2], dtype=torch.int32))
    want = {"model_name": "text_gen", "model_version": "1", "text_output": text[0],
            "token_count": int(count[0])}
    if kind == "generate":
        assert r.json() == want
    else:
        assert r.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        assert r.text.startswith("data: ") and r.text.endswith("\n\n"), r.text
        assert json.loads(r.text[len("data: "):]) == want


def test_unset_model_and_ping_modes(start_server, repo, tmp_path):
    """Without SAGEMAKER_TRITON_DEFAULT_MODEL_NAME, /invocations names
    Triton's placeholder as the unknown model. With a model that failed to
    load and strict readiness, /ping says not ready; in live mode, live."""
    broken = tmp_path / "repo"
    broken.mkdir()
    os.symlink(os.path.join(str(repo), "add_sub_fp32"), str(broken / "add_sub_fp32"))
    (broken / "broken" / "1").mkdir(parents=True)
    (broken / "broken" / "config.pbtxt").write_text('name: "broken"\nbackend: "pytorch"\n')
    (broken / "broken" / "1" / "model.pt").write_bytes(b"not a TorchScript archive")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGEMAKER_")}
    s = start_server(broken, "--allow-sagemaker=true", "--sagemaker-port", port,
                     "--exit-on-error=false", "--strict-readiness=true", env=env,
                     expect_ready=False)
    url = "http://127.0.0.1:%d" % port
    assert requests.get(url + "/ping", timeout=TIMEOUT).status_code == 400
    r = requests.post(url + "/invocations", json={"inputs": []}, timeout=TIMEOUT)
    assert 400 <= r.status_code < 500
    assert "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" in r.json()["error"], r.text
    s.stop()
    port = free_port()
    env["SAGEMAKER_TRITON_PING_MODE"] = "live"
    start_server(broken, "--allow-sagemaker=true", "--sagemaker-port", port,
                 "--exit-on-error=false", "--strict-readiness=true", env=env, expect_ready=False)
    r = requests.get("http://127.0.0.1:%d/ping" % port, timeout=TIMEOUT)
    assert (r.status_code, r.content) == (200, b"")


@pytest.mark.parametrize("args, env, words", [
    (["--sagemaker-safe-port-range", "9000-9100"], {},
     "The server cannot listen to HTTP requests at port 8000, allowed port range is "
     "[9000, 9100]"),
    (["--sagemaker-port", "8001"], {},
     "The server cannot listen to GRPC requests and SageMaker requests at the same address "
     "and port 0.0.0.0:8001"),
    (["--sagemaker-safe-port-range", "9100-9000"], {}, "the range is empty"),
    (["--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"],
     {"SAGEMAKER_TRITON_INFERENCE_TYPE": "predict"},
     "Server has invalid inference type 'predict'. Must be one of: infer, generate, "
     "generate_stream."),
])
def test_refused_at_start(ptserve_bin, repo, args, env, words):
    """tritonserver's port checks (default addresses) and its inference
    type check stop the server before it serves, naming the problem."""
    run = subprocess.run([ptserve_bin, "--model-repository", str(repo), "--allow-sagemaker=true",
                          "--sagemaker-port", str(free_port())] + args,
                         env=dict(os.environ, **env), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode != 0
    assert words in run.stderr, run.stderr


# ------------------------------------------------------------- Vertex AI

VERTEX_ENV = {"AIP_PREDICT_ROUTE": "/v1/endpoints/e1/deployedModels/m1:predict",
              "AIP_HEALTH_ROUTE": "/v1/endpoints/e1/deployedModels/m1"}


def vertex(start_server, repo, *args, **env):
    port = free_port()
    full = {k: v for k, v in os.environ.items() if not k.startswith("AIP_")}
    full.update(VERTEX_ENV)
    full.update(env)
    s = start_server(repo, "--allow-vertex-ai=true", "--vertex-ai-port", port, *args, env=full)
    s.vx_url = "http://127.0.0.1:%d" % port
    return s


def add_sub_body(a, b):
    return {"inputs": [{"name": n, "datatype": "FP32", "shape": list(x.shape),
                        "data": x.flatten().tolist()} for n, x in (("INPUT0", a), ("INPUT1", b))]}


def test_vertex_health_predict_and_redirect(start_server, repo):
    httpclient = need_module("tritonclient.http")
    s = vertex(start_server, repo, "--vertex-ai-default-model", "add_sub_fp32")
    health, predict = (s.vx_url + VERTEX_ENV[k] for k in ("AIP_HEALTH_ROUTE", "AIP_PREDICT_ROUTE"))
    r = requests.get(health, timeout=TIMEOUT)
    assert (r.status_code, r.content) == (200, b"")
    a, b = rows()
    want_sum, want_diff = add_sub(repo, a, b)
    r = requests.post(predict, json=add_sub_body(a, b), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    got = {o["name"]: o["data"] for o in r.json()["outputs"]}
    assert got["OUTPUT0"] == want_sum.flatten().tolist()
    assert got["OUTPUT1"] == want_diff.flatten().tolist()
    # Binary, its header size in Vertex AI's own type.
    inputs = [httpclient.InferInput("INPUT0", [2, 4], "FP32"),
              httpclient.InferInput("INPUT1", [2, 4], "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=True)
    inputs[1].set_data_from_numpy(b, binary_data=True)
    body, json_size = httpclient.InferenceServerClient.generate_request_body(
        inputs, [httpclient.InferRequestedOutput("OUTPUT1", binary_data=True)])
    r = requests.post(predict, data=body, headers={"Content-Type": VERTEX_MIME + str(json_size)},
                      timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    ctype = r.headers["Content-Type"]
    assert ctype.startswith(VERTEX_MIME), ctype
    result = httpclient.InferenceServerClient.parse_response_body(
        r.content, header_length=int(ctype[len(VERTEX_MIME):]))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), want_diff)
    # The redirect header reaches any KServe endpoint: another model's
    # generate, the repository index.
    r = requests.post(predict, json={"text_input": "redirected to generate", "max_tokens": 1},
                      headers={"X-Vertex-Ai-Triton-Redirect": "v2/models/text_gen/generate"},
                      timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["text_output"] == "REDIRECTED", r.text
    r = requests.post(predict, headers={"X-Vertex-Ai-Triton-Redirect": "v2/repository/index"},
                      timeout=TIMEOUT)
    assert r.status_code == 200 and {m["name"] for m in r.json()} == set(MODELS), r.text
    for path in ("/v2/health/ready", "/ping", "/"):
        r = requests.get(s.vx_url + path, timeout=TIMEOUT)
        assert (r.status_code, r.content) == (400, b""), path


def test_vertex_prediction_mode_from_the_environment(ptserve_bin, repo, tmp_path):
    """AIP_MODE=PREDICTION with no flags: Vertex AI's listener on
    $AIP_HTTP_PORT alone (HTTP and gRPC off), the repository from
    $AIP_STORAGE_URI, the default model its one model."""
    one = tmp_path / "one"
    one.mkdir()
    os.symlink(os.path.join(str(repo), "add_sub_fp32"), str(one / "add_sub_fp32"))
    port, grpc_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIP_")}
    env.update(VERTEX_ENV, AIP_MODE="PREDICTION", AIP_HTTP_PORT=str(port),
               AIP_STORAGE_URI=str(one))
    log = open(str(tmp_path / "server.log"), "w")
    p = subprocess.Popen([ptserve_bin, "--grpc-port", str(grpc_port), "--metrics-port", "0"],
                         env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = "http://127.0.0.1:%d" % port
        for _ in range(600):
            try:
                if requests.get(url + VERTEX_ENV["AIP_HEALTH_ROUTE"], timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert p.poll() is None, open(str(tmp_path / "server.log")).read()
            time.sleep(0.1)
        a, b = rows()
        r = requests.post(url + VERTEX_ENV["AIP_PREDICT_ROUTE"], json=add_sub_body(a, b),
                          timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["data"] == add_sub(repo, a, b)[0].flatten().tolist()
        with socket.socket() as sock:  # gRPC is off
            assert sock.connect_ex(("127.0.0.1", grpc_port)) != 0
    finally:
        p.terminate()
        assert p.wait(timeout=60) == 0
        log.close()
    text = open(str(tmp_path / "server.log")).read()
    assert "Started Vertex AI HTTPService at 0.0.0.0:%d" % port in text, text
    assert "Started HTTPService" not in text and "Started GRPCInferenceService" not in text, text


@pytest.mark.parametrize("args, env, words", [
    ([], {}, "Expect the model repository contains only a single model if default model is not "
             "specified"),
    (["--vertex-ai-default-model", "nope"], {}, "Expect the default model 'nope' is loaded"),
    (["--vertex-ai-default-model", "text_gen"], {"AIP_PREDICT_ROUTE": ""},
     "API_PREDICT_ROUTE is not defined for Vertex AI endpoint"),
    (["--vertex-ai-default-model", "text_gen"], {"AIP_HEALTH_ROUTE": ""},
     "AIP_HEALTH_ROUTE is not defined for Vertex AI endpoint"),
    (["--vertex-ai-port", "8000"], {},
     "The server cannot listen to HTTP requests and Vertex AI requests at the same address and "
     "port 0.0.0.0:8000"),
])
def test_vertex_refused_at_start(ptserve_bin, repo, args, env, words):
    full = {k: v for k, v in os.environ.items() if not k.startswith("AIP_")}
    full.update(VERTEX_ENV)
    full.update(env)
    run = subprocess.run([ptserve_bin, "--model-repository", str(repo), "--allow-vertex-ai=true",
                          "--vertex-ai-port", str(free_port()), "--grpc-port", str(free_port()),
                          "--metrics-port", "0", "--http-port", "0"] + args
                         if "--vertex-ai-port" not in args else
                         [ptserve_bin, "--model-repository", str(repo), "--allow-vertex-ai=true",
                          "--http-port", "8000"] + args,
                         env=full, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert words in run.stderr, run.stderr
