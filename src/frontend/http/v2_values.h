/* frontend/http/v2_values.h — the pieces of the v2 JSON format that the
 * generate extension (generate.c) shares with the infer format
 * (v2_json.c): parsing a request body, the request parameters, and one
 * tensor's elements as JSON values, read and written. Internal to
 * frontend/http; everything else uses v2_json.h and generate.h.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_FRONTEND_HTTP_V2_VALUES_H
#define PTS_FRONTEND_HTTP_V2_VALUES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "frontend/http/jsonw.h"
#include "scheduler/request.h"

/* Parses a request body as JSON (duplicate keys refused), INVALID_ARG with
 * the line and column otherwise. *root is a new reference (json_decref).
 * Callers parse between pts_json_arena_begin/end (config/json_arena.h). */
enum pts_status pts_v2_parse_json(const char *text, size_t n, json_t **root,
                                  struct pts_error *err);

/* What a value is, for messages: "an object", "a string", ... */
const char *pts_v2_json_kind(const json_t *v);

/* The request parameters object (protocol-facts §1.5): priority, timeout,
 * sequence_*, binary_data_output; keys starting with "triton_" refused;
 * other keys of a string, integer, boolean or number value kept in
 * req->params for the model (others dropped). `params` NULL: nothing to
 * do. */
enum pts_status pts_v2_decode_params(const json_t *params, struct pts_infer_request *req,
                                     struct pts_error *err);

/* Fills t->buf/data/byte_size from the JSON array `data` (nested arrays
 * flatten row-major), converted to t->dtype; t->name and t->shape are the
 * caller's and must hold `expected` elements. `field` names the JSON value
 * in messages ("'data'"). FP16 and BF16 have no JSON form: INVALID_ARG. */
enum pts_status pts_v2_decode_values(const json_t *data, int64_t expected, const char *field,
                                     struct pts_tensor *t, struct pts_error *err);

/* Writes t's elements as a JSON array, or, when `scalar_if_one` and t
 * holds exactly one element, as that value alone. A tensor with no JSON
 * form (FP16, BF16, NaN or infinity, BYTES that are not UTF-8) is
 * INVALID_ARG "output '<name>' can not be returned as JSON: <why>". */
enum pts_status pts_v2_write_values(struct pts_jsonw *w, const struct pts_tensor *t,
                                    bool scalar_if_one, struct pts_error *err);

#endif
