/* frontend/grpc/restrict_grpc.c — see restrict_grpc.h. */
#include "frontend/grpc/restrict_grpc.h"

#include <grpc/slice.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#define SVC "/inference.GRPCInferenceService/"

/* Every method of the service has a row: one added to rpc.c without a row
 * here would be open under every restriction, so grpc_restrict_test checks that
 * each served method maps to a group. */
static const struct {
  const char *path;
  enum pts_api api;
} METHODS[] = {
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

enum pts_api pts_grpc_api_of_method(const char *path, size_t len) {
  if (!path) return PTS_API_NONE;
  for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++)
    if (strlen(METHODS[i].path) == len && memcmp(METHODS[i].path, path, len) == 0)
      return METHODS[i].api;
  return PTS_API_NONE;
}

enum pts_status pts_grpc_restrictions_parse(const char *const *specs, size_t n,
                                            struct pts_restrictions *out, struct pts_error *err) {
  return pts_restrictions_parse("--grpc-restricted-protocol", specs, n, out, err);
}

static bool slice_equals(grpc_slice s, const char *text, bool fold_case) {
  size_t n = strlen(text);
  if (GRPC_SLICE_LENGTH(s) != n) return false;
  const char *p = (const char *)GRPC_SLICE_START_PTR(s);
  return fold_case ? strncasecmp(p, text, n) == 0 : memcmp(p, text, n) == 0;
}

enum pts_status pts_grpc_restriction_check(const struct pts_restrictions *r, const char *path,
                                           size_t len, const grpc_metadata_array *md,
                                           struct pts_error *err) {
  const struct pts_restriction *rs = pts_restriction_for(r, pts_grpc_api_of_method(path, len));
  if (!rs) return PTS_OK;
  for (size_t i = 0; md && i < md->count; i++)
    if (slice_equals(md->metadata[i].key, rs->header, true) &&
        slice_equals(md->metadata[i].value, rs->value, false))
      return PTS_OK;
  return pts_error_set(err, PTS_UNAVAILABLE, "This protocol is restricted, expecting header '%s'",
                       rs->header);
}
