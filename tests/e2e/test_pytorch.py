"""The pytorch backend, end to end: real TorchScript models over HTTP.

Models come from tests/models/gen_models.py (the torch_models fixture).
Every expected value is computed here by torch itself, running the same
model.pt with torch.jit.load, or by hand from the model's definition — never
taken from ptserve.
"""
import json
import os
import shutil
import struct
import threading

import numpy as np
import pytest
import requests
import torch

from conftest import assert_clean_exit

TIMEOUT = 30

# config type suffix -> (protocol datatype, numpy dtype; None = BF16)
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
    "bf16": ("BF16", None),
}


# ---------------------------------------------------------------- helpers

@pytest.fixture
def serve(start_server):
    """start_server, plus a clean stop at the end: the server must still be
    running, exit 0 on SIGTERM and have logged no sanitizer report (the
    ASan+UBSan build runs these tests too)."""
    servers = []

    def start(*args, **kwargs):
        server = start_server(*args, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        assert_clean_exit(server)


def make_repo(tmp_path, torch_models, names, subdir="repo"):
    """A repository of the named generated models (symlinked, not copied)."""
    repo = tmp_path / subdir
    repo.mkdir()
    for n in names:
        os.symlink(os.path.join(torch_models, n), str(repo / n))
    return repo


def load_model(torch_models, name):
    return torch.jit.load(os.path.join(torch_models, name, "1", "model.pt")).eval()


def bf16_bits(values):
    """float32 values (exactly representable in bf16) -> bf16 bit patterns."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def serialize_bytes(items):
    out = b""
    for s in items:
        b = s.encode() if isinstance(s, str) else s
        out += struct.pack("<I", len(b)) + b
    return out


def deserialize_bytes(buf):
    items, off = [], 0
    while off < len(buf):
        (n,) = struct.unpack_from("<I", buf, off)
        items.append(buf[off + 4:off + 4 + n])
        off += 4 + n
    return items


def raw_bytes(datatype, array):
    if datatype == "BYTES":
        return serialize_bytes(array)
    return np.ascontiguousarray(array).tobytes()


def infer_json(url, model, inputs, outputs=None):
    """inputs: list of (name, datatype, shape, flat list)."""
    body = {"inputs": [{"name": n, "datatype": d, "shape": list(s), "data": v}
                       for n, d, s, v in inputs]}
    if outputs is not None:
        body["outputs"] = [{"name": o} for o in outputs]
    return requests.post("%s/v2/models/%s/infer" % (url, model), json=body, timeout=TIMEOUT)


def infer_binary(url, model, inputs, outputs):
    """inputs: list of (name, datatype, shape, numpy array or list of str).
    Returns (status, {output name: (datatype, shape, raw bytes)}) or (status, error)."""
    chunks, header = [], {"inputs": [], "outputs": []}
    for name, datatype, shape, array in inputs:
        raw = raw_bytes(datatype, array)
        chunks.append(raw)
        header["inputs"].append({"name": name, "datatype": datatype, "shape": list(shape),
                                 "parameters": {"binary_data_size": len(raw)}})
    header["outputs"] = [{"name": o, "parameters": {"binary_data": True}} for o in outputs]
    head = json.dumps(header).encode()
    r = requests.post("%s/v2/models/%s/infer" % (url, model), data=head + b"".join(chunks),
                      headers={"Inference-Header-Content-Length": str(len(head)),
                               "Content-Type": "application/octet-stream"},
                      timeout=TIMEOUT)
    if r.status_code != 200:
        return r.status_code, r.json().get("error", r.text)
    n = int(r.headers["Inference-Header-Content-Length"])
    resp = json.loads(r.content[:n])
    result, off = {}, n
    for o in resp["outputs"]:
        size = o["parameters"]["binary_data_size"]
        result[o["name"]] = (o["datatype"], o["shape"], r.content[off:off + size])
        off += size
    assert off == len(r.content)
    return 200, result


def outputs_by_name(response):
    assert response.status_code == 200, response.text
    return {o["name"]: o for o in response.json()["outputs"]}


def random_inputs(suffix, shape, rng):
    """Two inputs in a range where the model's arithmetic is well defined."""
    if suffix == "bool":
        return rng.random(shape) < 0.5, rng.random(shape) < 0.5
    if suffix in ("fp16", "fp32", "fp64", "bf16"):
        # Multiples of 1/4 below 64: exact in every float type, bf16 included.
        return (rng.integers(-256, 256, shape) / 4.0).astype(np.float32), \
            (rng.integers(-256, 256, shape) / 4.0).astype(np.float32)
    info = np.iinfo(ADD_SUB[suffix][1])
    return rng.integers(info.min, info.max, shape, endpoint=True), \
        rng.integers(info.min, info.max, shape, endpoint=True)


def torch_add_sub(model, suffix, a, b):
    if suffix == "bf16":
        ta, tb = torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16()
        return [t.float().numpy() for t in model(ta, tb)]
    dtype = ADD_SUB[suffix][1]
    ta, tb = torch.from_numpy(a.astype(dtype)), torch.from_numpy(b.astype(dtype))
    return [t.numpy() for t in model(ta, tb)]


# ---------------------------------------------------------------- add_sub, every type

def test_add_sub_every_type_json_and_binary(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["add_sub_" + t for t in ADD_SUB]))
    rng = np.random.default_rng(7)
    for suffix, (datatype, np_dtype) in ADD_SUB.items():
        name = "add_sub_" + suffix
        model = load_model(torch_models, name)
        for batch in range(1, 9):
            a, b = random_inputs(suffix, (batch, 4), rng)
            want = torch_add_sub(model, suffix, a, b)
            if suffix == "bf16":
                wire = [bf16_bits(a), bf16_bits(b)]
            else:
                wire = [a.astype(np_dtype), b.astype(np_dtype)]

            status, got = infer_binary(server.url, name,
                                       [("INPUT0", datatype, (batch, 4), wire[0]),
                                        ("INPUT1", datatype, (batch, 4), wire[1])],
                                       ["OUTPUT0", "OUTPUT1"])
            assert status == 200, (name, batch, got)
            for out, expected in zip(["OUTPUT0", "OUTPUT1"], want):
                dt, shape, raw = got[out]
                assert dt == datatype and shape == [batch, 4], (name, out, dt, shape)
                if suffix == "bf16":
                    values = bf16_values(np.frombuffer(raw, dtype=np.uint16))
                else:
                    values = np.frombuffer(raw, dtype=np_dtype)
                np.testing.assert_array_equal(values.reshape(batch, 4), expected,
                                              err_msg="%s %s batch %d" % (name, out, batch))

            if datatype in ("FP16", "BF16"):
                continue  # JSON can not carry these (protocol-facts §1.6)
            r = infer_json(server.url, name,
                           [("INPUT0", datatype, (batch, 4), wire[0].ravel().tolist()),
                            ("INPUT1", datatype, (batch, 4), wire[1].ravel().tolist())])
            outs = outputs_by_name(r)
            for out, expected in zip(["OUTPUT0", "OUTPUT1"], want):
                assert outs[out]["datatype"] == datatype
                assert outs[out]["shape"] == [batch, 4]
                values = np.array(outs[out]["data"], dtype=np_dtype).reshape(batch, 4)
                np.testing.assert_array_equal(values, expected,
                                              err_msg="%s %s batch %d (JSON)" % (name, out, batch))


