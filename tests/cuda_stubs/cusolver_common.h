/* Stand-in: see tests/cuda_stubs/README.md. */
#pragma once
typedef int cusolverStatus_t;
#define CUSOLVER_VER_MAJOR 11
#define CUSOLVER_VER_MINOR 0
