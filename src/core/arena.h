/* core/arena.h — a small bump arena over memory its owner provides.
 *
 * A request's arrays and strings are many small allocations that all end
 * together; carving them out of space inside the object that owns them
 * (a request, a response, a batch on the stack) saves a malloc/free pair
 * each (issue #13: malloc and free were ~18% of a request's instructions).
 * What does not fit comes from pts_calloc, so callers never need to know
 * the size in advance; pts_arena_free frees only such overflow pieces.
 *
 * Ownership: the arena borrows `mem` (usually a member of its owner) and
 * never frees it. A piece is valid until its owner's memory goes; pieces
 * from the overflow are owned by whoever holds them and are released with
 * pts_arena_free (a no-op for pieces inside `mem`). Call pts_arena_done
 * before the memory holding `mem` is freed or reused.
 *
 * AddressSanitizer: built with ASan, the unused part of `mem` and a 16-byte
 * red zone after each piece stay poisoned while the arena is in use, so an
 * overflow from one piece into the next is reported as it would be between
 * two mallocs. pts_arena_done makes `mem` plain memory again (it may be a
 * stack frame that is reused); a use after free of a piece is then what
 * ASan reports for its owner: the request or response is a heap block of
 * its own, freed as a whole.
 *
 * Threading: none; an arena belongs to its owner's thread of the moment.
 */
#ifndef PTS_CORE_ARENA_H
#define PTS_CORE_ARENA_H

#include <stdbool.h>
#include <stddef.h>

struct pts_arena {
  unsigned char *mem; /* borrowed */
  size_t cap;
  size_t used;
};

/* Starts an empty arena over `cap` bytes at `mem` (16-byte aligned). */
void pts_arena_init(struct pts_arena *a, void *mem, size_t cap);
/* Bytes of arena memory one piece of `count` × `size` bytes takes (its
 * alignment and red zone included): what an owner sizes `mem` with. */
size_t pts_arena_piece_size(size_t count, size_t size);
/* Zeroed space for `count` elements of `size` bytes, 16-byte aligned: from
 * the arena when it fits, else from pts_calloc. NULL on overflow of the
 * product or when out of memory. */
void *pts_arena_calloc(struct pts_arena *a, size_t count, size_t size);
/* A NUL-terminated copy of the first `n` bytes of `s` / of `s` (NULL-safe:
 * NULL gives NULL), placed as pts_arena_calloc places it. */
char *pts_arena_strndup(struct pts_arena *a, const char *s, size_t n);
char *pts_arena_strdup(struct pts_arena *a, const char *s);
/* Whether `p` lies inside the arena's memory (then it is not freed alone). */
bool pts_arena_owns(const struct pts_arena *a, const void *p);
/* Frees `p` when it came from the overflow (pts_free); NULL-safe. */
void pts_arena_free(const struct pts_arena *a, void *p);
/* Ends the arena: its pieces are invalid from here on. Does not free
 * overflow pieces (their holders do, with pts_arena_free). */
void pts_arena_done(struct pts_arena *a);

#endif