def test_add_sub_seed_log_lines(serve, torch_models, tmp_path):
    repo = make_repo(tmp_path, torch_models, ["add_sub_fp32"])
    server = serve(repo)
    log = server.log()
    path = os.path.join(str(repo), "add_sub_fp32", "1", "model.pt")
    assert "Loaded PyTorch model from: %s on device: cpu" % path in log, log
    assert "PyTorch instance initialized on device: cpu" in log, log
    assert "Inference Mode is enabled for model instance" in log, log


# ---------------------------------------------------------------- other models

def test_mlp_matches_torch(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["mlp"]))
    model = load_model(torch_models, "mlp")
    rng = np.random.default_rng(3)
    for batch in (1, 5, 8):
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        want = model(torch.from_numpy(x)).detach().numpy()
        status, got = infer_binary(server.url, "mlp", [("INPUT__0", "FP32", (batch, 16), x)],
                                   ["OUTPUT__0"])
        assert status == 200, got
        dt, shape, raw = got["OUTPUT__0"]
        assert dt == "FP32" and shape == [batch, 4]
        values = np.frombuffer(raw, dtype=np.float32).reshape(batch, 4)
        np.testing.assert_allclose(values, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values.sum(axis=1), np.ones(batch), rtol=1e-5)  # softmax


