/* tests/unit/core/status_test.c — the status table's protocol mappings
 * (protocol-facts §1.2) and error-message helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/status.h"

static void maps_to_triton_codes(void **state) {
  (void)state;
  /* HTTP and gRPC numbers from the protocol facts' table. */
  assert_int_equal(pts_status_http(PTS_INVALID_ARG), 400);
  assert_int_equal(pts_status_grpc(PTS_INVALID_ARG), 3);
  assert_int_equal(pts_status_http(PTS_NOT_FOUND), 404);
  assert_int_equal(pts_status_grpc(PTS_NOT_FOUND), 5);
  assert_int_equal(pts_status_http(PTS_UNAVAILABLE), 503);
  assert_int_equal(pts_status_grpc(PTS_UNAVAILABLE), 14);
  assert_int_equal(pts_status_http(PTS_UNSUPPORTED), 501);
  assert_int_equal(pts_status_grpc(PTS_UNSUPPORTED), 12);
  assert_int_equal(pts_status_http(PTS_INTERNAL), 500);
  assert_int_equal(pts_status_grpc(PTS_INTERNAL), 13);
  assert_int_equal(pts_status_http(PTS_ALREADY_EXISTS), 400);
  assert_int_equal(pts_status_http(PTS_TOO_LARGE), 413);
  assert_string_equal(pts_status_name(PTS_NOT_FOUND), "NOT_FOUND");
  assert_int_equal(pts_status_http((enum pts_status)1000), 500);
}

static void set_and_prefix(void **state) {
  (void)state;
  struct pts_error err;
  assert_int_equal(pts_error_set(&err, PTS_INVALID_ARG, "input '%s' has %d dims", "X", 3),
                   PTS_INVALID_ARG);
  assert_string_equal(err.msg, "input 'X' has 3 dims");
  pts_error_prefix(&err, "model '%s'", "m");
  assert_string_equal(err.msg, "model 'm': input 'X' has 3 dims");
  assert_int_equal(err.code, PTS_INVALID_ARG);
  pts_error_clear(&err);
  assert_int_equal(err.code, PTS_OK);
  assert_string_equal(err.msg, "");
  assert_int_equal(pts_error_set(NULL, PTS_NOT_FOUND, "x"), PTS_NOT_FOUND);
}

static void long_messages_stay_terminated(void **state) {
  (void)state;
  struct pts_error err;
  char long_name[2 * PTS_ERROR_MSG_MAX];
  memset(long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  pts_error_set(&err, PTS_INVALID_ARG, "%s", long_name);
  assert_int_equal(strlen(err.msg), PTS_ERROR_MSG_MAX - 1);
  pts_error_prefix(&err, "%s", long_name);
  assert_true(strlen(err.msg) < PTS_ERROR_MSG_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(maps_to_triton_codes),
      cmocka_unit_test(set_and_prefix),
      cmocka_unit_test(long_messages_stay_terminated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
