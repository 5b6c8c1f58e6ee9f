/* frontend/grpc/restrict_grpc.c — see restrict_grpc.h. */
#include "frontend/grpc/restrict_grpc.h"

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

bool pts_grpc_restriction_key(const struct pts_restriction *rs, const char *name, size_t namelen) {
  size_t pre = strlen(PTS_GRPC_RESTRICTED_PREFIX);
  if (namelen > pre && strncasecmp(name, PTS_GRPC_RESTRICTED_PREFIX, pre) == 0) {
    name += pre;
    namelen -= pre;
  }
  return strlen(rs->header) == namelen && strncasecmp(name, rs->header, namelen) == 0;
}

bool pts_grpc_restriction_header(const struct pts_restriction *rs, const char *name,
                                 size_t namelen, const char *value, size_t valuelen) {
  return pts_grpc_restriction_key(rs, name, namelen) && strlen(rs->value) == valuelen &&
         memcmp(value, rs->value, valuelen) == 0;
}