def test_mlp_concurrent_requests(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["mlp"]))
    model = load_model(torch_models, "mlp")
    rng = np.random.default_rng(11)
    xs = [rng.standard_normal((1 + i % 4, 16)).astype(np.float32) for i in range(32)]
    wants = [model(torch.from_numpy(x)).detach().numpy() for x in xs]
    errors = []

    def worker(indices):
        for i in indices:
            status, got = infer_binary(server.url, "mlp",
                                       [("INPUT__0", "FP32", xs[i].shape, xs[i])], ["OUTPUT__0"])
            if status != 200:
                errors.append(got)
                continue
            values = np.frombuffer(got["OUTPUT__0"][2], dtype=np.float32).reshape(wants[i].shape)
            if not np.allclose(values, wants[i], rtol=1e-5, atol=1e-6):
                errors.append("request %d: %s != %s" % (i, values, wants[i]))

    threads = [threading.Thread(target=worker, args=(range(k, 32, 4),)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_strings_json_and_binary(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["strings"]))
    words = ["hello", "World", "", "mIxEd 123"]
    want = [w.upper() for w in words]
    assert load_model(torch_models, "strings")(words) == want
    outs = outputs_by_name(infer_json(server.url, "strings",
                                      [("INPUT0", "BYTES", [len(words)], words)]))
    assert outs["OUTPUT0"]["datatype"] == "BYTES"
    assert outs["OUTPUT0"]["shape"] == [len(words)]
    assert outs["OUTPUT0"]["data"] == want
    status, got = infer_binary(server.url, "strings", [("INPUT0", "BYTES", [2], ["ab", "c d"])],
                               ["OUTPUT0"])
    assert status == 200, got
    assert got["OUTPUT0"][1] == [2]
    assert deserialize_bytes(got["OUTPUT0"][2]) == [b"AB", b"C D"]


def test_strings_in_more_than_one_dimension(serve, torch_models, tmp_path):
    """TYPE_STRING of any rank: the model gets one flat List[str] (row-major)
    and the strings it returns get the configuration's shape back, its one
    open dimension deduced, or an input's shape where more are open."""
    server = serve(make_repo(tmp_path, torch_models,
                             ["strings_batched", "strings_grid", "strings_drop"]))
    rows = [["a", "bb", ""], ["Dd", "e f", "g"]]
    flat = [s for r in rows for s in r]
    want = load_model(torch_models, "strings_batched")(flat)
    outs = outputs_by_name(infer_json(server.url, "strings_batched",
                                      [("INPUT0", "BYTES", [2, 3], flat)]))
    assert outs["OUTPUT0"]["shape"] == [2, 3]
    assert outs["OUTPUT0"]["data"] == want
    status, got = infer_binary(server.url, "strings_batched",
                               [("INPUT0", "BYTES", [2, 3], flat)], ["OUTPUT0"])
    assert status == 200, got
    assert got["OUTPUT0"][1] == [2, 3]
    assert deserialize_bytes(got["OUTPUT0"][2]) == [w.encode() for w in want]

    # A and B hold six strings each in different shapes: each [-1, -1]
    # output takes the shape of the input at its own position
    a = [["x", "y", "z"], ["u", "v", "w"]]
    b = [["1", "2"], ["3", "4"], ["5", "6"]]
    c = [["p", "q"], ["r", "s"]]
    ua, same_b, same_c = load_model(torch_models, "strings_grid")(sum(a, []), sum(b, []),
                                                                   sum(c, []))
    outs = outputs_by_name(infer_json(server.url, "strings_grid",
                                      [("A", "BYTES", [2, 3], sum(a, [])),
                                       ("B", "BYTES", [3, 2], sum(b, [])),
                                       ("C", "BYTES", [2, 2], sum(c, []))]))
    assert (outs["UA"]["shape"], outs["UA"]["data"]) == ([2, 3], ua)
    assert (outs["SAME_B"]["shape"], outs["SAME_B"]["data"]) == ([3, 2], same_b)
    assert (outs["SAME_C"]["shape"], outs["SAME_C"]["data"]) == ([2, 2], same_c)

    # 5 strings back for 2 rows: no [2, n] holds them, and the error says so
    r = infer_json(server.url, "strings_drop", [("INPUT0", "BYTES", [2, 3], flat)])
    assert r.status_code == 400, r.text
    assert "'OUTPUT0' of model 'strings_drop' returned 5 strings, which do not fill its " \
           "shape [2,-1]" in r.json()["error"], r.text
    assert len(load_model(torch_models, "strings_drop")(flat)) == 5


def test_forward_argument_names(serve, torch_models, tmp_path):
    # The config lists y before x; forward(x, y) = 2x + y.
    server = serve(make_repo(tmp_path, torch_models, ["fwd_names"]))
    x, y = [1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]
    outs = outputs_by_name(infer_json(server.url, "fwd_names",
                                      [("y", "FP32", [1, 4], y), ("x", "FP32", [1, 4], x)]))
    assert outs["OUTPUT__0"]["data"] == [12.0, 24.0, 36.0, 48.0]


def test_dict_tuple_and_list_outputs(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models,
                                    ["dict_out", "tuple_out", "list_out"]))
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 0.5, -1.0]
    outs = outputs_by_name(infer_json(server.url, "dict_out",
                                      [("INPUT__0", "FP32", [1, 4], a),
                                       ("INPUT__1", "FP32", [1, 4], b)]))
    assert outs["sum"]["data"] == [3.0, 4.0, 3.5, 3.0]
    assert outs["prod"]["data"] == [2.0, 4.0, 1.5, -4.0]

    ia, ib = [5, 6, 7, 8], [1, 2, 3, 10]
    outs = outputs_by_name(infer_json(server.url, "tuple_out",
                                      [("INPUT__0", "INT32", [1, 4], ia),
                                       ("INPUT__1", "INT32", [1, 4], ib)]))
    assert outs["OUT__0"]["data"] == [6, 8, 10, 18]    # index 0 = a + b
    assert outs["OUT__1"]["data"] == [4, 4, 4, -2]     # index 1 = a - b

    outs = outputs_by_name(infer_json(server.url, "list_out",
                                      [("INPUT__0", "INT64", [2, 3], [1, 2, 3, -1, 0, 5])]))
    assert outs["OUTPUT__0"]["data"] == [2, 4, 6, -2, 0, 10]
    assert outs["OUTPUT__1"]["data"] == [3, 6, 9, -3, 0, 15]
    assert outs["OUTPUT__1"]["shape"] == [2, 3]


