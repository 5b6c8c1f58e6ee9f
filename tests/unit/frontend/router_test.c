/* tests/unit/frontend/router_test.c — the URL map of protocol-facts §1.1:
 * which paths are endpoints, how names are decoded, and which version
 * segments Triton's router accepts ([0-9]+ only). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/alloc.h"
#include "frontend/http/router.h"

struct want {
  const char *path;
  enum pts_http_route_kind kind;
  const char *model; /* NULL = none */
  int64_t version;
  const char *repo;
};

static void known_paths(void **state) {
  (void)state;
  static const struct want cases[] = {
      {"/v2", PTS_ROUTE_SERVER_METADATA, NULL, -1, NULL},
      {"/v2/health/live", PTS_ROUTE_HEALTH_LIVE, NULL, -1, NULL},
      {"/v2/health/ready", PTS_ROUTE_HEALTH_READY, NULL, -1, NULL},
      {"/v2/models/m", PTS_ROUTE_MODEL_METADATA, "m", -1, NULL},
      {"/v2/models/m/versions/3", PTS_ROUTE_MODEL_METADATA, "m", 3, NULL},
      {"/v2/models/m/ready", PTS_ROUTE_MODEL_READY, "m", -1, NULL},
      {"/v2/models/m/versions/12/ready", PTS_ROUTE_MODEL_READY, "m", 12, NULL},
      {"/v2/models/m/config", PTS_ROUTE_MODEL_CONFIG, "m", -1, NULL},
      {"/v2/models/m/infer", PTS_ROUTE_MODEL_INFER, "m", -1, NULL},
      {"/v2/models/m/versions/0/infer", PTS_ROUTE_MODEL_INFER, "m", 0, NULL},
      {"/v2/models/my%20model/infer", PTS_ROUTE_MODEL_INFER, "my model", -1, NULL},
      {"/v2/models/a%2Fb/infer", PTS_ROUTE_MODEL_INFER, "a/b", -1, NULL},
      {"/v2/models/a+b", PTS_ROUTE_MODEL_METADATA, "a+b", -1, NULL},
      {"/v2/models/versions", PTS_ROUTE_MODEL_METADATA, "versions", -1, NULL},
      {"/v2/models/infer/infer", PTS_ROUTE_MODEL_INFER, "infer", -1, NULL},
      {"/v2/repository/index", PTS_ROUTE_REPO_INDEX, NULL, -1, NULL},
      {"/v2/repository/r1/index", PTS_ROUTE_REPO_INDEX, NULL, -1, "r1"},
      {"/v2/repository/models/m/load", PTS_ROUTE_REPO_LOAD, "m", -1, NULL},
      {"/v2/repository/models/m/unload", PTS_ROUTE_REPO_UNLOAD, "m", -1, NULL},
      {"/v2/repository/r1/models/m/load", PTS_ROUTE_REPO_LOAD, "m", -1, "r1"},
      /* statistics (§1.1): /v2/models/stats is every model, not a model "stats" */
      {"/v2/models/stats", PTS_ROUTE_MODEL_STATS, NULL, -1, NULL},
      {"/v2/models/m/stats", PTS_ROUTE_MODEL_STATS, "m", -1, NULL},
      {"/v2/models/m/versions/2/stats", PTS_ROUTE_MODEL_STATS, "m", 2, NULL},
      {"/v2/models/stats/stats", PTS_ROUTE_MODEL_STATS, "stats", -1, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct pts_http_route r;
    struct pts_error err;
    assert_int_equal(pts_http_route_parse(cases[i].path, &r, &err), PTS_OK);
    if (r.kind != cases[i].kind)
      fail_msg("%s: kind %d, want %d", cases[i].path, r.kind, cases[i].kind);
    if (cases[i].model)
      assert_string_equal(r.model, cases[i].model);
    else
      assert_null(r.model);
    if (cases[i].repo)
      assert_string_equal(r.repo, cases[i].repo);
    else
      assert_null(r.repo);
    assert_int_equal(r.version, cases[i].version);
    pts_http_route_clear(&r);
  }
}

static void unknown_paths(void **state) {
  (void)state;
  static const char *const paths[] = {
      "/",
      "",
      "v2",
      "/v3",
      "/v2/",
      "/v2/nothing",
      "/v2/health",
      "/v2/health/alive",
      "/v2/models",
      "/v2/models/",
      "/v2/models//infer",
      "/v2/models/m/infer/extra",
      "/v2/models/m/versions/abc/infer",
      "/v2/models/m/versions/-1/infer",
      "/v2/models/m/versions/1.0",
      "/v2/models/m/versions/",
      "/v2/models/m/versions",
      "/v2/models/m/stats/x",
      "/v2/models/m/versions/x/stats",
      "/v2/repository",
      "/v2/repository/models/m",
      "/v2/repository/models/m/reload",
      "/V2/health/live",
      "/v2/health/live/",
      "/v2/a/b/c/d/e/f/g/h/i/j",
  };
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    struct pts_http_route r;
    struct pts_error err;
    assert_int_equal(pts_http_route_parse(paths[i], &r, &err), PTS_OK);
    if (r.kind != PTS_ROUTE_NOT_FOUND) fail_msg("%s routed to %d", paths[i], r.kind);
    assert_null(r.model);
    pts_http_route_clear(&r);
  }
  struct pts_http_route r;
  struct pts_error err;
  assert_int_equal(pts_http_route_parse(NULL, &r, &err), PTS_OK);
  assert_int_equal(r.kind, PTS_ROUTE_NOT_FOUND);
}

