"""AOTInductor packages (platform "torch_aoti", model.pt2), end to end.

The packages are exported at test time by tests/models/gen_aoti_models.py
(examples/export_aoti.py underneath), with the example's package
(examples/export_aoti.py, from examples/gen_models.py's class), and cached in
tests/e2e/.cache by the hash of those three scripts and the torch version, so
the ASan pass and later runs reuse them. Every expected answer comes from the
very nn.Module a package was exported from (gen_aoti_models.build: same
class, same seed), run eagerly by torch in this process, or for the example
from its TorchScript twin; expected configs and messages follow
docs/pytorch-backend.md ("AOTInductor packages").
"""
import concurrent.futures as cf
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import requests
import torch

from conftest import ROOT, assert_clean_exit, copy_example, models_python
from sched_util import DELAY_ENV, batch_sizes, model_stats

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import gen_aoti_models as gen  # noqa: E402

TIMEOUT = 60
GENERATORS = [os.path.join(ROOT, "tests", "models", "gen_aoti_models.py"),
              os.path.join(ROOT, "examples", "export_aoti.py"),
              os.path.join(ROOT, "examples", "gen_models.py")]  # the example's class
EXAMPLE_PACKAGE = os.path.join("examples", "mlp_classifier_aoti", "1", "model.pt2")
NP = {"FP32": np.float32, "INT64": np.int64}


# ---------------------------------------------------------------- packages

@functools.cache
def runner_hands_on_errors():
    """Whether this torch's AOTInductor runner hands on a package's own
    error message (it asks the package through AOTInductorGetLastError, in
    its header; 2.13 does, 2.11 does not). Without it a failed run is only
    "run_func_(...) API call failed", and the package's words ("input_handles
    [0]: ...") go to its stderr, which is the server's log."""
    header = os.path.join(os.path.dirname(torch.__file__), "include", "torch", "csrc",
                          "inductor", "aoti_runner", "model_container_runner.h")
    with open(header) as f:
        return "AOTInductorGetLastError" in f.read()


# What ptserve says of a failed run when the runner does not hand on the
# package's reason (torch_bridge.cc, explain_package_failure).
SILENT_RUNNER = ("run_func_(...) API call failed (this LibTorch's AOTInductor runner does not "
                 "hand on the package's reason; the package wrote it to the server's log)")


