/* tests/unit/ptperf/ptperf_absl_test.c — the abseil mutex deadlock detector
 * of ptperf's gRPC core client is switched off through its mangled name
 * (ptperf/lib/absl_sync.h): where CMake found abseil's inline namespace, the name
 * it derives must be the one gRPC's abseil exports, or the switch silently
 * never happens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <grpc/grpc.h>

#include "ptperf/lib/absl_sync.h"

static void test_detector_switch_found(void **state) {
  (void)state;
  grpc_init(); /* abseil is loaded with gRPC, as in ptperf */
#ifdef PTS_ABSL_SYM
  assert_true(pts_absl_detector_off());
  assert_true(pts_absl_detector_off()); /* a second call: still fine */
#else
  assert_false(pts_absl_detector_off()); /* no abseil headers: nothing claimed */
#endif
  grpc_shutdown();
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_detector_switch_found)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
