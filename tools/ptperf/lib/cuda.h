/* ptperf/lib/cuda.h — the few CUDA runtime calls that --shared-memory cuda
 * needs, loaded at run time.
 *
 * ptperf has no build-time dependency on CUDA: the runtime library is
 * opened with dlopen when CUDA shared memory is asked for, and nowhere
 * else, so one ptperf binary runs on every host and needs CUDA only on
 * the hosts that use it. The library tried is $PTPERF_CUDART when it is
 * set (and then only that one: an explicit path that fails is an error,
 * not a reason to pick another runtime), else "libcudart.so",
 * "libcudart.so.13" and "libcudart.so.12" in turn through the loader's
 * search path. A pip-installed torch carries one under
 * site-packages/nvidia (bench/gpu/run.py finds it there).
 *
 * Device memory is exported to the server as a cudaIpcMemHandle_t, which
 * the server opens in its own process (Triton's CUDA shared-memory
 * extension, protocol-facts §1.15).
 *
 * Threading: the CUDA runtime's current device is per thread, so every
 * call on one ptperf_cuda must come from the thread that opened it (ptperf
 * uses it only on its controlling thread, at setup and teardown).
 */
#ifndef PTPERF_CUDA_H
#define PTPERF_CUDA_H

#include <stddef.h>

#include "core/status.h"

/* Size of a cudaIpcMemHandle_t: an opaque 64-byte struct. */
#define PTPERF_CUDA_IPC_HANDLE_SIZE 64

struct ptperf_cuda;

/* Loads the runtime and makes GPU `device` current. Errors (UNAVAILABLE)
 * name what failed: the library (every name tried, or $PTPERF_CUDART, with
 * the loader's reason), a missing function, or cudaSetDevice with CUDA's
 * own words ("no CUDA-capable device is detected", "invalid device
 * ordinal"). On OK the caller owns *out (ptperf_cuda_close). */
enum pts_status ptperf_cuda_open(int device, struct ptperf_cuda **out, struct pts_error *err);

/* Unloads the runtime. Device memory not freed by then is the runtime's
 * to reclaim at exit. NULL-safe. */
void ptperf_cuda_close(struct ptperf_cuda *c);

/* The library that was loaded, as it was named to dlopen. Borrowed. */
const char *ptperf_cuda_library(const struct ptperf_cuda *c);

/* cudaMalloc of `n` bytes on the device; caller frees with
 * ptperf_cuda_free. */
enum pts_status ptperf_cuda_alloc(struct ptperf_cuda *c, size_t n, void **dev,
                                  struct pts_error *err);
void ptperf_cuda_free(struct ptperf_cuda *c, void *dev);

/* Synchronous copy of `n` host bytes to device address `dev`. */
enum pts_status ptperf_cuda_upload(struct ptperf_cuda *c, void *dev, const void *host, size_t n,
                                   struct pts_error *err);

/* The IPC handle of allocation `dev` (the start of a ptperf_cuda_alloc
 * block), PTPERF_CUDA_IPC_HANDLE_SIZE bytes into `handle`. */
enum pts_status ptperf_cuda_ipc_handle(struct ptperf_cuda *c, void *dev, void *handle,
                                       struct pts_error *err);

#endif
