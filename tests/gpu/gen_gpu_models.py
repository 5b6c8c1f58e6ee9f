#!/usr/bin/env python3
"""Writes the model repository of the GPU test suite (tests/gpu).

    python3 tests/gpu/gen_gpu_models.py OUTDIR

Run on the GPU host with its own torch (2.x with CUDA). Every model asks
for KIND_GPU unless its name says otherwise; the tests compute expected
values by loading the same model.pt with torch on the GPU.
"""
import os
import sys

import torch


class AddSub(torch.nn.Module):
    def forward(self, a, b):
        return a + b, a - b


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 8)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)


class Conv(torch.nn.Module):
    """Exercises cuDNN (DISABLE_CUDNN models run it without)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


class ConvProbe(torch.nn.Module):
    """Conv, and a probe of the layout forward() was handed: 1.0 per row
    when its input is channels-last (NHWC) in memory, 0.0 when not."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        nhwc = x.is_contiguous(memory_format=torch.channels_last)
        probe = torch.full([x.shape[0], 1], 1.0 if nhwc else 0.0, device=x.device)
        return torch.relu(self.conv(x)), probe


class Alloc(torch.nn.Module):
    """Allocates n float32 elements on the input's device: n = x[0] * 2^20."""

    def forward(self, x):
        n = int(x[0].item()) * 1048576
        return torch.ones(n, device=x.device).sum().reshape(1) + x[0:1].float() * 0


TYPES = {"fp32": ("TYPE_FP32", torch.float32), "fp16": ("TYPE_FP16", torch.float16),
         "bf16": ("TYPE_BF16", torch.bfloat16)}


def tensor(name, dtype, dims):
    return '  { name: "%s" data_type: %s dims: [ %s ] }' % (name, dtype, ", ".join(map(str, dims)))


def config(name, mbs, inputs, outputs, kind="KIND_GPU", extra=""):
    text = ['name: "%s"' % name, 'backend: "pytorch"', "max_batch_size: %d" % mbs,
            "input [\n%s\n]" % ",\n".join(tensor(*t) for t in inputs),
            "output [\n%s\n]" % ",\n".join(tensor(*t) for t in outputs),
            "instance_group [ { count: 1, kind: %s } ]" % kind]
    if extra:
        text.append(extra)
    return "\n".join(text) + "\n"


def param(key, value):
    return 'parameters { key: "%s" value: { string_value: "%s" } }' % (key, value)


def save(outdir, name, cfg, module, traced_example=None):
    d = os.path.join(outdir, name, "1")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(outdir, name, "config.pbtxt"), "w") as f:
        f.write(cfg)
    m = module.eval()
    if traced_example is not None:
        sm = torch.jit.trace(m, traced_example)
    else:
        sm = torch.jit.script(m)
    sm.save(os.path.join(d, "model.pt"))


