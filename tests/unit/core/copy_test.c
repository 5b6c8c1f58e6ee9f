/* tests/unit/core/copy_test.c — the parallel copy (core/copy.h): every byte
 * lands where memcpy would put it, whether the caller copies alone (small),
 * shares the copy with the pool (large), or finds the pool busy with
 * another caller's copy (several threads at once). The pool size is fixed
 * with PTSERVE_COPY_THREADS before the first copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/copy.h"

/* Sources of odd sizes filled with a pattern of their own, copied into one
 * destination back to back; checks every byte and the guard after them. */
static void copy_and_check(const size_t *sizes, size_t n, unsigned seed) {
  struct pts_copy_part parts[16];
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += sizes[i];
  unsigned char *dst = pts_malloc(total + 1);
  assert_non_null(dst);
  dst[total] = 0x5a;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char *src = pts_malloc(sizes[i] ? sizes[i] : 1);
    assert_non_null(src);
    for (size_t k = 0; k < sizes[i]; k++) src[k] = (unsigned char)(k * 7 + i * 13 + seed);
    parts[i] = (struct pts_copy_part){dst + at, src, sizes[i]};
    at += sizes[i];
  }
  pts_copy_parts(parts, n);
  at = 0;
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < sizes[i]; k++)
      if (dst[at + k] != (unsigned char)(k * 7 + i * 13 + seed))
        fail_msg("part %zu byte %zu wrong", i, k);
    at += sizes[i];
    pts_free((void *)parts[i].src);
  }
  assert_int_equal(dst[total], 0x5a);
  pts_free(dst);
}

static void small_copies(void **state) {
  (void)state;
  const size_t sizes[] = {0, 1, 7, 4096, 100000};
  copy_and_check(sizes, 5, 1);
  copy_and_check(sizes, 0, 2);
}

static void large_copies_use_the_pool(void **state) {
  (void)state;
  assert_int_equal(pts_copy_threads(), 3);
  /* 1 MiB chunks straddle every part boundary */
  const size_t sizes[] = {3 * 1048576 + 17, 1, 2 * 1048576 - 3, 0, 5 * 1048576 + 999};
  copy_and_check(sizes, 5, 3);
  const size_t one[] = {PTS_COPY_PARALLEL_MIN};
  copy_and_check(one, 1, 4);
}

static void *copier(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  const size_t sizes[] = {6 * 1048576 + seed, 1048576 + 5};
  for (int i = 0; i < 3; i++) copy_and_check(sizes, 2, seed + (unsigned)i);
  return NULL;
}

static void concurrent_callers(void **state) {
  (void)state;
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, copier, (void *)i), 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
}

int main(void) {
  setenv("PTSERVE_COPY_THREADS", "3", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(small_copies),
      cmocka_unit_test(large_copies_use_the_pool),
      cmocka_unit_test(concurrent_callers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
