/* backends/pytorch/cuda_shm.c — the CUDA runtime calls of the CUDA
 * shared-memory extension (shm/shm.h: struct pts_shm_cuda_ops), for builds
 * whose LibTorch has CUDA (PTS_WITH_CUDA, which links the CUDA runtime).
 * Without CUDA the file provides no operations and the registry refuses
 * CUDA registrations with a message saying so.
 *
 * What each call does and why:
 * - open: cudaIpcOpenMemHandle on the region's device (what Triton does),
 *   then checks with the driver's cuMemGetAddressRange that the allocation
 *   holds byte_size bytes from the opened address. A region larger than its
 *   allocation would let a request make the GPU write past it, which
 *   poisons the CUDA context of the whole process, so a size that can not
 *   be checked is refused. The driver entry point is looked up with dlsym
 *   in libcuda.so.1 (always present where CUDA runs), so nothing links
 *   against the driver library.
 * - to_device / to_host: copies on a non-blocking stream of our own per
 *   device, then a stream synchronization: the bytes are in place before
 *   the response that announces them leaves (a pageable-memory cudaMemcpy
 *   may return before its DMA has landed). to_device_batch enqueues a
 *   batch's answers with one cudaMemcpyBatchAsync (CUDA 13; one
 *   cudaMemcpyAsync each before it, or where the batch call is refused) and
 *   sync waits for the stream: one call and one wait per batch, not per
 *   request.
 * - pin / unpin: cudaHostRegister (portable) of a system region's mapping,
 *   so a GPU copies from it by DMA with no staging copy; failure is not an
 *   error (the region then works unpinned).
 * Every call restores the calling thread's current device.
 *
 * Threading: every function is thread-safe (the per-device streams are
 * created once under a mutex).
 */
#include "backends/pytorch/cuda_shm.h"

#ifdef PTS_WITH_CUDA

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "core/log.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == PTS_SHM_CUDA_HANDLE_SIZE,
               "a cudaIpcMemHandle_t is 64 bytes");

/* The device the caller had, restored by device_leave. */
static enum pts_status device_enter(int device, int *prev, struct pts_error *err) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return pts_error_set(err, PTS_INVALID_ARG, "no CUDA device is usable: %s",
                         cudaGetErrorString(e));
  if (device < 0 || device >= count)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "CUDA device %d does not exist (this host has %d)", device, count);
  if (cudaGetDevice(prev) != cudaSuccess) *prev = -1;
  e = cudaSetDevice(device);
  if (e != cudaSuccess)
    return pts_error_set(err, PTS_INVALID_ARG, "cudaSetDevice(%d) failed: %s", device,
                         cudaGetErrorString(e));
  return PTS_OK;
}

static void device_leave(int prev) {
  if (prev >= 0) cudaSetDevice(prev);
}

/* cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr),
 * CUdeviceptr being an unsigned long long on 64-bit hosts. */
typedef int (*range_fn)(unsigned long long *, size_t *, unsigned long long);
static range_fn address_range;
static pthread_once_t range_once = PTHREAD_ONCE_INIT;

static void find_address_range(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib) address_range = (range_fn)dlsym(lib, "cuMemGetAddressRange_v2");
}

static enum pts_status ipc_open(const void *handle, int device, uint64_t byte_size,
                                void **dev_ptr, struct pts_error *err) {
  int prev;
  enum pts_status st = device_enter(device, &prev, err);
  if (st != PTS_OK) return st;
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  void *p = NULL;
  cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    device_leave(prev);
    return pts_error_set(err, PTS_INVALID_ARG, "cudaIpcOpenMemHandle on device %d failed: %s",
                         device, cudaGetErrorString(e));
  }
  pthread_once(&range_once, find_address_range);
  unsigned long long base = 0;
  size_t size = 0;
  int rc = address_range ? address_range(&base, &size, (unsigned long long)(uintptr_t)p) : -1;
  uint64_t room = rc == 0 ? (uint64_t)(base + size - (uintptr_t)p) : 0;
  if (rc != 0 || room < byte_size) {
    cudaIpcCloseMemHandle(p);
    device_leave(prev);
    if (rc != 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "can not check the size of the CUDA allocation behind the handle "
                           "(cuMemGetAddressRange %s)",
                           address_range ? "failed" : "not found in libcuda.so.1");
    return pts_error_set(err, PTS_INVALID_ARG,
                         "byte_size %llu is larger than the %llu bytes of the CUDA allocation "
                         "behind the handle",
                         (unsigned long long)byte_size, (unsigned long long)room);
  }
  device_leave(prev);
  *dev_ptr = p;
  return PTS_OK;
}

static void ipc_close(void *dev_ptr, int device) {
  int prev;
  struct pts_error err;
  if (device_enter(device, &prev, &err) != PTS_OK) return;
  cudaError_t e = cudaIpcCloseMemHandle(dev_ptr);
  if (e != cudaSuccess)
    PTS_LOG_WARN("closing a CUDA shared memory region on device %d failed: %s", device,
                 cudaGetErrorString(e));
  device_leave(prev);
}

/* One non-blocking stream per device for region copies, made on first use
 * and kept for the process's life. */
#define MAX_DEVICES 64
static cudaStream_t streams[MAX_DEVICES];
static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;

