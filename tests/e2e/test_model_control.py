"""Model management end to end: --model-control-mode none|poll|explicit,
--load-model, --repository-poll-secs, --model-load-thread-count, and the
model repository extension over HTTP and gRPC (index, load with config and
file overrides, unload), with Triton's semantics (protocol-facts §1.12,
triton-anchor §2.5): a reload swaps in the new versions before the old ones
go, a failed load leaves what serves in place and says why, the version
policy applies on every load, and requests to a model that does not serve
get a 4xx that names the model and its state.

Every test builds its own repository of identity models (output i echoes
input i, so the expected answer is what the test sent) in a temporary
directory (one failed-load test names a missing TorchScript file).
Nothing waits on a clock: a test that needs a load in progress holds it
with the identity backend's load gate file; one that needs a request in
flight during an unload queues it behind PTSERVE_DELAY_SCHEDULER, so it is
known to be accepted, and the unload lets it run for the identity
backend's execute_delay_ms; waits are for a condition (bounded by a
generous deadline).
"""
import base64
import json
import os
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest
import requests

from conftest import (Server, assert_clean_exit, logged_http_port, need_module, wait_for,
                      wait_until_answering)
from sched_util import DELAY_ENV, wait_pending

grpc = need_module("grpc")
# tritonclient's generated gRPC messages (requirements.txt)
service_pb2 = need_module("tritonclient.grpc.service_pb2")
service_pb2_grpc = need_module("tritonclient.grpc.service_pb2_grpc")

TIMEOUT = 30

CONFIG = """name: "{name}"
backend: "identity"
max_batch_size: {max_batch}
input [ {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
{extra}
"""


WAIT_S = 60  # how long a state change may take here


def write_model(repo, name, versions=(1,), max_batch=8, extra=""):
    d = os.path.join(str(repo), name)
    os.makedirs(d, exist_ok=True)
    for v in versions:
        os.makedirs(os.path.join(d, str(v)), exist_ok=True)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(name=name, max_batch=max_batch, extra=extra))


def gate_extra(path):
    return 'parameters {{ key: "load_gate_file" value {{ string_value: "{}" }} }}'.format(path)


def infer(server, model, values=(3, 4), version=None):
    url = server.url + "/v2/models/%s%s/infer" % (model, "/versions/%d" % version if version else "")
    body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 2],
                        "data": list(values)}]}
    return requests.post(url, data=json.dumps(body), timeout=TIMEOUT)


def infer_ok(server, model, values=(3, 4), version=None):
    r = infer(server, model, values, version)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["model_name"] == model
    assert out["outputs"][0]["data"] == list(values)
    return out


def post(server, path, body=None):
    data = json.dumps(body) if body is not None else None
    return requests.post(server.url + path, data=data, timeout=TIMEOUT)


def index(server, ready=False):
    """name -> list of entries, from POST /v2/repository/index."""
    r = post(server, "/v2/repository/index", {"ready": True} if ready else None)
    assert r.status_code == 200, r.text
    out = {}
    for e in r.json():
        assert set(e) <= {"name", "version", "state", "reason"}, e
        out.setdefault(e["name"], []).append(e)
    return out


def load(server, model, parameters=None):
    return post(server, "/v2/repository/models/%s/load" % model,
                {"parameters": parameters} if parameters is not None else None)


def unload(server, model, dependents=None):
    body = None if dependents is None else {"parameters": {"unload_dependents": dependents}}
    return post(server, "/v2/repository/models/%s/unload" % model, body)


def grpc_stub(server):
    channel = grpc.insecure_channel(server.grpc_target)
    return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)


def run_cli(ptserve_bin, *args):
    p = subprocess.run([ptserve_bin] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=TIMEOUT)
    return p.returncode, p.stdout + p.stderr


# ---------------------------------------------------------------- flags


@pytest.mark.parametrize("args,words", [
    (["--load-model", "a"],
     "Use of '--load-model' requires setting '--model-control-mode=explicit' as well."),
    (["--model-control-mode=poll", "--load-model", "a"], "requires setting"),
    (["--model-control-mode=explicit", "--load-model=*", "--load-model", "a"],
     "Wildcard model name '*' must be the ONLY --load-model argument."),
    (["--model-control-mode=sometimes"], "invalid value 'sometimes' for --model-control-mode"),
    (["--model-load-thread-count=0"], "model-load-thread-count"),
    (["--repository-poll-secs=-1"], "repository-poll-secs"),
    (["--model-control-mode=explicit", "--load-model="], "--load-model needs a model name"),
])
def test_bad_model_control_flags_are_refused(ptserve_bin, tmp_path, args, words):
    rc, out = run_cli(ptserve_bin, "--model-repository", tmp_path, "--http-port", "0", *args)
    assert rc == 1, out
    assert words in out, out


def test_help_lists_model_control_flags(ptserve_bin):
    rc, out = run_cli(ptserve_bin, "--help")
    assert rc == 0
    for flag in ("--model-control-mode", "--load-model", "--repository-poll-secs",
                 "--model-load-thread-count"):
        assert flag in out


# ---------------------------------------------------------------- explicit mode


