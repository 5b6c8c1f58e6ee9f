/* ptperf/lib/cuda.c — see cuda.h. The declarations below are the CUDA
 * runtime's own (cuda_runtime_api.h), written out so that no CUDA header
 * is needed to build. */
#include "ptperf/lib/cuda.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

typedef int cuda_error;                 /* cudaError_t; 0 is cudaSuccess */
enum { CUDA_MEMCPY_HOST_TO_DEVICE = 1 }; /* cudaMemcpyHostToDevice */
typedef struct {
  char reserved[PTPERF_CUDA_IPC_HANDLE_SIZE];
} cuda_ipc_mem_handle; /* cudaIpcMemHandle_t */

struct ptperf_cuda {
  char library[512]; /* the name given to dlopen */
  cuda_error (*set_device)(int device);
  cuda_error (*malloc_)(void **dev, size_t n);
  cuda_error (*free_)(void *dev);
  cuda_error (*memcpy_)(void *dst, const void *src, size_t n, int kind);
  cuda_error (*ipc_get_mem_handle)(cuda_ipc_mem_handle *handle, void *dev);
  const char *(*get_error_string)(cuda_error e);
};

static const char *const default_names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12"};

/* The handle of the first library that loads, its name in `name`; on
 * failure the loader's reasons, one per name tried, in `why`. */
static void *load(const char *env, char *name, size_t name_cap, char *why, size_t why_cap) {
  const char *const *names = env ? &env : default_names;
  size_t n = env ? 1 : sizeof default_names / sizeof *default_names, w = 0;
  why[0] = 0;
  for (size_t i = 0; i < n; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      snprintf(name, name_cap, "%s", names[i]);
      return h;
    }
    const char *e = dlerror();
    if (w < why_cap) {
      int k = snprintf(why + w, why_cap - w, "%s%s", w ? "; " : "", e ? e : names[i]);
      if (k > 0) w += (size_t)k;
    }
  }
  return NULL;
}

/* dlsym into a function pointer: ISO C has no conversion from void *, so
 * the bytes are copied (what POSIX guarantees is representable). */
static bool symbol(void *lib, const char *name, void *fn) {
  void *p = dlsym(lib, name);
  if (!p) return false;
  memcpy(fn, &p, sizeof p);
  return true;
}

enum pts_status ptperf_cuda_open(int device, struct ptperf_cuda **out, struct pts_error *err) {
  *out = NULL;
  struct ptperf_cuda *c = pts_calloc(1, sizeof *c);
  if (!c) return pts_error_set(err, PTS_NOMEM, "no memory for the CUDA runtime's table");
  char why[1024];
  const char *env = getenv("PTPERF_CUDART");
  if (env && !*env) env = NULL;
  /* Never dlclose'd: the runtime registers exit-time handlers that must
   * still find their code when the process exits. */
  void *lib = load(env, c->library, sizeof c->library, why, sizeof why);
  if (!lib) {
    enum pts_status st =
        env
            ? pts_error_set(err, PTS_UNAVAILABLE,
                            "can not load the CUDA runtime PTPERF_CUDART=%s: %s", env, why)
            : pts_error_set(err, PTS_UNAVAILABLE,
                            "can not load the CUDA runtime (tried libcudart.so, libcudart.so.13, "
                            "libcudart.so.12; set PTPERF_CUDART to its path): %s",
                            why);
    pts_free(c);
    return st;
  }
  static const struct {
    const char *name;
    size_t offset;
  } fns[] = {
      {"cudaSetDevice", offsetof(struct ptperf_cuda, set_device)},
      {"cudaMalloc", offsetof(struct ptperf_cuda, malloc_)},
      {"cudaFree", offsetof(struct ptperf_cuda, free_)},
      {"cudaMemcpy", offsetof(struct ptperf_cuda, memcpy_)},
      {"cudaIpcGetMemHandle", offsetof(struct ptperf_cuda, ipc_get_mem_handle)},
      {"cudaGetErrorString", offsetof(struct ptperf_cuda, get_error_string)},
  };
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
    if (!symbol(lib, fns[i].name, (char *)c + fns[i].offset)) {
      enum pts_status st = pts_error_set(err, PTS_UNAVAILABLE,
                                         "the CUDA runtime %s has no %s", c->library, fns[i].name);
      pts_free(c);
      return st;
    }
  cuda_error e = c->set_device(device);
  if (e) {
    enum pts_status st =
        pts_error_set(err, PTS_UNAVAILABLE, "CUDA device %d (runtime %s): cudaSetDevice: %s",
                      device, c->library, c->get_error_string(e));
    pts_free(c);
    return st;
  }
  *out = c;
  return PTS_OK;
}

void ptperf_cuda_close(struct ptperf_cuda *c) { pts_free(c); }

const char *ptperf_cuda_library(const struct ptperf_cuda *c) { return c->library; }

static enum pts_status failed(struct ptperf_cuda *c, cuda_error e, struct pts_error *err,
                              const char *what, size_t n) {
  return pts_error_set(err, PTS_UNAVAILABLE, "%s (%zu bytes): %s", what, n,
                       c->get_error_string(e));
}

enum pts_status ptperf_cuda_alloc(struct ptperf_cuda *c, size_t n, void **dev,
                                  struct pts_error *err) {
  *dev = NULL;
  cuda_error e = c->malloc_(dev, n);
  if (e) {
    *dev = NULL;
    return failed(c, e, err, "cudaMalloc", n);
  }
  return PTS_OK;
}

void ptperf_cuda_free(struct ptperf_cuda *c, void *dev) {
  if (dev) c->free_(dev);
}

enum pts_status ptperf_cuda_upload(struct ptperf_cuda *c, void *dev, const void *host, size_t n,
                                   struct pts_error *err) {
  cuda_error e = c->memcpy_(dev, host, n, CUDA_MEMCPY_HOST_TO_DEVICE);
  return e ? failed(c, e, err, "cudaMemcpy to the device", n) : PTS_OK;
}

enum pts_status ptperf_cuda_ipc_handle(struct ptperf_cuda *c, void *dev, void *handle,
                                       struct pts_error *err) {
  cuda_ipc_mem_handle h;
  cuda_error e = c->ipc_get_mem_handle(&h, dev);
  if (e)
    return pts_error_set(err, PTS_UNAVAILABLE, "cudaIpcGetMemHandle: %s", c->get_error_string(e));
  memcpy(handle, h.reserved, sizeof h.reserved);
  return PTS_OK;
}
