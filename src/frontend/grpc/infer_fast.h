/* frontend/grpc/infer_fast.h — the common ModelInferRequest, decoded in one
 * pass over its wire bytes, without protobuf-c.
 *
 * Why: the full decoder (infer.c) splits the raw_input_contents off by hand,
 * copies every other field aside and has protobuf-c unpack that copy: two
 * passes over the message, three buffers of its own and about seven
 * allocations of protobuf-c's, freed again once the request is filled. On
 * a small request that is a few thousand instructions of a unary call
 * (issue #13, docs/experiments/hotpath). Most requests are one shape, as
 * tritonclient, perf_analyzer and ptperf send them: a model name, maybe a
 * version and an id, inputs with a name, a datatype and a shape whose data
 * is in raw_input_contents, outputs asked for by name.
 *
 * What: pts_grpc_fast_decode takes a message only when it is in that subset
 * and valid: fields model_name (not empty), model_version (a version the
 * full decoder accepts) and id, each at most once; 1 to PTS_GRPC_FAST_MAX
 * inputs with exactly name, datatype (a known one) and shape (one packed
 * run of non-negative values, at most PTS_TENSOR_MAX_DIMS), each field at
 * most once; at most PTS_GRPC_FAST_MAX outputs with a name alone; as many
 * raw_input_contents entries as inputs. Strings are ASCII without NUL
 * (protobuf-c checks a proto3 string for UTF-8 in its own way, and the
 * full decoder's C strings would end at a NUL); keys are in their one-byte
 * form and lengths in at most five bytes (protobuf-c refuses longer ones).
 * Anything else — request or tensor parameters (shared memory, sequences,
 * priorities), typed contents, an unpacked or split shape, unknown or
 * repeated fields, a shape value of ten bytes, any error — it declines,
 * untouched, and the full decoder handles the message: that decoder alone
 * writes error messages, so they stay the same. Where it accepts, it fills
 * the request exactly as the full decoder would
 * (tests/unit/grpc/grpc_fast_test.c and tests/fuzz/fuzz_grpc_infer.c
 * compare the two).
 *
 * Threading: a pure function; thread-safe.
 */
#ifndef PTS_FRONTEND_GRPC_INFER_FAST_H
#define PTS_FRONTEND_GRPC_INFER_FAST_H

#include "core/buf.h"
#include "scheduler/request.h"

/* Most inputs or outputs a message may carry and still be taken here. */
#define PTS_GRPC_FAST_MAX 16

enum pts_grpc_fast {
  PTS_GRPC_FAST_DECLINED, /* not in the subset (or invalid): req untouched */
  PTS_GRPC_FAST_DONE,     /* req filled: model, version, id, inputs, outputs */
  PTS_GRPC_FAST_NOMEM,    /* out of memory while filling: req partly filled */
};

/* msg holds one whole ModelInferRequest. Inputs become views of `msg` (one
 * reference each), as the full decoder makes them. `msg` is borrowed. */
enum pts_grpc_fast pts_grpc_fast_decode(struct pts_buf *msg, struct pts_infer_request *req);

#endif
