/* frontend/grpc/version.c — see version.h. */
#include "frontend/grpc/version.h"

#include <stddef.h>

enum pts_status pts_grpc_parse_version(const char *s, const char *model, int64_t *out,
                                       struct pts_error *err) {
  if (!s || !*s) {
    *out = -1;
    return PTS_OK;
  }
  int64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9' || v > (INT64_MAX - (*p - '0')) / 10)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "invalid version '%.40s' for model '%s': expected a non-negative "
                           "integer, or an empty string for the latest version",
                           s, model ? model : "");
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return PTS_OK;
}