@pytest.fixture(scope="session")
def packages():
    """Directory of <name>.pt2 for every gen_aoti_models package, and of
    the example's package (examples/export_aoti.py) under EXAMPLE_PACKAGE,
    exported once per generator version."""
    out = os.path.join(ROOT, "tests", "e2e", ".cache", "aoti_packages")
    h = hashlib.sha256(torch.__version__.encode())
    for path in GENERATORS:
        with open(path, "rb") as f:
            h.update(f.read())
    stamp = os.path.join(out, ".hash")
    fresh = os.path.exists(stamp) and open(stamp).read() == h.hexdigest() and all(
        os.path.exists(os.path.join(out, n + ".pt2")) for n in gen.PACKAGES) and \
        os.path.exists(os.path.join(out, EXAMPLE_PACKAGE))
    if not fresh:
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([models_python(), GENERATORS[0], out], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([models_python(), GENERATORS[1], os.path.join(out, "examples")],
                       check=True, stdout=subprocess.DEVNULL)
        with open(stamp, "w") as f:
            f.write(h.hexdigest())
    return out


def edit_metadata(src, dst, edit):
    """Copies a package, passing the metadata of its model to edit(dict)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("_metadata.json"):
                meta = json.loads(data)
                edit(meta)
                data = json.dumps(meta).encode()
            zout.writestr(info, data)


def tensors(kind, items):
    return "%s [\n%s\n]" % (kind, ",\n".join(
        '  { name: "%s" data_type: %s dims: [ %s ] }' % (n, t, ", ".join(map(str, d)))
        for n, t, d in items))


def add_model(repo, name, package, max_batch_size=0, inputs=(), outputs=(), extra="",
              kind="KIND_CPU"):
    """repo/<name>: config.pbtxt (platform torch_aoti; inputs and outputs
    only when given) and 1/model.pt2 (a copy of `package`, or these bytes)."""
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    text = ['name: "%s"' % name, 'platform: "torch_aoti"', "max_batch_size: %d" % max_batch_size]
    if inputs:
        text.append(tensors("input", inputs))
    if outputs:
        text.append(tensors("output", outputs))
    if kind:
        text.append("instance_group [ { count: 1, kind: %s } ]" % kind)
    text.append(extra)
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write("\n".join(text) + "\n")
    dst = os.path.join(repo, name, "1", "model.pt2")
    if isinstance(package, bytes):
        with open(dst, "wb") as f:
            f.write(package)
    else:
        shutil.copyfile(package, dst)


@pytest.fixture
def serve(start_server):
    """start_server, plus: the server still runs at the end, stops cleanly
    and logged no sanitizer report (the ASan build runs these tests too)."""
    servers = []

    def start(*args, **kwargs):
        s = start_server(*args, **kwargs)
        servers.append(s)
        return s

    yield start
    for s in servers:
        assert_clean_exit(s)


def infer(server, model, inputs, outputs):
    """Binary request; inputs [(name, numpy array)]. Returns (status,
    {output: numpy array}) or (status, error message)."""
    header, chunks = {"inputs": [], "outputs": []}, []
    for name, a in inputs:
        dt = {np.float32: "FP32", np.int64: "INT64"}[a.dtype.type]
        raw = np.ascontiguousarray(a).tobytes()
        header["inputs"].append({"name": name, "datatype": dt, "shape": list(a.shape),
                                 "parameters": {"binary_data_size": len(raw)}})
        chunks.append(raw)
    header["outputs"] = [{"name": o, "parameters": {"binary_data": True}} for o in outputs]
    head = json.dumps(header).encode()
    r = requests.post("%s/v2/models/%s/infer" % (server.url, model), data=head + b"".join(chunks),
                      headers={"Inference-Header-Content-Length": str(len(head))}, timeout=TIMEOUT)
    if r.status_code != 200:
        return r.status_code, r.json()["error"]
    n = int(r.headers["Inference-Header-Content-Length"])
    meta, body, off, out = json.loads(r.content[:n]), r.content[n:], 0, {}
    for o in meta["outputs"]:
        size = o["parameters"]["binary_data_size"]
        out[o["name"]] = np.frombuffer(body[off:off + size], NP[o["datatype"]]).reshape(o["shape"])
        off += size
    return 200, out


def eager(name, *args, **kwargs):
    """The package's module, run by torch here."""
    module = gen.build(name)[0]
    with torch.inference_mode():
        return module(*args, **kwargs)


def index(server):
    r = requests.post(server.url + "/v2/repository/index", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return {m["name"]: m for m in r.json()}


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- serving

def test_single_tensor_by_position_and_by_forward_names(serve, packages, tmp_path):
    repo = str(tmp_path / "repo")
    pkg = os.path.join(packages, "single.pt2")
    add_model(repo, "ordinal", pkg, 0, [("INPUT__0", "TYPE_FP32", [2, 4])],
              [("OUTPUT__0", "TYPE_FP32", [2, 3])])
    add_model(repo, "forward", pkg, 0, [("ARGS[0]", "TYPE_FP32", [2, 4])],
              [("RESULT", "TYPE_FP32", [2, 3])])
    server = serve(repo)
    log = server.log()
    assert ("Loaded AOTInductor package from: %s on device: cpu"
            % os.path.join(repo, "ordinal", "1", "model.pt2")) in log, log
    for seed in range(3):
        x = rand(2, 4, seed=seed)
        want = eager("single", torch.from_numpy(x)).numpy()
        for model, i, o in (("ordinal", "INPUT__0", "OUTPUT__0"), ("forward", "ARGS[0]", "RESULT")):
            status, got = infer(server, model, [(i, x)], [o])
            assert status == 200, got
            np.testing.assert_allclose(got[o], want, rtol=1e-5, atol=1e-6)


def test_tuple_outputs_bound_by_name_and_position(serve, packages, tmp_path):
    # Inputs listed b first, one by forward name and one by position; two
    # of the three results, in the other order.
    repo = str(tmp_path / "repo")
    add_model(repo, "tuple", os.path.join(packages, "tuple.pt2"), 0,
              [("ARGS[1]", "TYPE_INT64", [3, 4]), ("INPUT__0", "TYPE_INT64", [3, 4])],
              [("RESULT[2]", "TYPE_INT64", [3, 4]), ("OUT__0", "TYPE_INT64", [3, 4])])
    server = serve(repo)
    rng = np.random.default_rng(5)
    for _ in range(3):
        a = rng.integers(-1000, 1000, (3, 4))
        b = rng.integers(-1000, 1000, (3, 4))
        want = eager("tuple", torch.from_numpy(a), torch.from_numpy(b))
        status, got = infer(server, "tuple", [("INPUT__0", a), ("ARGS[1]", b)],
                            ["RESULT[2]", "OUT__0"])
        assert status == 200, got
        np.testing.assert_array_equal(got["RESULT[2]"], want[2].numpy())
        np.testing.assert_array_equal(got["OUT__0"], want[0].numpy())


def test_nested_dict_outputs_with_a_dynamic_batch(serve, packages, tmp_path):
    repo = str(tmp_path / "repo")
    add_model(repo, "dict_out", os.path.join(packages, "dict_out.pt2"), 8,
              [("ARGS[0]", "TYPE_FP32", [6])],
              [("RESULT[logits]", "TYPE_FP32", [3]), ("RESULT[stats][0]", "TYPE_FP32", [1]),
               ("RESULT[stats][1]", "TYPE_FP32", [1])], extra="dynamic_batching { }")
    server = serve(repo)
    names = ["RESULT[logits]", "RESULT[stats][0]", "RESULT[stats][1]"]
    for batch in range(1, 9):
        x = rand(batch, 6, seed=batch)
        want = eager("dict_out", torch.from_numpy(x))
        status, got = infer(server, "dict_out", [("ARGS[0]", x)], names)
        assert status == 200, (batch, got)
        for name, w in zip(names, [want["logits"], want["stats"][0], want["stats"][1]]):
            assert got[name].shape == tuple(w.shape), (name, got[name].shape)
            np.testing.assert_allclose(got[name], w.numpy(), rtol=1e-5, atol=1e-6)


def test_dict_argument_and_keyword_argument(serve, packages, tmp_path):
    repo = str(tmp_path / "repo")
    add_model(repo, "kwargs", os.path.join(packages, "kwargs.pt2"), 0,
              [("KWARGS[scale]", "TYPE_FP32", [2, 3]), ("ARGS[1][bias]", "TYPE_FP32", [2, 3]),
               ("ARGS[0]", "TYPE_FP32", [2, 5])],
              [("RESULT", "TYPE_FP32", [2, 3])])
    server = serve(repo)
    x, bias, scale = rand(2, 5, seed=1), rand(2, 3, seed=2), rand(2, 3, seed=3)
    want = eager("kwargs", torch.from_numpy(x), {"bias": torch.from_numpy(bias)},
                 scale=torch.from_numpy(scale)).numpy()
    status, got = infer(server, "kwargs", [("ARGS[0]", x), ("ARGS[1][bias]", bias),
                                           ("KWARGS[scale]", scale)], ["RESULT"])
    assert status == 200, got
    np.testing.assert_allclose(got["RESULT"], want, rtol=1e-5, atol=1e-6)
    # JSON works too.
    r = requests.post(server.url + "/v2/models/kwargs/infer", timeout=TIMEOUT, json={"inputs": [
        {"name": n, "datatype": "FP32", "shape": list(a.shape), "data": a.ravel().tolist()}
        for n, a in (("ARGS[0]", x), ("ARGS[1][bias]", bias), ("KWARGS[scale]", scale))]})
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    assert out["name"] == "RESULT" and out["shape"] == [2, 3]
    np.testing.assert_allclose(np.array(out["data"], np.float32).reshape(2, 3), want, rtol=1e-5,
                               atol=1e-6)


def test_dynamic_batching_preferred_sizes_instances_and_warmup(serve, packages, tmp_path):
    repo = str(tmp_path / "repo")
    add_model(repo, "mlp", os.path.join(packages, "mlp.pt2"), 8,
              [("INPUT__0", "TYPE_FP32", [16])], [("OUTPUT__0", "TYPE_FP32", [4])], kind=None,
              extra='instance_group [ { count: 2, kind: KIND_CPU } ]\n'
                    'dynamic_batching { preferred_batch_size: [ 4, 8 ] }\n'
                    'model_warmup [ { name: "w" batch_size: 8 count: 2 inputs { key: "INPUT__0" '
                    'value: { data_type: TYPE_FP32 dims: [ 16 ] random_data: true } } } ]')
    # The scheduler holds its queue until 8 requests wait: they must go as
    # one batch of the preferred size 8.
    server = serve(repo, env={DELAY_ENV: "8"})
    log = server.log()
    for inst in ("mlp_0_0", "mlp_0_1"):
        assert "instance '%s': warmup 'w' ran 2 time(s) at batch size 8" % inst in log, log
    assert log.count("the package ran at load") == 1, log
    xs = [rand(1, 16, seed=i) for i in range(8)]
    with cf.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda x: infer(server, "mlp", [("INPUT__0", x)], ["OUTPUT__0"]), xs))
    for x, (status, got) in zip(xs, results):
        assert status == 200, got
        np.testing.assert_allclose(got["OUTPUT__0"], eager("mlp", torch.from_numpy(x)).numpy(),
                                   rtol=1e-5, atol=1e-6)
    st = model_stats(server, "mlp")
    assert st["inference_count"] == 8 and st["execution_count"] == 1, st
    assert batch_sizes(st) == {8: 1}, st
    # Then any size up to max_batch_size, each its own request.
    for batch in (1, 3, 8):
        x = rand(batch, 16, seed=100 + batch)
        status, got = infer(server, "mlp", [("INPUT__0", x)], ["OUTPUT__0"])
        assert status == 200, got
        np.testing.assert_allclose(got["OUTPUT__0"], eager("mlp", torch.from_numpy(x)).numpy(),
                                   rtol=1e-5, atol=1e-6)
    status, err = infer(server, "mlp", [("INPUT__0", rand(9, 16))], ["OUTPUT__0"])
    assert status == 400 and "batch-size must be <= 8" in err, err