def test_dict_input(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["dict_in"]))
    outs = outputs_by_name(infer_json(server.url, "dict_in",
                                      [("a", "FP32", [1, 2], [1.0, 2.0]),
                                       ("b", "FP32", [1, 2], [3.0, 4.0])]))
    assert outs["OUTPUT__0"]["data"] == [31.0, 42.0]  # a + 10 b


def test_no_batch_and_reshape(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["no_batch", "reshaped"]))
    x = [float(i) for i in range(15)]
    outs = outputs_by_name(infer_json(server.url, "no_batch", [("INPUT__0", "FP32", [5, 3], x)]))
    assert outs["OUTPUT__0"]["shape"] == [5, 3]
    assert outs["OUTPUT__0"]["data"] == [3 * v for v in x]
    assert outs["OUTPUT__1"]["shape"] == [5]
    assert outs["OUTPUT__1"]["data"] == [sum(x[3 * i:3 * i + 3]) for i in range(5)]

    # The model sees [B, 6] (reshape) and takes a running sum along it; the
    # client sends and receives [B, 2, 3].
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    outs = outputs_by_name(infer_json(server.url, "reshaped",
                                      [("INPUT__0", "FP32", [2, 2, 3], x)]))
    assert outs["OUTPUT__0"]["shape"] == [2, 2, 3]
    assert outs["OUTPUT__0"]["data"] == [1.0, 3.0, 6.0, 10.0, 15.0, 21.0,
                                         1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_thread_and_inference_mode_parameters(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["threads"]))
    log = server.log()
    assert "Inference Mode is disabled for model instance" in log, log
    x = np.eye(8, dtype=np.float32)[[0, 7]]
    outs = outputs_by_name(infer_json(server.url, "threads",
                                      [("INPUT__0", "FP32", [2, 8], x.ravel().tolist())]))
    # W[i][j] = (8 i + j) / 64; rows 0 and 7 of W.
    want = [j / 64.0 for j in range(8)] + [(56 + j) / 64.0 for j in range(8)]
    np.testing.assert_allclose(outs["OUTPUT__0"]["data"], want, rtol=1e-6)


