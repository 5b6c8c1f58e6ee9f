/* frontend/http/sagemaker.h — Amazon SageMaker's serving contract, as
 * tritonserver r25.07 implements it (its sagemaker_server.cc): a listener
 * of its own (--allow-sagemaker, --sagemaker-port, default 8080) where
 *   GET  /ping         is the server's readiness (or liveness), 200 or 400,
 *                      no body;
 *   POST /invocations  is an inference on one model, in the KServe v2 body
 *                      (infer) or Triton's generate form;
 * and every other path is a 400 with no body. SageMaker passes no custom
 * headers, so a binary body says its JSON header's size in its
 * Content-Type (PTS_SAGEMAKER_BINARY_MIME<n>), and a binary reply does the
 * same. What /invocations runs comes from the environment, read once at
 * start-up:
 *   SAGEMAKER_TRITON_DEFAULT_MODEL_NAME  the model (Triton's placeholder
 *                                        name when unset: requests then
 *                                        name it as unknown);
 *   SAGEMAKER_TRITON_PING_MODE           "live", else readiness;
 *   SAGEMAKER_TRITON_INFERENCE_TYPE      infer (default), generate or
 *                                        generate_stream.
 * Multi-model endpoints (/models/...) are not served: their paths get the
 * 400 of any unknown path.
 *
 * Threading: pts_sagemaker_from_env reads the environment (start-up, one
 * thread); the rest are pure functions over a configuration nobody writes
 * once the listener runs.
 */
#ifndef PTS_FRONTEND_HTTP_SAGEMAKER_H
#define PTS_FRONTEND_HTTP_SAGEMAKER_H

#include <stdbool.h>

#include "core/status.h"
#include "frontend/http/router.h"

#define PTS_SAGEMAKER_BINARY_MIME "application/vnd.sagemaker-triton.binary+json;json-header-size="

struct pts_sagemaker {
  char *model;                      /* owned (pts_free) */
  bool ping_live;                   /* /ping answers liveness instead of readiness */
  enum pts_http_route_kind invoke;  /* MODEL_INFER, MODEL_GENERATE or _GENERATE_STREAM */
};

/* Reads the SAGEMAKER_TRITON_* variables. An inference type other than the
 * three is INVALID_ARG (tritonserver refuses to start the same way). */
enum pts_status pts_sagemaker_from_env(struct pts_sagemaker *out, struct pts_error *err);
void pts_sagemaker_clear(struct pts_sagemaker *sm);

/* The endpoint `path` (no query) names on the SageMaker listener, filled
 * as pts_http_route_parse fills it (the model of /invocations copied);
 * PTS_ROUTE_NOT_FOUND for any other path. Clear with pts_http_route_clear. */
enum pts_status pts_sagemaker_route(const struct pts_sagemaker *sm, const char *path,
                                    struct pts_http_route *out, struct pts_error *err);

/* The JSON header's size of a request from its Content-Type: *value
 * points into `content_type` at the digits after PTS_SAGEMAKER_BINARY_MIME
 * (for pts_v2_header_length to read), or is NULL when the body is all JSON
 * (no such type). The type anywhere but at the start is INVALID_ARG, in
 * Triton's words. */
enum pts_status pts_sagemaker_header_length(const char *content_type, const char **value,
                                            struct pts_error *err);

#endif
