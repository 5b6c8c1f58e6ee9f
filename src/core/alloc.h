/* core/alloc.h — every allocation of ptserve goes through these wrappers.
 *
 * They behave like the libc functions (NULL on failure, never abort). In test
 * builds a failure injector can make the Nth allocation fail, so each error
 * path can be walked in turn (curl's "torture" idea; issue: hardening).
 *
 * Threading: thread-safe.
 */
#ifndef PTS_CORE_ALLOC_H
#define PTS_CORE_ALLOC_H

#include <stddef.h>

void *pts_malloc(size_t n);
void *pts_calloc(size_t count, size_t n);
void *pts_realloc(void *p, size_t n);
void pts_free(void *p);
/* Returns a new copy of `s` (caller frees with pts_free), or NULL. */
char *pts_strdup(const char *s);
/* Copy of the first `n` bytes of `s`, NUL-terminated. */
char *pts_strndup(const char *s, size_t n);

/* Failure injection: after `countdown` more successful allocations, every
 * allocation fails until reset with -1. For tests only. */
void pts_alloc_fail_after(long countdown);

/* jemalloc's mallctl when jemalloc serves this process's malloc (the build
 * links it, or it is preloaded), else NULL. Looked up at run time, so that
 * callers need no jemalloc header and a build without it still compiles. */
typedef int (*pts_mallctl_fn)(const char *name, void *oldp, size_t *oldlenp, void *newp,
                              size_t newlen);
pts_mallctl_fn pts_jemalloc_mallctl(void);

#endif
