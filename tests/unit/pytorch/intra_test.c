/* tests/unit/pytorch/intra_test.c — the intra-op thread default (intra.h),
 * worked out by hand per case: cores / instances, at least 1, at most
 * LibTorch's own default; INTRA_OP_THREAD_COUNT wins. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "backends/pytorch/intra.h"

static int choose(int configured, int cores, int instances, int libtorch_default) {
  struct pts_intra_choice c;
  int n = pts_intra_choose(configured, cores, instances, libtorch_default, &c);
  assert_int_equal(n, c.threads);
  return n;
}

static void cores_are_shared_by_the_instances(void **state) {
  (void)state;
  assert_int_equal(choose(0, 2, 1, 2), 2); /* the build machine, one instance */
  assert_int_equal(choose(0, 2, 2, 2), 1); /* two instances on two cores */
  assert_int_equal(choose(0, 2, 3, 2), 1); /* never below one */
  assert_int_equal(choose(0, 16, 4, 16), 4);
  assert_int_equal(choose(0, 16, 3, 16), 5); /* rounded down: 15 threads busy, not 18 */
  assert_int_equal(choose(0, 64, 1, 64), 64);
}

static void libtorch_default_caps_it(void **state) {
  (void)state;
  assert_int_equal(choose(0, 16, 2, 4), 4); /* OMP_NUM_THREADS=4 */
  assert_int_equal(choose(0, 16, 2, 1), 1);
  assert_int_equal(choose(0, 16, 2, 0), 8); /* unknown: the cores */
}

static void configured_value_wins(void **state) {
  (void)state;
  struct pts_intra_choice c;
  assert_int_equal(pts_intra_choose(3, 2, 2, 2, &c), 3); /* even above the cores */
  assert_int_equal(c.configured, 3);
  assert_int_equal(c.instances, 2);
  assert_int_equal(pts_intra_choose(0, 2, 2, 2, &c), 1);
  assert_int_equal(c.configured, 0);
}

static void nonsense_inputs_are_clamped(void **state) {
  (void)state;
  assert_int_equal(choose(0, 0, 0, 0), 1);
  assert_int_equal(choose(-1, 4, -2, 4), 4);
}

static void cores_match_the_affinity_mask(void **state) {
  (void)state;
  int n = pts_intra_cores();
  assert_true(n >= 1);
  assert_true(n <= sysconf(_SC_NPROCESSORS_CONF) || sysconf(_SC_NPROCESSORS_CONF) < 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cores_are_shared_by_the_instances),
      cmocka_unit_test(libtorch_default_caps_it),
      cmocka_unit_test(configured_value_wins),
      cmocka_unit_test(nonsense_inputs_are_clamped),
      cmocka_unit_test(cores_match_the_affinity_mask),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
