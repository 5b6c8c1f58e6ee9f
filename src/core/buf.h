/* core/buf.h — reference-counted byte buffers.
 *
 * The zero-copy path of a request rests on this: input tensors are views into
 * the request body buffer, output slices share the batch output buffer, and
 * the HTTP frontend hands buffers to libevent by reference. Whoever holds a
 * reference may read `data`; nobody writes after the buffer is shared.
 *
 * Threading: retain/release are atomic and may be called from any thread;
 * the release callback runs on the thread that drops the last reference.
 */
#ifndef PTS_CORE_BUF_H
#define PTS_CORE_BUF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct pts_buf;
typedef void (*pts_buf_release_fn)(void *ctx, void *data);

struct pts_buf {
  atomic_int refs;
  void *data;   /* owned through `release` (or pts_free when release is NULL) */
  size_t size;
  pts_buf_release_fn release; /* called once, when the last reference goes */
  void *ctx;
  /* The bytes are page-locked host memory a GPU reads by DMA
   * (core/pinned.h); false for everything pts_buf_new and pts_buf_wrap make. */
  bool pinned;
};

/* A new buffer of `size` bytes (uninitialised) with one reference, or NULL.
 * The bytes share the header's allocation: `data` must not be replaced. */
struct pts_buf *pts_buf_new(size_t size);
/* Wraps memory owned elsewhere: `release(ctx, data)` frees it when the last
 * reference is dropped. Takes ownership of `data` on success only. */
struct pts_buf *pts_buf_wrap(void *data, size_t size, pts_buf_release_fn release, void *ctx);
/* Adds a reference; returns `b` (NULL-safe). */
struct pts_buf *pts_buf_retain(struct pts_buf *b);
/* Drops a reference (NULL-safe); frees on the last one. */
void pts_buf_release(struct pts_buf *b);

#endif
