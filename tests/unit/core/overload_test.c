/* tests/unit/core/overload_test.c — the memory budget's accounting, the
 * defaults it and the connection limits derive, and the log rate limit.
 * Expected values are worked by hand from the rules in overload.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/log.h"
#include "core/overload.h"

static void budget_admits_up_to_the_limit(void **state) {
  (void)state;
  assert_int_equal(pts_overload_configure(1000), 1000);
  assert_int_equal(pts_overload_budget(), 1000);
  size_t base = pts_overload_held();
  assert_int_equal(base, 0);
  assert_true(pts_overload_try_charge(600));
  assert_true(pts_overload_try_charge(400)); /* exactly the budget */
  assert_int_equal(pts_overload_held(), 1000);
  assert_false(pts_overload_try_charge(1)); /* nothing is charged on refusal */
  assert_int_equal(pts_overload_held(), 1000);
  pts_overload_release(400);
  assert_false(pts_overload_try_charge(401));
  assert_true(pts_overload_try_charge(400));
  pts_overload_release(1000);
  assert_int_equal(pts_overload_held(), 0);
  /* Larger than the whole budget: never, even when nothing is held. */
  assert_false(pts_overload_try_charge(1001));
  assert_false(pts_overload_try_charge(SIZE_MAX));
  /* Forced charges (admitted work) may pass the budget; then nothing new
   * fits until they are returned. */
  pts_overload_charge(1500);
  assert_int_equal(pts_overload_held(), 1500);
  assert_false(pts_overload_try_charge(1));
  pts_overload_release(1500);
  assert_true(pts_overload_try_charge(0));
  assert_int_equal(pts_overload_held(), 0);
}

/* A message's charge moved to what its decoded request holds: up (past the
 * budget if need be: the request is admitted) and down. */
static void recharge_moves_a_charge(void **state) {
  (void)state;
  pts_overload_configure(1000);
  assert_true(pts_overload_try_charge(300));
  assert_int_equal(pts_overload_recharge(300, 1200), 1200);
  assert_int_equal(pts_overload_held(), 1200);
  assert_int_equal(pts_overload_recharge(1200, 50), 50);
  assert_int_equal(pts_overload_held(), 50);
  assert_int_equal(pts_overload_recharge(50, 50), 50);
  assert_int_equal(pts_overload_held(), 50);
  pts_overload_release(50);
  assert_int_equal(pts_overload_held(), 0);
}

static void release_without_charge_is_clamped(void **state) {
  (void)state;
  pts_overload_configure(1000);
  pts_overload_charge(10);
  pts_overload_release(25); /* a bug elsewhere: logged, the counter stays sane */
  assert_int_equal(pts_overload_held(), 0);
}

static void counters_and_snapshot(void **state) {
  (void)state;
  pts_overload_configure(4096);
  struct pts_overload_stats before, after;
  pts_overload_snapshot(&before);
  pts_overload_count(PTS_OVERLOAD_HTTP_CONNECTIONS, 3);
  pts_overload_count(PTS_OVERLOAD_HTTP_CONNECTIONS, -1);
  pts_overload_count(PTS_OVERLOAD_GRPC_MEMORY_REFUSED, 1);
  assert_true(pts_overload_try_charge(100));
  pts_overload_snapshot(&after);
  assert_int_equal(after.budget, 4096);
  assert_int_equal(after.held, 100);
  assert_int_equal(after.counters[PTS_OVERLOAD_HTTP_CONNECTIONS] -
                       before.counters[PTS_OVERLOAD_HTTP_CONNECTIONS],
                   2);
  assert_int_equal(after.counters[PTS_OVERLOAD_GRPC_MEMORY_REFUSED] -
                       before.counters[PTS_OVERLOAD_GRPC_MEMORY_REFUSED],
                   1);
  pts_overload_release(100);
}