def test_auto_complete_from_the_package(serve, packages, tmp_path):
    # Only max_batch_size: the platform comes from model.pt2, the instance
    # kind from the package's device, inputs and outputs from its call
    # specification with types and dims from its "ptserve.io" record.
    repo = tmp_path / "repo"
    (repo / "auto" / "1").mkdir(parents=True)
    shutil.copyfile(os.path.join(packages, "dict_out.pt2"), str(repo / "auto" / "1" / "model.pt2"))
    (repo / "auto" / "config.pbtxt").write_text("max_batch_size: 8\n")
    server = serve(str(repo))
    cfg = requests.get(server.url + "/v2/models/auto/config", timeout=TIMEOUT).json()
    module = gen.build("dict_out")[0]
    n_in, n_out = module.lin.in_features, module.lin.out_features  # 6 and 3
    assert cfg["platform"] == "torch_aoti" and cfg["backend"] == "pytorch", cfg
    assert cfg["default_model_filename"] == "model.pt2", cfg
    assert cfg["instance_group"][0]["kind"] == "KIND_CPU", cfg
    assert [(i["name"], i["data_type"], i["dims"]) for i in cfg["input"]] == [
        ("ARGS[0]", "TYPE_FP32", [n_in])], cfg
    assert [(o["name"], o["data_type"], o["dims"]) for o in cfg["output"]] == [
        ("RESULT[logits]", "TYPE_FP32", [n_out]), ("RESULT[stats][0]", "TYPE_FP32", [1]),
        ("RESULT[stats][1]", "TYPE_FP32", [1])], cfg
    meta = requests.get(server.url + "/v2/models/auto", timeout=TIMEOUT).json()
    assert meta["inputs"] == [{"name": "ARGS[0]", "datatype": "FP32", "shape": [-1, n_in]}], meta
    x = rand(3, n_in, seed=9)
    want = eager("dict_out", torch.from_numpy(x))
    status, got = infer(server, "auto", [("ARGS[0]", x)], ["RESULT[logits]", "RESULT[stats][1]"])
    assert status == 200, got
    np.testing.assert_allclose(got["RESULT[logits]"], want["logits"].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["RESULT[stats][1]"], want["stats"][1].numpy(), rtol=1e-6)


