"""PyTorch's own loader of an AOTInductor package, as the benchmarks'
references (bench/aoti/torch_ref.py, bench/gpu/torch_ref.py) call it.

A package's compiled wrapper (data/aotinductor/model/*.so) takes LibTorch's
aoti_torch_* shims from the process without linking libtorch itself, and
Python's torch loads its libraries privately (RTLD_LOCAL) unless
TORCH_USE_RTLD_GLOBAL=1 was set before `import torch`. On torch 2.13's CPU
wheel aoti_load_package then fails with "undefined symbol:
aoti_torch_dtype_float32". Opening the already loaded libraries again with
RTLD_GLOBAL makes their symbols visible to what is opened later, as that
variable would, without changing how anything else in the process runs.
"""
import ctypes
import os

import torch


def load_package(path, **kwargs):
    """torch._inductor.aoti_load_package(path, **kwargs), LibTorch's
    libraries made global first."""
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    for name in ("libtorch_cpu.so", "libtorch_cuda.so"):
        if os.path.exists(os.path.join(lib, name)):
            ctypes.CDLL(os.path.join(lib, name), mode=os.RTLD_GLOBAL)
    from torch._inductor import aoti_load_package
    return aoti_load_package(path, **kwargs)