def test_explicit_mode_loads_only_the_named_models(start_server, tmp_path):
    for m in ("a", "b", "c"):
        write_model(tmp_path, m)
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model", "a",
                     "--load-model", "b")
    idx = index(s)
    assert idx["a"] == [{"name": "a", "version": "1", "state": "READY"}]
    assert idx["b"] == [{"name": "b", "version": "1", "state": "READY"}]
    # In the repository, never loaded: the name alone (protocol-facts §1.12).
    assert idx["c"] == [{"name": "c"}]
    assert "c" not in index(s, ready=True)
    infer_ok(s, "a")
    r = infer(s, "c")
    assert r.status_code == 404, r.text
    assert r.json()["error"] == ("Request for unknown model: 'c' is not found (it is in the "
                                 "model repository but not loaded)")
    # Models never loaded do not hold readiness back.
    assert requests.get(s.url + "/v2/health/ready", timeout=TIMEOUT).status_code == 200
    assert_clean_exit(s)


def test_explicit_mode_load_model_star_loads_everything(start_server, tmp_path):
    for m in ("a", "b"):
        write_model(tmp_path, m)
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=*")
    assert {n: [e["state"] for e in es] for n, es in index(s).items()} == {
        "a": ["READY"], "b": ["READY"]}
    assert_clean_exit(s)


def test_explicit_mode_without_load_model_loads_nothing(start_server, tmp_path):
    write_model(tmp_path, "a")
    s = start_server(tmp_path, "--model-control-mode=EXPLICIT")  # case does not matter
    assert index(s) == {"a": [{"name": "a"}]}
    assert "| a " not in s.log()  # no row in the start-up table
    assert_clean_exit(s)


def test_unknown_startup_model_fails_startup(ptserve_bin, tmp_path):
    write_model(tmp_path, "a")
    rc, out = run_cli(ptserve_bin, "--model-repository", tmp_path, "--http-port", "0",
                      "--grpc-port", "0", "--metrics-port", "0", "--model-control-mode=explicit",
                      "--load-model", "ghost")
    assert rc == 1, out
    assert "failed to load 'ghost', failed to poll from model repository: no model repository holds a model named 'ghost'" in out
    assert "failed to load all models" in out


def launch_unready(ptserve_bin, repo, log_path, *args):
    """Starts ptserve without waiting: start-up loads block the frontends,
    which bind their ports only after them. So every port is 0 (the server
    picks a free one when it binds): a port chosen here could be taken by
    another process before then, and no retry could start the loads again.
    `answering` gives the Server once HTTP has started."""
    cmd = [ptserve_bin, "--model-repository", str(repo), "--http-port", "0",
           "--http-address", "127.0.0.1", "--grpc-port", "0", "--metrics-port", "0"]
    with open(log_path, "w") as logf:
        proc = subprocess.Popen(cmd + [str(a) for a in args], stdout=logf,
                                stderr=subprocess.STDOUT)
    return proc


def answering(proc, log_path):
    """The Server of a launch_unready process once it answers ready."""
    s = Server(proc, logged_http_port(proc, log_path, TIMEOUT), str(log_path))
    wait_until_answering(s, True, TIMEOUT)
    return s


