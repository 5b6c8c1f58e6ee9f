/* tests/unit/scheduler/rate_limit_test.c — the rate limiter's flags and the
 * resource rules, with tritonserver's messages (core/src/rate_limiter.cc,
 * src/command_line_parser.cc), and one allotment order worked by hand. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "scheduler/rate_limit.h"

static Inference__ModelRateLimiter__Resource res_r1 =
    INFERENCE__MODEL_RATE_LIMITER__RESOURCE__INIT;
static Inference__ModelRateLimiter__Resource *res_list[1] = {&res_r1};

static Inference__ModelRateLimiter limiter(const char *name, uint32_t count, bool global,
                                           uint32_t priority) {
  res_r1.name = (char *)name;
  res_r1.count = count;
  res_r1.global = global;
  Inference__ModelRateLimiter l = INFERENCE__MODEL_RATE_LIMITER__INIT;
  l.n_resources = 1;
  l.resources = res_list;
  l.priority = priority;
  return l;
}

static void flags(void **state) {
  (void)state;
  struct pts_error err;
  pts_rate_limit_reset();
  assert_false(pts_rate_limit_on());
  assert_int_equal(pts_rate_limit_set_mode("Execution_Count", &err), PTS_OK);
  assert_true(pts_rate_limit_on());
  assert_int_equal(pts_rate_limit_set_mode("sometimes", &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "invalid argument for --rate-limit"));
  assert_int_equal(pts_rate_limit_set_mode("off", &err), PTS_OK);
  assert_false(pts_rate_limit_on());
  const char *bad[] = {"r", ":1", "r:", "r:x", "r:1:", "r:1:0:0", "r:-2", "r:1:-1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(pts_rate_limit_add_resource(bad[i], &err), PTS_INVALID_ARG);
    assert_non_null(strstr(err.msg, "--rate-limit-resource option format is"));
  }
  assert_int_equal(pts_rate_limit_add_resource("r:2", &err), PTS_OK);
  assert_int_equal(pts_rate_limit_add_resource("R:3:1", &err), PTS_OK);
  pts_rate_limit_reset();
}

static void off_registers_nothing(void **state) {
  (void)state;
  struct pts_error err;
  pts_rate_limit_reset();
  Inference__ModelRateLimiter l = limiter("r", 1, false, 0);
  struct pts_rate_limit_instance *in = (void *)&l;
  assert_int_equal(pts_rate_limit_register(&l, -1, &in, &err), PTS_OK);
  assert_null(in);
  pts_rate_limit_acquire(NULL);
  pts_rate_limit_release(NULL, false);
  pts_rate_limit_withdraw(NULL);
}

static void resource_rules(void **state) {
  (void)state;
  struct pts_error err;
  pts_rate_limit_reset();
  assert_int_equal(pts_rate_limit_set_mode("execution_count", &err), PTS_OK);
  struct pts_rate_limit_instance *a, *b;
  Inference__ModelRateLimiter l = limiter("r", 1, true, 0);
  assert_int_equal(pts_rate_limit_register(&l, 0, &a, &err), PTS_OK);
  l = limiter("r", 1, false, 0);
  assert_int_equal(pts_rate_limit_register(&l, 0, &b, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg, "Resource \"r\" is present as both global and device-specific "
                               "resource in the model configuration.");
  pts_rate_limit_unregister(a);
  /* given counts: a device's own, or the every-device one */
  assert_int_equal(pts_rate_limit_add_resource("r:2", &err), PTS_OK);
  assert_int_equal(pts_rate_limit_add_resource("r:5:1", &err), PTS_OK);
  l = limiter("r", 3, false, 0);
  assert_int_equal(pts_rate_limit_register(&l, 0, &a, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg, "Resource count for \"r\" is limited to 2 which will prevent "
                               "scheduling of one or more model instances, the minimum "
                               "required count is 3");
  assert_int_equal(pts_rate_limit_register(&l, 1, &a, &err), PTS_OK); /* 5 on device 1 */
  /* a global one takes the largest count given for its name */
  l = limiter("g", 1, true, 0);
  assert_int_equal(pts_rate_limit_register(&l, 0, &b, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "\"g\" is limited to 0"));
  pts_rate_limit_unregister(a);
  pts_rate_limit_reset();
}

/* Two instances needing the one r, the second waiting on a thread: it runs
 * only once the first released it. */
static struct pts_rate_limit_instance *waiter;
static volatile int waiter_ran;
static void *wait_main(void *arg) {
  (void)arg;
  pts_rate_limit_acquire(waiter);
  waiter_ran = 1;
  pts_rate_limit_release(waiter, false);
  return NULL;
}

static void one_at_a_time(void **state) {
  (void)state;
  struct pts_error err;
  pts_rate_limit_reset();
  assert_int_equal(pts_rate_limit_set_mode("execution_count", &err), PTS_OK);
  struct pts_rate_limit_instance *a;
  Inference__ModelRateLimiter l = limiter("r", 1, false, 0);
  assert_int_equal(pts_rate_limit_register(&l, 0, &a, &err), PTS_OK);
  assert_int_equal(pts_rate_limit_register(&l, 0, &waiter, &err), PTS_OK);
  pts_rate_limit_acquire(a);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, wait_main, NULL), 0);
  struct timespec ts = {0, 50000000L};
  nanosleep(&ts, NULL);
  assert_int_equal(waiter_ran, 0);
  pts_rate_limit_release(a, false);
  pthread_join(t, NULL);
  assert_int_equal(waiter_ran, 1);
  pts_rate_limit_unregister(a);
  pts_rate_limit_unregister(waiter);
  pts_rate_limit_reset();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(flags),
      cmocka_unit_test(off_registers_nothing),
      cmocka_unit_test(resource_rules),
      cmocka_unit_test(one_at_a_time),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
