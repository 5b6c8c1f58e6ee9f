/* tests/unit/grpc/grpc_restrict_test.c — --grpc-restricted-protocol: the
 * group of every rpc (the mapping the issue lists, tritonserver's groups),
 * the header check and the flag's error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <string.h>

#include "frontend/grpc/restrict_grpc.h"
#include "frontend/grpc/rpc.h"

#define SVC "/inference.GRPCInferenceService/"

static const struct {
  const char *path;
  enum pts_api api;
} EXPECTED[] = {
    {SVC "ServerLive", PTS_API_HEALTH},
    {SVC "ServerReady", PTS_API_HEALTH},
    {SVC "ModelReady", PTS_API_HEALTH},
    {"/grpc.health.v1.Health/Check", PTS_API_HEALTH},
    {SVC "ServerMetadata", PTS_API_METADATA},
    {SVC "ModelMetadata", PTS_API_METADATA},
    {SVC "ModelInfer", PTS_API_INFERENCE},
    {SVC "ModelStreamInfer", PTS_API_INFERENCE},
    {SVC "ModelConfig", PTS_API_MODEL_CONFIG},
    {SVC "ModelStatistics", PTS_API_STATISTICS},
    {SVC "RepositoryIndex", PTS_API_MODEL_REPOSITORY},
    {SVC "RepositoryModelLoad", PTS_API_MODEL_REPOSITORY},
    {SVC "RepositoryModelUnload", PTS_API_MODEL_REPOSITORY},
    {SVC "SystemSharedMemoryStatus", PTS_API_SHARED_MEMORY},
    {SVC "SystemSharedMemoryRegister", PTS_API_SHARED_MEMORY},
    {SVC "SystemSharedMemoryUnregister", PTS_API_SHARED_MEMORY},
    {SVC "CudaSharedMemoryStatus", PTS_API_SHARED_MEMORY},
    {SVC "CudaSharedMemoryRegister", PTS_API_SHARED_MEMORY},
    {SVC "CudaSharedMemoryUnregister", PTS_API_SHARED_MEMORY},
    {SVC "TraceSetting", PTS_API_TRACE},
    {SVC "LogSettings", PTS_API_LOGGING},
};
#define N_EXPECTED (sizeof EXPECTED / sizeof EXPECTED[0])

static void test_every_rpc_has_its_group(void **state) {
  (void)state;
  for (size_t i = 0; i < N_EXPECTED; i++) {
    const char *p = EXPECTED[i].path;
    /* Every method listed is served, so none is left open by accident. */
    assert_non_null(pts_grpc_rpc_find(p, strlen(p)));
    enum pts_api got = pts_grpc_api_of_method(p, strlen(p));
    if (got != EXPECTED[i].api) fail_msg("%s: group %d, expected %d", p, got, EXPECTED[i].api);
  }
}

static void test_unknown_methods_have_no_group(void **state) {
  (void)state;
  const char *bad[] = {SVC "NoSuchRpc", SVC, "", "/inference.GRPCInferenceService/ModelInferX",
                       "/grpc.health.v1.Health/Watch"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(pts_grpc_api_of_method(bad[i], strlen(bad[i])), PTS_API_NONE);
  /* A prefix of a real path (len shorter than the name) is not that rpc. */
  assert_int_equal(pts_grpc_api_of_method(SVC "ModelInfer", strlen(SVC "Model")), PTS_API_NONE);
  assert_int_equal(pts_grpc_api_of_method(NULL, 0), PTS_API_NONE);
}

/* What h2_call.c does with a call's headers: the call passes when one of
 * them is the key with the value. */
static bool passes(const struct pts_restrictions *r, const char *path, const char *const *hdrs,
                   size_t n) {
  const struct pts_restriction *rs = pts_restriction_for(r, pts_grpc_api_of_method(path, strlen(path)));
  if (!rs) return true;
  bool ok = false;
  for (size_t i = 0; i < n && !ok; i++)
    if (pts_grpc_restriction_key(rs, hdrs[2 * i], strlen(hdrs[2 * i])))
      ok = pts_grpc_restriction_header(rs, hdrs[2 * i], strlen(hdrs[2 * i]), hdrs[2 * i + 1],
                                       strlen(hdrs[2 * i + 1]));
  return ok;
}

static void test_header_check(void **state) {
  (void)state;
  const char *specs[] = {"inference,model-config:infer-key=secret"};
  struct pts_restrictions r;
  struct pts_error err;
  assert_int_equal(pts_grpc_restrictions_parse(specs, 1, &r, &err), PTS_OK);

  assert_false(passes(&r, SVC "ModelInfer", NULL, 0));
  const char *wrong[] = {"other", "secret", "infer-key", "Secret"};
  assert_false(passes(&r, SVC "ModelStreamInfer", wrong, 2));
  const char *right[] = {"other", "x", "infer-key", "secret"};
  assert_true(passes(&r, SVC "ModelInfer", right, 2));
  assert_true(passes(&r, SVC "ModelConfig", right, 2));
  /* Keys are lower-case on the wire; the flag's key is matched regardless. */
  const char *upper[] = {"INFER-KEY", "secret"};
  assert_true(passes(&r, SVC "ModelInfer", upper, 1));
  /* Neither a prefix of the value nor a longer one passes, nor a key that
   * only begins like the flag's. */
  const char *prefix[] = {"infer-key", "secre"};
  assert_false(passes(&r, SVC "ModelInfer", prefix, 1));
  const char *longer[] = {"infer-key", "secrets"};
  assert_false(passes(&r, SVC "ModelInfer", longer, 1));
  const char *keyprefix[] = {"infer-keyx", "secret"};
  assert_false(passes(&r, SVC "ModelInfer", keyprefix, 1));
  /* Open groups and unknown methods need nothing. */
  assert_true(passes(&r, SVC "ServerLive", NULL, 0));
  assert_true(passes(&r, SVC "NoSuchRpc", NULL, 0));
  pts_restrictions_clear(&r);

  /* No restrictions at all. */
  assert_int_equal(pts_grpc_restrictions_parse(NULL, 0, &r, &err), PTS_OK);
  assert_true(passes(&r, SVC "ModelInfer", NULL, 0));
  pts_restrictions_clear(&r);
}

static void test_flag_errors_name_the_flag(void **state) {
  (void)state;
  const char *bad[] = {"inference", "inference:k", "inference:=v",     "inference:k=",
                       ":k=v",      "bogus:k=v",   "health,health:k=v"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct pts_restrictions r;
    struct pts_error err;
    assert_int_equal(pts_grpc_restrictions_parse(&bad[i], 1, &r, &err), PTS_INVALID_ARG);
    assert_non_null(strstr(err.msg, "--grpc-restricted-protocol"));
    assert_non_null(strstr(err.msg, bad[i]));
    pts_restrictions_clear(&r);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_rpc_has_its_group),
      cmocka_unit_test(test_unknown_methods_have_no_group),
      cmocka_unit_test(test_header_check),
      cmocka_unit_test(test_flag_errors_name_the_flag),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