def test_model_load_thread_count_loads_models_in_parallel(ptserve_bin, tmp_path):
    # Both loads wait for one gate file: both can have begun before it
    # exists only if two load threads run them at once.
    repo = tmp_path / "repo"
    gate = tmp_path / "gate"
    for m in ("g1", "g2"):
        write_model(repo, m, extra=gate_extra(gate))
    log = tmp_path / "log"
    proc = launch_unready(ptserve_bin, repo, log, "--model-load-thread-count", "2")
    try:
        wait_for("both models loading at once",
                 lambda: "loading: g1:1" in log.read_text() and "loading: g2:1" in log.read_text(),
                 timeout=WAIT_S)
        assert "successfully loaded" not in log.read_text()
        gate.write_text("")
        s = answering(proc, log)
        assert [e["state"] for es in index(s).values() for e in es] == ["READY", "READY"]
        assert_clean_exit(s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_load_unload_over_http(start_server, tmp_path):
    write_model(tmp_path, "m", versions=(1, 2))
    s = start_server(tmp_path, "--model-control-mode=explicit")
    r = load(s, "m")
    assert r.status_code == 200, r.text
    assert r.content == b""
    assert index(s)["m"] == [{"name": "m", "version": "2", "state": "READY"}]
    assert infer_ok(s, "m")["model_version"] == "2"

    r = unload(s, "m", dependents=False)
    assert r.status_code == 200, r.text
    assert r.content == b""
    assert index(s)["m"] == [{"name": "m", "version": "2", "state": "UNAVAILABLE",
                              "reason": "unloaded"}]
    # After the unload: a 4xx that names the model and its state.
    r = infer(s, "m")
    assert r.status_code == 404, r.text
    assert r.json()["error"] == ("Request for unknown model: 'm' has no available versions "
                                 "(version 2 is UNAVAILABLE: unloaded)")
    r = infer(s, "m", version=2)
    assert r.status_code == 404, r.text
    assert "'m' version 2 is not at ready state (version 2 is UNAVAILABLE: unloaded)" in \
        r.json()["error"]
    assert requests.get(s.url + "/v2/models/m/ready", timeout=TIMEOUT).status_code == 400
    assert requests.get(s.url + "/v2/health/ready", timeout=TIMEOUT).status_code == 200
    # Loading again brings it back; unloading twice is fine.
    assert unload(s, "m").status_code == 200
    assert load(s, "m").status_code == 200
    infer_ok(s, "m")
    assert requests.get(s.url + "/v2/models/m/ready", timeout=TIMEOUT).status_code == 200
    assert_clean_exit(s)


@pytest.mark.parametrize("path,body,code,words", [
    ("/v2/repository/models/ghost/load", None, 404,
     "failed to load 'ghost', failed to poll from model repository: no model repository holds a model named 'ghost'"),
    ("/v2/repository/models/ghost/unload", None, 404, "failed to unload 'ghost'"),
    ("/v2/repository/models/m/load", "{", 400, "failed to parse the load request of model 'm'"),
    ("/v2/repository/models/m/load", {"parameters": {"bogus": "x"}}, 400,
     "unknown parameter 'bogus' in the load request of model 'm'"),
    ("/v2/repository/models/m/load", {"parameters": {"config": {"max_batch_size": 1}}}, 400,
     "parameter 'config' of the load request of model 'm' must be a string"),
    ("/v2/repository/models/m/load", {"parameters": {"file:1/model.pt": "AAAA"}}, 400,
     "file overrides ('file:' parameters) need the 'config' parameter too"),
    ("/v2/repository/models/m/load", {"parameters": {"config": "{}", "file:1/x": "not base64!"}},
     400, "parameter 'file:1/x' is not valid base64"),
    ("/v2/repository/models/m/load", {"parameters": {"config": "{\"inputs\": []}"}}, 400,
     "load failed for model 'm': load config of model 'm': inference.ModelConfig has no field "
     "named 'inputs'"),
    ("/v2/repository/models/m/load", {"extra": 1}, 400, "unexpected key 'extra'"),
    ("/v2/repository/models/m/unload", {"parameters": {"unload_dependents": "yes"}}, 400,
     "parameter 'unload_dependents' of the unload request of model 'm' must be a boolean"),
    ("/v2/repository/other/models/m/load", None, 501,
     "repository name 'other' is not supported"),
    ("/v2/repository/index", {"ready": "yes"}, 400, "Invalid value for 'ready'"),
])
def test_bad_repository_requests(start_server, tmp_path, path, body, code, words):
    write_model(tmp_path, "m")
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model", "m")
    data = body if isinstance(body, str) else (json.dumps(body) if body is not None else None)
    r = requests.post(s.url + path, data=data, timeout=TIMEOUT)
    assert r.status_code == code, r.text
    assert words in r.json()["error"], r.text
    infer_ok(s, "m")  # still serving
    assert requests.get(s.url + "/v2/repository/models/m/load",
                        timeout=TIMEOUT).status_code == 405
    assert_clean_exit(s)


def test_load_with_config_override(start_server, tmp_path):
    write_model(tmp_path, "m", max_batch=8)
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=m")
    cfg = {"backend": "identity", "maxBatchSize": 2,  # lowerCamelCase is protobuf JSON too
           "input": [{"name": "INPUT0", "data_type": "type_int32", "dims": [2]}],
           "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [2]}]}
    r = load(s, "m", {"config": json.dumps(cfg)})
    assert r.status_code == 200, r.text
    got = requests.get(s.url + "/v2/models/m/config", timeout=TIMEOUT).json()
    assert got["max_batch_size"] == 2
    infer_ok(s, "m")
    # A plain load goes back to config.pbtxt.
    assert load(s, "m").status_code == 200
    assert requests.get(s.url + "/v2/models/m/config", timeout=TIMEOUT).json()[
        "max_batch_size"] == 8
    assert_clean_exit(s)


def test_load_refuses_dims_over_the_rank_limit(start_server, tmp_path):
    # 16 dims fit a tensor; with the batch dimension in front they are 17,
    # one more than ptserve's shapes hold. The load names the input and the
    # count, and the model already loaded keeps serving.
    write_model(tmp_path, "m", max_batch=8)
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=m")
    cfg = {"backend": "identity", "max_batch_size": 4,
           "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [1] * 16}],
           "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [1] * 16}]}
    r = load(s, "m", {"config": json.dumps(cfg)})
    assert r.status_code == 400, r.text
    assert ("model input 'INPUT0' has 17 dimensions with the batch dimension, more than the 16 "
            "ptserve supports") in r.json()["error"], r.text
    infer_ok(s, "m")
    # Without a batch dimension the same 16 dims load and serve.
    cfg["max_batch_size"] = 0
    assert load(s, "m", {"config": json.dumps(cfg)}).status_code == 200
    body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1] * 16, "data": [7]}]}
    r = requests.post(s.url + "/v2/models/m/infer", data=json.dumps(body), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["shape"] == [1] * 16
    assert r.json()["outputs"][0]["data"] == [7]
    assert_clean_exit(s)


def test_load_with_file_override(start_server, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    s = start_server(repo, "--model-control-mode=explicit", env={"TMPDIR": str(tmp)})
    cfg = {"backend": "identity", "max_batch_size": 4,
           "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
           "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [2]}]}
    blob = bytes(range(256)) * 3
    r = load(s, "fresh", {"config": json.dumps(cfg),
                          "file:5/model.pt": base64.b64encode(blob).decode()})
    assert r.status_code == 200, r.text
    assert index(s)["fresh"] == [{"name": "fresh", "version": "5", "state": "READY"}]
    assert infer_ok(s, "fresh")["model_version"] == "5"
    # The files were written, privately, where the model loaded from.
    (private,) = list(tmp.iterdir())
    assert oct(private.stat().st_mode & 0o777) == "0o700"
    assert (private / "5" / "model.pt").read_bytes() == blob
    # Base64 with line breaks, as NVIDIA's C++ clients send it (libb64
    # breaks its lines; here Python's MIME encoder, lines of 76 and one at
    # the end): the same bytes.
    blob = bytes(range(255, -1, -1)) * 2
    text = base64.encodebytes(blob).decode()
    assert text.count("\n") == 9
    r = load(s, "fresh", {"config": json.dumps(cfg), "file:5/model.pt": text})
    assert r.status_code == 200, r.text
    (private,) = list(tmp.iterdir())
    assert (private / "5" / "model.pt").read_bytes() == blob
    # A path that would leave the directory is refused.
    r = load(s, "other", {"config": json.dumps(cfg),
                          "file:../x": base64.b64encode(b"x").decode()})
    assert r.status_code == 400, r.text
    assert "may not contain '..'" in r.json()["error"]
    assert unload(s, "fresh").status_code == 200
    assert list(tmp.iterdir()) == []  # the private directory went with the model
    assert "fresh" not in index(s)  # no repository holds it
    assert_clean_exit(s)


def test_version_policy_applies_on_every_load(start_server, tmp_path):
    write_model(tmp_path, "m", versions=(1,))
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=m")
    assert infer_ok(s, "m")["model_version"] == "1"
    os.makedirs(tmp_path / "m" / "2")
    assert load(s, "m").status_code == 200
    assert infer_ok(s, "m")["model_version"] == "2"
    assert [(e["version"], e["state"], e.get("reason", "")) for e in index(s)["m"]] == [
        ("1", "UNAVAILABLE", "unloaded"), ("2", "READY", "")]
    write_model(tmp_path, "m", versions=(1, 2), extra="version_policy { all { } }")
    assert load(s, "m").status_code == 200
    assert [e["state"] for e in index(s)["m"]] == ["READY", "READY"]
    infer_ok(s, "m", version=1)
    write_model(tmp_path, "m", versions=(1, 2),
                extra="version_policy { specific { versions: [ 1 ] } }")
    assert load(s, "m").status_code == 200
    assert [e["state"] for e in index(s)["m"]] == ["READY", "UNAVAILABLE"]
    assert infer_ok(s, "m")["model_version"] == "1"
    assert_clean_exit(s)


def test_failed_load_keeps_the_loaded_model(start_server, tmp_path):
    write_model(tmp_path, "m")
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=m")
    with open(tmp_path / "m" / "config.pbtxt", "w") as f:
        f.write('name: "m"\nbackend: "identity"\nmax_batch_size: [\n')  # half written
    r = load(s, "m")
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith("load failed for model 'm': ")
    infer_ok(s, "m")  # the old version serves on
    (e,) = index(s)["m"]
    assert e["state"] == "READY"
    assert e["reason"].startswith("the last load failed, the previously loaded versions still "
                                  "serve: ")
    # A version that fails: Triton's words, and still the old one serves.
    write_model(tmp_path, "m", versions=(1, 2), extra='version_policy { all { } }\nparameters '
                '{ key: "fail_load_versions" value { string_value: "2" } }')
    r = load(s, "m")
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith("load failed for model 'm': version 2 is at UNAVAILABLE "
                                        "state: Invalid argument: identity backend: model 'm' "
                                        "version 2 fails to load")
    infer_ok(s, "m", version=1)
    states = {e["version"]: e for e in index(s)["m"]}
    assert states["1"]["state"] == "READY"
    assert states["2"]["state"] == "UNAVAILABLE"
    assert "fails to load" in states["2"]["reason"]
    # Fixed: the load goes through and the note goes away.
    write_model(tmp_path, "m", versions=(1, 2), extra="version_policy { all { } }")
    assert load(s, "m").status_code == 200
    assert [e.get("reason", "") for e in index(s)["m"]] == ["", ""]
    assert_clean_exit(s)


def test_first_load_is_loading_until_ready(start_server, tmp_path):
    gate = tmp_path / "gate"
    repo = tmp_path / "repo"
    write_model(repo, "g", extra=gate_extra(gate))
    s = start_server(repo, "--model-control-mode=explicit")
    result = {}
    t = threading.Thread(target=lambda: result.update(r=load(s, "g")))
    t.start()
    try:
        wait_for("g LOADING", lambda: index(s).get("g") == [{"name": "g", "version": "1",
                                                             "state": "LOADING"}],
                 timeout=WAIT_S)
        r = infer(s, "g", version=1)
        assert r.status_code == 404, r.text
        assert "(version 1 is LOADING)" in r.json()["error"]
        # Readiness follows: a first load in progress holds it back.
        assert requests.get(s.url + "/v2/health/ready", timeout=TIMEOUT).status_code == 400
    finally:
        gate.write_text("")
        t.join(TIMEOUT)
    assert result["r"].status_code == 200, result["r"].text
    infer_ok(s, "g")
    assert requests.get(s.url + "/v2/health/ready", timeout=TIMEOUT).status_code == 200
    assert_clean_exit(s)


def test_metrics_and_statistics_follow_loads(start_server, tmp_path):
    write_model(tmp_path, "m")
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=m")
    infer_ok(s, "m")
    text = requests.get(s.metrics_url, timeout=TIMEOUT).text
    assert 'nv_inference_request_success{model="m",version="1"} 1' in text
    assert requests.get(s.url + "/v2/models/m/stats", timeout=TIMEOUT).status_code == 200
    assert unload(s, "m").status_code == 200
    assert 'model="m"' not in requests.get(s.metrics_url, timeout=TIMEOUT).text
    r = requests.get(s.url + "/v2/models/m/stats", timeout=TIMEOUT)
    assert r.status_code == 400
    assert r.json()["error"] == "requested model 'm' is not available"
    assert_clean_exit(s)


def test_index_sees_models_added_after_startup(start_server, tmp_path):
    write_model(tmp_path, "a")
    s = start_server(tmp_path, "--model-control-mode=explicit")
    write_model(tmp_path, "late", versions=(3,))
    assert index(s)["late"] == [{"name": "late"}]
    assert load(s, "late").status_code == 200
    assert infer_ok(s, "late")["model_version"] == "3"
    assert_clean_exit(s)


# ---------------------------------------------------------------- none and poll


@pytest.mark.parametrize("mode", ["none", "poll"])
def test_load_and_unload_refused_unless_explicit(start_server, tmp_path, mode):
    write_model(tmp_path, "m")
    s = start_server(tmp_path, "--model-control-mode=" + mode)
    words = "explicit model load / unload is not allowed if polling is enabled"
    for r in (load(s, "m"), unload(s, "m")):
        assert r.status_code == 503, r.text  # tritonserver's UNAVAILABLE
        assert r.json()["error"].startswith(words)
        assert "mode is " + mode.upper() in r.json()["error"]
    channel, stub = grpc_stub(s)
    with channel:
        for call in (lambda: stub.RepositoryModelLoad(
                service_pb2.RepositoryModelLoadRequest(model_name="m"), timeout=TIMEOUT),
                lambda: stub.RepositoryModelUnload(
                    service_pb2.RepositoryModelUnloadRequest(model_name="m"), timeout=TIMEOUT)):
            with pytest.raises(grpc.RpcError) as info:
                call()
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            assert info.value.details().startswith(words)
    infer_ok(s, "m")  # every model loaded at start-up, and still serving
    assert_clean_exit(s)


def test_poll_mode_picks_up_changes(start_server, tmp_path):
    write_model(tmp_path, "a")
    s = start_server(tmp_path, "--model-control-mode=poll", "--repository-poll-secs=1")
    infer_ok(s, "a")

    # A model added.
    write_model(tmp_path, "b")
    wait_for("b loaded", lambda: index(s).get("b", [{}])[0].get("state") == "READY",
             timeout=WAIT_S)
    infer_ok(s, "b")

    # A changed config.
    write_model(tmp_path, "a", max_batch=4)
    wait_for("a reloaded", lambda: requests.get(s.url + "/v2/models/a/config",
                                                timeout=TIMEOUT).json()["max_batch_size"] == 4,
             timeout=WAIT_S)

    # An added version (the default policy serves the highest).
    os.makedirs(tmp_path / "a" / "2")
    wait_for("a version 2", lambda: infer(s, "a").json().get("model_version") == "2",
             timeout=WAIT_S)

    # A half-written config: the reload fails, version 2 serves on.
    with open(tmp_path / "b" / "config.pbtxt", "w") as f:
        f.write('name: "b"\nbackend: "identi')
    wait_for("b's failed reload in the index",
             lambda: index(s)["b"][0].get("reason", "").startswith("the last load failed"),
             timeout=WAIT_S)
    infer_ok(s, "b")
    # Completed: picked up.
    write_model(tmp_path, "b", max_batch=2)
    wait_for("b reloaded", lambda: index(s)["b"][0].get("reason", "") == "", timeout=WAIT_S)
    assert requests.get(s.url + "/v2/models/b/config", timeout=TIMEOUT).json()[
        "max_batch_size"] == 2

    # A removed model.
    shutil.rmtree(tmp_path / "a")
    wait_for("a gone", lambda: "a" not in index(s), timeout=WAIT_S)
    r = infer(s, "a")
    assert r.status_code == 404, r.text
    assert "'a'" in r.json()["error"]
    infer_ok(s, "b")
    assert_clean_exit(s)


def test_poll_secs_zero_never_polls(start_server, tmp_path):
    write_model(tmp_path, "a")
    s = start_server(tmp_path, "--model-control-mode=poll", "--repository-poll-secs=0")
    assert "--repository-poll-secs=0: the repositories are not polled" in s.log()
    infer_ok(s, "a")
    assert_clean_exit(s)


# ---------------------------------------------------------------- gRPC


def test_grpc_repository_rpcs(start_server, tmp_path):
    write_model(tmp_path, "m", versions=(1, 2), extra="version_policy { all { } }")
    write_model(tmp_path, "n")
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=n")
    channel, stub = grpc_stub(s)
    with channel:
        idx = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(), timeout=TIMEOUT)
        got = sorted((e.name, e.version, e.state, e.reason) for e in idx.models)
        assert got == [("m", "", "", ""), ("n", "1", "READY", "")]

        cfg = json.dumps({"backend": "identity", "max_batch_size": 8,
                          "version_policy": {"specific": {"versions": [2]}},
                          "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
                          "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32",
                                      "dims": [2]}]})
        req = service_pb2.RepositoryModelLoadRequest(model_name="m")
        req.parameters["config"].string_param = cfg
        stub.RepositoryModelLoad(req, timeout=TIMEOUT)
        idx = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True), timeout=TIMEOUT)
        assert sorted((e.name, e.version) for e in idx.models) == [("m", "2"), ("n", "1")]

        # Files as raw bytes (bytes_param) for a model no repository holds.
        req = service_pb2.RepositoryModelLoadRequest(model_name="fresh")
        req.parameters["config"].string_param = cfg.replace('"versions": [2]', '"versions": [4]')
        req.parameters["file:4/model.pt"].bytes_param = b"\x00\x01weights"
        stub.RepositoryModelLoad(req, timeout=TIMEOUT)
        infer_ok(s, "fresh")

        unload = service_pb2.RepositoryModelUnloadRequest(model_name="m")
        unload.parameters["unload_dependents"].bool_param = True
        stub.RepositoryModelUnload(unload, timeout=TIMEOUT)
        r = infer(s, "m")
        assert r.status_code == 404 and "UNAVAILABLE: unloaded" in r.json()["error"], r.text

        def expect(call, code, words):
            with pytest.raises(grpc.RpcError) as info:
                call()
            assert info.value.code() == code, info.value
            assert words in info.value.details(), info.value.details()

        bad = service_pb2.RepositoryModelLoadRequest(model_name="m")
        bad.parameters["config"].bytes_param = b"{}"
        expect(lambda: stub.RepositoryModelLoad(bad, timeout=TIMEOUT),
               grpc.StatusCode.INVALID_ARGUMENT, "must be a string_param, got bytes_param")
        bad = service_pb2.RepositoryModelLoadRequest(model_name="m")
        bad.parameters["file:1/x"].string_param = "x"
        bad.parameters["config"].string_param = cfg
        expect(lambda: stub.RepositoryModelLoad(bad, timeout=TIMEOUT),
               grpc.StatusCode.INVALID_ARGUMENT, "must be a bytes_param, got string_param")
        bad = service_pb2.RepositoryModelUnloadRequest(model_name="m")
        bad.parameters["unload_dependents"].int64_param = 1
        expect(lambda: stub.RepositoryModelUnload(bad, timeout=TIMEOUT),
               grpc.StatusCode.INVALID_ARGUMENT, "must be a bool_param")
        expect(lambda: stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(
            repository_name="other", model_name="m"), timeout=TIMEOUT),
            grpc.StatusCode.UNIMPLEMENTED, "repository_name 'other' is not supported")
        expect(lambda: stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(
            model_name="ghost"), timeout=TIMEOUT), grpc.StatusCode.NOT_FOUND,
            "no model repository holds a model named 'ghost'")
    assert_clean_exit(s)


