/* config/json_arena.c — see json_arena.h. */
#include "config/json_arena.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

/* Enough for a typical inference header (about 150 values, keys and
 * strings of 16 to 64 bytes) with room to spare; a header with JSON tensor
 * data overflows into malloc, as before. */
#define ARENA_BYTES 16384

static _Thread_local struct {
  alignas(max_align_t) unsigned char buf[ARENA_BYTES];
  size_t used;
  bool on;
} arena;

static void *arena_malloc(size_t n) {
  if (arena.on) {
    size_t need = (n + (alignof(max_align_t) - 1)) & ~(alignof(max_align_t) - 1);
    if (need >= n && need <= ARENA_BYTES - arena.used) {
      void *p = arena.buf + arena.used;
      arena.used += need;
      return p;
    }
  }
  return malloc(n);
}

/* A pointer into this thread's buffer is released by end; anything else
 * came from malloc. (jansson frees a value on the thread that frees its
 * document, which is the thread that parsed it here.) */
static void arena_free(void *p) {
  uintptr_t at = (uintptr_t)p, base = (uintptr_t)arena.buf;
  if (at >= base && at < base + ARENA_BYTES) return;
  free(p);
}

void pts_json_arena_install(void) { json_set_alloc_funcs(arena_malloc, arena_free); }

void pts_json_arena_begin(void) {
  arena.used = 0;
  arena.on = true;
}

void pts_json_arena_end(void) {
  arena.on = false;
  arena.used = 0;
}
