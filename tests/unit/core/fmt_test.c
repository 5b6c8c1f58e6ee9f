/* tests/unit/core/fmt_test.c — integers as printf writes them, and HTTP
 * dates as strftime writes them (both from libc, an independent source),
 * plus the RFC 9110 example date written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/fmt.h"

static void check_u64(uint64_t v) {
  char want[32], got[PTS_FMT_INT_MAX];
  int n = snprintf(want, sizeof want, "%" PRIu64, v);
  assert_int_equal(pts_fmt_u64(got, v), (size_t)n);
  assert_string_equal(got, want);
}

static void check_i64(int64_t v) {
  char want[32], got[PTS_FMT_INT_MAX];
  int n = snprintf(want, sizeof want, "%" PRId64, v);
  assert_int_equal(pts_fmt_i64(got, v), (size_t)n);
  assert_string_equal(got, want);
}

static void integers_match_printf(void **state) {
  (void)state;
  const uint64_t edges[] = {0, 1, 9, 10, 99, 100, 12345, UINT32_MAX, (uint64_t)INT64_MAX,
                            (uint64_t)INT64_MAX + 1, UINT64_MAX - 1, UINT64_MAX};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    check_u64(edges[i]);
    check_i64((int64_t)edges[i]); /* the large ones wrap to negatives */
  }
  check_i64(INT64_MIN);
  check_i64(INT64_MIN + 1);
  check_i64(-1);
  check_i64(-10);
  /* Every digit count, with a xorshift walk through the values. */
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 100000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    check_u64(x >> (i % 64));
    check_i64((int64_t)(x >> (i % 64)));
    check_i64(-(int64_t)(x >> (1 + i % 63))); /* at most INT64_MAX before the minus */
  }
}

static void check_date(time_t t) {
  char want[64], got[PTS_FMT_DATE_MAX];
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t n = strftime(want, sizeof want, "%a, %d %b %Y %H:%M:%S GMT", &tm); /* C locale */
  assert_int_equal(pts_fmt_http_date(got, t), n);
  assert_string_equal(got, want);
}

static void dates_match_strftime(void **state) {
  (void)state;
  char got[PTS_FMT_DATE_MAX];
  pts_fmt_http_date(got, (time_t)784111777);
  assert_string_equal(got, "Sun, 06 Nov 1994 08:49:37 GMT"); /* RFC 9110 §5.6.7 */
  const time_t edges[] = {0, 951782400 /* 2000-02-29 */, 1798675199 /* 2026-12-31 23:59:59 */,
                          253402300799 /* 9999-12-31 23:59:59 */};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) check_date(edges[i]);
  for (time_t t = 0; t < (time_t)4102444800; t += 86400 * 13 + 3607) check_date(t); /* to 2100 */
}

static void date_now_is_now(void **state) {
  (void)state;
  time_t before = time(NULL);
  char a[PTS_FMT_DATE_MAX], b[PTS_FMT_DATE_MAX];
  strcpy(a, pts_fmt_http_date_now());
  time_t after = time(NULL);
  char lo[PTS_FMT_DATE_MAX], hi[PTS_FMT_DATE_MAX];
  pts_fmt_http_date(lo, before);
  pts_fmt_http_date(hi, after);
  assert_true(strcmp(a, lo) == 0 || strcmp(a, hi) == 0);
  /* A second later the cache moves on. */
  struct timespec s = {1, 100000000};
  nanosleep(&s, NULL);
  before = time(NULL);
  strcpy(b, pts_fmt_http_date_now());
  after = time(NULL);
  assert_string_not_equal(a, b);
  pts_fmt_http_date(lo, before);
  pts_fmt_http_date(hi, after);
  assert_true(strcmp(b, lo) == 0 || strcmp(b, hi) == 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(integers_match_printf),
      cmocka_unit_test(dates_match_strftime),
      cmocka_unit_test(date_now_is_now),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
