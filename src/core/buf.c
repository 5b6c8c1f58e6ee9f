/* core/buf.c — see buf.h. */
#include "core/buf.h"

#include <stdbool.h>
#include <stdint.h>

#include "core/alloc.h"

/* pts_buf_new places the bytes right after the header, in the same
 * allocation (one malloc/free per buffer, not two: issue #13), at a
 * 16-byte offset so that they are aligned as malloc's would be. */
#define INLINE_OFFSET ((sizeof(struct pts_buf) + 15) & ~(size_t)15)

static bool is_inline(const struct pts_buf *b) {
  return b->data == (const unsigned char *)b + INLINE_OFFSET;
}

struct pts_buf *pts_buf_new(size_t size) {
  if (size > SIZE_MAX - INLINE_OFFSET) return NULL;
  struct pts_buf *b = pts_malloc(INLINE_OFFSET + size);
  if (!b) return NULL;
  b->data = (unsigned char *)b + INLINE_OFFSET;
  atomic_init(&b->refs, 1);
  b->size = size;
  b->release = NULL;
  b->ctx = NULL;
  b->pinned = false;
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
  b->pinned = false;
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
  else if (!is_inline(b))
    pts_free(b->data);
  pts_free(b);
}
