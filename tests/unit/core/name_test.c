/* tests/unit/core/name_test.c — which names may become a path component. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/name.h"

static void safe_names(void **state) {
  (void)state;
  static const char *const ok[] = {"add_sub", "model.v2", "a-b", "x", "名前", ".hidden", "a.b.c"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) assert_true(pts_name_is_safe(ok[i]));
}

static void unsafe_names(void **state) {
  (void)state;
  static const char *const bad[] = {"",     "..",   "../x",  "a/b",       "/etc",  "a\\b",
                                    "x/..", "a..b", "..%2F", "tab\there", "nl\nx", "del\x7f"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_false(pts_name_is_safe(bad[i]));
  assert_false(pts_name_is_safe(NULL));
}

static void check_message_names_the_thing(void **state) {
  (void)state;
  struct pts_error err;
  assert_int_equal(pts_name_check("model name", "../etc", &err), PTS_INVALID_ARG);
  assert_int_equal(err.code, PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "invalid model name '../etc'"));
  assert_int_equal(pts_name_check("model name", "fine", &err), PTS_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(safe_names),
      cmocka_unit_test(unsafe_names),
      cmocka_unit_test(check_message_names_the_thing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
