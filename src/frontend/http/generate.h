/* frontend/http/generate.h — Triton's generate extension (provisional,
 * HTTP only; protocol-facts §1.17): POST .../generate and
 * .../generate_stream take one flat JSON object instead of the v2 tensor
 * form, and answer one.
 *
 * Request: every key that names one of the model's inputs is that input;
 * its value is a JSON value or a flat array of them, and its shape comes
 * from the configuration (Triton's rule: the fixed dims take their share
 * of the elements, the innermost variable dim the rest, other variable
 * dims 1). "id" is the request id; "parameters" is an object whose keys
 * are mapped the same way; every other key is a request parameter
 * (string, number or boolean). Every output is returned.
 * Reply: {"id"?, "model_name", "model_version", <output>: value...}, an
 * output of one element as a bare value, else a flat array; for
 * generate_stream each reply is one Server-Sent Event ("data: ...\n\n").
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_FRONTEND_HTTP_GENERATE_H
#define PTS_FRONTEND_HTTP_GENERATE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "model_config.pb-c.h"
#include "scheduler/request.h"

/* Decodes body[0..len) for the model configured by `cfg` (borrowed): fills
 * req->id, inputs and the parameters pts_v2_decode_params knows; outputs
 * stay "every output, as JSON". An empty body is an empty object (Triton
 * allows it; the core then names the missing inputs). INVALID_ARG with a
 * message naming the key otherwise; req may be partly filled, the caller
 * frees it as usual. */
enum pts_status pts_generate_decode(const char *body, size_t len, const Inference__ModelConfig *cfg,
                                    struct pts_infer_request *req, struct pts_error *err);

/* Encodes `resp` (borrowed, with its request) as the generate reply, or,
 * when `stream`, as one SSE event. *out is a new string (pts_free).
 * INVALID_ARG for an output with no JSON form (FP16, BF16, NaN, BYTES that
 * are not UTF-8), NOMEM. */
enum pts_status pts_generate_encode(const struct pts_infer_request *req,
                                    const struct pts_infer_response *resp, bool stream, char **out,
                                    size_t *len, struct pts_error *err);

/* An error as one SSE event: data: {"error":"<msg>"}\n\n. New string
 * (pts_free), NULL on OOM. */
char *pts_generate_error_event(const char *msg, size_t *len);

#endif