def main(outdir):
    torch.manual_seed(0)
    for suffix, (cfg_type, _) in TYPES.items():
        ios = ([("INPUT0", cfg_type, [16]), ("INPUT1", cfg_type, [16])],
               [("OUTPUT0", cfg_type, [16]), ("OUTPUT1", cfg_type, [16])])
        save(outdir, "add_sub_" + suffix, config("add_sub_" + suffix, 8, *ios), AddSub())
    mlp = Mlp()
    mlp_io = ([("INPUT__0", "TYPE_FP32", [64])], [("OUTPUT__0", "TYPE_FP32", [8])])
    save(outdir, "mlp", config("mlp", 8, *mlp_io), mlp)
    save(outdir, "mlp_graphs", config("mlp_graphs", 8, *mlp_io,
                                      extra=param("CUDA_GRAPH_BATCH_SIZES", "1,4")), mlp)
    # Padded into graphs: ptserve's switch, and Triton's graph_lower_bound.
    # Two instances, loaded beside mlp_graphs_bound: three captures at once
    # (the default global capture mode failed the others' loads).
    save(outdir, "mlp_graphs_pad", config(
        "mlp_graphs_pad", 8, *mlp_io,
        extra=param("CUDA_GRAPH_BATCH_SIZES", "2,8") + "\n" + param("CUDA_GRAPH_PAD_BATCHES", "true")
        ).replace("count: 1", "count: 2"), mlp)
    save(outdir, "mlp_graphs_bound", config(
        "mlp_graphs_bound", 8, *mlp_io,
        extra="optimization { cuda { graphs: true graph_spec [ { batch_size: 8 "
              "graph_lower_bound { batch_size: 5 } } ] } }"), mlp)
    save(outdir, "mlp_traced", config("mlp_traced", 8, *mlp_io), mlp,
         traced_example=torch.randn(2, 64))
    save(outdir, "mlp_auto", config("mlp_auto", 8, *mlp_io, kind="KIND_AUTO"), mlp)
    if torch.cuda.device_count() >= 2:
        # Traced on cuda:0, served from cuda:1: the load must remap it.
        on0 = Mlp()
        on0.load_state_dict(mlp.state_dict())
        on0 = on0.cuda(0).eval()
        cfg = config("mlp_gpu1", 8, *mlp_io).replace("kind: KIND_GPU", "kind: KIND_GPU gpus: [ 1 ]")
        save(outdir, "mlp_gpu1", cfg, on0, traced_example=torch.randn(2, 64, device="cuda:0"))
        save(outdir, "mlp_all_gpus", config("mlp_all_gpus", 8, *mlp_io), mlp)
    save(outdir, "mlp_cpu", config("mlp_cpu", 8, *mlp_io, kind="KIND_CPU"), mlp)
    save(outdir, "mlp_cuda_accel", config("mlp_cuda_accel", 8, *mlp_io, extra=(
        'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "cuda" } ] } }')),
        mlp)
    save(outdir, "mlp_mps_accel", config("mlp_mps_accel", 8, *mlp_io, extra=(
        'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "mps" } ] } }')),
        mlp)
    save(outdir, "mlp_warmup", config("mlp_warmup", 8, *mlp_io, extra=(
        'model_warmup [ { name: "w" batch_size: 4 count: 2 inputs { key: "INPUT__0" '
        'value: { data_type: TYPE_FP32 dims: [ 64 ] random_data: true } } } ]')), mlp)
    conv_io = ([("INPUT__0", "TYPE_FP32", [3, 32, 32])], [("OUTPUT__0", "TYPE_FP32", [8, 32, 32])])
    conv = Conv()
    save(outdir, "conv", config("conv", 8, *conv_io), conv)
    save(outdir, "conv_nocudnn", config("conv_nocudnn", 8, *conv_io,
                                        extra=param("DISABLE_CUDNN", "true") + "\n" +
                                        param("ENABLE_CACHE_CLEANING", "true")), conv)
    # CUDA graphs over a channels-last model: batches are copied into the
    # graphs' row-major static inputs and each graph reorders them itself.
    probe_io = ([("INPUT__0", "TYPE_FP32", [3, 16, 16])],
                [("OUTPUT__0", "TYPE_FP32", [8, 16, 16]), ("OUTPUT__1", "TYPE_FP32", [1])])
    save(outdir, "conv_probe_cl_graphs", config(
        "conv_probe_cl_graphs", 8, *probe_io,
        extra="\n".join([param("CUDA_GRAPH_BATCH_SIZES", "1,4"),
                         param("CUDA_GRAPH_PAD_BATCHES", "true"),
                         param("INPUT_MEMORY_FORMAT", "channels_last")])), ConvProbe())
    # 192 KiB per image: request bodies above core/pinned.h's 64 KiB, read
    # into pinned memory; dynamic batching so that concurrent ones batch.
    big_io = ([("INPUT__0", "TYPE_FP32", [3, 128, 128])],
              [("OUTPUT__0", "TYPE_FP32", [8, 128, 128])])
    save(outdir, "conv_big", config("conv_big", 8, *big_io,
                                    extra="dynamic_batching { max_queue_delay_microseconds: 20000 }"),
         conv)
    alloc_io = ([("INPUT__0", "TYPE_INT64", [1])], [("OUTPUT__0", "TYPE_FP32", [1])])
    save(outdir, "alloc_limited", config("alloc_limited", 0, *alloc_io,
                                         extra=param("MEMORY_FRACTION", "0.05")), Alloc())


if __name__ == "__main__":
    main(sys.argv[1])
