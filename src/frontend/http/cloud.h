/* frontend/http/cloud.h — the listeners cloud platforms talk to, as
 * tritonserver r25.07 implements them (its sagemaker_server.cc and
 * vertex_ai_server.cc): a port of its own where a fixed pair of paths stands
 * for health and inference on one model, and every other path is a 400
 * with no body. They pass no custom headers, so a binary body says its
 * JSON header's size in its Content-Type (binary_mime<n>), and a binary
 * reply does the same.
 *
 * Amazon SageMaker (--allow-sagemaker, --sagemaker-port 8080):
 *   GET  /ping         readiness (or liveness), 200 or 400, no body;
 *   POST /invocations  inference on SAGEMAKER_TRITON_DEFAULT_MODEL_NAME
 *                      (Triton's placeholder name when unset, which a
 *                      request then reports as unknown), as infer
 *                      (default), generate or generate_stream
 *                      (SAGEMAKER_TRITON_INFERENCE_TYPE); /ping is
 *                      liveness when SAGEMAKER_TRITON_PING_MODE=live.
 *   Multi-model endpoints (/models/...) are not served.
 * Google Vertex AI (--allow-vertex-ai, --vertex-ai-port, AIP_* variables):
 *   GET  $AIP_HEALTH_ROUTE   readiness;
 *   POST $AIP_PREDICT_ROUTE  inference on the default model
 *                            (--vertex-ai-default-model, else the
 *                            repository's one model), or, with the header
 *                            X-Vertex-Ai-Triton-Redirect: <path>, the
 *                            KServe endpoint /<path> (any of router.h's).
 *
 * Threading: the _from_env functions read the environment at start-up, on
 * one thread; the rest are pure functions over a configuration nobody
 * writes once the listener runs.
 */
#ifndef PTS_FRONTEND_HTTP_CLOUD_H
#define PTS_FRONTEND_HTTP_CLOUD_H

#include <stdbool.h>

#include "core/status.h"
#include "frontend/http/router.h"

#define PTS_VERTEX_AI_REDIRECT_HEADER "X-Vertex-Ai-Triton-Redirect"

struct pts_cloud {
  const char *what;                /* "SageMaker" or "Vertex AI", for messages and logs */
  const char *binary_mime;         /* static; the size follows it */
  char *model;                     /* owned (pts_free): what inference runs */
  bool ping_live;                  /* health is liveness instead of readiness */
  enum pts_http_route_kind invoke; /* MODEL_INFER, MODEL_GENERATE or _GENERATE_STREAM */
  char *health_route;              /* owned; the health path */
  char *predict_route;             /* owned; the inference path */
  bool redirect;                   /* the inference path follows the redirect header */
};

/* SageMaker's, from the SAGEMAKER_TRITON_* variables. An inference type
 * other than the three is INVALID_ARG (tritonserver refuses to start the
 * same way). */
enum pts_status pts_cloud_sagemaker(struct pts_cloud *out, struct pts_error *err);

/* Vertex AI's, from AIP_PREDICT_ROUTE and AIP_HEALTH_ROUTE (each required,
 * INVALID_ARG in Triton's words otherwise) and the default model: `model`
 * (--vertex-ai-default-model, borrowed) when given, which must be among
 * the `n` READY models `ready` (borrowed); else the one READY model there
 * is. */
enum pts_status pts_cloud_vertex_ai(struct pts_cloud *out, const char *model,
                                    const char *const *ready, size_t n, struct pts_error *err);

void pts_cloud_clear(struct pts_cloud *c);

/* The endpoint `path` (no query) names on the listener, filled as
 * pts_http_route_parse fills it (the model of the inference path copied);
 * `redirect` is the request's PTS_VERTEX_AI_REDIRECT_HEADER or NULL. Any
 * other path is PTS_ROUTE_NOT_FOUND. Clear with pts_http_route_clear. */
enum pts_status pts_cloud_route(const struct pts_cloud *c, const char *path, const char *redirect,
                                struct pts_http_route *out, struct pts_error *err);

/* The JSON header's size of a request from its Content-Type: *value
 * points into `content_type` at the digits after c->binary_mime (for
 * pts_v2_header_length to read), or is NULL when the body is all JSON (no
 * such type). The type anywhere but at the start is INVALID_ARG, in
 * Triton's words. */
enum pts_status pts_cloud_header_length(const struct pts_cloud *c, const char *content_type,
                                        const char **value, struct pts_error *err);

#endif
