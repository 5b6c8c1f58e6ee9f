/* core/pinned.h — request bodies received straight into pinned host memory.
 *
 * A batch of one request on a CUDA instance goes to the device by DMA from
 * wherever its bytes are, if that memory is page-locked (pinned); from
 * ordinary memory it must first be copied into the instance's pinned
 * staging buffer. So when a model runs on a GPU, the frontends read large
 * request bodies (an HTTP body, a gRPC message) into pinned memory as they
 * arrive, and that copy disappears: the socket's bytes are the ones the GPU
 * reads. Batches of several requests are still gathered into staging (one
 * copy, as before).
 *
 * The memory comes from whoever installs an allocator: the pytorch backend,
 * when it puts an instance on a CUDA device, installs LibTorch's caching
 * host allocator (cudaHostAlloc'd blocks recycled from request to request).
 * Until then, and in builds without CUDA, pts_buf_new_io is pts_buf_new.
 * PTSERVE_PINNED_BODIES_MAX=N (read when the allocator is installed) pins
 * at most N bodies at a time and gives the rest ordinary memory: pinned
 * bodies help only batches of one, and an H100 measured FP32 ResNet-50
 * over HTTP faster at c=64 with none (docs/experiments/gpu-http-tail).
 *
 * Threading: pts_pinned_install and pts_buf_new_io may be called from any
 * thread at any time (a model loads while requests arrive); the allocator's
 * functions are called from frontend threads and from whichever thread drops
 * a buffer's last reference.
 */
#ifndef PTS_CORE_PINNED_H
#define PTS_CORE_PINNED_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

/* Bodies smaller than this stay in ordinary memory: their staging copy
 * costs little, and pinned blocks are a scarcer resource than heap. */
#define PTS_PINNED_MIN_BYTES ((size_t)64 * 1024)

struct pts_pinned_allocator {
  /* `n` bytes of pinned host memory, or NULL (the caller then falls back to
   * ordinary memory). *ctx is handed back to `release`. */
  void *(*alloc)(size_t n, void **ctx);
  void (*release)(void *ctx, void *data);
};

/* Installs `a` (borrowed for the process's life: a static table) for every
 * later pts_buf_new_io. The first installation wins; later ones are
 * ignored, so every backend may install its own without caring which came
 * first. NULL is ignored. */
void pts_pinned_install(const struct pts_pinned_allocator *a);

/* Whether an allocator is installed (request bodies of PTS_PINNED_MIN_BYTES
 * and more are then pinned). */
bool pts_pinned_enabled(void);

/* A buffer for `size` bytes of a request arriving from the network, with one
 * reference: pinned (b->pinned true) when an allocator is installed, `size`
 * is at least PTS_PINNED_MIN_BYTES and the allocator has the memory;
 * otherwise pts_buf_new(size). NULL when out of memory. */
struct pts_buf *pts_buf_new_io(size_t size);

/* Tests only: forgets the installed allocator. */
void pts_pinned_reset_for_tests(void);

#endif
