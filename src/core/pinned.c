/* core/pinned.c — see pinned.h. */
#include "core/pinned.h"

#include <stdatomic.h>
#include <stdbool.h>

static _Atomic(const struct pts_pinned_allocator *) installed;

void pts_pinned_install(const struct pts_pinned_allocator *a) {
  if (!a) return;
  const struct pts_pinned_allocator *none = NULL;
  atomic_compare_exchange_strong(&installed, &none, a);
}

bool pts_pinned_enabled(void) { return atomic_load(&installed) != NULL; }

struct pts_buf *pts_buf_new_io(size_t size) {
  const struct pts_pinned_allocator *a = atomic_load(&installed);
  if (a && size >= PTS_PINNED_MIN_BYTES) {
    void *ctx = NULL;
    void *data = a->alloc(size, &ctx);
    if (data) {
      struct pts_buf *b = pts_buf_wrap(data, size, a->release, ctx);
      if (b) {
        b->pinned = true;
        return b;
      }
      a->release(ctx, data);
    }
  }
  return pts_buf_new(size);
}

void pts_pinned_reset_for_tests(void) { atomic_store(&installed, NULL); }