@pytest.mark.parametrize("flags", [("--disable-auto-complete-config",),
                                   ("--strict-model-config=true",),
                                   ("--strict-model-config=false",
                                    "--disable-auto-complete-config")])
def test_auto_complete_disabled(serve, packages, tmp_path, flags):
    """tritonserver's --disable-auto-complete-config (and the deprecated
    --strict-model-config=true, which it overrides when false): the
    package's inputs and outputs are not filled in, and a model without a
    config file fails, each in its own words; a model whose config lists
    them still serves, with the core's defaults (platform from model.pt2)."""
    repo = tmp_path / "repo"
    (repo / "auto" / "1").mkdir(parents=True)
    shutil.copyfile(os.path.join(packages, "dict_out.pt2"), str(repo / "auto" / "1" / "model.pt2"))
    (repo / "auto" / "config.pbtxt").write_text("max_batch_size: 8\n")
    (repo / "no_config" / "1").mkdir(parents=True)
    shutil.copyfile(os.path.join(packages, "dict_out.pt2"),
                    str(repo / "no_config" / "1" / "model.pt2"))
    module = gen.build("dict_out")[0]
    n_in, n_out = module.lin.in_features, module.lin.out_features
    (repo / "listed" / "1").mkdir(parents=True)
    shutil.copyfile(os.path.join(packages, "dict_out.pt2"),
                    str(repo / "listed" / "1" / "model.pt2"))
    (repo / "listed" / "config.pbtxt").write_text(
        "max_batch_size: 8\n" + tensors("input", [("ARGS[0]", "TYPE_FP32", [n_in])]) + "\n" +
        tensors("output", [("RESULT[logits]", "TYPE_FP32", [n_out])]) + "\n")
    server = serve(str(repo), "--exit-on-error=false", *flags, expect_ready=False)
    reasons = {name: m.get("reason", "") for name, m in index(server).items()}
    assert "auto-complete is disabled (--disable-auto-complete-config)" in reasons["auto"], reasons
    assert ("failed to open text file for read no_config/config.pbtxt: No such file or directory"
            in reasons["no_config"]), reasons
    x = rand(2, n_in, seed=4)
    status, got = infer(server, "listed", [("ARGS[0]", x)], ["RESULT[logits]"])
    assert status == 200, got
    np.testing.assert_allclose(got["RESULT[logits]"],
                               eager("dict_out", torch.from_numpy(x))["logits"].numpy(),
                               rtol=1e-5, atol=1e-6)
    if "--strict-model-config=false" in flags:
        assert ("Overriding deprecated '--strict-model-config' from False to True in favor of "
                "'--disable-auto-complete-config'!") in server.log()
    if any(f.startswith("--strict-model-config") for f in flags):
        assert "Warning: '--strict-model-config' has been deprecated!" in server.log()


