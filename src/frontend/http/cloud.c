/* frontend/http/cloud.c — see cloud.h. */
#include "frontend/http/cloud.h"

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

static enum pts_status nomem(struct pts_error *err, const char *what) {
  return pts_error_set(err, PTS_NOMEM, "out of memory reading %s's settings", what);
}

enum pts_status pts_cloud_sagemaker(struct pts_cloud *out, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  out->what = "SageMaker";
  out->binary_mime = "application/vnd.sagemaker-triton.binary+json;json-header-size=";
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
  out->health_route = pts_strdup("/ping");
  out->predict_route = pts_strdup("/invocations");
  if (!out->model || !out->health_route || !out->predict_route) {
    pts_cloud_clear(out);
    return nomem(err, "SageMaker");
  }
  return PTS_OK;
}

enum pts_status pts_cloud_vertex_ai(struct pts_cloud *out, const char *model,
                                    const char *const *ready, size_t n, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  out->what = "Vertex AI";
  out->binary_mime = "application/vnd.vertex-ai-triton.binary+json;json-header-size=";
  out->invoke = PTS_ROUTE_MODEL_INFER;
  out->redirect = true;
  const char *predict = env_or("AIP_PREDICT_ROUTE", ""), *health = env_or("AIP_HEALTH_ROUTE", "");
  /* Triton's words, its misspelt variable name included. */
  if (!*predict)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "API_PREDICT_ROUTE is not defined for Vertex AI endpoint (set "
                         "AIP_PREDICT_ROUTE)");
  if (!*health)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "AIP_HEALTH_ROUTE is not defined for Vertex AI endpoint");
  if (!model && n != 1)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "Expect the model repository contains only a single model if default "
                         "model is not specified (%zu models are ready; name one with "
                         "--vertex-ai-default-model)",
                         n);
  if (!model) model = ready[0];
  bool loaded = false;
  for (size_t i = 0; i < n && !loaded; i++) loaded = strcmp(ready[i], model) == 0;
  if (!loaded)
    return pts_error_set(err, PTS_INVALID_ARG, "Expect the default model '%.200s' is loaded",
                         model);
  out->model = pts_strdup(model);
  out->health_route = pts_strdup(health);
  out->predict_route = pts_strdup(predict);
  if (!out->model || !out->health_route || !out->predict_route) {
    pts_cloud_clear(out);
    return nomem(err, "Vertex AI");
  }
  return PTS_OK;
}

void pts_cloud_clear(struct pts_cloud *c) {
  if (!c) return;
  pts_free(c->model);
  pts_free(c->health_route);
  pts_free(c->predict_route);
  c->model = c->health_route = c->predict_route = NULL;
}

enum pts_status pts_cloud_route(const struct pts_cloud *c, const char *path, const char *redirect,
                                struct pts_http_route *out, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  out->kind = PTS_ROUTE_NOT_FOUND;
  out->version = -1; /* the model's latest ready version, as Triton's empty version */
  if (strcmp(path, c->health_route) == 0) {
    out->kind = c->ping_live ? PTS_ROUTE_HEALTH_LIVE : PTS_ROUTE_HEALTH_READY;
  } else if (strcmp(path, c->predict_route) == 0 && c->redirect && redirect) {
    /* Vertex AI: the header names a KServe endpoint, "/" prepended. */
    size_t n = strlen(redirect);
    char *full = pts_malloc(n + 2);
    if (!full) return pts_error_set(err, PTS_NOMEM, "out of memory routing a %s request", c->what);
    full[0] = '/';
    memcpy(full + 1, redirect, n + 1);
    enum pts_status st = pts_http_route_parse(full, out, err);
    pts_free(full);
    return st;
  } else if (strcmp(path, c->predict_route) == 0) {
    if (!(out->model = pts_strdup(c->model)))
      return pts_error_set(err, PTS_NOMEM, "out of memory routing a %s request", c->what);
    out->kind = c->invoke;
  }
  return PTS_OK;
}

enum pts_status pts_cloud_header_length(const struct pts_cloud *c, const char *content_type,
                                        const char **value, struct pts_error *err) {
  *value = NULL;
  if (!content_type) return PTS_OK;
  const char *at = strstr(content_type, c->binary_mime);
  if (!at) return PTS_OK;
  if (at != content_type)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "expect MIME type for binary data starts with '%s', got: %.200s",
                         c->binary_mime, content_type);
  *value = at + strlen(c->binary_mime);
  return PTS_OK;
}
