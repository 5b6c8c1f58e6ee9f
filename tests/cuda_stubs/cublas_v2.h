/* Stand-in: see tests/cuda_stubs/README.md. */
#pragma once
#include <cuda_runtime.h>
typedef struct cublasContext *cublasHandle_t;
typedef int cublasStatus_t;