static void trims_only_after_a_burst(void **state) {
  (void)state;
  pts_overload_configure((size_t)1 << 40);
  /* A burst drains the peak the test binary may have left. */
  pts_overload_tick();
  assert_false(pts_overload_tick()); /* nothing happened since */
  pts_overload_charge(PTS_OVERLOAD_TRIM_MIN);
  assert_false(pts_overload_tick()); /* still held: not a quarter of the peak */
  pts_overload_release(PTS_OVERLOAD_TRIM_MIN / 4 * 3);
#if defined(__GLIBC__)
  assert_true(pts_overload_tick()); /* a quarter left */
  assert_true(pts_overload_tick()); /* and once more, for what was freed late */
#else
  assert_false(pts_overload_tick());
  assert_false(pts_overload_tick());
#endif
  assert_false(pts_overload_tick()); /* then no more for this burst */
  pts_overload_release(PTS_OVERLOAD_TRIM_MIN / 4);
  /* A small burst does not trim. */
  pts_overload_charge(PTS_OVERLOAD_TRIM_MIN / 2);
  pts_overload_release(PTS_OVERLOAD_TRIM_MIN / 2);
  assert_false(pts_overload_tick());
}

static void burst_ends_by_the_free_pages_when_the_allocator_says(void **state) {
  (void)state;
  const size_t min = PTS_OVERLOAD_TRIM_MIN;
  /* Still held: more than a quarter of the peak, whatever is free. */
  assert_false(pts_overload_burst_ended(min, min, (int64_t)min * 4));
  /* jemalloc's count decides: a small burst that left many free pages
   * (a steady load below the minimum, ended) returns them... */
  assert_true(pts_overload_burst_ended(0, min / 8, (int64_t)min));
  assert_true(pts_overload_burst_ended(0, 0, (int64_t)min)); /* idle since */
  /* ...and a large burst whose pages are already back does not. */
  assert_false(pts_overload_burst_ended(0, min * 4, (int64_t)min - 1));
  /* The C library's malloc does not say: the peak decides. */
  assert_true(pts_overload_burst_ended(min / 4, min, -1));
  assert_false(pts_overload_burst_ended(0, min - 1, -1));
}

static void default_budget(void **state) {
  (void)state;
  const uint64_t gib = (uint64_t)1 << 30, mib = (uint64_t)1 << 20;
  assert_int_equal(pts_overload_default_budget(24 * gib), 6 * gib); /* a quarter */
  assert_int_equal(pts_overload_default_budget(1 * gib), 256 * mib);
  assert_int_equal(pts_overload_default_budget(100 * mib), 64 * mib); /* the floor */
  assert_int_equal(pts_overload_default_budget(0), 1 * gib);         /* unknown */
  assert_true(pts_overload_system_memory() > 0); /* /proc or sysconf answers here */
  assert_int_equal(pts_overload_configure(0),
                   pts_overload_default_budget(pts_overload_system_memory()));
}

static void default_connections(void **state) {
  (void)state;
  /* 512 descriptors: 512 - 128 = 384 left; 75% is 288, 25% is 96. */
  assert_int_equal(pts_overload_default_connections(512, 75), 288);
  assert_int_equal(pts_overload_default_connections(512, 25), 96);
  assert_int_equal(pts_overload_default_connections(512, 100), 384);
  /* 1024: 896 left. */
  assert_int_equal(pts_overload_default_connections(1024, 75), 672);
  /* A small limit (<= 2 x 128): half of it. 200 -> 100 -> 75. */
  assert_int_equal(pts_overload_default_connections(200, 75), 75);
  assert_int_equal(pts_overload_default_connections(1, 25), 1); /* at least one */
  /* Unlimited descriptors count as 2^20. */
  assert_int_equal(pts_overload_default_connections(UINT64_MAX, 100), (1u << 20) - 128);
}

static void log_limit(void **state) {
  (void)state;
  struct pts_log_limit l;
  memset(&l, 0, sizeof l);
  unsigned long dropped = 99;
  const uint64_t hour = 3600ull * 1000000000ull;
  assert_true(pts_log_limit_allow(&l, hour, &dropped));
  assert_int_equal(dropped, 0);
  for (int i = 0; i < 5; i++) assert_false(pts_log_limit_allow(&l, hour, &dropped));
  /* A zero interval lets the next line out, saying five were dropped. */
  atomic_store(&l.next_ns, 0);
  assert_true(pts_log_limit_allow(&l, 0, &dropped));
  assert_int_equal(dropped, 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(budget_admits_up_to_the_limit),
      cmocka_unit_test(recharge_moves_a_charge),
      cmocka_unit_test(release_without_charge_is_clamped),
      cmocka_unit_test(counters_and_snapshot),
      cmocka_unit_test(trims_only_after_a_burst),
      cmocka_unit_test(burst_ends_by_the_free_pages_when_the_allocator_says),
      cmocka_unit_test(default_budget),
      cmocka_unit_test(default_connections),
      cmocka_unit_test(log_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
