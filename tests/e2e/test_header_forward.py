"""--http-header-forward-pattern and --grpc-header-forward-pattern, with
tritonserver r25.07's meaning (src/http_server.cc ForwardHeaders,
src/grpc/infer_handler.h ForwardHeadersAsParameters): the headers of an
inference whose name the pattern matches anywhere, in any case, become
string request parameters, after the request's own parameters; a name in
both is kept twice, the request's first. What reaches the model is read
back through the identity model's parameters_output hook, which answers
with every request parameter it was given ("<key>=<value>", in order); the
expected lists are written out from the headers and parameters each test
sends with NVIDIA's tritonclient."""
import queue

import numpy as np
import pytest

from conftest import assert_clean_exit, need_module, run_cli

httpclient = need_module("tritonclient.http")
grpcclient = need_module("tritonclient.grpc")

PARAMS_MODEL = """name: "p"
backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "PARAMS" data_type: TYPE_STRING dims: [ -1 ] } ]
parameters { key: "parameters_output" value: { string_value: "PARAMS" } }
"""
# An ensemble of one step, p: its steps get the ensemble request's parameters.
ENSEMBLE = """name: "ens"
platform: "ensemble"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "P" data_type: TYPE_STRING dims: [ -1 ] } ]
ensemble_scheduling { step [ { model_name: "p" input_map { key: "INPUT0" value: "X" }
  output_map { key: "OUTPUT0" value: "Y" } output_map { key: "PARAMS" value: "P" } } ] }
"""


@pytest.fixture
def repo(tmp_path):
    for name, text in (("p", PARAMS_MODEL), ("ens", ENSEMBLE)):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(text)
    return tmp_path


def received(result, output="PARAMS"):
    """The parameters the model saw, as (key, value) pairs in order."""
    return [tuple(e.decode().split("=", 1)) for e in result.as_numpy(output).reshape(-1)]


def http_infer(server, headers=None, parameters=None, model="p", inp="INPUT0"):
    c = httpclient.InferenceServerClient(server.url.replace("http://", ""))
    i = httpclient.InferInput(inp, [4], "FP32")
    i.set_data_from_numpy(np.arange(4, dtype=np.float32))
    return c.infer(model, [i], headers=headers, parameters=parameters)


def grpc_infer(server, headers=None, parameters=None, model="p", inp="INPUT0"):
    c = grpcclient.InferenceServerClient(server.grpc_target)
    i = grpcclient.InferInput(inp, [4], "FP32")
    i.set_data_from_numpy(np.arange(4, dtype=np.float32))
    return c.infer(model, [i], headers=headers, parameters=parameters)


def split(params, explicit):
    """The request's own parameters must come first (in any order: a JSON
    object or protobuf map keeps none), then the forwarded headers in the
    order sent."""
    own, fwd = params[:len(explicit)], params[len(explicit):]
    assert sorted(own) == sorted(explicit), params
    return fwd


def test_http_headers_forwarded(start_server, repo):
    server = start_server(repo, "--http-header-forward-pattern", "x-.*")
    headers = {"X-Tag": "blue", "x-user": "u1", "y-other": "not me", "my-x-c": "3"}
    r = http_infer(server, headers=headers, parameters={"x-user": "explicit", "n": 3})
    fwd = split(received(r), [("x-user", "explicit"), ("n", "3")])
    # Matched anywhere in the name (RE2::PartialMatch), in any case; the
    # value as sent. HTTP/1.1 names keep the case the client sent, so only
    # the names are compared without it.
    assert [(k.lower(), v) for k, v in fwd] == [("x-tag", "blue"), ("x-user", "u1"),
                                                ("my-x-c", "3")], fwd
    # Headers the client library adds (Host, Content-Type, ...) do not match.
    assert all("x-" in k.lower() for k, _ in fwd), fwd
    # A request without parameters of its own (decoded on the fast path).
    r = http_infer(server, headers={"x-only": "1", "z": "2"})
    assert [(k.lower(), v) for k, v in received(r)] == [("x-only", "1")]
    # gRPC has no pattern: nothing of its metadata is forwarded.
    r = grpc_infer(server, headers={"x-tag": "blue"}, parameters={"n": 1})
    assert received(r) == [("n", "1")]
    assert_clean_exit(server)


