/* Stand-in: see tests/cuda_stubs/README.md (CMake writes this file for a
 * CUDA build of LibTorch; its macros are not needed to compile against). */
#pragma once