def test_grpc_failed_load_answers_and_shows_unavailable(start_server, tmp_path):
    # A config that names a model file the version directory does not
    # hold: the backend's load fails.
    d = tmp_path / "broken"
    os.makedirs(d / "1")
    (d / "config.pbtxt").write_text(
        'name: "broken"\nbackend: "pytorch"\nmax_batch_size: 8\n'
        'default_model_filename: "missing.pt"\n'
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')
    s = start_server(tmp_path, "--model-control-mode=explicit")
    channel, stub = grpc_stub(s)
    with channel:
        with pytest.raises(grpc.RpcError) as info:
            stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name="broken"),
                                     timeout=TIMEOUT)
        # Triton's status (HTTP 400) and words.
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value
        details = info.value.details()
        assert details.startswith("load failed for model 'broken': version 1 is at UNAVAILABLE "
                                  "state: "), details
        assert "missing.pt" in details, details
        idx = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(), timeout=TIMEOUT)
        (e,) = [e for e in idx.models if e.name == "broken"]
        assert (e.version, e.state) == ("1", "UNAVAILABLE"), e
        assert "missing.pt" in e.reason, e.reason
        assert details.split("state: ", 1)[1].startswith(e.reason), (details, e.reason)
        ready = stub.ModelReady(service_pb2.ModelReadyRequest(name="broken"), timeout=TIMEOUT)
        assert not ready.ready
    assert_clean_exit(s)


