/* core/buf.c — see buf.h. */
#include "core/buf.h"

#include "core/alloc.h"

struct pts_buf *pts_buf_new(size_t size) {
  struct pts_buf *b = pts_malloc(sizeof *b);
  if (!b) return NULL;
  b->data = pts_malloc(size);
  if (!b->data) {
    pts_free(b);
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->size = size;
  b->release = NULL;
  b->ctx = NULL;
  return b;
}

struct pts_buf *pts_buf_wrap(void *data, size_t size, pts_buf_release_fn release, void *ctx) {
  struct pts_buf *b = pts_malloc(sizeof *b);
  if (!b) return NULL;
  atomic_init(&b->refs, 1);
  b->data = data;
  b->size = size;
  b->release = release;
  b->ctx = ctx;
  return b;
}

struct pts_buf *pts_buf_retain(struct pts_buf *b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}

void pts_buf_release(struct pts_buf *b) {
  if (!b) return;
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  if (b->release)
    b->release(b->ctx, b->data);
  else
    pts_free(b->data);
  pts_free(b);
}
