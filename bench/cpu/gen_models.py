"""Writes the model repository of the CPU benchmark (bench/cpu/run.py).

    .venv/bin/python bench/cpu/gen_models.py OUTDIR

Models (config.pbtxt + 1/model.pt each, scripted with this interpreter's torch
so the LibTorch ptserve links can load them):

  mlp          a 16 -> 4 MLP: softmax(Linear(16, 4)(x)), FP32 [16] -> FP32 [4];
               max_batch_size 8, one CPU instance, no dynamic batching
  add_sub      OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, FP32 [16];
               max_batch_size 8, one CPU instance
  mlp_dyn      the same model.pt as mlp, with dynamic_batching {}
  deep         a batch-friendly model: 24 x (Linear(16, 16) + ReLU), FP32 [16] ->
               FP32 [16]. Its time is LibTorch's per-operator cost (48 small
               ops), nearly the same for 8 rows as for 1, so batching pays;
               max_batch_size 8, one CPU instance
  deep_dyn     the same model.pt as deep, with dynamic_batching {}

Weights come from torch.manual_seed(0), so every run serves the same models.
"""
import os
import shutil
import sys
import tempfile

import torch

CONFIG = """name: "{name}"
backend: "pytorch"
max_batch_size: 8
input [
{inputs}
]
output [
{outputs}
]
instance_group [ {{ count: 1, kind: KIND_CPU }} ]
{extra}"""

TENSOR = """  {{
    name: "{name}"
    data_type: TYPE_FP32
    dims: [ {dim} ]
  }}"""


class Mlp16to4(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=1)


class AddSub(torch.nn.Module):
    def forward(self, a, b):
        return a + b, a - b


class Deep(torch.nn.Module):
    def __init__(self, layers=24):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 16) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def tensors(names, dim):
    return ",\n".join(TENSOR.format(name=n, dim=dim) for n in names)


def write(repo, name, module_path, inputs, outputs, dim, extra=""):
    vdir = os.path.join(repo, name, "1")
    os.makedirs(vdir, exist_ok=True)
    shutil.copyfile(module_path, os.path.join(vdir, "model.pt"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(name=name, inputs=tensors(inputs, dim),
                              outputs=tensors(outputs, dim_out(name, dim)), extra=extra))
    print("wrote", os.path.join(repo, name))


def dim_out(name, dim):
    return 4 if name.startswith("mlp") else dim


def script(module, path):
    torch.jit.script(module.eval()).save(path)
    return path


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    repo = argv[1]
    with tempfile.TemporaryDirectory() as scratch:
        generate(repo, scratch)
    return 0


def generate(repo, scratch):
    torch.manual_seed(0)
    mlp = script(Mlp16to4(), os.path.join(scratch, "mlp.pt"))
    add_sub = script(AddSub(), os.path.join(scratch, "add_sub.pt"))
    deep = script(Deep(), os.path.join(scratch, "deep.pt"))
    dyn = "dynamic_batching { }\n"
    write(repo, "mlp", mlp, ["INPUT0"], ["OUTPUT0"], 16)
    write(repo, "mlp_dyn", mlp, ["INPUT0"], ["OUTPUT0"], 16, dyn)
    write(repo, "add_sub", add_sub, ["INPUT0", "INPUT1"], ["OUTPUT0", "OUTPUT1"], 16)
    write(repo, "deep", deep, ["INPUT0"], ["OUTPUT0"], 16)
    write(repo, "deep_dyn", deep, ["INPUT0"], ["OUTPUT0"], 16, dyn)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