def test_output_aliasing_an_input(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["identity"]))
    for batch in (1, 3):
        x = np.arange(batch * 4, dtype=np.int32).reshape(batch, 4) * 7 - 5
        status, got = infer_binary(server.url, "identity", [("INPUT__0", "INT32", x.shape, x)],
                                   ["OUTPUT__0", "OUTPUT__1"])
        assert status == 200, got
        np.testing.assert_array_equal(np.frombuffer(got["OUTPUT__0"][2], np.int32).reshape(x.shape), x)
        np.testing.assert_array_equal(
            np.frombuffer(got["OUTPUT__1"][2], np.int32).reshape(batch, 3), x[:, 1:])


def test_optional_input(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["optional_in"]),
                          "--exit-on-error=false", expect_ready=False)
    index = requests.post(server.url + "/v2/repository/index", timeout=TIMEOUT).json()
    assert index[0]["state"] == "READY", index
    x, bias = [1.0, 2.0, 3.0, 4.0], [0.5, 0.5, -1.0, 10.0]
    outs = outputs_by_name(infer_json(server.url, "optional_in",
                                      [("INPUT__0", "FP32", [1, 4], x),
                                       ("BIAS__1", "FP32", [1, 4], bias)]))
    assert outs["OUTPUT__0"]["data"] == [1.5, 2.5, 2.0, 14.0]
    outs = outputs_by_name(infer_json(server.url, "optional_in",
                                      [("INPUT__0", "FP32", [1, 4], x)]))
    assert outs["OUTPUT__0"]["data"] == x


def test_output_errors_reach_the_client(serve, torch_models, tmp_path):
    server = serve(make_repo(tmp_path, torch_models, ["wrong_dtype", "scalar_out", "mlp"]))
    r = infer_json(server.url, "wrong_dtype", [("INPUT__0", "FP32", [1, 4], [1.0, 2.0, 3.0, 4.0])])
    assert r.status_code == 400, r.text
    assert r.json()["error"] == ("configuration expects datatype TYPE_INT32 for output "
                                 "'OUTPUT__0', model provides TYPE_FP32")
    r = infer_json(server.url, "scalar_out", [("INPUT__0", "FP32", [3], [1.0, 2.0, 3.0])])
    assert r.status_code == 400, r.text
    assert "OUTPUT__0" in r.json()["error"] and "scalar" in r.json()["error"]
    # The server goes on serving.
    r = infer_json(server.url, "mlp", [("INPUT__0", "FP32", [1, 16], [0.0] * 16)])
    assert r.status_code == 200, r.text


