/* frontend/http/v2_fast.h — the common KServe v2 infer header, decoded in
 * one pass over its text, without a JSON tree.
 *
 * Why: decoding the header through jansson (build the tree, look keys up,
 * free it) was about a quarter of the instructions ptserve spends on a
 * small HTTP request (issue #13, docs/experiments/hotpath). Most requests are the
 * same few shapes, as tritonclient and perf_analyzer send them: binary
 * inputs named with a datatype and a shape, outputs asking for binary data,
 * or both in shared-memory regions (a request that is all header, and
 * that jansson alone would take: docs/experiments/shm-fast-decode).
 *
 * What: pts_v2_fast_decode takes a header only when it is in that subset
 * and valid: an object with "id" (string), "parameters" (only
 * "binary_data_output": bool), "inputs" (1 to PTS_V2_FAST_MAX objects with
 * exactly "name", "datatype", "shape" and "parameters" of either
 * {"binary_data_size": n}, whose sizes match their shapes and use up the
 * body, or a shared-memory place: "shared_memory_region" (a non-empty
 * string), "shared_memory_byte_size" and optionally "shared_memory_offset")
 * and "outputs" (at most PTS_V2_FAST_MAX objects with "name" and optionally
 * "parameters" of "binary_data": bool and/or a shared-memory place, not
 * binary_data true with a region); strings without escapes, control or
 * non-ASCII bytes; integers of at most 18 digits; no duplicate key or name.
 * Anything else — JSON data, classification, other parameters, any error —
 * it declines, untouched, and pts_v2_decode_infer's full decoder (jansson)
 * handles it: that decoder alone writes error messages, so they stay the
 * same. Where it accepts, it fills the request exactly as the full decoder
 * would (tests/unit/frontend/v2_fast_test.c and tests/fuzz/fuzz_v2_infer.c
 * compare the two).
 *
 * Threading: a pure function; thread-safe.
 */
#ifndef PTS_FRONTEND_HTTP_V2_FAST_H
#define PTS_FRONTEND_HTTP_V2_FAST_H

#include <stddef.h>

#include "core/buf.h"
#include "scheduler/request.h"

/* Most inputs or outputs a header may name and still be taken here. */
#define PTS_V2_FAST_MAX 16

enum pts_v2_fast {
  PTS_V2_FAST_DECLINED, /* not in the subset (or invalid): req untouched */
  PTS_V2_FAST_DONE,     /* req filled: id, binary_data_output, inputs, outputs */
  PTS_V2_FAST_NOMEM,    /* out of memory while filling: req partly filled */
};

/* body->data[0..header_len) is the JSON header (header_len <= body->size),
 * the rest the binary tail. Inputs become views of `body` (one reference
 * each), as the full decoder makes them. `body` is borrowed. */
enum pts_v2_fast pts_v2_fast_decode(struct pts_buf *body, size_t header_len,
                                    struct pts_infer_request *req);

#endif
