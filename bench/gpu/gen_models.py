#!/usr/bin/env python3
"""Models of the GPU benchmark (bench/gpu/run.py), written with the GPU
host's torch and torchvision:

    python3 bench/gpu/gen_models.py OUTDIR [--aoti]

- resnet50_fp32, resnet50_fp16: torchvision ResNet-50 with random weights,
  traced on cuda:0 at FP32 / FP16, served with dynamic batching (max 128),
  channels-last inputs, and CUDA graphs for 13 batch sizes with every
  other batch padded up to the next (CUDA_GRAPH_PAD_BATCHES);
- resnet50_fp16_graph: the FP16 model with a CUDA graph captured at batch 1,
  no queue delay (a latency model);
- mlp: 64 -> 256 -> 8, dynamic batching;
- mlp_b1: the same MLP on one instance without a queue: batches of one
  that take the device tens of microseconds (how the instance waits for
  such a batch is what docs/experiments/gpu-wait-ab measured on it).

With --aoti, only resnet50_fp16_aoti: the same FP16 ResNet-50 (same seed,
same weights) exported with torch.export and compiled by AOTInductor for
cuda:0 (examples/export_aoti.py, batch dimension dynamic 1..128) as
model.pt2, served by the torch_aoti platform with the same dynamic batching,
instances and padded CUDA graphs at the same 13 batch sizes (the package
takes its batch in NCHW, as exported), and resnet50_fp16_aoti_graph: the
same package with a CUDA graph at batch 1 only and no queue delay, the
set's latency model. The compile takes minutes.
"""
import argparse
import os
import shutil
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from export_aoti import export_package  # noqa: E402


def config(name, dtype, in_dims, out_dims, extra="", delay_us=200, count=2,
           engine='backend: "pytorch"'):
    """delay_us None: no dynamic batching."""
    batching = ("dynamic_batching { max_queue_delay_microseconds: %d }" % delay_us
                if delay_us is not None else "")
    return """name: "%s"
%s
max_batch_size: 128
input [ { name: "INPUT__0" data_type: %s dims: [ %s ] } ]
output [ { name: "OUTPUT__0" data_type: %s dims: [ %s ] } ]
instance_group [ { count: %d kind: KIND_GPU gpus: [ 0 ] } ]
%s
%s
""" % (name, engine, dtype, ", ".join(map(str, in_dims)), dtype, ", ".join(map(str, out_dims)), count,
       batching, extra)


def write(outdir, name, cfg, module):
    d = os.path.join(outdir, name, "1")
    os.makedirs(d, exist_ok=True)
    module.save(os.path.join(d, "model.pt"))
    with open(os.path.join(outdir, name, "config.pbtxt"), "w") as f:
        f.write(cfg)


# Every batch size a dynamic batcher forms is a new shape to cuDNN, whose
# first call at a new shape takes 70-120 ms on an H200 (it plans every
# convolution again: docs/gpu.md), and those first calls were the p99 of a
# run. Captured graphs at these sizes, each batch padded up to the next,
# give the device 13 shapes, all planned at load. The package too: its
# convolutions are cuDNN's (a run without them had p99 at 14.7x p50).
BUCKETS = ('\nparameters { key: "CUDA_GRAPH_BATCH_SIZES" value: { string_value: '
           '"1,2,4,8,16,24,32,48,64,80,96,112,128" } }'
           '\nparameters { key: "CUDA_GRAPH_PAD_BATCHES" value: { string_value: "true" } }')


def resnet50_fp16():
    """torchvision's ResNet-50, random weights from seed 0, FP16 on cuda:0."""
    torch.manual_seed(0)
    return torchvision.models.resnet50(weights=None).eval().cuda().half()


def write_aoti(outdir):
    name = "resnet50_fp16_aoti"
    d = os.path.join(outdir, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    export_package(resnet50_fp16(), (torch.randn(2, 3, 224, 224, device="cuda").half(),),
                   path=os.path.join(d, "1", "model.pt2"), batch_max=128, device="cuda")
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(config(name, "TYPE_FP16", [3, 224, 224], [1000], BUCKETS,
                       engine='platform: "torch_aoti"'))
    # The batch-1 latency model of the set, as resnet50_fp16_graph is the
    # TorchScript set's: the same package, a CUDA graph at batch 1 only, no
    # queue delay.
    g = os.path.join(outdir, name + "_graph")
    os.makedirs(os.path.join(g, "1"), exist_ok=True)
    shutil.copyfile(os.path.join(d, "1", "model.pt2"), os.path.join(g, "1", "model.pt2"))
    with open(os.path.join(g, "config.pbtxt"), "w") as f:
        f.write(config(name + "_graph", "TYPE_FP16", [3, 224, 224], [1000],
                       'parameters { key: "CUDA_GRAPH_BATCH_SIZES" value: { string_value: "1" } }',
                       delay_us=0, engine='platform: "torch_aoti"'))


def main(outdir):
    torch.manual_seed(0)
    with torch.no_grad():
        # The ResNet-50s take their batch in channels-last order (ptserve's
        # INPUT_MEMORY_FORMAT): cuDNN's NHWC kernels, 1.5x the images/s of
        # NCHW in FP16 on an H200 (docs/gpu.md).
        cl = 'parameters { key: "INPUT_MEMORY_FORMAT" value: { string_value: "channels_last" } }'
        rn = torchvision.models.resnet50(weights=None).eval().cuda()  # seed 0, as resnet50_fp16()
        x = torch.randn(1, 3, 224, 224, device="cuda")
        write(outdir, "resnet50_fp32",
              config("resnet50_fp32", "TYPE_FP32", [3, 224, 224], [1000], cl + BUCKETS),
              torch.jit.trace(rn, x))
        rn16 = rn.half()
        traced16 = torch.jit.trace(rn16, x.half())
        write(outdir, "resnet50_fp16",
              config("resnet50_fp16", "TYPE_FP16", [3, 224, 224], [1000], cl + BUCKETS),
              traced16)
        graph_extra = ('parameters { key: "CUDA_GRAPH_BATCH_SIZES" value: { string_value: "1" } }\n'
                       + cl)
        # A batch-1 latency model (its graph is captured for batch 1 only):
        # no queue delay, which would only add to every request's latency.
        # Two instances as the others: one alone made no difference in a
        # server holding the other models' graphs
        # (docs/experiments/gpu-batch1-forward).
        write(outdir, "resnet50_fp16_graph",
              config("resnet50_fp16_graph", "TYPE_FP16", [3, 224, 224], [1000], graph_extra,
                     delay_us=0),
              traced16)
        mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                  torch.nn.Linear(256, 8)).eval().cuda()
        traced_mlp = torch.jit.trace(mlp, torch.randn(1, 64, device="cuda"))
        write(outdir, "mlp", config("mlp", "TYPE_FP32", [64], [8]), traced_mlp)
        write(outdir, "mlp_b1", config("mlp_b1", "TYPE_FP32", [64], [8], delay_us=None, count=1),
              traced_mlp)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--aoti", action="store_true", help="only the AOTInductor ResNet-50")
    a = ap.parse_args()
    if a.aoti:
        write_aoti(a.outdir)
    else:
        main(a.outdir)
