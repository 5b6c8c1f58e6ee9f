/* core/pinned.c — see pinned.h. */
#include "core/pinned.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static _Atomic(const struct pts_pinned_allocator *) installed;
/* Bodies in pinned memory now, and how many may be (read once). */
static atomic_size_t held;
static atomic_size_t cap_cached; /* 0 = not read yet; SIZE_MAX = no cap */

/* PTSERVE_PINNED_BODIES_MAX=N: at most N bodies pinned at once, the rest
 * in ordinary memory; unset: no cap. */
static size_t cap(void) {
  size_t c = atomic_load_explicit(&cap_cached, memory_order_relaxed);
  if (c) return c - 1;
  const char *v = getenv("PTSERVE_PINNED_BODIES_MAX");
  char *end = NULL;
  unsigned long long n = v && *v ? strtoull(v, &end, 10) : 0;
  c = v && *v && end && !*end && n < SIZE_MAX - 1 ? (size_t)n : SIZE_MAX - 1;
  atomic_store_explicit(&cap_cached, c + 1, memory_order_relaxed);
  return c;
}

/* The buffer's release: the allocator's, then the count. The installed
 * allocator never changes once set (tests reset it with no body out). */
static void release_pinned(void *ctx, void *data) {
  atomic_load(&installed)->release(ctx, data);
  atomic_fetch_sub_explicit(&held, 1, memory_order_relaxed);
}

void pts_pinned_install(const struct pts_pinned_allocator *a) {
  if (!a) return;
  const struct pts_pinned_allocator *none = NULL;
  atomic_compare_exchange_strong(&installed, &none, a);
}

bool pts_pinned_enabled(void) { return atomic_load(&installed) != NULL; }

struct pts_buf *pts_buf_new_io(size_t size) {
  const struct pts_pinned_allocator *a = atomic_load(&installed);
  if (a && size >= PTS_PINNED_MIN_BYTES) {
    if (atomic_fetch_add_explicit(&held, 1, memory_order_relaxed) < cap()) {
      void *ctx = NULL;
      void *data = a->alloc(size, &ctx);
      if (data) {
        struct pts_buf *b = pts_buf_wrap(data, size, release_pinned, ctx);
        if (b) {
          b->pinned = true;
          return b; /* counted in `held` until release_pinned */
        }
        a->release(ctx, data);
      }
    }
    atomic_fetch_sub_explicit(&held, 1, memory_order_relaxed);
  }
  return pts_buf_new(size);
}

void pts_pinned_reset_for_tests(void) {
  atomic_store(&installed, NULL);
  atomic_store(&cap_cached, 0);
}