def test_input_checks_refuse_shapes_the_package_can_not_take(serve, packages, tmp_path):
    # A package without the "ptserve.io" record and a config more permissive
    # than the package (-1 where it has 2): nothing can check at load, so the
    # package's own input checks refuse the request, as a 400 naming the input.
    repo = str(tmp_path / "repo")
    bare = str(tmp_path / "bare.pt2")
    edit_metadata(os.path.join(packages, "single.pt2"), bare, lambda m: m.pop("ptserve.io"))
    add_model(repo, "loose", bare, 0, [("INPUT__0", "TYPE_FP32", [-1, 4])],
              [("OUTPUT__0", "TYPE_FP32", [-1, 3])])
    server = serve(repo)
    status, err = infer(server, "loose", [("INPUT__0", rand(3, 4))], ["OUTPUT__0"])
    refusal = "input_handles[0]: unmatched dim value at 0, expected: 2, but got: 3"
    if runner_hands_on_errors():
        assert status == 400, err
        assert err == ("model 'loose': input 'INPUT__0' does not fit the compiled package: "
                       + refusal), err
    else:
        # The package's words reach only its stderr, the server's log, and
        # the error says so.
        assert status == 500, err
        assert err == "model 'loose': PyTorch execute failure: " + SILENT_RUNNER, err
        assert refusal in server.log()
    x = rand(2, 4, seed=4)
    status, got = infer(server, "loose", [("INPUT__0", x)], ["OUTPUT__0"])
    assert status == 200, got
    np.testing.assert_allclose(got["OUTPUT__0"], eager("single", torch.from_numpy(x)).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_recorded_ranges_refuse_sizes_before_the_package(serve, packages, tmp_path):
    # dict_out records its batch dimension as 1..16 (gen_aoti_models). Served
    # without batching and with a variable first dimension, a request of 17
    # rows is refused by ptserve itself, naming the range, and 16 works.
    repo = str(tmp_path / "repo")
    add_model(repo, "rows", os.path.join(packages, "dict_out.pt2"), 0,
              [("ARGS[0]", "TYPE_FP32", [-1, 6])], [("RESULT[logits]", "TYPE_FP32", [-1, 3])])
    server = serve(repo)
    status, err = infer(server, "rows", [("ARGS[0]", rand(17, 6))], ["RESULT[logits]"])
    assert status == 400, err
    assert err == ("model 'rows': input 'ARGS[0]' has size 17 in dimension 0, but the compiled "
                   "package takes 1 to 16 there"), err
    assert "input_handles" not in server.log()  # the package never saw it
    x = rand(16, 6, seed=16)
    status, got = infer(server, "rows", [("ARGS[0]", x)], ["RESULT[logits]"])
    assert status == 200, got
    np.testing.assert_allclose(got["RESULT[logits]"],
                               eager("dict_out", torch.from_numpy(x))["logits"].numpy(),
                               rtol=1e-5, atol=1e-6)


def test_example_twin_answers_as_the_torchscript_example(serve, packages, tmp_path):
    # examples/models/mlp_classifier_aoti with its committed config, beside
    # its TorchScript twin mlp_classifier (model.pt from examples/gen_models.py,
    # the same class and weights), and the twin once more with input and
    # output left out, as its config's comment offers.
    repo = str(tmp_path / "repo")
    for name in ("mlp_classifier", "mlp_classifier_aoti"):
        copy_example(name, os.path.join(repo, name))
    scratch = str(tmp_path / "examples")  # gen_models.py writes every example's model.pt
    subprocess.run([models_python(), os.path.join(ROOT, "examples", "gen_models.py"), scratch],
                   check=True, stdout=subprocess.DEVNULL)
    # The version folders are the test's to make: a fresh clone has none
    # (git keeps no empty folder), a checkout where `make run` ran has them.
    for name in ("mlp_classifier", "mlp_classifier_aoti"):
        os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    shutil.copyfile(os.path.join(scratch, "mlp_classifier", "1", "model.pt"),
                    os.path.join(repo, "mlp_classifier", "1", "model.pt"))
    shutil.copyfile(os.path.join(packages, EXAMPLE_PACKAGE),
                    os.path.join(repo, "mlp_classifier_aoti", "1", "model.pt2"))
    auto = os.path.join(repo, "mlp_classifier_aoti_auto")
    shutil.copytree(os.path.join(repo, "mlp_classifier_aoti"), auto)
    with open(os.path.join(auto, "config.pbtxt")) as f:
        text = f.read()
    start, end = text.index("input ["), text.index("instance_group")
    with open(os.path.join(auto, "config.pbtxt"), "w") as f:
        f.write(text[:start].replace('"mlp_classifier_aoti"', '"mlp_classifier_aoti_auto"') +
                text[end:])
    server = serve(repo)
    cfg = requests.get(server.url + "/v2/models/mlp_classifier_aoti_auto/config",
                       timeout=TIMEOUT).json()
    assert cfg["platform"] == "torch_aoti" and cfg["max_batch_size"] == 8, cfg
    assert [(i["name"], i["data_type"], i["dims"]) for i in cfg["input"]] == [
        ("ARGS[0]", "TYPE_FP32", [16])], cfg
    assert [(o["name"], o["data_type"], o["dims"]) for o in cfg["output"]] == [
        ("RESULT", "TYPE_FP32", [4])], cfg
    ts = torch.jit.load(os.path.join(repo, "mlp_classifier", "1", "model.pt")).eval()
    for batch in (1, 3, 8):
        x = rand(batch, 16, seed=300 + batch)
        with torch.inference_mode():
            want = ts(torch.from_numpy(x)).numpy()
        answers = {}
        for model, i, o in (("mlp_classifier", "INPUT__0", "OUTPUT__0"),
                            ("mlp_classifier_aoti", "INPUT__0", "OUTPUT__0"),
                            ("mlp_classifier_aoti_auto", "ARGS[0]", "RESULT")):
            status, got = infer(server, model, [(i, x)], [o])
            assert status == 200, (model, got)
            assert got[o].shape == (batch, 4), (model, got[o].shape)
            answers[model] = got[o]
        # float32 softmax probabilities: TorchScript's ATen kernels and the
        # package's generated ones may differ in the last bits.
        for model, got in answers.items():
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=model)
        np.testing.assert_allclose(answers["mlp_classifier_aoti"], answers["mlp_classifier"],
                                   rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- bad packages

def test_bad_packages_fail_their_model_with_a_reason(serve, packages, tmp_path):
    repo = str(tmp_path / "repo")
    single = os.path.join(packages, "single.pt2")
    cuda = str(tmp_path / "cuda.pt2")
    edit_metadata(single, cuda, lambda m: m.update(AOTI_DEVICE_KEY="cuda"))
    bare = str(tmp_path / "bare.pt2")
    edit_metadata(single, bare, lambda m: m.pop("ptserve.io"))
    io_ok = ([("INPUT__0", "TYPE_FP32", [2, 4])], [("OUTPUT__0", "TYPE_FP32", [2, 3])])
    io_batched = ([("INPUT__0", "TYPE_FP32", [4])], [("OUTPUT__0", "TYPE_FP32", [3])])
    add_model(repo, "good", single, 0, *io_ok)
    add_model(repo, "corrupt", b"this is not a zip archive\n" * 16, 0, *io_ok)
    add_model(repo, "wrong_device", cuda, 0, *io_ok)
    if not torch.cuda.is_available():  # a GPU host would try to run the cpu code on cuda
        add_model(repo, "cuda_here", cuda, 0, *io_ok, kind="KIND_GPU")
    add_model(repo, "gpu_kind", single, 0, *io_ok, kind="KIND_GPU")
    add_model(repo, "static_batch", single, 8, *io_batched)
    add_model(repo, "static_batch_bare", bare, 8, *io_batched)
    add_model(repo, "batch_too_big", os.path.join(packages, "dict_out.pt2"), 32,
              [("ARGS[0]", "TYPE_FP32", [6])], [("RESULT[logits]", "TYPE_FP32", [3])])
    add_model(repo, "no_such_name", single, 0, [("image", "TYPE_FP32", [2, 4])], io_ok[1])
    add_model(repo, "bare_no_config_io", bare, 0)
    server = serve(repo, "--exit-on-error=false", expect_ready=False)
    models = index(server)
    assert models["good"]["state"] == "READY", models
    bare_refusal = "input_handles[0]: unmatched dim value at 0, expected: 2, but got: 1"
    want = {
        "corrupt": "failed to read the AOTInductor package '%s'"
                   % os.path.join(repo, "corrupt", "1", "model.pt2"),
        "wrong_device": "the package was compiled for cuda, but instance group 'wrong_device_0' "
                        "is KIND_CPU (cpu); serve it with KIND_GPU",
        "gpu_kind": "the package was compiled for cpu, but instance group 'gpu_kind_0' is "
                    "KIND_GPU (cuda or mps); serve it with KIND_CPU",
        "static_batch": "max_batch_size is 8, but input 'ARGS[0]' of the package has the static "
                        "shape [2,4] (no dynamic first dimension to batch along)",
        "static_batch_bare": "max_batch_size is 8, but the package refused batch size 1: "
                             + ("input 'INPUT__0' does not fit the compiled package: "
                                + bare_refusal if runner_hands_on_errors() else
                                "PyTorch execute failure: " + SILENT_RUNNER),
        "batch_too_big": "max_batch_size is 32, but the package takes batch sizes 1 to 16 (its "
                         "input ARGS[0])",
        "no_such_name": "input 'image' matches no input of the package; its inputs are ARGS[0], "
                        "or by position <name>__0 to <name>__0",
        "bare_no_config_io": "the configuration lists no inputs or outputs, and the package does "
                             "not record their data types and shapes (metadata 'ptserve.io', "
                             "written by examples/export_aoti.py); list them in config.pbtxt: "
                             "inputs ARGS[0]; outputs RESULT",
    }
    if not torch.cuda.is_available():
        want["cuda_here"] = ("the package was compiled for cuda, but this LibTorch was built "
                             "without CUDA, so its instances would run on cpu")
    for name, text in want.items():
        assert models[name]["state"] == "UNAVAILABLE", (name, models[name])
        assert text in models[name]["reason"], (name, models[name]["reason"])
    if not runner_hands_on_errors():  # the package's words: in the log only
        assert bare_refusal in server.log()
    # The good model serves, and the server lives on (checked by `serve`).
    x = rand(2, 4, seed=8)
    status, got = infer(server, "good", [("INPUT__0", x)], ["OUTPUT__0"])
    assert status == 200, got
    np.testing.assert_allclose(got["OUTPUT__0"], eager("single", torch.from_numpy(x)).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_non_tensor_leaves_fail_their_model_by_name(serve, packages, tmp_path):
    # Exported without export_package (which refuses them): none_out returns
    # (tensor, None), int_arg takes (tensor, int). Their call specifications
    # show a leaf like any other; the load check's run finds what it is.
    repo = str(tmp_path / "repo")
    x_in = [("INPUT__0", "TYPE_FP32", [2, 4])]
    out0 = [("OUTPUT__0", "TYPE_FP32", [2, 3])]
    add_model(repo, "good", os.path.join(packages, "single.pt2"), 0, x_in, out0)
    add_model(repo, "returns_none", os.path.join(packages, "none_out.pt2"), 0, x_in, out0)
    add_model(repo, "takes_int", os.path.join(packages, "int_arg.pt2"), 0,
              x_in + [("ARGS[1]", "TYPE_INT64", [1])], out0)
    server = serve(repo, "--exit-on-error=false", expect_ready=False)
    models = index(server)
    assert models["good"]["state"] == "READY", models
    want = {
        "returns_none": "unable to load model 'returns_none': output RESULT[1] (<name>__1) of the "
                        "package is None, not a tensor; only tensors are supported at the "
                        "leaves: export a forward() that returns tensors only",
        "takes_int": "unable to load model 'takes_int': the package takes 1 input tensor(s), but "
                     "its call specification has 2 inputs (ARGS[0], ARGS[1]): 1 of them not a "
                     "tensor (a number, string or None that torch.export baked into the "
                     "program); ptserve feeds tensors only: export a forward() whose arguments "
                     "are all tensors",
    }
    for name, text in want.items():
        assert models[name]["state"] == "UNAVAILABLE", (name, models[name])
        assert text in models[name]["reason"], (name, models[name]["reason"])
    x = rand(2, 4, seed=11)
    status, got = infer(server, "good", [("INPUT__0", x)], ["OUTPUT__0"])
    assert status == 200, got
    np.testing.assert_allclose(got["OUTPUT__0"], eager("single", torch.from_numpy(x)).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_more_outputs_than_the_package_returns_fail_the_model(serve, packages, tmp_path):
    # The names are resolved against the call specification at load, before
    # the package runs: an output past the package's last, by position or by
    # forward name, fails its model with the count of what the package has.
    repo = str(tmp_path / "repo")
    single, tup = os.path.join(packages, "single.pt2"), os.path.join(packages, "tuple.pt2")
    f32 = lambda n: (n, "TYPE_FP32", [2, 3])  # noqa: E731
    i64 = lambda n: (n, "TYPE_INT64", [3, 4])  # noqa: E731
    tuple_in = [i64("INPUT__0"), i64("INPUT__1")]
    add_model(repo, "good", tup, 0, tuple_in, [i64("OUTPUT__0"), i64("OUTPUT__2")])
    add_model(repo, "one_more", single, 0, [("INPUT__0", "TYPE_FP32", [2, 4])],
              [f32("OUTPUT__0"), f32("OUTPUT__1")])
    add_model(repo, "four_of_three", tup, 0, tuple_in,
              [i64("OUTPUT__%d" % k) for k in range(4)])
    add_model(repo, "by_name", tup, 0, tuple_in, [i64("RESULT[0]"), i64("RESULT[3]")])
    server = serve(repo, "--exit-on-error=false", expect_ready=False)
    models = index(server)
    assert models["good"]["state"] == "READY", models
    want = {
        "one_more": "unable to load model 'one_more': output 'OUTPUT__1' names position 1, but "
                    "the package has 1 outputs",
        "four_of_three": "unable to load model 'four_of_three': output 'OUTPUT__3' names "
                         "position 3, but the package has 3 outputs",
        "by_name": "unable to load model 'by_name': output 'RESULT[3]' matches no output of the "
                   "package; its outputs are RESULT[0], RESULT[1], RESULT[2]",
    }
    for name, text in want.items():
        assert models[name]["state"] == "UNAVAILABLE", (name, models[name])
        assert text in models[name]["reason"], (name, models[name]["reason"])
    rng = np.random.default_rng(12)
    a, b = rng.integers(-9, 9, (3, 4)), rng.integers(-9, 9, (3, 4))
    want_out = eager("tuple", torch.from_numpy(a), torch.from_numpy(b))
    status, got = infer(server, "good", [("INPUT__0", a), ("INPUT__1", b)],
                        ["OUTPUT__0", "OUTPUT__2"])
    assert status == 200, got
    np.testing.assert_array_equal(got["OUTPUT__0"], want_out[0].numpy())
    np.testing.assert_array_equal(got["OUTPUT__2"], want_out[2].numpy())


def test_default_model_filename_names_the_package(serve, packages, tmp_path):
    # The package stored as 1/mlp.pt2 and named by default_model_filename,
    # once with platform torch_aoti and once with only backend pytorch (the
    # .pt2 name makes it torch_aoti). As in Triton, a file name other than
    # model.pt2 does not choose the backend by itself.
    repo = tmp_path / "repo"
    io = ('max_batch_size: 8\n'
          'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
          'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')
    paths = {}
    for name, which in (("named", 'platform: "torch_aoti"'),
                        ("named_backend", 'backend: "pytorch"')):
        (repo / name / "1").mkdir(parents=True)
        paths[name] = str(repo / name / "1" / "mlp.pt2")
        shutil.copyfile(os.path.join(packages, "mlp.pt2"), paths[name])
        (repo / name / "config.pbtxt").write_text(
            '%s\ndefault_model_filename: "mlp.pt2"\n%s' % (which, io))
    server = serve(str(repo))
    for name, path in paths.items():
        assert "Loaded AOTInductor package from: %s on device: cpu" % path in server.log()
        cfg = requests.get(server.url + "/v2/models/%s/config" % name, timeout=TIMEOUT).json()
        assert cfg["platform"] == "torch_aoti" and cfg["backend"] == "pytorch", cfg
        assert cfg["default_model_filename"] == "mlp.pt2", cfg
        for batch in (1, 5, 8):
            x = rand(batch, 16, seed=200 + batch)
            status, got = infer(server, name, [("INPUT__0", x)], ["OUTPUT__0"])
            assert status == 200, got
            np.testing.assert_allclose(got["OUTPUT__0"],
                                       eager("mlp", torch.from_numpy(x)).numpy(),
                                       rtol=1e-5, atol=1e-6)


def test_a_range_that_starts_at_2_is_padded_from_batch_1(serve, packages, tmp_path):
    """A package exported as PyTorch's documentation shows a dynamic batch
    (Dim("batch", min=1, max=8), an example batch of 2) compiles a range
    that starts at 2: run as it is, it refuses batch 1 ("dim value is too
    small ... expected it to be >= 2"), which PyTorch in process runs. The
    server finds the start at load, pads smaller batches with zero rows and
    returns only the real rows, and says so once per model; every batch
    size from 1 to max_batch_size answers what torch computes eagerly."""
    repo = str(tmp_path / "repo")
    add_model(repo, "docs_batch", os.path.join(packages, "docs_batch.pt2"), 8,
              [("INPUT__0", "TYPE_FP32", [16])], [("OUTPUT__0", "TYPE_FP32", [4])],
              kind="")
    with open(os.path.join(repo, "docs_batch", "config.pbtxt"), "a") as f:
        f.write("instance_group [ { count: 2, kind: KIND_CPU } ]\n")
    s = serve(repo)
    for b in range(1, 9):
        x = rand(b, 16, seed=b)
        status, out = infer(s, "docs_batch", [("INPUT__0", x)], ["OUTPUT__0"])
        assert status == 200, out
        want = eager("docs_batch", torch.from_numpy(x)).numpy()
        assert out["OUTPUT__0"].shape == (b, 4)
        np.testing.assert_allclose(out["OUTPUT__0"], want, rtol=1e-5, atol=1e-6)
    warned = [line for line in s.log().splitlines()
              if "model 'docs_batch': the package's compiled batch range starts at 2" in line]
    assert len(warned) == 1, s.log()[-3000:]
    assert "padded with zero rows up to 2" in warned[0]
