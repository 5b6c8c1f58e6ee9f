/* core/alloc.c — see alloc.h. */
#include "core/alloc.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long countdown = -1;

static int should_fail(void) {
  long c = atomic_load_explicit(&countdown, memory_order_relaxed);
  if (c < 0) return 0;
  if (c == 0) return 1;
  atomic_fetch_sub(&countdown, 1);
  return 0;
}

void pts_alloc_fail_after(long n) { atomic_store(&countdown, n); }

void *pts_malloc(size_t n) { return should_fail() ? NULL : malloc(n ? n : 1); }
void *pts_calloc(size_t c, size_t n) { return should_fail() ? NULL : calloc(c ? c : 1, n ? n : 1); }
void *pts_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n ? n : 1); }
void pts_free(void *p) { free(p); }

char *pts_strndup(const char *s, size_t n) {
  char *d = pts_malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *pts_strdup(const char *s) { return s ? pts_strndup(s, strlen(s)) : NULL; }

pts_mallctl_fn pts_jemalloc_mallctl(void) {
  pts_mallctl_fn fn;
  *(void **)&fn = dlsym(RTLD_DEFAULT, "mallctl");
  return fn;
}
