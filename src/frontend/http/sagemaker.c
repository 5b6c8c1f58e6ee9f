/* frontend/http/sagemaker.c — see sagemaker.h. */
#include "frontend/http/sagemaker.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* tritonserver's default: a name no model has, so /invocations says which
 * variable was missing when the request names an unknown model. */
#define UNSET_MODEL "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"

static const char *env_or(const char *name, const char *fallback) {
  const char *v = getenv(name);
  return v ? v : fallback;
}

enum pts_status pts_sagemaker_from_env(struct pts_sagemaker *out, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  const char *type = env_or("SAGEMAKER_TRITON_INFERENCE_TYPE", "infer");
  if (strcmp(type, "infer") == 0)
    out->invoke = PTS_ROUTE_MODEL_INFER;
  else if (strcmp(type, "generate") == 0)
    out->invoke = PTS_ROUTE_MODEL_GENERATE;
  else if (strcmp(type, "generate_stream") == 0)
    out->invoke = PTS_ROUTE_MODEL_GENERATE_STREAM;
  else
    return pts_error_set(err, PTS_INVALID_ARG,
                         "Server has invalid inference type '%.100s'. Must be one of: infer, "
                         "generate, generate_stream. (SAGEMAKER_TRITON_INFERENCE_TYPE)",
                         type);
  /* Triton: "live" is liveness, anything else readiness. */
  out->ping_live = strcmp(env_or("SAGEMAKER_TRITON_PING_MODE", "ready"), "live") == 0;
  out->model = pts_strdup(env_or("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", UNSET_MODEL));
  if (!out->model) return pts_error_set(err, PTS_NOMEM, "out of memory reading SageMaker's settings");
  return PTS_OK;
}

void pts_sagemaker_clear(struct pts_sagemaker *sm) {
  if (!sm) return;
  pts_free(sm->model);
  sm->model = NULL;
}

enum pts_status pts_sagemaker_route(const struct pts_sagemaker *sm, const char *path,
                                    struct pts_http_route *out, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  out->kind = PTS_ROUTE_NOT_FOUND;
  out->version = -1; /* the model's latest ready version, as Triton's empty version */
  if (strcmp(path, "/ping") == 0) {
    out->kind = sm->ping_live ? PTS_ROUTE_HEALTH_LIVE : PTS_ROUTE_HEALTH_READY;
  } else if (strcmp(path, "/invocations") == 0) {
    if (!(out->model = pts_strdup(sm->model)))
      return pts_error_set(err, PTS_NOMEM, "out of memory routing a SageMaker request");
    out->kind = sm->invoke;
  }
  return PTS_OK;
}

enum pts_status pts_sagemaker_header_length(const char *content_type, const char **value,
                                            struct pts_error *err) {
  static const char mime[] = PTS_SAGEMAKER_BINARY_MIME;
  *value = NULL;
  if (!content_type) return PTS_OK;
  const char *at = strstr(content_type, mime);
  if (!at) return PTS_OK;
  if (at != content_type)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "expect MIME type for binary data starts with '%s', got: %.200s", mime,
                         content_type);
  *value = at + sizeof mime - 1;
  return PTS_OK;
}
