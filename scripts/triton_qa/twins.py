"""TorchScript twins of the models tritonserver's QA suites name.

Triton's QA (qa/L0_*) drives models made by its own generators: ONNX
identity models, Python-backend models, "identity"-backend nops, and the
examples' ONNX "simple". ptserve serves TorchScript, and so does Triton's
PyTorch backend, so each of those becomes a twin here: the *same*
config.pbtxt that NVIDIA's generator writes (its own code, imported from the
fetched qa/common), with the platform set to pytorch_libtorch, beside a
model.pt that computes what the original computes (identity, or the
examples' add/sub). Both servers then read one repository.

    twins.py QA_DIR EXAMPLES_DIR OUT_DIR

QA_DIR is a checkout of the server repository's qa/ (for common/,
python_models/, custom_models/ and L0_lifecycle/), EXAMPLES_DIR its docs/examples/model_repository. OUT_DIR
gets one repository per set (see REPOS at the bottom).
"""
import argparse
import importlib
import os
import re
import shutil
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch

TYPES = {"TYPE_STRING": "List[str]"}  # every other type is a Tensor
_made = []  # the model dirs twinned so far


def _io(config_text, kind):
    """(name, data_type) of each input or output block of a config."""
    out = []
    for block in re.findall(kind + r"\s*\[(.*?)\n\]", config_text, re.S):
        for m in re.finditer(r'name:\s*"([^"]+)"\s*data_type:\s*(\w+)', block):
            out.append((m.group(1), m.group(2)))
    return out


def _twin_source(inputs, outputs, body):
    """Python source of a scriptable module whose forward() takes the
    config's inputs by name (Triton's FORWARD_ARGUMENT convention) and
    returns the outputs in config order (its STRICT_CONFIG_ORDERING)."""
    args = ", ".join(f"{n}: {TYPES.get(t, 'Tensor')}" for n, t in inputs)
    rets = [TYPES.get(t, "Tensor") for _, t in outputs]
    ret_type = rets[0] if len(rets) == 1 else f"Tuple[{', '.join(rets)}]"
    return (
        "from typing import List, Tuple\nimport torch\nfrom torch import Tensor\n\n"
        "def _busy(n: int) -> Tensor:\n"
        "    x = torch.ones(256, 256) / 256\n"
        "    for _ in range(n):\n"
        "        x = torch.tanh(x @ x)\n"
        "    return (x.sum() * 0).to(torch.int32)\n\n"
        "class Twin(torch.nn.Module):\n"
        f"    def forward(self, {args}) -> {ret_type}:\n"
        f"        return {body}\n"
    )


def write_twin(model_dir, body_of, scratch, versions=None):
    """Rewrites model_dir/config.pbtxt for pytorch_libtorch and writes
    <version>/model.pt for each of `versions` (default: the version
    folders there, or 1). body_of(inputs, outputs) gives forward()'s return
    expression; a dict {version: body_of} gives each version its own."""
    cfg_path = os.path.join(model_dir, "config.pbtxt")
    with open(cfg_path) as f:
        text = f.read()
    text = re.sub(r'^\s*(platform|backend):\s*"[^"]*"\s*$', "", text, flags=re.M)
    # after the name, or first where the config has none (python_models/add_sub)
    text = re.sub(r"(^name:[^\n]*\n)", r'\1platform: "pytorch_libtorch"\n', text,
                  count=1, flags=re.M) if re.search(r"^name:", text, re.M) else \
        'platform: "pytorch_libtorch"\n' + text
    with open(cfg_path, "w") as f:
        f.write(text)
    inputs, outputs = _io(text, "input"), _io(text, "output")
    versions = versions or [d for d in os.listdir(model_dir) if d.isdigit()] or ["1"]
    for v in versions:
        fn = body_of[v] if isinstance(body_of, dict) else body_of
        src = _twin_source(inputs, outputs, fn(inputs, outputs))
        _made.append(model_dir)  # a module name of its own, even for a re-twin
        name = "twin_%d_%s" % (len(_made), re.sub(r"\W", "_", os.path.basename(model_dir)))
        with open(os.path.join(scratch, name + ".py"), "w") as f:
            f.write(src)
        mod = importlib.import_module(name)
        vdir = os.path.join(model_dir, v)
        os.makedirs(vdir, exist_ok=True)
        for f in os.listdir(vdir):  # the original's model.onnx / model.py
            os.remove(os.path.join(vdir, f))
        torch.jit.script(mod.Twin()).save(os.path.join(vdir, "model.pt"))


