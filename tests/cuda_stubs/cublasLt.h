/* Stand-in: see tests/cuda_stubs/README.md. */
#pragma once
typedef struct cublasLtContext *cublasLtHandle_t;
