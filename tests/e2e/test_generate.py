"""Triton's generate extension (issue 48, part 3): POST
/v2/models/{m}/generate answers one JSON object, .../generate_stream the
same as Server-Sent Events. Every key of the request that names a model
input is that input (a value or a flat array, shaped by the
configuration); "parameters" is mapped the same way; the reply carries
every output, one element as a bare value. Driven with plain HTTP
(requests), as curl users and LLM front-ends do; every expected answer is
torch running the same model.pt."""
import json
import os

import numpy as np
import pytest
import requests
import torch

from conftest import assert_clean_exit, free_port, launch_server

TIMEOUT = 30
MODELS = ("text_gen", "add_sub_fp32", "add_sub_fp16", "strings_batched", "mlp")

# A model whose forward raises for a negative input: an inference that
# fails after the request was accepted.
FAILS_CONFIG = """name: "fails"
backend: "pytorch"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


class Fails(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool((x < 0).any()):
            raise RuntimeError("the input must not be negative")
        return x * 2


@pytest.fixture(scope="module")
def repo(torch_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("generate")
    for name in MODELS:
        os.symlink(os.path.join(torch_models, name), str(root / name))
    (root / "fails" / "1").mkdir(parents=True)
    (root / "fails" / "config.pbtxt").write_text(FAILS_CONFIG)
    torch.jit.script(Fails().eval()).save(str(root / "fails" / "1" / "model.pt"))
    return root


@pytest.fixture(scope="module")
def server(ptserve_bin, repo, tmp_path_factory):
    s = launch_server(ptserve_bin, repo, tmp_path_factory.mktemp("generate_log") / "server.log",
                      metrics_port=0, grpc_port=free_port(), grpc_address="127.0.0.1")
    yield s
    assert_clean_exit(s)


def model(repo, name):
    return torch.jit.load(os.path.join(str(repo), name, "1", "model.pt"))


def generate(server, name, body, stream=False, **kw):
    url = "%s/v2/models/%s/%s" % (server.url, name, "generate_stream" if stream else "generate")
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(url, data=data, timeout=TIMEOUT, **kw)


def sse_events(r):
    """The data of each event of a text/event-stream body (one 'data:'
    line per event, events separated by a blank line)."""
    assert r.headers["Content-Type"] == "text/event-stream; charset=utf-8", r.headers
    assert r.text.endswith("\n\n"), r.text
    events = []
    for block in r.text.split("\n\n")[:-1]:
        assert block.startswith("data: "), r.text
        events.append(json.loads(block[len("data: "):]))
    return events


def text_gen_expected(repo, text, max_tokens):
    out, count = model(repo, "text_gen")([text], torch.tensor([max_tokens], dtype=torch.int32))
    return out[0], int(count[0])


def test_text_in_text_out(server, repo):
    """The documentation's request: id, text_input, and parameters that
    are either model inputs (max_tokens) or request parameters
    (temperature, stream)."""
    body = {"id": "42", "text_input": "the quick brown fox jumps",
            "parameters": {"max_tokens": 3, "temperature": 0, "stream": False}}
    r = generate(server, "text_gen", body)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/json"
    text, count = text_gen_expected(repo, "the quick brown fox jumps", 3)
    assert r.json() == {"id": "42", "model_name": "text_gen", "model_version": "1",
                        "text_output": text, "token_count": count}
    # max_tokens at the top level is the same input; no id, no "id" key.
    r = generate(server, "text_gen", {"text_input": "a b c", "max_tokens": 1})
    assert r.status_code == 200, r.text
    text, count = text_gen_expected(repo, "a b c", 1)
    assert r.json() == {"model_name": "text_gen", "model_version": "1", "text_output": text,
                        "token_count": count}


def test_generate_stream_is_server_sent_events(server, repo):
    body = {"id": "7", "text_input": "streamed words come back", "max_tokens": 2}
    r = generate(server, "text_gen", body, stream=True)
    assert r.status_code == 200, r.text
    text, count = text_gen_expected(repo, "streamed words come back", 2)
    assert sse_events(r) == [{"id": "7", "model_name": "text_gen", "model_version": "1",
                              "text_output": text, "token_count": count}]


def test_numeric_inputs_fill_the_configured_shape(server, repo):
    """add_sub_fp32 (max_batch_size 8, dims [4]): four numbers are one
    batch row [1, 4]; outputs of four elements come back as arrays."""
    a, b = [1.5, -2.0, 3.25, 4.0], [0.5, 0.5, -1.0, 8.0]
    r = generate(server, "add_sub_fp32", {"INPUT0": a, "INPUT1": b})
    assert r.status_code == 200, r.text
    s, d = model(repo, "add_sub_fp32")(torch.tensor([a]), torch.tensor([b]))
    got = r.json()
    assert got["OUTPUT0"] == s[0].tolist() and got["OUTPUT1"] == d[0].tolist(), got
    # Eight numbers fill two rows of four (Triton's rule: the batch dim
    # takes what the fixed dims leave), and the outputs are flat.
    a8, b8 = list(range(8)), [1] * 8
    r = generate(server, "add_sub_fp32", {"INPUT0": a8, "INPUT1": b8})
    assert r.status_code == 200, r.text
    s, d = model(repo, "add_sub_fp32")(torch.tensor(a8, dtype=torch.float32).reshape(2, 4),
                                       torch.tensor(b8, dtype=torch.float32).reshape(2, 4))
    assert r.json()["OUTPUT0"] == s.flatten().tolist()
    assert r.json()["OUTPUT1"] == d.flatten().tolist()


def test_strings_take_the_variable_dimension(server, repo):
    """strings_batched (max_batch_size 8, dims [-1]): three strings are
    shape [1, 3] (the innermost variable dim gets them, the batch 1)."""
    words = ["alpha", "beta", "gamma"]
    r = generate(server, "strings_batched", {"INPUT0": words})
    assert r.status_code == 200, r.text
    assert r.json()["OUTPUT0"] == model(repo, "strings_batched")(words)
    # One string alone is one element, and comes back bare.
    r = generate(server, "strings_batched", {"INPUT0": "solo"})
    assert r.status_code == 200, r.text
    assert r.json()["OUTPUT0"] == model(repo, "strings_batched")(["solo"])[0]


def test_mlp_answer_matches_torch(server, repo):
    x = np.random.RandomState(3).randn(16).astype(np.float32)
    r = generate(server, "mlp", {"INPUT__0": x.tolist()})
    assert r.status_code == 200, r.text
    want = model(repo, "mlp")(torch.from_numpy(x)[None])[0]
    np.testing.assert_allclose(r.json()["OUTPUT__0"], want.detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name, body, status, words", [
    ("add_sub_fp32", {"INPUT0": [1, 2, 3], "INPUT1": [1, 2, 3]}, 400,
     "The schema can not convert input 'INPUT0' to tensor with proper shape: 3 elements do not "
     "fill its dims [4]"),
    ("text_gen", {"text_input": "x", "max_tokens": 1, "style": [1, 2]}, 400,
     "parameter 'style' has invalid type. It should be either 'int', 'bool', or 'string'"),
    ("text_gen", {"text_input": "x", "parameters": [1]}, 400,
     "Expected JSON object for keyword: 'parameters', got an array"),
    ("text_gen", {"text_input": "x", "max_tokens": 1, "parameters": {"max_tokens": 2}}, 400,
     "input 'max_tokens' is given twice in the generate request"),
    ("text_gen", {"text_input": 5, "max_tokens": 1}, 400,
     "input 'text_input': element 0 of its JSON value must be a string for datatype BYTES, "
     "got an integer"),
    ("text_gen", {"text_input": [["nested"]], "max_tokens": 1}, 400,
     "input 'text_input' of a generate request must be a flat array of values, but element 0 "
     "is an array"),
    ("text_gen", {"text_input": "x", "max_tokens": 2 ** 40}, 400,
     "input 'max_tokens': element 0 of its JSON value (1099511627776) is out of range for INT32"),
    ("text_gen", {"text_input": "no max_tokens"}, 400, "max_tokens"),
    ("text_gen", {"id": 3, "text_input": "x", "max_tokens": 1}, 400,
     "request 'id' must be a string"),
    ("add_sub_fp16", {"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 2, 3, 4]}, 400,
     "input 'INPUT0': datatype FP16 has no JSON form"),
    ("text_gen", b'{"text_input": "x",', 400, "failed to parse the request JSON"),
    ("text_gen", b'["an", "array"]', 400, "the generate request must be a JSON object"),
    ("no_such_model", {"text_input": "x"}, 404, "Request for unknown model: 'no_such_model'"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_refusals_before_inference_are_json(server, name, body, status, words, stream):
    """A request refused before inference is a plain JSON error with a 4xx,
    on both endpoints (Triton's generate_stream does the same), and the
    server goes on answering."""
    r = generate(server, name, body, stream=stream)
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["Content-Type"] == "application/json"
    assert words in r.json()["error"], r.text
    r = generate(server, "text_gen", {"text_input": "still here", "max_tokens": 1})
    assert r.status_code == 200 and r.json()["text_output"] == "STILL", r.text


def test_a_failed_inference(server):
    """The model raised: generate answers a JSON error; generate_stream
    sets the status from the error and sends it as the stream's event."""
    r = generate(server, "fails", {"x": [1.0, -1.0]})
    assert r.status_code in (400, 500), r.text
    assert "the input must not be negative" in r.json()["error"]
    r = generate(server, "fails", {"x": [1.0, -1.0]}, stream=True)
    assert r.status_code in (400, 500), r.text
    (event,) = sse_events(r)
    assert "the input must not be negative" in event["error"], event
    r = generate(server, "fails", {"x": [1.0, 2.5]}, stream=True)
    assert r.status_code == 200
    assert sse_events(r)[0]["y"] == Fails()(torch.tensor([1.0, 2.5])).tolist()


def test_transport_rules(server):
    """GET is 405; a compressed body is refused (Triton takes none here);
    an empty body is an empty object, whose missing inputs the server
    names."""
    r = requests.get(server.url + "/v2/models/text_gen/generate", timeout=TIMEOUT)
    assert r.status_code == 405, r.text
    r = generate(server, "text_gen", {"text_input": "x"}, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 400
    assert "Unsupported content-encoding, only 'identity' is supported" in r.json()["error"]
    r = generate(server, "text_gen", b"")
    assert r.status_code == 400 and "text_input" in r.json()["error"], r.text
    r = requests.post(server.url + "/v2/models/text_gen/versions/1/generate",
                      json={"text_input": "versioned path", "max_tokens": 1}, timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["model_version"] == "1", r.text