static void bad_escapes_and_versions(void **state) {
  (void)state;
  struct pts_http_route r;
  struct pts_error err;
  assert_int_equal(pts_http_route_parse("/v2/models/a%zzb/infer", &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "a%zzb"));
  assert_int_equal(pts_http_route_parse("/v2/models/ab%2/infer", &r, &err), PTS_INVALID_ARG);
  assert_int_equal(pts_http_route_parse("/v2/models/ab%/infer", &r, &err), PTS_INVALID_ARG);
  /* A NUL would make "m%00x" address model "m". */
  assert_int_equal(pts_http_route_parse("/v2/models/m%00x/infer", &r, &err), PTS_INVALID_ARG);
  /* 2^63 does not fit int64; 2^63 - 1 does. */
  assert_int_equal(pts_http_route_parse("/v2/models/m/versions/9223372036854775808", &r, &err),
                   PTS_INVALID_ARG);
  assert_int_equal(pts_http_route_parse("/v2/models/m/versions/9223372036854775807", &r, &err),
                   PTS_OK);
  assert_int_equal(r.version, INT64_MAX);
  pts_http_route_clear(&r);
}

static void methods(void **state) {
  (void)state;
  assert_int_equal(pts_http_route_method(PTS_ROUTE_MODEL_INFER), PTS_HTTP_POST);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_REPO_INDEX), PTS_HTTP_POST);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_REPO_LOAD), PTS_HTTP_POST);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_REPO_UNLOAD), PTS_HTTP_POST);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_SERVER_METADATA), PTS_HTTP_GET);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_HEALTH_LIVE), PTS_HTTP_GET);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_MODEL_METADATA), PTS_HTTP_GET);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_MODEL_CONFIG), PTS_HTTP_GET);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_MODEL_READY), PTS_HTTP_GET);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_SHM_STATUS), PTS_HTTP_GET);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_SHM_REGISTER), PTS_HTTP_POST);
  assert_int_equal(pts_http_route_method(PTS_ROUTE_SHM_UNREGISTER), PTS_HTTP_POST);
}

/* Shared memory (§1.1): system and CUDA, the region optional except for
 * register; the region name is percent-decoded like a model name. */
static void shared_memory_paths(void **state) {
  (void)state;
  static const struct {
    const char *path;
    enum pts_http_route_kind kind;
    bool cuda;
    const char *region; /* NULL = none */
  } cases[] = {
      {"/v2/systemsharedmemory/status", PTS_ROUTE_SHM_STATUS, false, NULL},
      {"/v2/systemsharedmemory/region/r0/status", PTS_ROUTE_SHM_STATUS, false, "r0"},
      {"/v2/systemsharedmemory/region/my%20region/register", PTS_ROUTE_SHM_REGISTER, false,
       "my region"},
      {"/v2/systemsharedmemory/unregister", PTS_ROUTE_SHM_UNREGISTER, false, NULL},
      {"/v2/systemsharedmemory/region/r0/unregister", PTS_ROUTE_SHM_UNREGISTER, false, "r0"},
      {"/v2/cudasharedmemory/status", PTS_ROUTE_SHM_STATUS, true, NULL},
      {"/v2/cudasharedmemory/region/c/register", PTS_ROUTE_SHM_REGISTER, true, "c"},
      {"/v2/cudasharedmemory/unregister", PTS_ROUTE_SHM_UNREGISTER, true, NULL},
      {"/v2/systemsharedmemory/region/a%20b/unregister", PTS_ROUTE_SHM_UNREGISTER, false, "a b"},
      {"/v2/cudasharedmemory/region/g/unregister", PTS_ROUTE_SHM_UNREGISTER, true, "g"},
      /* not endpoints */
      {"/v2/systemsharedmemory/region//status", PTS_ROUTE_NOT_FOUND, false, NULL},
      {"/v2/systemsharedmemory/regions/r1/status", PTS_ROUTE_NOT_FOUND, false, NULL},
      {"/v2/systemsharedmemory", PTS_ROUTE_NOT_FOUND, false, NULL},
      {"/v2/systemsharedmemory/register", PTS_ROUTE_NOT_FOUND, false, NULL},
      {"/v2/systemsharedmemory/region/r0", PTS_ROUTE_NOT_FOUND, false, NULL},
      {"/v2/systemsharedmemory/region/status", PTS_ROUTE_NOT_FOUND, false, NULL},
      {"/v2/systemsharedmemory/region/r0/status/x", PTS_ROUTE_NOT_FOUND, false, NULL},
      {"/v2/cudasharedmemory/region/c/load", PTS_ROUTE_NOT_FOUND, false, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct pts_http_route r;
    struct pts_error err;
    assert_int_equal(pts_http_route_parse(cases[i].path, &r, &err), PTS_OK);
    if (r.kind != cases[i].kind)
      fail_msg("%s: kind %d, want %d", cases[i].path, r.kind, cases[i].kind);
    assert_int_equal(r.cuda, cases[i].cuda);
    if (cases[i].region)
      assert_string_equal(r.region, cases[i].region);
    else
      assert_null(r.region);
    assert_null(r.model);
    pts_http_route_clear(&r);
  }
  struct pts_http_route r;
  struct pts_error err;
  assert_int_equal(pts_http_route_parse("/v2/systemsharedmemory/region/a%zz/status", &r, &err),
                   PTS_INVALID_ARG);
}

static void percent_decode(void **state) {
  (void)state;
  char *out;
  size_t len;
  struct pts_error err;
  assert_int_equal(pts_http_percent_decode("a%41%62%7e", 10, &out, &len, &err), PTS_OK);
  assert_string_equal(out, "aAb~");
  assert_int_equal(len, 4);
  pts_free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(known_paths),
      cmocka_unit_test(unknown_paths),
      cmocka_unit_test(bad_escapes_and_versions),
      cmocka_unit_test(methods),
      cmocka_unit_test(shared_memory_paths),
      cmocka_unit_test(percent_decode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
