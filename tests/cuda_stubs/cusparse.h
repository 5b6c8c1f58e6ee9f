/* Stand-in: see tests/cuda_stubs/README.md. */
#pragma once
typedef struct cusparseContext *cusparseHandle_t;
typedef int cusparseStatus_t;