def test_grpc_index_shows_loading_during_a_slow_load(start_server, tmp_path):
    # The load gate of test_first_load_is_loading_until_ready.
    gate = tmp_path / "gate"
    repo = tmp_path / "repo"
    write_model(repo, "g", extra=gate_extra(gate))
    s = start_server(repo, "--model-control-mode=explicit")
    channel, stub = grpc_stub(s)
    with channel:
        def entries():
            idx = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(), timeout=TIMEOUT)
            return [(e.name, e.version, e.state, e.reason) for e in idx.models]

        pending = stub.RepositoryModelLoad.future(
            service_pb2.RepositoryModelLoadRequest(model_name="g"), timeout=TIMEOUT * 2)
        try:
            wait_for("g LOADING over gRPC", lambda: entries() == [("g", "1", "LOADING", "")],
                     timeout=WAIT_S)
            assert not pending.done()  # the load answers once the model serves
            assert not stub.ModelReady(service_pb2.ModelReadyRequest(name="g"),
                                       timeout=TIMEOUT).ready
            ready = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True),
                                         timeout=TIMEOUT)
            assert list(ready.models) == []
        finally:
            gate.write_text("")
        pending.result()  # raises on a failed load
        assert entries() == [("g", "1", "READY", "")]
    infer_ok(s, "g")
    assert_clean_exit(s)


