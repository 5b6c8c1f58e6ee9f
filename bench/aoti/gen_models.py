#!/usr/bin/env python3
"""Writes the models of the AOTInductor benchmark (bench/aoti/run.py).

    .venv/bin/python bench/aoti/gen_models.py OUTDIR [--device cpu|cuda]

Each model twice, from the same module and weights (torch.manual_seed(0)):
<name>_ts/1/model.pt (TorchScript, torch.jit.trace) and <name>_aoti/1/model.pt2
(torch.export + AOTInductor, examples/export_aoti.py, batch dimension dynamic
1..64), with configs that differ only in platform and file. build(name,
device) gives the module for the eager measurement (bench/aoti/eager.py).

  cpu   mlp   64 -> 256 -> 256 -> 10, ReLU, softmax; FP32 [64] -> [10]
        cnn   conv 3->16, pool, conv 16->32, pool, linear: FP32 [3,32,32] -> [10]
        one CPU instance, INTRA_OP_THREAD_COUNT 1, max_batch_size 8
  cuda  resnet50_fp16  torchvision ResNet-50 (random weights), FP16 [3,224,224] -> [1000]
        mlp            as above, FP32
        one GPU instance, max_batch_size 32
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from export_aoti import export_package  # noqa: E402


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 10))

    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.head = torch.nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def resnet50():
    import torchvision
    return torchvision.models.resnet50(weights=None)


# name -> (factory, dtype, dims without the batch dimension, output dims)
MODELS = {
    "cpu": {"mlp": (Mlp, torch.float32, [64], [10]),
            "cnn": (Cnn, torch.float32, [3, 32, 32], [10])},
    "cuda": {"resnet50_fp16": (resnet50, torch.float16, [3, 224, 224], [1000]),
             "mlp": (Mlp, torch.float32, [64], [10])},
}
CONFIG_TYPE = {torch.float32: "TYPE_FP32", torch.float16: "TYPE_FP16"}
WIRE_TYPE = {torch.float32: "FP32", torch.float16: "FP16"}


def build(name, device):
    factory, dtype, dims, _ = MODELS[device][name]
    torch.manual_seed(0)
    return factory().eval().to(device=device, dtype=dtype), dtype, dims


def config(name, platform, dtype, dims, out_dims, device):
    group = ("instance_group [ { count: 1, kind: KIND_CPU } ]\n"
             'parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }'
             if device == "cpu" else "instance_group [ { count: 1, kind: KIND_GPU } ]")
    return ('name: "%s"\nplatform: "%s"\nmax_batch_size: %d\n'
            'input [ { name: "INPUT__0" data_type: %s dims: [ %s ] } ]\n'
            'output [ { name: "OUTPUT__0" data_type: %s dims: [ %s ] } ]\n%s\n'
            % (name, platform, 8 if device == "cpu" else 32, CONFIG_TYPE[dtype],
               ", ".join(map(str, dims)), CONFIG_TYPE[dtype], ", ".join(map(str, out_dims)), group))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = ap.parse_args()
    for name, (_, _, _, out_dims) in MODELS[a.device].items():
        module, dtype, dims = build(name, a.device)
        example = torch.zeros([2] + dims, dtype=dtype, device=a.device)
        for kind, platform, file in (("ts", "pytorch_libtorch", "model.pt"),
                                     ("aoti", "torch_aoti", "model.pt2")):
            d = os.path.join(a.outdir, "%s_%s" % (name, kind))
            os.makedirs(os.path.join(d, "1"), exist_ok=True)
            with open(os.path.join(d, "config.pbtxt"), "w") as f:
                f.write(config("%s_%s" % (name, kind), platform, dtype, dims, out_dims, a.device))
            path = os.path.join(d, "1", file)
            if kind == "ts":
                with torch.no_grad():
                    torch.jit.trace(module, example).save(path)
            else:
                export_package(module, (example,), path=path, batch_max=64, device=a.device)
            print("wrote", path, flush=True)


if __name__ == "__main__":
    main()