def test_grpc_metadata_forwarded(start_server, repo):
    server = start_server(repo, "--grpc-header-forward-pattern=^X-(TAG|user)$")
    headers = {"x-tag": "blue", "x-user": "u1", "x-tagged": "no: anchored", "y-other": "no",
               "my-x-tag": "no: anchored"}
    r = grpc_infer(server, headers=headers, parameters={"x-user": "explicit", "b": True})
    fwd = split(received(r), [("x-user", "explicit"), ("b", "true")])
    # gRPC metadata keys are lower case on the wire; the pattern's case does
    # not matter.
    assert fwd == [("x-tag", "blue"), ("x-user", "u1")], fwd
    # The HTTP pattern is a separate flag: none given, nothing forwarded.
    r = http_infer(server, headers={"x-tag": "blue"})
    assert received(r) == []
    assert_clean_exit(server)


def test_grpc_stream_requests_each_get_the_metadata(start_server, repo):
    """ModelStreamInfer: the call's metadata goes with every request on it."""
    server = start_server(repo, "--grpc-header-forward-pattern", "^x-")
    c = grpcclient.InferenceServerClient(server.grpc_target)
    results = queue.Queue()
    c.start_stream(callback=lambda result, error: results.put((result, error)),
                   headers={"x-stream": "s1", "other": "no"})
    i = grpcclient.InferInput("INPUT0", [4], "FP32")
    i.set_data_from_numpy(np.zeros(4, dtype=np.float32))
    for k in range(2):
        c.async_stream_infer("p", [i], parameters={"k": k})
    got = []
    for _ in range(2):
        result, error = results.get(timeout=30)
        assert error is None, error
        got.append(received(result))
    c.stop_stream()
    assert sorted(got) == [[("k", "0"), ("x-stream", "s1")], [("k", "1"), ("x-stream", "s1")]]
    assert_clean_exit(server)


def test_ensemble_steps_get_the_forwarded_headers(start_server, repo):
    server = start_server(repo, "--http-header-forward-pattern=^x-",
                          "--grpc-header-forward-pattern=^x-")
    r = http_infer(server, headers={"x-via": "http"}, parameters={"n": 2}, model="ens", inp="X")
    assert [(k.lower(), v) for k, v in received(r, "P")] == [("n", "2"), ("x-via", "http")]
    r = grpc_infer(server, headers={"x-via": "grpc"}, model="ens", inp="X")
    assert received(r, "P") == [("x-via", "grpc")]
    assert_clean_exit(server)


def test_no_pattern_forwards_nothing(start_server, repo):
    server = start_server(repo)
    assert received(http_infer(server, headers={"x-a": "1"}, parameters={"s": "v"})) == \
        [("s", "v")]
    assert received(grpc_infer(server, headers={"x-a": "1"})) == []
    assert_clean_exit(server)


@pytest.mark.parametrize("flag,pattern,says", [
    ("--http-header-forward-pattern", "x-(", "is not a valid regular expression"),
    ("--grpc-header-forward-pattern", "[x", "is not a valid regular expression"),
    ("--http-header-forward-pattern", "^x-\\d+", "uses a \\d-style escape"),
    ("--grpc-header-forward-pattern", "(?i)x-", "uses a (?...) group"),
    ("--http-header-forward-pattern", "x-.*?", "uses a lazy quantifier"),
])
def test_bad_pattern_stops_the_start(ptserve_bin, repo, flag, pattern, says):
    rc, out = run_cli(ptserve_bin, "--model-repository", repo, "--http-port", "0",
                      "--grpc-port", "0", "--metrics-port", "0", "%s=%s" % (flag, pattern))
    assert rc != 0, out
    assert "%s '%s'" % (flag, pattern) in out and says in out, out
    assert "Started" not in out, out