def test_broken_models_are_unavailable_with_reason(serve, torch_models, tmp_path):
    repo = make_repo(tmp_path, torch_models, ["bad_file", "wrong_arity", "add_sub_fp32"])
    server = serve(repo, "--exit-on-error=false", expect_ready=False)
    r = requests.post(server.url + "/v2/repository/index", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    index = {m["name"]: m for m in r.json()}
    assert index["add_sub_fp32"]["state"] == "READY"
    bad = index["bad_file"]
    assert bad["state"] == "UNAVAILABLE"
    assert "PytorchStreamReader" in bad["reason"], bad
    assert os.path.join("bad_file", "1", "model.pt") in bad["reason"], bad
    arity = index["wrong_arity"]
    assert arity["state"] == "UNAVAILABLE"
    assert ("unable to load model 'wrong_arity', configuration expects 1 inputs, "
            "model provides 2") in arity["reason"], arity
    # The good model serves.
    r = infer_json(server.url, "add_sub_fp32", [("INPUT0", "FP32", [1, 4], [1.0] * 4),
                                                ("INPUT1", "FP32", [1, 4], [2.0] * 4)])
    assert outputs_by_name(r)["OUTPUT1"]["data"] == [-1.0] * 4


def test_missing_model_file(serve, torch_models, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(torch_models, "mlp"), str(repo / "mlp"))
    os.remove(str(repo / "mlp" / "1" / "model.pt"))
    shutil.copytree(os.path.join(torch_models, "strings"), str(repo / "strings"))
    server = serve(repo, "--exit-on-error=false", expect_ready=False)
    index = {m["name"]: m for m in requests.post(server.url + "/v2/repository/index",
                                                 timeout=TIMEOUT).json()}
    assert index["mlp"]["state"] == "UNAVAILABLE"
    assert os.path.join("mlp", "1", "model.pt") in index["mlp"]["reason"], index["mlp"]
    assert index["strings"]["state"] == "READY"


def test_kind_gpu_falls_back_to_cpu(serve, torch_models, tmp_path):
    """KIND_GPU and an explicit "mps" accelerator where neither is usable
    load on the CPU and say so. The server sees no CUDA device even on a
    GPU host (CUDA_VISIBLE_DEVICES empty): there a CUDA build is tested as
    it runs on a node without GPUs, which is where a fallback happens."""
    repo = tmp_path / "repo"
    for name, extra in (("gpu_model", ""),
                        ("mps_model", 'optimization { execution_accelerators { '
                                      'gpu_execution_accelerator [ { name: "mps" } ] } }')):
        shutil.copytree(os.path.join(torch_models, "add_sub_fp32"), str(repo / name))
        cfg_path = repo / name / "config.pbtxt"
        cfg = cfg_path.read_text().replace('name: "add_sub_fp32"', 'name: "%s"' % name)
        cfg = cfg.replace("kind: KIND_CPU", "kind: KIND_GPU") + extra + "\n"
        cfg_path.write_text(cfg)
    server = serve(repo, env={"CUDA_VISIBLE_DEVICES": ""})
    log = server.log()
    assert "falling back to cpu" in log, log
    # Why, as the LibTorch the server was built against (this torch's) has it.
    why = ("LibTorch has CUDA support but no CUDA device is available"
           if torch.backends.cuda.is_built() else
           "this LibTorch was built without CUDA and MPS support")
    assert "KIND_GPU asked for a GPU but %s; falling back to cpu" % why in log, log
    assert "gpu_execution_accelerator 'mps' is not usable" in log, log
    assert "PyTorch instance initialized on device: cpu" in log, log
    # The first request of a model goes to its instance thread; once its
    # batch time is known, the KIND_GPU instance on the CPU may be lent to
    # the HTTP loop (run to completion, backend.h lendable), so later ones
    # take that path: every answer must be right either way.
    for name in ("gpu_model", "mps_model"):
        for i in range(20):
            r = infer_json(server.url, name, [("INPUT0", "FP32", [1, 4], [float(i)] * 4),
                                              ("INPUT1", "FP32", [1, 4], [0.5] * 4)])
            assert outputs_by_name(r)["OUTPUT0"]["data"] == [i + 0.5] * 4


@pytest.mark.parametrize("inference_mode", ["true", "false"])
def test_a_model_that_changes_its_own_tensors(serve, torch_models, tmp_path, inference_mode):
    """`stateful` updates a buffer and a weight it shares with a submodule in
    place on each call. Under InferenceMode ptserve makes the module's tensors
    inference tensors (torch_bridge.h); the answers must still be torch's own,
    call after call, in both modes."""
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(torch_models, "stateful"), str(repo / "stateful"))
    with open(str(repo / "stateful" / "config.pbtxt"), "a") as f:
        f.write('parameters: { key: "INFERENCE_MODE" value: { string_value: "%s" } }\n'
                % inference_mode)
    server = serve(repo)
    model = load_model(torch_models, "stateful")
    x = [1.0, -2.0]
    for _ in range(3):
        with torch.inference_mode():
            want = model(torch.tensor([x])).flatten().tolist()
        r = infer_json(server.url, "stateful", [("INPUT__0", "FP32", [1, 2], x)])
        assert r.status_code == 200, r.text
        assert outputs_by_name(r)["OUTPUT__0"]["data"] == want


class _ConvProbe(torch.nn.Module):
    """A convolution, and whether its input arrived in channels-last order."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(46)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        flag = 1.0 if x.is_contiguous(memory_format=torch.channels_last) else 0.0
        return self.conv(x), torch.full([x.size(0), 1], flag)


CONV_PROBE_CONFIG = """name: "%s"
backend: "pytorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4, 8, 8 ] },
         { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU } ]
