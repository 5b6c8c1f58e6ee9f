#!/usr/bin/env python3
"""Exports a PyTorch model as an AOTInductor package (.pt2) for ptserve.

    .venv/bin/python examples/export_aoti.py [REPOSITORY]

writes the example repository's torch_aoti model,
REPOSITORY/mlp_classifier_aoti/1/model.pt2: the very classifier of
examples/models/mlp_classifier (same class, same seed, same weights),
exported with torch.export and compiled ahead of time by AOTInductor (it
compiles C++, so it takes a minute). `make run` calls it before serving.

As a library, export_package() is what ptserve's tests and benchmarks use:

    from export_aoti import export_package
    export_package(model, (x,), path="model.pt2", batch_max=64)

It does three things a plain torch._inductor.aoti_compile_and_package call
does not:
  * batch_max: the first dimension of every input becomes a dynamic batch
    dimension (torch.export.Dim, 1..batch_max), exported with
    backed_size_oblivious so that batch size 1 is in range too (by default
    torch.export specializes sizes 0 and 1 and the package refuses them),
    and with LibTorch's batch-size-dependent choice of CPU convolution
    backend held off while compiling (it would narrow the range);
  * it records the data type and shape of every flat input and output in
    the package metadata under "ptserve.io" ({"inputs": [{"dtype":
    "TYPE_FP32", "shape": [-1, 16], "min": [1, 16], "max": [64, 16]}],
    "outputs": [...]}, -1 = dynamic, max -1 = unbounded), which ptserve reads
    to complete a config that lists no inputs or outputs, to check one that
    does, and to refuse request shapes out of range before the package sees
    them (AOTInductor keeps no such record itself);
  * device="cuda" compiles for the GPU (the package then runs on KIND_GPU
    instances only).
"""
import contextlib
import inspect
import json
import os
import sys

import torch

IO_KEY = "ptserve.io"

CONFIG_TYPES = {
    torch.bool: "TYPE_BOOL", torch.uint8: "TYPE_UINT8", torch.int8: "TYPE_INT8",
    torch.int16: "TYPE_INT16", torch.int32: "TYPE_INT32", torch.int64: "TYPE_INT64",
    torch.float16: "TYPE_FP16", torch.float32: "TYPE_FP32", torch.float64: "TYPE_FP64",
    torch.bfloat16: "TYPE_BF16",
}


def _bound(v):
    """A range bound as an int; -1 for an unbounded (infinite) one."""
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return -1


def _entry(node, what, ranges=None):
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise ValueError("%s %s is not a tensor (%r); ptserve serves tensors only"
                         % (what, node.name, type(val).__name__))
    if val.dtype not in CONFIG_TYPES:
        raise ValueError("%s %s has dtype %s, which has no config type" % (what, node.name, val.dtype))
    shape = [d if isinstance(d, int) else -1 for d in val.shape]
    entry = {"dtype": CONFIG_TYPES[val.dtype], "shape": shape}
    if ranges is not None:
        # Inputs: the sizes each dynamic dimension may take (the package's
        # own input checks refuse others), so ptserve can refuse them first.
        lo, hi = [], []
        for d in val.shape:
            if isinstance(d, int):
                lo.append(d)
                hi.append(d)
                continue
            vr = ranges.get(d.node.expr)
            lo.append(max(0, _bound(vr.lower)) if vr is not None else 0)
            hi.append(_bound(vr.upper) if vr is not None else -1)
        entry["min"], entry["max"] = lo, hi
    return entry


def io_record(ep):
    """The "ptserve.io" record of an ExportedProgram: its user inputs and
    outputs in flat (pytree) order, the order the package runs on, and the
    range of every input dimension."""
    from torch.export.graph_signature import InputKind, OutputKind
    nodes = {n.name: n for n in ep.graph.nodes}
    inputs = []
    for s in ep.graph_signature.input_specs:
        if s.kind != InputKind.USER_INPUT:
            continue
        if getattr(s.arg, "name", None) not in nodes:
            # torch.export bakes a number or None into the program, but the
            # call specification keeps its place: ptserve could not feed it.
            raise ValueError("input %r is not a tensor; ptserve serves tensors only" % (s.arg,))
        inputs.append(_entry(nodes[s.arg.name], "input", ep.range_constraints))
    outputs = []
    for s in ep.graph_signature.output_specs:
        if s.kind != OutputKind.USER_OUTPUT:
            continue
        if s.arg.name not in nodes:
            raise ValueError("output %r is not a tensor; ptserve serves tensors only" % (s.arg,))
        outputs.append(_entry(nodes[s.arg.name], "output"))
    return {"inputs": inputs, "outputs": outputs}


def _oblivious():
    """Sizes 0 and 1 stay symbolic (LibTorch 2.13; older ones lack it)."""
    try:
        import torch.fx.experimental._config as fx_config
        return fx_config.patch(backed_size_oblivious=True)
    except (ImportError, AttributeError):
        return contextlib.nullcontext()


def export_package(module, args, kwargs=None, path="model.pt2", batch_max=None, device="cpu"):
    """Exports module(*args, **kwargs) to an AOTInductor package at `path`.
    batch_max: make dim 0 of every input tensor one dynamic batch dimension
    of 1..batch_max (None: every shape static). Returns the path."""
    kwargs = dict(kwargs or {})
    module = module.eval().to(device)
    move = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    args = tuple(torch.utils._pytree.tree_map(move, list(args)))
    kwargs = torch.utils._pytree.tree_map(move, kwargs)
    dynamic_shapes = None
    if batch_max:
        batch = torch.export.Dim("batch", min=1, max=batch_max)
        bound = inspect.signature(module.forward).bind(*args, **kwargs).arguments
        dynamic_shapes = {name: torch.utils._pytree.tree_map(
            lambda t: {0: batch} if isinstance(t, torch.Tensor) else None, value)
            for name, value in bound.items()}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    # Inductor re-derives shape facts while compiling: the setting must hold
    # for both steps, or the compiled checks demand a batch of at least 2.
    # LibTorch picks a CPU convolution backend by batch size (oneDNN from 2,
    # NNPACK from 16), and tracing that choice would pin the batch range
    # (to 2..15 for a small CNN); with both off while compiling the output
    # layout does not depend on the batch. At run time LibTorch picks its
    # backends as usual.
    with torch.no_grad(), _oblivious(), torch.backends.mkldnn.flags(enabled=False), \
            torch.backends.nnpack.flags(enabled=False):
        ep = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes)
        metadata = {IO_KEY: json.dumps(io_record(ep))}
        return torch._inductor.aoti_compile_and_package(
            ep, package_path=path, inductor_configs={"aot_inductor.metadata": metadata})


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    repo = argv[1] if len(argv) > 1 else os.path.join(here, "models")
    sys.path.insert(0, here)
    from gen_models import MlpClassifier  # the TorchScript twin's class
    torch.manual_seed(0)  # as gen_models.py: the same weights as mlp_classifier
    model = MlpClassifier()
    path = os.path.join(repo, "mlp_classifier_aoti", "1", "model.pt2")
    export_package(model, (torch.zeros(2, 16),), path=path, batch_max=64)
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