# ---------------------------------------------------------------- UNLOADING


def grpc_infer_request(model, values):
    req = service_pb2.ModelInferRequest(model_name=model)
    inp = req.inputs.add(name="INPUT0", datatype="INT32", shape=[1, len(values)])
    inp.contents.int_contents.extend(values)
    return req


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_unloading_shows_while_a_request_runs(start_server, tmp_path, proto):
    # The scheduler holds the queue until 2 requests are queued
    # (PTSERVE_DELAY_SCHEDULER), so one request is known to be in flight
    # before the unload; the unload lets it run, for 2.5 s (the identity
    # backend's execute_delay_ms), while the version is UNLOADING.
    write_model(tmp_path, "slow", extra='parameters { key: "execute_delay_ms" value { '
                'string_value: "2500" } }')
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=slow",
                     env={DELAY_ENV: "2"})
    channel, stub = grpc_stub(s)
    result = {}
    with channel:
        if proto == "http":
            def states():
                return [(e["version"], e["state"], e.get("reason", ""))
                        for e in index(s).get("slow", [])]
            t = threading.Thread(target=lambda: result.update(r=infer(s, "slow", (5, -5))))
            t.start()
            in_flight = t.is_alive
        else:
            def states():
                idx = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(),
                                           timeout=TIMEOUT)
                return [(e.version, e.state, e.reason) for e in idx.models if e.name == "slow"]
            fut = stub.ModelInfer.future(grpc_infer_request("slow", (5, -5)), timeout=TIMEOUT)
            in_flight = lambda: not fut.done()  # noqa: E731
        wait_pending(s, "slow", 1)
        assert states() == [("1", "READY", "")]
        done = {}
        if proto == "http":
            u = threading.Thread(target=lambda: done.update(r=unload(s, "slow")))
        else:
            u = threading.Thread(target=lambda: done.update(r=stub.RepositoryModelUnload(
                service_pb2.RepositoryModelUnloadRequest(model_name="slow"), timeout=TIMEOUT)))
        u.start()
        wait_for("slow UNLOADING", lambda: states() == [("1", "UNLOADING", "")], timeout=WAIT_S)
        # Seen while the request still runs, and the unload waits for it.
        assert in_flight()
        assert u.is_alive()
        # A new request is refused with the state meanwhile.
        r = infer(s, "slow")
        assert r.status_code == 404, r.text
        assert "(version 1 is UNLOADING)" in r.json()["error"], r.text
        u.join(TIMEOUT)
        assert not u.is_alive()
        # The request in flight was answered normally.
        if proto == "http":
            t.join(TIMEOUT)
            r = result["r"]
            assert r.status_code == 200, r.text
            assert r.json()["outputs"][0]["data"] == [5, -5]
            assert done["r"].status_code == 200, done["r"].text
        else:
            out = fut.result()
            assert list(np.frombuffer(out.raw_output_contents[0], dtype="<i4")) == [5, -5]
        assert states() == [("1", "UNAVAILABLE", "unloaded")]
    assert_clean_exit(s)


