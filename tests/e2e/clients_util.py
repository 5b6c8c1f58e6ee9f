"""What the tritonclient suites (test_client_http.py, test_client_grpc.py,
test_client_aio.py) share: the server they talk to, its models, and expected
values computed independently of ptserve.

The server serves two repositories:
  - a temporary one: the example repository (examples/models, model files
    written by examples/gen_models.py: mlp_classifier with its labels.txt,
    text_upper), the TorchScript test models add_sub_<type>, mlp and strings
    (tests/models/gen_models.py, the torch_models fixture), and `slow`, an
    identity model that takes SLOW_MS per execution (for client deadlines);
  - tests/e2e/repos/identity: one identity model per datatype (dt_*), which
    echo input i as output i, and the versioned id_* models.

Expected values: torch running the same model.pt in this process
(torch.jit.load), the identity models' echo, the committed config.pbtxt and
labels.txt files, and the protocol's rules (protocol-facts §1.9 for
classification).
"""
import os
import subprocess

import ml_dtypes
import numpy as np
import pytest
import torch

from conftest import (ROOT, assert_clean_exit, copy_example, free_port, launch_server,
                      models_python)

TIMEOUT = 30
IDENTITY_REPO = os.path.join(ROOT, "tests", "e2e", "repos", "identity")
# The TorchScript examples examples/gen_models.py writes (the repository
# holds others, made by other generators).
EXAMPLE_MODELS = ["add_sub", "mlp_classifier", "text_upper", "accumulator", "standardize"]
LABELS = ["cat", "dog", "bird", "fish"]  # examples/models/mlp_classifier/labels.txt
SLOW_MS = 3000

# add_sub_<suffix> (tests/models/gen_models.py): protocol datatype, numpy dtype
ADD_SUB = {
    "bool": ("BOOL", np.bool_),
    "uint8": ("UINT8", np.uint8),
    "int8": ("INT8", np.int8),
    "int16": ("INT16", np.int16),
    "int32": ("INT32", np.int32),
    "int64": ("INT64", np.int64),
    "fp16": ("FP16", np.float16),
    "fp32": ("FP32", np.float32),
    "fp64": ("FP64", np.float64),
    "bf16": ("BF16", ml_dtypes.bfloat16),
}

# Every protocol datatype -> the numpy dtype tritonclient uses for it, and
# values that reach the ends of its range (the identity models dt_<type>).
DTYPES = {
    "BOOL": (np.bool_, [True, False, True, True]),
    "UINT8": (np.uint8, [0, 1, 200, 255]),
    "UINT16": (np.uint16, [0, 1, 40000, 65535]),
    "UINT32": (np.uint32, [0, 1, 3000000000, 4294967295]),
    "UINT64": (np.uint64, [0, 1, 2**40 + 3, 2**64 - 1]),
    "INT8": (np.int8, [-128, -1, 0, 127]),
    "INT16": (np.int16, [-32768, -2, 7, 32767]),
    "INT32": (np.int32, [-2**31, -3, 5, 2**31 - 1]),
    "INT64": (np.int64, [-2**63, -4, 9, 2**63 - 1]),
    "FP16": (np.float16, [0.5, -2.0, 65504.0, 1.0 / 3.0]),
    "FP32": (np.float32, [1.5, -2.25, 3.0e38, 1.0 / 3.0]),
    "FP64": (np.float64, [1.0 / 3.0, -1e300, 5e-324, 0.1]),
    "BF16": (ml_dtypes.bfloat16, [1.0, -2.5, 3.140625, 1.0e30]),
    "BYTES": (np.object_, [b"hello", b"", "\u00fcn\u00efcode".encode(), b"a\x00b"]),
}
# JSON can not carry FP16 and BF16 (protocol-facts §1.6): binary only.
JSON_DTYPES = [d for d in DTYPES if d not in ("FP16", "BF16")]

SLOW_CONFIG = """name: "slow"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
parameters: { key: "execute_delay_ms" value: { string_value: "%d" } }
""" % SLOW_MS


# ---------------------------------------------------------------- the server

def clients_repo(root, torch_models):
    """Writes the temporary repository under `root` and returns its path."""
    repo = os.path.join(str(root), "repo")
    for name in EXAMPLE_MODELS:
        copy_example(name, os.path.join(repo, name))
    subprocess.run([models_python(), os.path.join(ROOT, "examples", "gen_models.py"), repo],
                   check=True, stdout=subprocess.DEVNULL)
    for name in ["add_sub_" + s for s in ADD_SUB] + ["mlp", "strings"]:
        os.symlink(os.path.join(torch_models, name), os.path.join(repo, name))
    os.makedirs(os.path.join(repo, "slow", "1"))
    with open(os.path.join(repo, "slow", "config.pbtxt"), "w") as f:
        f.write(SLOW_CONFIG)
    return repo


def launch_clients_server(ptserve_bin, repo, log_path, *args):
    return launch_server(ptserve_bin, repo, log_path, "--model-repository", IDENTITY_REPO,
                         *args, metrics_port=free_port(), grpc_port=free_port(),
                         grpc_address="127.0.0.1")


