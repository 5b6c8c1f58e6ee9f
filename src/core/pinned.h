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
 * The pool (tritonserver's --pinned-memory-pool-byte-size): a caching
 * allocator such as LibTorch's makes a new block whenever more bodies are
 * in flight than ever before, on the frontend thread that reads the body,
 * and keeps it. A server meeting a load higher than any before then grows
 * in those very requests (docs/experiments/gpu-inline-limit). With a pool
 * set, each CUDA model reserves bodies of its one-request size at load
 * (pts_pinned_reserve): made and handed back at once, so that the
 * allocator holds them for the first peak. Unlike tritonserver's fixed
 * pool, bodies past it are still pinned, from new blocks.
 *
 * Threading: pts_pinned_install, pts_pinned_reserve and pts_buf_new_io may
 * be called from any thread at any time (a model loads while requests
 * arrive); the allocator's functions are called from frontend threads,
 * model-loading threads and whichever thread drops a buffer's last
 * reference. pts_pinned_set_pool is called once at start-up, before any
 * model loads.
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

/* Sets the pool: `bytes` of bodies that CUDA models reserve at load, all
 * models together (0, the default: none). */
void pts_pinned_set_pool(size_t bytes);

/* Reserves what is left of the pool as bodies of `body_bytes`: as many as
 * fit, all allocated from the installed allocator, then all released, so
 * that a caching allocator holds that many blocks of that size. Returns
 * how many were made (fewer where the allocator refused one; 0 without an
 * allocator or a pool, for bodies under PTS_PINNED_MIN_BYTES, or with the
 * pool spent by earlier calls). Safe from concurrent model loads: each
 * byte of the pool is reserved once. */
size_t pts_pinned_reserve(size_t body_bytes);

/* Tests only: forgets the installed allocator and the pool. */
void pts_pinned_reset_for_tests(void);

#endif