def identity(inputs, outputs):
    return ", ".join(n for n, _ in inputs[: len(outputs)])


def add_sub(inputs, outputs):
    a, b = inputs[0][0], inputs[1][0]
    return f"{a} + {b}, {a} - {b}"


def sub_add(inputs, outputs):
    """Versions 2 and 3 of qa_model_repository's models: the outputs swapped
    (gen_qa_models.py's swap=True)."""
    a, b = inputs[0][0], inputs[1][0]
    return f"{a} - {b}, {a} + {b}"


def delayed_identity(iters):
    """identity, except that a lone zero (the sample of DELAY_WARMUP) first
    spins `iters` rounds of _busy. The stand-in for the identity backend's
    creation_delay_sec: with the warmup in its config the model takes that
    long to load, in both servers, as warmup runs before a model is READY;
    requests (never a single zero in these tests) are answered at once."""
    def body(inputs, outputs):
        x = inputs[0][0]
        return (f"{x} + _busy({iters}).to({x}.dtype) "
                f"if {x}.numel() == 1 and bool(({x} == 0).all()) else {x}")
    return body


DELAY_WARMUP = ('model_warmup [{ name: "creation_delay" batch_size: 1 inputs { key: "%s" '
                'value { data_type: %s dims: [ 1 ] zero_data: true } } }]\n')


def slow_add_sub(iters):
    """add_sub after a chain of bounded matmuls that takes seconds: the
    stand-in for execute_delayed_model's time.sleep(15), which TorchScript
    cannot express. Its result adds exactly zero."""
    def body(inputs, outputs):
        a, b = inputs[0][0], inputs[1][0]
        return (f"{a} + {b} + _busy({iters}), {a} - {b}")
    return body


def busy_seconds_per_iter():
    """One iteration of _busy with torch's default threads (as a server's
    instance gets on this machine), measured here."""
    import time
    x = torch.rand(256, 256)
    t = time.perf_counter()
    for _ in range(20):
        x = torch.tanh(x @ x)
    return (time.perf_counter() - t) / 20


def identity_repository(qa_common, out):
    """qa_identity_model_repository and its ensembles, as
    gen_qa_identity_models.py's main() makes them for --onnx --libtorch
    --ensemble, by NVIDIA's functions; then the ONNX and nop members are
    twinned (its libtorch ones are TorchScript already)."""
    sys.path.insert(0, qa_common)
    import test_util
    gen = importlib.import_module("gen_qa_identity_models")
    gen.tu, gen.torch, gen.nn = test_util, torch, torch.nn
    gen.FLAGS = SimpleNamespace(
        onnx=True, libtorch=True, ensemble=True, openvino=False, tensorrt=False,
        tensorrt_compat=False, tensorrt_big=False, tensorrt_shape_io=False)
    gen.create_onnx_modelfile = lambda *a, **k: None  # twinned below
    s = np.dtype(object)
    for dtype, shape, io_cnt in [(bool, [-1], 1), (np.float32, [-1], 1),
                                 (np.float32, [-1], 3), (np.float16, [-1, -1], 1),
                                 (np.float16, [-1, -1], 3), (s, [-1], 1),
                                 (s, [-1, -1], 3)]:
        gen.create_models(out, dtype, shape, io_cnt=io_cnt)
    return out


