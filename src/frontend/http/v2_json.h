/* frontend/http/v2_json.h — KServe v2 REST wire format <-> native structs.
 *
 * Everything here is a pure function over memory: no event loop, no socket,
 * no server. The transport (http.c) reads the body into a pts_buf, calls the
 * decoder, hands the request to the core, and writes what the encoder
 * produced. That keeps every wire rule unit-testable.
 *
 * Checks made here are the wire-level ones (protocol-facts §1.6, §1.7, §5):
 * JSON well-formedness and structure, datatype names, shape numbers, element
 * counts and JSON element types and ranges, binary chunk accounting. Checks
 * against the model config (datatype vs config, shapes, batch size, unknown
 * tensors) are the core's, in pts_server_infer_async.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_FRONTEND_HTTP_V2_JSON_H
#define PTS_FRONTEND_HTTP_V2_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/status.h"
#include "model_config.pb-c.h"
#include "scheduler/request.h"
#include "server/server.h"

/* Deepest nesting of an input's "data" arrays accepted (Triton's limit). */
#define PTS_V2_MAX_DATA_DEPTH 100

/* Reads the Inference-Header-Content-Length header. `value` NULL (absent):
 * the whole body is JSON, *header_len = body_len. Otherwise it must be a
 * decimal integer in [0, body_len]; 0 is a raw binary request
 * (pts_v2_decode_raw). INVALID_ARG otherwise. */
enum pts_status pts_v2_header_length(const char *value, size_t body_len, size_t *header_len,
                                     struct pts_error *err);

/* Triton's raw binary request (Inference-Header-Content-Length: 0): the
 * whole body is the one input of a model with exactly one input, named and
 * typed by `cfg` (the model's configuration, borrowed), shape its dims
 * (with a batch of 1 when max_batch_size > 0), the one variable-sized dim
 * deduced from the body's length. A BYTES input must have dims [1]: the
 * body is its one element (the 4-byte length is prepended, so the input
 * gets a buffer of its own). Every output is asked for, in binary.
 * Refusals (INVALID_ARG) start with Triton's words: more than one input in
 * the configuration, more than one variable-sized dim, BYTES not [1], and
 * a body whose length is no whole number of elements. Fills req->inputs
 * and binary_data_output; `body` is borrowed (the input holds a reference). */
enum pts_status pts_v2_decode_raw(struct pts_buf *body, const Inference__ModelConfig *cfg,
                                  struct pts_infer_request *req, struct pts_error *err);

/* Decodes an infer request body: body->data[0..header_len) is the JSON
 * header, the rest the binary tail. Fills req->id, inputs, outputs,
 * binary_data_output, priority and timeout_us (the caller sets the model,
 * version and callbacks). Binary inputs are views of `body` (each holds a
 * reference); JSON inputs get their own buffer, little-endian and typed.
 * On error req may be partly filled: the caller frees it as usual
 * (pts_infer_request_free). `body` is borrowed. */
enum pts_status pts_v2_decode_infer(struct pts_buf *body, size_t header_len,
                                    struct pts_infer_request *req, struct pts_error *err);
/* The same through jansson's tree alone. pts_v2_decode_infer tries the
 * one-pass decoder of the common header first (v2_fast.h) and comes here
 * for everything it declines; tests and the fuzzer call this one to check
 * that both fill a request alike. */
enum pts_status pts_v2_decode_infer_tree(struct pts_buf *body, size_t header_len,
                                         struct pts_infer_request *req, struct pts_error *err);

/* One binary chunk of a response, in output order. */
struct pts_v2_chunk {
  const void *data; /* points into buf->data, or borrowed from the response */
  size_t size;
  struct pts_buf *buf; /* one reference held (release with pts_buf_release), or
                          NULL: then data is valid only while the response lives */
};

/* An encoded infer response: `json` then each chunk, in order. */
struct pts_v2_reply {
  char *json; /* owned (pts_free) */
  size_t json_len;
  bool binary; /* some output is binary: octet-stream + header length */
  size_t n_chunks;
  struct pts_v2_chunk *chunks; /* owned array */
};

/* Encodes `resp` for the request that produced it (binary or JSON per
 * output, §1.7: `binary_data` on a listed output; `binary_data_output` for
 * outputs the request did not list). FP16/BF16 in JSON, non-finite floats
 * and BYTES elements that are not UTF-8 are INVALID_ARG telling the client
 * to ask for binary data. Both arguments are borrowed; *out is filled only
 * on success (clear it with pts_v2_reply_clear). */
enum pts_status pts_v2_encode_infer(const struct pts_infer_request *req,
                                    const struct pts_infer_response *resp, struct pts_v2_reply *out,
                                    struct pts_error *err);
void pts_v2_reply_clear(struct pts_v2_reply *r);

/* `{"error":"<msg>"}` (§1.2), a new string (pts_free) or NULL on OOM. */
char *pts_v2_error_json(const char *msg, size_t *len);

/* Server metadata (§1.4). New string (pts_free) or NULL on OOM. */
char *pts_v2_server_metadata(const char *name, const char *version, const char *const *extensions,
                             size_t n_extensions, size_t *len);

/* Model metadata (§1.5): `versions` as strings, platform = config platform or
 * backend, shapes with a leading -1 when max_batch_size > 0. New string
 * (pts_free) or NULL on OOM. */
char *pts_v2_model_metadata(const char *name, const int64_t *versions, size_t n_versions,
                            const Inference__ModelConfig *cfg, size_t *len);

/* The repository index (§1.12): an array of {name, version, state, reason},
 * version only when known, reason only when non-empty. */
char *pts_v2_index_json(const struct pts_index_entry *entries, size_t n, size_t *len);

/* Reads the optional repository-index request body ({"ready": bool}); an
 * empty body means ready = false. */
enum pts_status pts_v2_parse_index_request(const char *body, size_t len, bool *ready,
                                           struct pts_error *err);

#endif
