/* tests/unit/core/arena_test.c — pieces from the owner's memory, the rest
 * from the heap, and only the heap's pieces freed alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/arena.h"

static void pieces_fit_then_overflow_to_the_heap(void **state) {
  (void)state;
  _Alignas(16) unsigned char mem[256];
  memset(mem, 0xab, sizeof mem);
  struct pts_arena a;
  pts_arena_init(&a, mem, sizeof mem);
  int64_t *xs = pts_arena_calloc(&a, 4, sizeof *xs);
  assert_non_null(xs);
  assert_true(pts_arena_owns(&a, xs));
  assert_int_equal((uintptr_t)xs % 16, 0);
  for (int i = 0; i < 4; i++) assert_int_equal(xs[i], 0); /* zeroed */
  char *s = pts_arena_strdup(&a, "INPUT__0");
  assert_string_equal(s, "INPUT__0");
  assert_true(pts_arena_owns(&a, s));
  assert_true((unsigned char *)s >= (unsigned char *)(xs + 4)); /* no overlap */
  char *big = pts_arena_calloc(&a, 1, 1024); /* does not fit: heap */
  assert_non_null(big);
  assert_false(pts_arena_owns(&a, big));
  big[1023] = 1;
  pts_arena_free(&a, big); /* freed (ASan/LSan would see a leak otherwise) */
  pts_arena_free(&a, s);   /* a no-op: part of mem */
  pts_arena_free(&a, NULL);
  assert_null(pts_arena_strdup(&a, NULL));
  pts_arena_done(&a);
  memset(mem, 0, sizeof mem); /* plain memory again, even under ASan */
}

static void overflowing_sizes_fail(void **state) {
  (void)state;
  _Alignas(16) unsigned char mem[64];
  struct pts_arena a;
  pts_arena_init(&a, mem, sizeof mem);
  assert_null(pts_arena_calloc(&a, SIZE_MAX / 2, 4));
  void *one = pts_arena_calloc(&a, 0, 8); /* a valid, distinct piece */
  assert_non_null(one);
  pts_arena_done(&a);
}

static void an_unaligned_start_is_aligned(void **state) {
  (void)state;
  _Alignas(16) unsigned char mem[128];
  struct pts_arena a;
  pts_arena_init(&a, mem + 3, sizeof mem - 3);
  void *p = pts_arena_calloc(&a, 1, 8);
  assert_int_equal((uintptr_t)p % 16, 0);
  assert_true(pts_arena_owns(&a, p));
  pts_arena_done(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pieces_fit_then_overflow_to_the_heap),
      cmocka_unit_test(overflowing_sizes_fail),
      cmocka_unit_test(an_unaligned_start_is_aligned),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
