"""Writes TorchScript models that misbehave, for the model-fault tests.

    .venv/bin/python tests/models/gen_fault_models.py OUTDIR

Each model gets OUTDIR/<name>/config.pbtxt and OUTDIR/<name>/1/model.pt:

  raises        forward raises RuntimeError("input sum must be non-negative")
                when the input sums below zero; otherwise returns 2 * x
  asserts       torch._assert fails with "values must stay below 100" when
                an element is >= 100; otherwise returns x + 1
  index_error   indexes element 10 of a 4-element row: every call fails
                inside ATen (IndexError)
  truncated     model.pt cut in half: torch.jit.load throws at load time
  not_a_model   model.pt is a text file: torch.jit.load throws at load time

Scripted with the interpreter's torch (the project venv's in CI).
"""
import os
import sys

import torch


class Raises(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() < 0):
            raise RuntimeError("input sum must be non-negative")
        return x * 2


class Asserts(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._assert(bool(x.max() < 100), "values must stay below 100")
        return x + 1


class IndexError_(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 10:11] + x


CONFIG = """name: "%s"
backend: "pytorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def write(outdir, name, module=None, raw=None):
    d = os.path.join(outdir, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(CONFIG % name)
    path = os.path.join(d, "1", "model.pt")
    if module is not None:
        torch.jit.save(torch.jit.script(module), path)
    else:
        with open(path, "wb") as f:
            f.write(raw)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    out = argv[1]
    write(out, "raises", Raises())
    write(out, "asserts", Asserts())
    write(out, "index_error", IndexError_())
    good = os.path.join(out, "raises", "1", "model.pt")
    with open(good, "rb") as f:
        data = f.read()
    write(out, "truncated", raw=data[: len(data) // 2])
    write(out, "not_a_model", raw=b"this is not a TorchScript archive\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