static enum pts_status stream_of(int device, cudaStream_t *out, struct pts_error *err) {
  if (device >= MAX_DEVICES)
    return pts_error_set(err, PTS_INVALID_ARG, "CUDA device %d is beyond the %d supported",
                         device, MAX_DEVICES);
  pthread_mutex_lock(&streams_mu);
  cudaError_t e = cudaSuccess;
  if (!streams[device]) e = cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking);
  *out = streams[device];
  pthread_mutex_unlock(&streams_mu);
  if (e != cudaSuccess)
    return pts_error_set(err, PTS_INTERNAL, "creating a CUDA stream on device %d failed: %s",
                         device, cudaGetErrorString(e));
  return PTS_OK;
}

/* Makes `device` current (the caller's restored by device_leave(*prev))
 * and gives its stream; on failure nothing is left to undo. */
static enum pts_status enter_stream(int device, int *prev, cudaStream_t *s,
                                    struct pts_error *err) {
  enum pts_status st = device_enter(device, prev, err);
  if (st != PTS_OK) return st;
  st = stream_of(device, s, err);
  if (st != PTS_OK) device_leave(*prev);
  return st;
}

/* A copy on the device's stream, landed on return. */
static enum pts_status copy(void *dst, const void *src, size_t n, int device,
                            enum cudaMemcpyKind kind, struct pts_error *err) {
  int prev;
  cudaStream_t s;
  enum pts_status st = enter_stream(device, &prev, &s, err);
  if (st != PTS_OK) return st;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e != cudaSuccess)
    st = pts_error_set(err, PTS_INTERNAL, "copying %zu bytes %s CUDA device %d failed: %s", n,
                       kind == cudaMemcpyHostToDevice ? "to" : "from", device,
                       cudaGetErrorString(e));
  device_leave(prev);
  return st;
}

static enum pts_status to_device(void *dst, const void *src, size_t n, int device,
                                 struct pts_error *err) {
  return copy(dst, src, n, device, cudaMemcpyHostToDevice, err);
}

static enum pts_status to_host(void *dst, const void *src, size_t n, int device,
                               struct pts_error *err) {
  return copy(dst, src, n, device, cudaMemcpyDeviceToHost, err);
}

/* The copies of a batch of answers (shm.h: pts_shm_writes), enqueued on
 * `s`. cudaMemcpyBatchAsync takes them in one call, where 128 calls of
 * cudaMemcpyAsync cost the instance thread most of a millisecond; its
 * sources are read in stream order (the attribute it requires). The
 * signature is CUDA 13's (12.8 had another), so older runtimes, and a
 * refusal, take the loop. */
static cudaError_t enqueue_batch(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                 size_t count, cudaStream_t s) {
#if CUDART_VERSION >= 13000
  struct cudaMemcpyAttributes attr;
  memset(&attr, 0, sizeof attr);
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attr_of_all = 0; /* attrs[0] applies from copy 0 on */
  cudaError_t e = cudaMemcpyBatchAsync(dsts, srcs, sizes, count, &attr, &attr_of_all, 1, s);
  if (e == cudaSuccess) return cudaSuccess;
  cudaGetLastError(); /* not sticky; the loop below decides */
  static atomic_bool said;
  if (!atomic_exchange(&said, true))
    PTS_LOG_INFO("cudaMemcpyBatchAsync refused a batch of %zu answers (%s); answers to CUDA "
                 "shared memory are copied one call each", count, cudaGetErrorString(e));
#endif
  for (size_t i = 0; i < count; i++) {
    cudaError_t ce = cudaMemcpyAsync(dsts[i], srcs[i], sizes[i], cudaMemcpyHostToDevice, s);
    if (ce != cudaSuccess) return ce;
  }
  return cudaSuccess;
}

static enum pts_status to_device_batch(void *const *dsts, const void *const *srcs,
                                       const size_t *sizes, size_t count, int device,
                                       struct pts_error *err) {
  int prev;
  cudaStream_t s;
  enum pts_status st = enter_stream(device, &prev, &s, err);
  if (st != PTS_OK) return st;
  cudaError_t e = enqueue_batch(dsts, srcs, sizes, count, s);
  if (e != cudaSuccess)
    st = pts_error_set(err, PTS_INTERNAL, "copying %zu answers to CUDA device %d failed: %s",
                       count, device, cudaGetErrorString(e));
  device_leave(prev);
  return st;
}

static enum pts_status sync_device(int device, struct pts_error *err) {
  int prev;
  cudaStream_t s;
  enum pts_status st = enter_stream(device, &prev, &s, err);
  if (st != PTS_OK) return st;
  cudaError_t e = cudaStreamSynchronize(s);
  if (e != cudaSuccess)
    st = pts_error_set(err, PTS_INTERNAL, "copies to CUDA device %d failed: %s", device,
                       cudaGetErrorString(e));
  device_leave(prev);
  return st;
}

static bool pin(void *addr, size_t n) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return false;
  cudaError_t e = cudaHostRegister(addr, n, cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    PTS_LOG_VERBOSE(1, "pinning a %zu-byte shared memory mapping failed (%s); it is used "
                    "unpinned", n, cudaGetErrorString(e));
    cudaGetLastError(); /* clear it: the failure is not the next caller's */
    return false;
  }
  return true;
}

static void unpin(void *addr) {
  if (cudaHostUnregister(addr) != cudaSuccess) cudaGetLastError();
}

static const struct pts_shm_cuda_ops ops = {.open = ipc_open,
                                            .close = ipc_close,
                                            .to_device = to_device,
                                            .to_host = to_host,
                                            .to_device_batch = to_device_batch,
                                            .sync = sync_device,
                                            .pin = pin,
                                            .unpin = unpin};

const struct pts_shm_cuda_ops *pts_pytorch_cuda_shm_ops(void) { return &ops; }

#else

const struct pts_shm_cuda_ops *pts_pytorch_cuda_shm_ops(void) { return NULL; }

#endif
