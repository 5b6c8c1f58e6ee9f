/* tests/unit/ptperf/fake_cudart.c — a stand-in for libcudart.so with the
 * six calls ptperf's --shared-memory cuda uses (tools/ptperf/lib/cuda.h),
 * so that path runs on CPU-only CI: ptperf_cuda_test loads it directly and
 * the e2e suite through PTPERF_CUDART. "Device memory" is host memory.
 * FAKE_CUDART_DEVICES=<n> sets how many GPUs it has (default 1; 0 answers
 * as a machine without a GPU does). FAKE_CUDART_LOG=<file> appends one
 * line per call that changes memory, so a test can check that everything
 * allocated was freed and what was copied:
 *   malloc <ptr> <bytes> | memcpy <ptr> <bytes> <sum of bytes> | free <ptr>
 * An IPC handle is the allocation's address in its first 8 bytes and 0xab
 * in the other 56. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;
typedef struct {
  char reserved[64];
} cudaIpcMemHandle_t;

enum { SUCCESS = 0, INVALID_VALUE = 1, NO_DEVICE = 100, INVALID_DEVICE = 101 };

static void note(const char *fmt, ...) {
  const char *path = getenv("FAKE_CUDART_LOG");
  FILE *f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

cudaError_t cudaSetDevice(int device) {
  const char *v = getenv("FAKE_CUDART_DEVICES");
  long n = v ? strtol(v, NULL, 10) : 1;
  if (n == 0) return NO_DEVICE;
  return device < 0 || device >= n ? INVALID_DEVICE : SUCCESS;
}

cudaError_t cudaMalloc(void **dev, size_t n) {
  *dev = malloc(n ? n : 1);
  if (!*dev) return 2; /* cudaErrorMemoryAllocation */
  note("malloc %p %zu", *dev, n);
  return SUCCESS;
}

cudaError_t cudaFree(void *dev) {
  note("free %p", dev);
  free(dev);
  return SUCCESS;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
  if (kind != 1) return INVALID_VALUE; /* ptperf only copies host to device */
  memcpy(dst, src, n);
  unsigned long sum = 0;
  for (size_t i = 0; i < n; i++) sum += ((const unsigned char *)src)[i];
  note("memcpy %p %zu %lu", dst, n, sum);
  return SUCCESS;
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *dev) {
  uint64_t a = (uint64_t)(uintptr_t)dev;
  memset(h->reserved, 0xab, sizeof h->reserved);
  memcpy(h->reserved, &a, sizeof a);
  return SUCCESS;
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case NO_DEVICE:
      return "no CUDA-capable device is detected";
    case INVALID_DEVICE:
      return "invalid device ordinal";
    case INVALID_VALUE:
      return "invalid argument";
    default:
      return "unknown error";
  }
}
