/* tests/unit/tensor/dtype_test.c — the data-type table against the protocol
 * facts (§3.1, §5): names, config names, numeric values and sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tensor/dtype.h"

static void protocol_names_round_trip(void **state) {
  (void)state;
  /* Expected values written out from protocol-facts §3.1, not from the table. */
  static const struct { const char *name, *cfg; int value; size_t size; } want[] = {
      {"BOOL", "TYPE_BOOL", 1, 1},    {"UINT8", "TYPE_UINT8", 2, 1},
      {"UINT16", "TYPE_UINT16", 3, 2}, {"UINT32", "TYPE_UINT32", 4, 4},
      {"UINT64", "TYPE_UINT64", 5, 8}, {"INT8", "TYPE_INT8", 6, 1},
      {"INT16", "TYPE_INT16", 7, 2},  {"INT32", "TYPE_INT32", 8, 4},
      {"INT64", "TYPE_INT64", 9, 8},  {"FP16", "TYPE_FP16", 10, 2},
      {"FP32", "TYPE_FP32", 11, 4},   {"FP64", "TYPE_FP64", 12, 8},
      {"BYTES", "TYPE_STRING", 13, 0}, {"BF16", "TYPE_BF16", 14, 2},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    enum pts_dtype t = pts_dtype_from_name(want[i].name);
    assert_int_equal(t, want[i].value);
    assert_string_equal(pts_dtype_name(t), want[i].name);
    assert_string_equal(pts_dtype_config_name(t), want[i].cfg);
    assert_int_equal(pts_dtype_from_config_name(want[i].cfg), want[i].value);
    assert_int_equal(pts_dtype_size(t), want[i].size);
  }
}

static void unknown_names_are_invalid(void **state) {
  (void)state;
  assert_int_equal(pts_dtype_from_name("fp32"), PTS_DTYPE_INVALID); /* case-sensitive */
  assert_int_equal(pts_dtype_from_name("STRING"), PTS_DTYPE_INVALID);
  assert_int_equal(pts_dtype_from_name(""), PTS_DTYPE_INVALID);
  assert_int_equal(pts_dtype_from_name(NULL), PTS_DTYPE_INVALID);
  assert_int_equal(pts_dtype_from_config_name("TYPE_INVALID"), PTS_DTYPE_INVALID);
  assert_string_equal(pts_dtype_name((enum pts_dtype)99), "INVALID");
  assert_int_equal(pts_dtype_size((enum pts_dtype)-1), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(protocol_names_round_trip),
      cmocka_unit_test(unknown_names_are_invalid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
