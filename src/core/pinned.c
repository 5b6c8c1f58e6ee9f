/* core/pinned.c — see pinned.h. */
#include "core/pinned.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/alloc.h"

static _Atomic(const struct pts_pinned_allocator *) installed;
/* Bodies in pinned memory now, and how many may be: PTSERVE_PINNED_BODIES_MAX,
 * read when the allocator is installed (SIZE_MAX: no cap). */
static atomic_size_t held;
static atomic_size_t cap = SIZE_MAX;
/* The pool's bytes, and how many of them models have reserved so far. */
static atomic_size_t pool;
static atomic_size_t reserved;

static size_t cap_from_env(void) {
  const char *v = getenv("PTSERVE_PINNED_BODIES_MAX");
  if (!v || !*v) return SIZE_MAX;
  char *end;
  unsigned long long n = strtoull(v, &end, 10);
  return *end || n >= SIZE_MAX ? SIZE_MAX : (size_t)n;
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
  if (atomic_load(&installed) == NULL) atomic_store(&cap, cap_from_env());
  atomic_compare_exchange_strong(&installed, &none, a);
}

bool pts_pinned_enabled(void) { return atomic_load(&installed) != NULL; }

struct pts_buf *pts_buf_new_io(size_t size) {
  const struct pts_pinned_allocator *a = atomic_load(&installed);
  if (a && size >= PTS_PINNED_MIN_BYTES) {
    if (atomic_fetch_add_explicit(&held, 1, memory_order_relaxed) < atomic_load(&cap)) {
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

void pts_pinned_set_pool(size_t bytes) { atomic_store(&pool, bytes); }

/* Claims room for as many bodies of `body` bytes as the unreserved rest of
 * the pool holds; returns how many it claimed. A compare-and-swap loop: two models loading at once
 * never claim the same bytes. */
static size_t claim(size_t body) {
  size_t total = atomic_load(&pool), got = atomic_load(&reserved), n;
  do {
    n = got < total ? (total - got) / body : 0;
    if (n == 0) return 0;
  } while (!atomic_compare_exchange_weak(&reserved, &got, got + n * body));
  return n;
}

size_t pts_pinned_reserve(size_t body_bytes) {
  const struct pts_pinned_allocator *a = atomic_load(&installed);
  if (!a || body_bytes < PTS_PINNED_MIN_BYTES) return 0;
  size_t n = claim(body_bytes);
  if (n == 0) return 0;
  /* Every block is held until the last is made: released one by one, a
   * caching allocator would hand the first back for the second. */
  void **data = pts_calloc(n, sizeof *data), **ctx = pts_calloc(n, sizeof *ctx);
  size_t made = 0;
  while (data && ctx && made < n && (data[made] = a->alloc(body_bytes, &ctx[made])) != NULL)
    made++;
  for (size_t i = 0; i < made; i++) a->release(ctx[i], data[i]);
  pts_free(data);
  pts_free(ctx);
  /* What the allocator refused goes back to the pool for a later model. */
  atomic_fetch_sub(&reserved, (n - made) * body_bytes);
  return made;
}

void pts_pinned_reset_for_tests(void) {
  atomic_store(&installed, NULL);
  atomic_store(&cap, SIZE_MAX);
  atomic_store(&pool, 0);
  atomic_store(&reserved, 0);
}