# ---------------------------------------------------------------- restricted group


def test_model_repository_group_needs_the_key(start_server, tmp_path):
    write_model(tmp_path, "m")
    s = start_server(tmp_path, "--model-control-mode=explicit", "--load-model=m",
                     "--http-restricted-api=model-repository:admin-key=secret",
                     "--grpc-restricted-protocol=model-repository:admin-key=secret")
    good, bad = {"admin-key": "secret"}, {"admin-key": "guess"}
    paths = ["/v2/repository/index", "/v2/repository/models/m/load",
             "/v2/repository/models/m/unload"]
    # HTTP: without the header, or with another value, 403 in tritonserver's
    # words, and nothing happens.
    for path in paths:
        for headers in ({}, bad):
            r = requests.post(s.url + path, headers=headers, timeout=TIMEOUT)
            assert r.status_code == 403, (path, r.text)
            assert r.json() == {"error": "This API is restricted, expecting header 'admin-key'"}
    infer_ok(s, "m")  # the refused unload did not unload; inference stays open
    # gRPC: UNAVAILABLE, tritonserver's status and words.
    channel, stub = grpc_stub(s)
    with channel:
        rpcs = [(stub.RepositoryIndex, service_pb2.RepositoryIndexRequest()),
                (stub.RepositoryModelLoad, service_pb2.RepositoryModelLoadRequest(model_name="m")),
                (stub.RepositoryModelUnload,
                 service_pb2.RepositoryModelUnloadRequest(model_name="m"))]
        for rpc, req in rpcs:
            for md in ((), tuple(bad.items())):
                with pytest.raises(grpc.RpcError) as info:
                    rpc(req, metadata=md, timeout=TIMEOUT)
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE, info.value
                assert info.value.details() == \
                    "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"
        infer_ok(s, "m")
        out = stub.ModelInfer(grpc_infer_request("m", (1, 2)), timeout=TIMEOUT)  # no key
        assert list(np.frombuffer(out.raw_output_contents[0], dtype="<i4")) == [1, 2]

        # With the key: every call goes through, on both protocols.
        md = tuple(good.items())
        idx = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(), metadata=md,
                                   timeout=TIMEOUT)
        assert [(e.name, e.version, e.state) for e in idx.models] == [("m", "1", "READY")]
        stub.RepositoryModelUnload(service_pb2.RepositoryModelUnloadRequest(model_name="m"),
                                   metadata=md, timeout=TIMEOUT)
        assert infer(s, "m").status_code == 404
        stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name="m"),
                                 metadata=md, timeout=TIMEOUT)
        infer_ok(s, "m")
    for path in reversed(paths):  # unload, load, index
        r = requests.post(s.url + path, headers=good, timeout=TIMEOUT)
        assert r.status_code == 200, (path, r.text)
    assert r.json() == [{"name": "m", "version": "1", "state": "READY"}]
    infer_ok(s, "m")
    assert_clean_exit(s)


# ---------------------------------------------------------------- file overrides, links


