/* tests/unit/tensor/bytes_test.c — the BYTES codec against the layout in
 * protocol-facts §5 (4-byte little-endian length + raw bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tensor/bytes.h"

/* ["ab", ""] from the protocol facts, written out by hand. */
static const unsigned char AB_EMPTY[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0};

static void encodes_the_documented_example(void **state) {
  (void)state;
  unsigned char out[16];
  size_t used = 0;
  pts_bytes_put(out, sizeof out, &used, "ab", 2);
  pts_bytes_put(out, sizeof out, &used, "", 0);
  assert_int_equal(used, sizeof AB_EMPTY);
  assert_memory_equal(out, AB_EMPTY, sizeof AB_EMPTY);
}

static void sizing_pass_writes_nothing(void **state) {
  (void)state;
  size_t used = 0;
  pts_bytes_put(NULL, 0, &used, "hello", 5);
  pts_bytes_put(NULL, 0, &used, "x", 1);
  assert_int_equal(used, 4 + 5 + 4 + 1);
}

static void length_prefix_is_little_endian(void **state) {
  (void)state;
  static char big[300];
  memset(big, 'z', sizeof big);
  unsigned char out[4 + 300];
  size_t used = 0;
  pts_bytes_put(out, sizeof out, &used, big, 300);
  /* 300 = 0x012C */
  assert_int_equal(out[0], 0x2C);
  assert_int_equal(out[1], 0x01);
  assert_int_equal(out[2], 0);
  assert_int_equal(out[3], 0);
}

static void iterates_elements(void **state) {
  (void)state;
  size_t off = 0;
  const char *e;
  uint32_t len;
  assert_int_equal(pts_bytes_next(AB_EMPTY, sizeof AB_EMPTY, &off, &e, &len), 1);
  assert_int_equal(len, 2);
  assert_memory_equal(e, "ab", 2);
  assert_int_equal(pts_bytes_next(AB_EMPTY, sizeof AB_EMPTY, &off, &e, &len), 1);
  assert_int_equal(len, 0);
  assert_int_equal(pts_bytes_next(AB_EMPTY, sizeof AB_EMPTY, &off, &e, &len), 0);
}

static void validate_counts_and_rejects_truncation(void **state) {
  (void)state;
  struct pts_error err;
  int64_t n = -1;
  assert_int_equal(pts_bytes_validate(AB_EMPTY, sizeof AB_EMPTY, 2, &n, "IN", &err), PTS_OK);
  assert_int_equal(n, 2);
  assert_int_equal(pts_bytes_validate(AB_EMPTY, sizeof AB_EMPTY, 3, &n, "IN", &err),
                   PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "expected 3, got 2"));
  /* Cut inside the second length prefix, then inside the first payload. */
  assert_int_equal(pts_bytes_validate(AB_EMPTY, 8, -1, &n, "IN", &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "truncated"));
  assert_non_null(strstr(err.msg, "'IN'"));
  assert_int_equal(pts_bytes_validate(AB_EMPTY, 5, -1, &n, "IN", &err), PTS_INVALID_ARG);
  /* A length prefix claiming 4 GiB must not be trusted. */
  static const unsigned char huge[] = {0xff, 0xff, 0xff, 0xff, 'a'};
  assert_int_equal(pts_bytes_validate(huge, sizeof huge, -1, &n, "IN", &err), PTS_INVALID_ARG);
  /* Empty data is zero elements. */
  assert_int_equal(pts_bytes_validate("", 0, 0, &n, "IN", &err), PTS_OK);
  assert_int_equal(n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encodes_the_documented_example),
      cmocka_unit_test(sizing_pass_writes_nothing),
      cmocka_unit_test(length_prefix_is_little_endian),
      cmocka_unit_test(iterates_elements),
      cmocka_unit_test(validate_counts_and_rejects_truncation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