def lifecycle_repositories(qa, out, scratch):
    """What qa/L0_lifecycle/test.sh copies from, under out/:
    qa_model_repository's add/sub models of the four frameworks it names,
    float32 and int32, and qa_ensemble_model_repository/qa_model_repository's
    simple_* ensembles over them, made by gen_qa_models.py's and
    gen_ensemble_model_utils.py's own config functions as their main() does
    (version 1 adds, 2 and 3 swap the outputs; float32 keeps versions
    [1, 3], int32 all). The libtorch models are its own TorchScript; the
    others twinned, their outputs named OUTPUT__<i>, which is what
    infer_util.py asks of a pytorch_libtorch model. And the suite's own
    folders with ../custom_models/custom_zero_1_float32 and
    ../python_models/add_sub, twinned, in the layout test.sh reads them."""
    gen = importlib.import_module("gen_qa_models")
    gen.tu, gen.torch, gen.nn = importlib.import_module("test_util"), torch, torch.nn
    gen.FLAGS = SimpleNamespace(onnx_opset=0)
    repo = os.path.join(out, "qa_model_repository")
    ens = os.path.join(out, "qa_ensemble_model_repository", "qa_model_repository")
    io = ((16,), (16,), (16,))
    for dt, policy in [(np.float32, ("specific", [1, 3])), (np.int32, ("all", None))]:
        for make in (gen.create_onnx_modelconfig, gen.create_plan_modelconfig,
                     gen.create_openvino_modelconfig, gen.create_libtorch_modelconfig):
            make(repo, 8, 1, *io, dt, dt, dt, 16, policy)
        for v in (1, 2, 3):
            gen.create_libtorch_modelfile(repo, 8, v, *io, dt, dt, dt, swap=v != 1)
    for fw in ("onnx", "plan", "openvino"):
        for t in ("float32", "int32"):
            d = os.path.join(repo, f"{fw}_{t}_{t}_{t}")
            _edit(d, lambda c: re.sub(r'name: "OUTPUT(\d)"', r'name: "OUTPUT__\1"', c))
            write_twin(d, {"1": add_sub, "2": sub_add, "3": sub_add}, scratch, ["1", "2", "3"])
    for fw in ("onnx", "plan", "libtorch"):
        gen.emu.create_ensemble_modelconfig(fw, ens, 8, 1, *io, np.float32, np.float32,
                                            np.float32, 16, ("specific", [1, 3]))
    for m in os.listdir(ens):
        if not m.startswith("simple_"):
            shutil.rmtree(os.path.join(ens, m))
            continue
        for v in ("1", "2", "3"):  # create_ensemble_modelfile's empty versions
            os.makedirs(os.path.join(ens, m, v))
        # the step reads the twinned member's OUTPUT__<i>
        _edit(os.path.join(ens, m), lambda c: re.sub(
            r'(output_map \{\s*key: ")OUTPUT(\d)"', r'\1OUTPUT__\2"', c))

    # creation_delay_sec "10": _busy's rounds timed as the twin runs them,
    # after a warm-up (busy_seconds_per_iter's first rounds run slow, which
    # made this delay about 3 s)
    x = torch.ones(256, 256) / 256
    for n in (5, 100):
        t = time.perf_counter()
        for _ in range(n):
            x = torch.tanh(x @ x)
    iters = max(1, int(10.0 / ((time.perf_counter() - t) / 100)))
    for src, dst, body in [
            ("L0_lifecycle/identity_zero_1_int32", None, delayed_identity(iters)),
            ("L0_lifecycle/ensemble_zero_1_float32", None, None),
            ("custom_models/custom_zero_1_float32", None, delayed_identity(iters)),
            ("python_models/add_sub", None, add_sub)]:
        d = os.path.join(out, src)
        shutil.copytree(os.path.join(qa, src), d)
        if src.endswith("identity_zero_1_int32"):  # infer_zero's PyTorch names
            _edit(d, lambda c: re.sub(r'name: "(INPUT|OUTPUT)(\d+)"', r'name: "\1__\2"', c))
        if body:
            write_twin(d, body, scratch)
    # identity_zero_1_int32 has creation_delay_sec "10" in its config; test.sh
    # gives custom_zero_1_float32 one where a test needs it: run.py appends
    # this file there. The warmup goes last, so that run.py can cut it.
    _edit(os.path.join(out, "L0_lifecycle/identity_zero_1_int32"),
          lambda c: c + DELAY_WARMUP % ("INPUT__0", "TYPE_INT32"))
    with open(os.path.join(out, "custom_models", "creation_delay_10.pbtxt"), "w") as f:
        f.write(DELAY_WARMUP % ("INPUT0", "TYPE_FP32"))