def tree(root, skip):
    """path -> what it is (a link's target, a file's bytes, "dir") for
    everything below root, links not followed; top-level names in `skip`
    left out."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == ".":
            dirs[:] = [d for d in dirs if d not in skip]
            files = [f for f in files if f not in skip]
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            key = os.path.normpath(os.path.join(rel, name))
            if os.path.islink(p):
                out[key] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[key] = "dir"
            else:
                with open(p, "rb") as f:
                    out[key] = ("file", f.read())
    return out


def test_file_overrides_never_write_through_links_or_outside(start_server, tmp_path):
    repo, tmp, outside = tmp_path / "repo", tmp_path / "tmp", tmp_path / "outside"
    for d in (repo, tmp, outside):
        d.mkdir()
    target = outside / "target"
    target.write_bytes(b"original")
    # The repository's m has a model file that is a link to a file outside.
    write_model(repo, "m")
    os.symlink(target, repo / "m" / "1" / "model.pt")
    os.symlink(outside, repo / "m" / "link")
    s = start_server(repo, "--model-control-mode=explicit", env={"TMPDIR": str(tmp)})
    logs = {f for f in os.listdir(tmp_path) if f.endswith(".log")}
    before = tree(tmp_path, logs | {"tmp"})
    cfg = json.dumps({"backend": "identity", "max_batch_size": 4,
                      "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
                      "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [2]}]})

    def b64(data):
        return base64.b64encode(data).decode()

    # Overrides named like the repository's links (the model file, and a
    # file below the directory link) are written to the load's private
    # directory, as plain files: never through the links.
    r = load(s, "m", {"config": cfg, "file:1/model.pt": b64(b"override"),
                      "file:link/target": b64(b"evil")})
    assert r.status_code == 200, r.text
    infer_ok(s, "m")
    (private,) = list(tmp.iterdir())
    assert tree(private, set()) == {
        "1": "dir", os.path.join("1", "model.pt"): ("file", b"override"),
        "link": "dir", os.path.join("link", "target"): ("file", b"evil")}

    # Names that would leave the directory, or go through a link: refused
    # before anything is written.
    for name, words in [
            ("1/../../outside/target", "may not contain '..'"),
            ("../outside/target", "may not contain '..'"),
            (str(target), "must be a relative path '<version>/<file name>'"),
            ("1/./model.pt", "may not contain '.'"),
            ("1//model.pt", "has an empty or too long path component"),
            ("1/", "names a directory, not a file"),
            ("1\\..\\x", "may not contain"),
    ]:
        r = load(s, "n", {"config": cfg, "file:1/model.pt": b64(b"x"),
                          "file:" + name: b64(b"evil")})
        assert r.status_code == 400, (name, r.text)
        assert words in r.json()["error"], (name, r.text)
    # A file and a directory of one name, in one load: refused, nothing
    # overwritten.
    r = load(s, "n", {"config": cfg, "file:1/x": b64(b"a"), "file:1/x/y": b64(b"b")})
    assert r.status_code == 400, r.text
    assert "failed to write file override" in r.json()["error"], r.text

    # Outside m's private directory nothing changed: the repository, its
    # links and their target are as they were, no other directory stayed.
    assert list(tmp.iterdir()) == [private]
    assert tree(tmp_path, logs | {"tmp"}) == before
    assert target.read_bytes() == b"original"
    infer_ok(s, "m")
    assert unload(s, "m").status_code == 200
    assert list(tmp.iterdir()) == []
    assert target.read_bytes() == b"original"
    assert_clean_exit(s)


def test_extensions_advertise_unload_dependents(start_server, tmp_path):
    write_model(tmp_path, "m")
    s = start_server(tmp_path)
    ext = requests.get(s.url + "/v2", timeout=TIMEOUT).json()["extensions"]
    assert "model_repository" in ext and "model_repository(unload_dependents)" in ext
    assert_clean_exit(s)


def test_unload_waits_for_the_ensemble_load_under_way(start_server, tmp_path):
    """tritonserver's order (L0_lifecycle's test_concurrent_model_load_unload):
    an ensemble's load loads its steps one after another, then itself; an
    unload of the step already loaded, issued meanwhile, waits for the whole
    load, which succeeds; then the step goes, and the ensemble with it."""
    import concurrent.futures
    repo = tmp_path / "repo"
    gate = tmp_path / "gate"
    write_model(repo, "first")
    write_model(repo, "second", extra=gate_extra(gate))
    (repo / "ens" / "1").mkdir(parents=True)
    (repo / "ens" / "config.pbtxt").write_text(
        'name: "ens"\nplatform: "ensemble"\nmax_batch_size: 8\n'
        'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 2 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 2 ] } ]\n'
        'ensemble_scheduling { step [\n'
        '  { model_name: "first" model_version: -1 input_map { key: "INPUT0" value: "IN" }\n'
        '    output_map { key: "OUTPUT0" value: "mid" } },\n'
        '  { model_name: "second" model_version: -1 input_map { key: "INPUT0" value: "mid" }\n'
        '    output_map { key: "OUTPUT0" value: "OUT" } } ] }\n')
    s = start_server(repo, "--model-control-mode=explicit")
    with concurrent.futures.ThreadPoolExecutor() as pool:
        loading = pool.submit(load, s, "ens")
        try:
            wait_for("the first step loaded, the second loading",
                     lambda: "successfully loaded 'first'" in s.log() and
                     "loading: second:1" in s.log(), timeout=WAIT_S)
            unloading = pool.submit(unload, s, "first")
            time.sleep(1)
            assert not unloading.done(), "the unload did not wait for the ensemble's load"
        finally:
            gate.write_text("")  # so the server can stop whatever happened
        r = loading.result(timeout=WAIT_S)
        assert r.status_code == 200, r.text
        r = unloading.result(timeout=WAIT_S)
        assert r.status_code == 200, r.text
    states = {name: [e.get("state") for e in es] for name, es in index(s).items()}
    assert "READY" not in states["first"] and "READY" not in states["ens"], states
    assert "unloading ensemble 'ens': its step model 'first' was unloaded" in s.log()
