#!/usr/bin/env python3
"""Exports the AOTInductor packages (model.pt2) of ptserve's tests.

    .venv/bin/python tests/models/gen_aoti_models.py OUTDIR [NAME ...]

writes OUTDIR/<name>.pt2 for each package below (or the named ones), with
examples/export_aoti.py's export_package, on the CPU; the RAW ones, whose
call specifications have non-tensor leaves that export_package refuses, with
torch.export and aoti_compile_and_package directly (no "ptserve.io" record);
and "docs_batch" exactly as PyTorch's documentation of torch.export shows a
dynamic batch: Dim("batch", min=1, max=8) and an example batch of 2, which
compiles a range that starts at 2 (ptserve pads smaller batches).
The tests build their repositories from these files with configs of their
own (good and bad ones).

build(name) gives the very module a package was exported from (fixed seed,
so the same weights in every process) and example inputs: the tests run it
eagerly with torch to get every expected answer. Exporting compiles C++
(about 15 s a package, more for the first), so tests/e2e caches the files
by the hash of this script, export_aoti.py and examples/gen_models.py.
"""
import os
import sys
from typing import Dict

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from export_aoti import export_package  # noqa: E402


class Single(torch.nn.Module):
    """One tensor in, one out: RESULT = tanh(Linear(4, 3)(x)), static [2, 4]."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.tanh(self.lin(x))


class Tuple(torch.nn.Module):
    """INT64 [3, 4] pair in, a tuple of three out (exact arithmetic)."""

    def forward(self, a, b):
        return a + b, a * b, torch.maximum(a, b) - 2 * b


class DictOut(torch.nn.Module):
    """A nested dict result, dynamic batch (1..16):
    {"logits": Linear(6, 3)(x), "stats": (row mean, row max)}."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 3)

    def forward(self, x):
        return {"logits": self.lin(x),
                "stats": (x.mean(dim=1, keepdim=True), x.amax(dim=1, keepdim=True))}


class Kwargs(torch.nn.Module):
    """A dict argument and a keyword-only argument, static [2, 5] / [2, 3]:
    ARGS[0], ARGS[1][bias], KWARGS[scale] -> RESULT."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 3)

    def forward(self, x, extra: Dict[str, torch.Tensor], *, scale):
        return self.lin(x) * scale + extra["bias"]


class Mlp(torch.nn.Module):
    """16 -> 32 (ReLU) -> 4 softmax, dynamic batch (1..64): the batching one."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)


class NoneOut(torch.nn.Module):
    """(tanh(Linear(4, 3)(x)), None), static [2, 4]: the call specification
    has a second output leaf, which the package returns as no tensor."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.tanh(self.lin(x)), None


class IntArg(torch.nn.Module):
    """Linear(4, 3)(x) * n with an int n, static [2, 4]: torch.export bakes
    n (3) into the program, but the call specification keeps its leaf, so
    the spec names two inputs and the package takes one tensor."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, n: int):
        return self.lin(x) * n


def _ints(*shape):
    return torch.randint(-50, 50, shape, dtype=torch.int64)


# name -> (seed, module class, example args, example kwargs, batch_max)
PACKAGES = {
    "single": (1, Single, lambda: (torch.randn(2, 4),), {}, None),
    "tuple": (2, Tuple, lambda: (_ints(3, 4), _ints(3, 4)), {}, None),
    "dict_out": (3, DictOut, lambda: (torch.randn(2, 6),), {}, 16),
    "kwargs": (4, Kwargs, lambda: (torch.randn(2, 5), {"bias": torch.randn(2, 3)}),
               {"scale": torch.randn(2, 3)}, None),
    "mlp": (5, Mlp, lambda: (torch.randn(2, 16),), {}, 64),
    "none_out": (6, NoneOut, lambda: (torch.randn(2, 4),), {}, None),
    "int_arg": (7, IntArg, lambda: (torch.randn(2, 4), 3), {}, None),
    "docs_batch": (8, Mlp, lambda: (torch.randn(2, 16),), {}, 8),
}
# Exported by torch.export and aoti_compile_and_package directly, without
# the "ptserve.io" record: export_package refuses their non-tensor leaves.
RAW = {"none_out", "int_arg"}


def build(name):
    """(module, args, kwargs) of a package: the module with its weights."""
    seed, cls, args, kwargs, _ = PACKAGES[name]
    torch.manual_seed(seed)
    module = cls().eval()
    return module, args(), kwargs


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: %s OUTDIR [NAME ...]\n" % argv[0])
        return 2
    names = argv[2:] or list(PACKAGES)
    for name in names:
        module, args, kwargs = build(name)
        path = os.path.join(argv[1], name + ".pt2")
        if name == "docs_batch":
            # PyTorch's own recipe (torch.export docs, "Expressing
            # Dynamism"), nothing of export_package's.
            os.makedirs(argv[1], exist_ok=True)
            batch = torch.export.Dim("batch", min=1, max=PACKAGES[name][4])
            with torch.no_grad():
                ep = torch.export.export(module, args, dynamic_shapes={"x": {0: batch}})
                torch._inductor.aoti_compile_and_package(ep, package_path=path)
        elif name in RAW:
            os.makedirs(argv[1], exist_ok=True)
            with torch.no_grad():
                ep = torch.export.export(module, args, kwargs)
                torch._inductor.aoti_compile_and_package(ep, package_path=path)
        else:
            export_package(module, args, kwargs, path=path, batch_max=PACKAGES[name][4])
        print("wrote", path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
