/* tests/unit/frontend/restrict_test.c — --http-restricted-api: the flag's
 * syntax and refusals, and which API group each endpoint of protocol-facts
 * §1.1 belongs to (tritonserver's grouping). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "frontend/http/restrict.h"

static void groups_of_paths(void **state) {
  (void)state;
  static const struct {
    const char *path;
    enum pts_api api;
  } cases[] = {
      {"/v2/health/live", PTS_API_HEALTH},
      {"/v2/health/ready", PTS_API_HEALTH},
      {"/v2/models/m/ready", PTS_API_HEALTH},
      {"/v2/models/m/versions/2/ready", PTS_API_HEALTH},
      {"/v2", PTS_API_METADATA},
      {"/v2/models/m", PTS_API_METADATA},
      {"/v2/models/m/versions/2", PTS_API_METADATA},
      {"/v2/models/ready", PTS_API_METADATA}, /* a model named "ready" */
      {"/v2/models/m/infer", PTS_API_INFERENCE},
      {"/v2/models/m/versions/1/infer", PTS_API_INFERENCE},
      {"/v2/models/m/generate", PTS_API_INFERENCE},
      {"/v2/models/m/generate_stream", PTS_API_INFERENCE},
      {"/v2/models/m/config", PTS_API_MODEL_CONFIG},
      {"/v2/models/stats", PTS_API_STATISTICS},
      {"/v2/models/m/stats", PTS_API_STATISTICS},
      {"/v2/models/m/versions/1/stats", PTS_API_STATISTICS},
      {"/v2/repository/index", PTS_API_MODEL_REPOSITORY},
      {"/v2/repository/models/m/load", PTS_API_MODEL_REPOSITORY},
      {"/v2/repository/r/models/m/unload", PTS_API_MODEL_REPOSITORY},
      {"/v2/systemsharedmemory/status", PTS_API_SHARED_MEMORY},
      {"/v2/cudasharedmemory/region/r/register", PTS_API_SHARED_MEMORY},
      {"/v2/trace/setting", PTS_API_TRACE},
      {"/v2/models/m/trace/setting", PTS_API_TRACE},
      {"/v2/logging", PTS_API_LOGGING},
      {"/metrics", PTS_API_NONE},
      {"/", PTS_API_NONE},
      {"", PTS_API_NONE},
      {"/v3/health/live", PTS_API_NONE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    enum pts_api got = pts_http_api_of_path(cases[i].path);
    if (got != cases[i].api) fail_msg("%s: got %d, want %d", cases[i].path, got, cases[i].api);
  }
  assert_int_equal(pts_http_api_of_path(NULL), PTS_API_NONE);
}

static void parse_one_and_several(void **state) {
  (void)state;
  const char *specs[] = {"inference,model-config:infer-key=secret", "health:h=v:with:colons"};
  struct pts_restrictions r;
  struct pts_error err;
  assert_int_equal(pts_http_restrictions_parse(specs, 2, &r, &err), PTS_OK);
  const struct pts_restriction *inf = pts_restriction_for(&r, PTS_API_INFERENCE);
  assert_non_null(inf);
  assert_string_equal(inf->header, "infer-key");
  assert_string_equal(inf->value, "secret");
  assert_ptr_equal(pts_restriction_for(&r, PTS_API_MODEL_CONFIG), inf);
  const struct pts_restriction *h = pts_restriction_for(&r, PTS_API_HEALTH);
  assert_non_null(h);
  assert_string_equal(h->header, "h");
  assert_string_equal(h->value, "v:with:colons");
  assert_null(pts_restriction_for(&r, PTS_API_METADATA));
  assert_null(pts_restriction_for(&r, PTS_API_NONE));
  pts_restrictions_clear(&r);
}

static void refusals(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    const char *want; /* part of the message */
  } cases[] = {
      {"inference", "expected <api>[,<api>...]:<header>=<value>"},
      {"inference:key", "expected <api>"},
      {"inference:=v", "expected <api>"},
      {"inference:k=", "expected <api>"},
      {":k=v", "expected <api>"},
      {"inferences:k=v", "unknown API 'inferences'"},
      {"health,,metadata:k=v", "unknown API ''"},
      {"health,health:k=v", "API 'health' is already restricted"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct pts_restrictions r;
    struct pts_error err;
    pts_error_clear(&err);
    const char *spec = cases[i].spec;
    assert_int_equal(pts_http_restrictions_parse(&spec, 1, &r, &err), PTS_INVALID_ARG);
    if (!strstr(err.msg, cases[i].want)) fail_msg("%s: message '%s'", spec, err.msg);
    assert_non_null(strstr(err.msg, spec));
    pts_restrictions_clear(&r);
  }
  /* The same group in two flag values. */
  const char *two[] = {"health:a=1", "metadata,health:b=2"};
  struct pts_restrictions r;
  struct pts_error err;
  assert_int_equal(pts_http_restrictions_parse(two, 2, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "API 'health' is already restricted"));
  pts_restrictions_clear(&r);
}

static void names(void **state) {
  (void)state;
  assert_string_equal(pts_api_name(PTS_API_SHARED_MEMORY), "shared-memory");
  assert_string_equal(pts_api_name(PTS_API_MODEL_REPOSITORY), "model-repository");
  assert_string_equal(pts_api_name(PTS_API_NONE), "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(groups_of_paths),
      cmocka_unit_test(parse_one_and_several),
      cmocka_unit_test(refusals),
      cmocka_unit_test(names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
