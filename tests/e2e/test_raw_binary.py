"""Triton's raw binary requests (Inference-Header-Content-Length: 0,
issue 51): the body is the model's one input, named, typed and shaped by
its configuration. Expected answers are the identity models' echo of the
bytes sent; refusals are Triton's words (its QA's http_test.py matches
them) with the model after them."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import requests

from clients_util import DTYPES, IDENTITY_REPO, identity_values
from conftest import assert_clean_exit, free_port, launch_server

TIMEOUT = 30

# A BYTES input of dims [1] (raw BYTES needs it), and a model whose input
# has two variable dims: neither is among the identity repository's.
EXTRA = {
    "raw_bytes": """name: "raw_bytes"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
""",
    "two_variable": """name: "two_variable"
backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
""",
    "two_inputs": """name: "two_inputs"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
""",
}


@pytest.fixture(scope="module")
def server(ptserve_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp("raw_binary")
    repo = root / "repo"
    for name, config in EXTRA.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    s = launch_server(ptserve_bin, repo, root / "server.log", "--model-repository",
                      IDENTITY_REPO, metrics_port=0, grpc_port=free_port(),
                      grpc_address="127.0.0.1")
    yield s
    assert_clean_exit(s)


def post_raw(server, model, body):
    return requests.post("%s/v2/models/%s/infer" % (server.url, model), data=body,
                         headers={"Inference-Header-Content-Length": "0"}, timeout=TIMEOUT)


def binary_answer(r):
    """(JSON header, [output bytes]) of a binary response."""
    assert r.status_code == 200, r.text
    n = int(r.headers["Inference-Header-Content-Length"])
    head = json.loads(r.content[:n])
    chunks, at = [], n
    for o in head["outputs"]:
        size = o["parameters"]["binary_data_size"]
        chunks.append(r.content[at:at + size])
        at += size
    assert at == len(r.content)
    return head, chunks


@pytest.mark.parametrize("datatype", [d for d in DTYPES if d != "BYTES"])
def test_every_fixed_size_datatype(server, datatype):
    """dt_<type> (dims [-1], max_batch_size 8): the body's values are a
    [1, n] input, echoed in binary."""
    values = identity_values(datatype, rows=3).reshape(-1)  # 12 values, any shape
    raw = values.tobytes()
    head, (out,) = binary_answer(post_raw(server, "dt_" + datatype.lower(), raw))
    o, = head["outputs"]
    assert (o["name"], o["datatype"], o["shape"]) == ("OUTPUT0", datatype, [1, len(values)]), head
    assert out == raw


def test_bytes_of_shape_one(server):
    """A BYTES input of dims [1]: the body is its one element, whatever
    its bytes (NULs and non-UTF-8 too); the answer's element is the same."""
    for body in (b"hello", b"", b"a\x00b\xff"):
        head, (out,) = binary_answer(post_raw(server, "raw_bytes", body))
        assert head["outputs"][0]["shape"] == [1, 1], head
        assert out == len(body).to_bytes(4, "little") + body


@pytest.mark.parametrize("model, status, words", [
    ("two_inputs", 400, "Raw request must only have 1 input (found 1) to be deduced but got 2 "
                        "inputs in 'two_inputs' model configuration"),
    ("two_variable", 400, "The shape of the raw input 'INPUT0' can not be deduced because there "
                          "are more than one variable-sized dimension"),
    ("dt_bytes", 400, "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"),
    ("dt_fp32", 400, "the raw input 'INPUT0' of model 'dt_fp32' is 10 bytes, which is no whole "
                     "number of FP32 elements"),
    ("no_such_model", 404, "Request for unknown model: 'no_such_model' is not found"),
])
def test_refusals_in_tritons_words(server, model, status, words):
    r = post_raw(server, model, bytes(10))
    assert r.status_code == status, (r.status_code, r.text)
    assert words in r.json()["error"], r.text
    # and the server goes on serving
    head, (out,) = binary_answer(post_raw(server, "dt_fp32", np.ones(2, "<f4").tobytes()))
    assert out == np.ones(2, "<f4").tobytes()


def test_the_docs_curl_example(server, tmp_path):
    """docs/http-api.md's curl command, as written there (host and port
    aside): four FP32 values to dt_fp32, the answer's JSON then the same
    16 bytes."""
    curl = shutil.which("curl")
    assert curl, "curl is installed by scripts/setup.sh"
    x = tmp_path / "x.bin"
    x.write_bytes(np.array([1.5, -2, 3, 0.25], "<f4").tobytes())
    answer = tmp_path / "answer.bin"
    out = subprocess.run([curl, "-s", server.url + "/v2/models/dt_fp32/infer",
                          "-H", "Inference-Header-Content-Length: 0",
                          "--data-binary", "@" + str(x), "-o", str(answer), "-D", "-"],
                         check=True, capture_output=True, text=True, timeout=TIMEOUT).stdout
    n = int([ln.split(":", 1)[1] for ln in out.splitlines()
             if ln.lower().startswith("inference-header-content-length")][0])
    body = answer.read_bytes()
    head = json.loads(body[:n])
    assert head["outputs"][0]["shape"] == [1, 4], head
    assert body[n:] == x.read_bytes()
    assert os.path.getsize(answer) == n + 16
