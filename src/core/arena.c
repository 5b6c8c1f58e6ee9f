/* core/arena.c — see arena.h. */
#include "core/arena.h"

#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/asan.h"

#ifdef PTS_ASAN
#define RED_ZONE 16 /* poisoned bytes after each piece */
#else
#define RED_ZONE 0
#endif
#define POISON PTS_ASAN_POISON
#define UNPOISON PTS_ASAN_UNPOISON

#define ALIGN 16

void pts_arena_init(struct pts_arena *a, void *mem, size_t cap) {
  uintptr_t start = ((uintptr_t)mem + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1);
  size_t skip = (size_t)(start - (uintptr_t)mem);
  a->mem = (unsigned char *)start;
  a->cap = cap > skip ? cap - skip : 0;
  a->used = 0;
  POISON(a->mem, a->cap);
}

size_t pts_arena_piece_size(size_t count, size_t size) {
  if (size && count > (SIZE_MAX - RED_ZONE - ALIGN) / size) return SIZE_MAX;
  size_t n = count * size;
  if (n == 0) n = 1;
  return (n + RED_ZONE + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

void *pts_arena_calloc(struct pts_arena *a, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  size_t n = count * size;
  if (n == 0) n = 1;
  size_t need = pts_arena_piece_size(count, size);
  if (need != SIZE_MAX && a->cap - a->used >= need) {
    unsigned char *p = a->mem + a->used;
    a->used += need;
    UNPOISON(p, n);
    memset(p, 0, n);
    return p;
  }
  return pts_calloc(1, n);
}

char *pts_arena_strndup(struct pts_arena *a, const char *s, size_t n) {
  if (!s) return NULL;
  char *d = pts_arena_calloc(a, n + 1, 1);
  if (d) memcpy(d, s, n);
  return d;
}

char *pts_arena_strdup(struct pts_arena *a, const char *s) {
  return s ? pts_arena_strndup(a, s, strlen(s)) : NULL;
}

bool pts_arena_owns(const struct pts_arena *a, const void *p) {
  const unsigned char *q = p;
  return q && a->mem && q >= a->mem && q < a->mem + a->cap;
}

void pts_arena_free(const struct pts_arena *a, void *p) {
  if (p && !pts_arena_owns(a, p)) pts_free(p);
}

void pts_arena_done(struct pts_arena *a) {
  UNPOISON(a->mem, a->cap);
  a->used = a->cap; /* nothing more from here */
}