%s
"""


def test_input_memory_format_channels_last(serve, tmp_path):
    """INPUT_MEMORY_FORMAT channels_last (ptserve's own parameter) hands a
    4-D input to the model in NHWC order, the model's own probe says so,
    and the answer is torch's for the same values in NCHW; without it (or
    with 'contiguous') the input comes as it always did. Another value
    fails the model's load, naming the parameter."""
    module = torch.jit.script(_ConvProbe().eval())
    repo = tmp_path / "repo"
    param = 'parameters { key: "INPUT_MEMORY_FORMAT" value { string_value: "%s" } }'
    for name, extra in (("nhwc", param % "channels_last"), ("nchw", param % "contiguous"),
                        ("plain", ""), ("bogus", param % "nhwc")):
        (repo / name / "1").mkdir(parents=True)
        module.save(str(repo / name / "1" / "model.pt"))
        (repo / name / "config.pbtxt").write_text(CONV_PROBE_CONFIG % (name, extra))
    server = serve(repo, "--exit-on-error=false", expect_ready=False)
    x = np.random.default_rng(46).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want, _ = module(torch.from_numpy(x))
    for name, flag in (("nhwc", 1.0), ("nchw", 0.0), ("plain", 0.0)):
        status, out = infer_binary(server.url, name, [("INPUT__0", "FP32", x.shape, x)],
                                   ["OUTPUT__0", "OUTPUT__1"])
        assert status == 200, (name, out)
        got = np.frombuffer(out["OUTPUT__0"][2], dtype=np.float32).reshape(out["OUTPUT__0"][1])
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        assert np.frombuffer(out["OUTPUT__1"][2], dtype=np.float32).tolist() == [flag] * 2, name
    index = {m["name"]: m for m in requests.post(server.url + "/v2/repository/index",
                                                 timeout=TIMEOUT).json()}
    assert index["bogus"]["state"] == "UNAVAILABLE", index["bogus"]
    assert "parameter INPUT_MEMORY_FORMAT is 'nhwc'" in index["bogus"]["reason"], index["bogus"]


def test_cuda_graph_padding_settings_are_checked(serve, tmp_path):
    """CUDA_GRAPH_PAD_BATCHES without graphs to pad into, a malformed value,
    and a graph_lower_bound outside 1..its graph's batch size each fail the
    load with a reason naming them; the same settings done right load on a
    CPU instance (graphs are a CUDA matter: it runs eagerly, with a warning)
    and answer as torch does. The padding itself is tested on the GPU host
    (tests/gpu/test_cuda.py)."""
    module = torch.jit.script(_ConvProbe().eval())
    sizes = 'parameters { key: "CUDA_GRAPH_BATCH_SIZES" value { string_value: "2,4" } }\n'
    pad = 'parameters { key: "CUDA_GRAPH_PAD_BATCHES" value { string_value: "%s" } }\n'
    bound = ("optimization { cuda { graphs: true graph_spec [ { batch_size: 4 "
             "graph_lower_bound { batch_size: %d } } ] } }\n")
    models = {"padded": sizes + pad % "true", "bounded": bound % 3,
              "nographs": pad % "true", "notbool": sizes + pad % "sometimes",
              "toolow": bound % 0, "toohigh": bound % 5}
    repo = tmp_path / "repo"
    for name, extra in models.items():
        (repo / name / "1").mkdir(parents=True)
        module.save(str(repo / name / "1" / "model.pt"))
        (repo / name / "config.pbtxt").write_text(CONV_PROBE_CONFIG % (name, extra))
    server = serve(repo, "--exit-on-error=false", expect_ready=False)
    index = {m["name"]: m for m in requests.post(server.url + "/v2/repository/index",
                                                 timeout=TIMEOUT).json()}
    for name, words in (("nographs", "CUDA_GRAPH_PAD_BATCHES needs CUDA graphs"),
                        ("notbool", "CUDA_GRAPH_PAD_BATCHES"),
                        ("toolow", "graph_lower_bound batch_size of 0; it must be in 1..4"),
                        ("toohigh", "graph_lower_bound batch_size of 5; it must be in 1..4")):
        assert index[name]["state"] == "UNAVAILABLE", index[name]
        assert words in index[name]["reason"], index[name]
    x = np.random.default_rng(47).standard_normal((3, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want, _ = module(torch.from_numpy(x))
    for name in ("padded", "bounded"):
        assert index[name]["state"] == "READY", index[name]
        status, out = infer_binary(server.url, name, [("INPUT__0", "FP32", x.shape, x)],
                                   ["OUTPUT__0"])
        assert status == 200, (name, out)
        got = np.frombuffer(out["OUTPUT__0"][2], dtype=np.float32).reshape(out["OUTPUT__0"][1])
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert "CUDA graphs were asked for, but the instance runs on cpu" in server.log(), server.log()