def clients_server(log_dir, *args):
    """A module-scoped `server` fixture (assign it to `server` in the test
    module) serving the two repositories with extra flags `args`; it must
    still be running at the end, stop on SIGTERM with 0 and have logged no
    sanitizer report."""
    @pytest.fixture(scope="module")
    def server(ptserve_bin, torch_models, tmp_path_factory):
        root = tmp_path_factory.mktemp(log_dir)
        repo = clients_repo(root, torch_models)
        s = launch_clients_server(ptserve_bin, repo, root / "server.log", *args)
        s.repo = repo
        yield s
        assert_clean_exit(s)
    return server


def http_target(server):
    return server.url[len("http://"):]


# ---------------------------------------------------------------- torch

_models = {}


def torch_model(server, name):
    """The model.pt the server loaded, run by torch in this process."""
    path = os.path.realpath(os.path.join(server.repo, name, "1", "model.pt"))
    if path not in _models:
        _models[path] = torch.jit.load(path).eval()
    return _models[path]


def add_sub_inputs(suffix, shape, rng):
    """Random INPUT0, INPUT1 for add_sub_<suffix>, as numpy arrays of the
    wire dtype; float values are multiples of 1/4 below 64, exact in every
    float type (bf16 included)."""
    dtype = ADD_SUB[suffix][1]
    if suffix == "bool":
        return rng.random(shape) < 0.5, rng.random(shape) < 0.5
    if suffix in ("fp16", "fp32", "fp64", "bf16"):
        return tuple((rng.integers(-256, 256, shape) / 4.0).astype(np.float32).astype(dtype)
                     for _ in range(2))
    info = np.iinfo(dtype)
    return tuple(rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
                 for _ in range(2))


def add_sub_expected(server, suffix, a, b):
    """[OUTPUT0, OUTPUT1] of add_sub_<suffix> by torch, in the wire dtype."""
    model = torch_model(server, "add_sub_" + suffix)
    dtype = ADD_SUB[suffix][1]
    if suffix == "bf16":
        ta = torch.from_numpy(a.astype(np.float32)).bfloat16()
        tb = torch.from_numpy(b.astype(np.float32)).bfloat16()
        return [t.float().numpy().astype(dtype) for t in model(ta, tb)]
    with torch.no_grad():
        return [t.numpy() for t in model(torch.from_numpy(a), torch.from_numpy(b))]


def mlp_expected(server, model, x):
    with torch.no_grad():
        return torch_model(server, model)(torch.from_numpy(x)).numpy()


def identity_values(datatype, rows=1):
    """[rows, 4] values of `datatype` for the dt_<type> identity models."""
    dtype, values = DTYPES[datatype]
    if datatype == "BF16":
        row = np.array(values, dtype=np.float32).astype(dtype)
    else:
        row = np.array(values, dtype=dtype)
    return np.stack([row] * rows)


def assert_same(got, want, datatype):
    """Exact equality, dtype included; BYTES compared as bytes."""
    assert got is not None, "output missing"
    assert got.shape == want.shape, (got.shape, want.shape)
    if datatype == "BYTES":
        to_bytes = lambda v: v if isinstance(v, bytes) else v.encode()
        assert [to_bytes(v) for v in got.ravel()] == [to_bytes(v) for v in want.ravel()]
        return
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if datatype in ("FP16", "FP32", "FP64", "BF16"):
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    else:
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- classification

def parse_class_entry(entry):
    """b"<value>:<index>[:<label>]" -> (value, index, label or None)."""
    text = entry.decode() if isinstance(entry, bytes) else entry
    parts = text.split(":", 2)
    return float(parts[0]), int(parts[1]), parts[2] if len(parts) == 3 else None


def assert_classification(got, scores, k, labels=None):
    """got: the BYTES output [batch, min(k, classes)] for `scores`
    [batch, classes] (torch's values, in the output's dtype); each row holds
    the top k as "value:index[:label]", highest first, the value printed as
    C++'s std::to_string prints the output's type: integers in decimal,
    floats with six decimals (%f) (protocol-facts §1.9)."""
    batch, classes = scores.shape
    n = min(k, classes)
    integer = np.issubdtype(scores.dtype, np.integer)
    assert got.shape == (batch, n), got.shape
    for row in range(batch):
        order = sorted(range(classes), key=lambda i: -scores[row][i])[:n]
        entries = [parse_class_entry(e) for e in got[row]]
        assert [e[1] for e in entries] == order, (entries, scores[row])
        for (value, index, label), raw in zip(entries, got[row]):
            text = (raw.decode() if isinstance(raw, bytes) else raw).split(":")[0]
            if integer:
                assert text == str(int(scores[row][index])), raw
            else:
                assert abs(value - float(scores[row][index])) <= 1.5e-6, (raw, scores[row][index])
                assert text == "%f" % value, raw
            assert label == (labels[index] if labels else None), raw