def _edit(model_dir, fn):
    cfg = os.path.join(model_dir, "config.pbtxt")
    with open(cfg) as f:
        text = fn(f.read())
    with open(cfg, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("qa")
    ap.add_argument("examples")
    ap.add_argument("out")
    a = ap.parse_args()
    scratch = os.path.join(a.out, ".twins")
    os.makedirs(scratch, exist_ok=True)
    sys.path.insert(0, scratch)

    def twin_all(repo, body_of, platforms=("onnxruntime_onnx", "identity", "python")):
        for m in sorted(os.listdir(repo)):
            cfg = os.path.join(repo, m, "config.pbtxt")
            if not os.path.isfile(cfg):
                continue
            with open(cfg) as f:
                text = f.read()
            if re.search(r'(platform|backend):\s*"(%s)"' % "|".join(platforms), text):
                write_twin(os.path.join(repo, m), body_of, scratch)

    # qa_identity_model_repository (+ its ensembles): L0_infer_zero
    ident = identity_repository(os.path.join(a.qa, "common"),
                                os.path.join(a.out, "qa_identity_model_repository"))
    twin_all(ident, identity)

    # the examples' repository ("models" of L0_http, L0_grpc and
    # L0_shared_memory): the models the suites use, twinned
    models = os.path.join(a.out, "models")
    for m, body in [("simple", add_sub), ("simple_identity", identity)]:
        shutil.copytree(os.path.join(a.examples, m), os.path.join(models, m))
        write_twin(os.path.join(models, m), body, scratch)

    # L0_http's python_unit_test_models, as its test.sh assembles them
    put = os.path.join(a.out, "python_unit_test_models")
    for m in ["onnx_zero_1_float32", "onnx_zero_1_object", "onnx_zero_1_float16",
              "onnx_zero_3_float32"]:
        shutil.copytree(os.path.join(ident, m), os.path.join(put, m))

    def variant(src, dst, edit):
        shutil.copytree(os.path.join(put if src.startswith("onnx") else models, src),
                        os.path.join(put, dst))
        cfg = os.path.join(put, dst, "config.pbtxt")
        with open(cfg) as f:
            text = f.read().replace(f'"{src}"', f'"{dst}"')
        with open(cfg, "w") as f:
            f.write(edit(text))

    # In the identity repository the twins use the PyTorch names
    # (INPUT__0): qa/common/infer_util.py asks a model's platform and names
    # a pytorch_libtorch model's tensors so. L0_http's copies above keep
    # INPUT0, which http_test.py names.
    for m in sorted(os.listdir(ident)):
        if m.startswith("onnx_"):
            cfg = os.path.join(ident, m, "config.pbtxt")
            with open(cfg) as f:
                text = re.sub(r'name: "(INPUT|OUTPUT)(\d+)"', r'name: "\1__\2"', f.read())
            with open(cfg, "w") as f:
                f.write(text)
            write_twin(os.path.join(ident, m), identity, scratch)

    # sed -i "0,/-1/{s/-1/1/}": the first variable dimension becomes 1
    variant("onnx_zero_1_object", "onnx_zero_1_object_1_element",
            lambda t: t.replace("-1", "1", 1))
    variant("onnx_zero_1_float32", "onnx_zero_1_float32_queue",
            lambda t: t + "dynamic_batching { \n    max_queue_delay_microseconds: 1000000\n"
            "    preferred_batch_size: [ 8 ]\n    default_queue_policy {\n"
            "        max_queue_size: 1\n    }\n}\n")
    variant("simple_identity", "simple_identity", lambda t: t)
    variant("simple_identity", "simple_identity_int64",
            lambda t: t.replace("TYPE_STRING", "TYPE_INT64"))
    # the int64 variant computes the same identity on a tensor
    write_twin(os.path.join(put, "simple_identity_int64"), identity, scratch)
    # L0_shared_memory's python_models/simple (execute_delayed_model, which
    # sleeps 15 s): about 10 s here. Its tests need a request still running
    # 4 s after it started, with a second one queued behind it.
    delayed = os.path.join(a.out, "python_models")
    shutil.copytree(os.path.join(a.qa, "python_models", "execute_delayed_model"),
                    os.path.join(delayed, "simple"))
    iters = max(1, int(10.0 / busy_seconds_per_iter()))
    write_twin(os.path.join(delayed, "simple"), slow_add_sub(iters), scratch)
    # L0_lifecycle's repositories and the folders its test.sh copies from
    lifecycle_repositories(a.qa, os.path.join(a.out, "lifecycle"), scratch)
    shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
