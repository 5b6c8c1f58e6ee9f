/* tests/unit/core/header_forward_test.c — the header forwarding patterns:
 * tritonserver's matching rules (a match anywhere in the name, case
 * ignored: RE2::PartialMatch with "(?i)") worked out by hand for each name,
 * and the patterns refused at start-up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/header_forward.h"
#include "core/request_param.h"

static bool http(const char *name) {
  return pts_header_forward_match(PTS_FORWARD_HTTP, name, strlen(name));
}

static void partial_match_any_case(void **state) {
  (void)state;
  struct pts_error err;
  pts_header_forward_reset();
  assert_false(http("x-a")); /* no pattern: nothing */
  assert_int_equal(pts_header_forward_set(PTS_FORWARD_HTTP, "x-.*", &err), PTS_OK);
  assert_true(http("x-a"));
  assert_true(http("X-Trace-Id"));
  assert_true(http("my-x-tag")); /* anywhere in the name */
  assert_false(http("y-a"));
  assert_false(http("Content-Type"));
  /* the gRPC pattern is another one */
  assert_false(pts_header_forward_match(PTS_FORWARD_GRPC, "x-a", 3));
  assert_int_equal(pts_header_forward_set(PTS_FORWARD_HTTP, "^X-(tag|USER)$", &err), PTS_OK);
  assert_true(http("x-tag"));
  assert_true(http("X-User"));
  assert_false(http("x-tagged"));
  assert_false(http("my-x-tag"));
  /* a name is matched by its length, not a NUL */
  assert_true(pts_header_forward_match(PTS_FORWARD_HTTP, "x-tagged", 5));
  /* empty: every name, as tritonserver's "(?i)" */
  assert_int_equal(pts_header_forward_set(PTS_FORWARD_HTTP, "", &err), PTS_OK);
  assert_true(http("anything"));
  /* brackets hold literal characters: "[*?]" is not a lazy quantifier */
  assert_int_equal(pts_header_forward_set(PTS_FORWARD_HTTP, "^a[*?]$", &err), PTS_OK);
  assert_true(http("a?"));
  assert_false(http("ab"));
  pts_header_forward_reset();
  assert_false(http("anything"));
}

static void refusals_name_the_flag(void **state) {
  (void)state;
  static const struct {
    enum pts_forward_proto proto;
    const char *pattern, *says;
  } BAD[] = {
      {PTS_FORWARD_HTTP, "x-(", "--http-header-forward-pattern 'x-(' is not a valid regular"},
      {PTS_FORWARD_GRPC, "a{2,1}", "--grpc-header-forward-pattern 'a{2,1}' is not a valid"},
      {PTS_FORWARD_HTTP, "\\d", "uses a \\d-style escape"},
      {PTS_FORWARD_GRPC, "(?i)x", "uses a (?...) group"},
      {PTS_FORWARD_GRPC, "x+?", "uses a lazy quantifier"},
  };
  struct pts_error err;
  assert_int_equal(pts_header_forward_set(PTS_FORWARD_GRPC, "^keep$", &err), PTS_OK);
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    assert_int_equal(pts_header_forward_set(BAD[i].proto, BAD[i].pattern, &err),
                     PTS_INVALID_ARG);
    if (!strstr(err.msg, BAD[i].says)) fail_msg("%s: %s", BAD[i].pattern, err.msg);
  }
  /* a refused pattern leaves the one before */
  assert_true(pts_header_forward_match(PTS_FORWARD_GRPC, "keep", 4));
  pts_header_forward_reset();
}

static void param_format(void **state) {
  (void)state;
  char buf[64];
  struct pts_request_param p = {.key = "k", .type = PTS_PARAM_STRING, .v.s = "v=1"};
  assert_int_equal(pts_request_param_format(&p, buf, sizeof buf), 5);
  assert_string_equal(buf, "k=v=1");
  p = (struct pts_request_param){.key = "n", .type = PTS_PARAM_INT, .v.i = -3};
  pts_request_param_format(&p, buf, sizeof buf);
  assert_string_equal(buf, "n=-3");
  p = (struct pts_request_param){.key = "b", .type = PTS_PARAM_BOOL, .v.b = true};
  pts_request_param_format(&p, buf, sizeof buf);
  assert_string_equal(buf, "b=true");
  p = (struct pts_request_param){.key = "d", .type = PTS_PARAM_DOUBLE, .v.d = 0.5};
  pts_request_param_format(&p, buf, sizeof buf);
  assert_string_equal(buf, "d=0.5");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(partial_match_any_case),
      cmocka_unit_test(refusals_name_the_flag),
      cmocka_unit_test(param_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
