/* ptperf/lib/grpc_msg.h — the bytes of ptperf's gRPC messages.
 *
 * Requests are ModelInferRequest messages (protocol-facts §2) built once,
 * packed by protobuf-c, with every input in raw_input_contents — the data
 * ptperf_inputs_fill gives, so HTTP and gRPC runs send the same tensors —
 * and no requested outputs: the server returns every output, in
 * raw_output_contents. The same message goes to ModelInfer and to
 * ModelStreamInfer.
 *
 * Responses are checked, not unpacked: a small scan of the protobuf wire
 * format (no allocation per response, like the HTTP client's framing
 * parser) that the message is well-formed, names at least one output and
 * carries one raw_output_contents entry per output, and, on a stream, that
 * error_message is empty.
 *
 * Threading: pure functions over caller-owned memory; thread-safe.
 */
#ifndef PTPERF_GRPC_MSG_H
#define PTPERF_GRPC_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "ptperf/lib/infer.h"

#define PTPERF_GRPC_INFER_METHOD "/inference.GRPCInferenceService/ModelInfer"
#define PTPERF_GRPC_STREAM_METHOD "/inference.GRPCInferenceService/ModelStreamInfer"

/* A packed ModelInferRequest for model m (its version, if set), inputs from
 * `seed` (zeros when zero_data). Caller frees *out with pts_free. */
enum pts_status ptperf_grpc_request_build(const struct ptperf_model *m, uint64_t seed,
                                          bool zero_data, uint8_t **out, size_t *out_len,
                                          struct pts_error *err);

/* What a response said. */
struct ptperf_grpc_reply {
  size_t n_outputs; /* ModelInferResponse.outputs entries */
  size_t n_raw;     /* raw_output_contents entries */
  /* ModelStreamInferResponse.error_message, pointing into the checked
   * buffer (not NUL-terminated); NULL when absent. */
  const char *error;
  size_t error_len;
};

/* Checks buf[0..len) as a ModelInferResponse (stream false) or a
 * ModelStreamInferResponse (stream true) and fills *out. PTS_OK: a
 * successful inference. INVALID_ARG: not well-formed, no outputs, or the
 * counts differ; UNAVAILABLE: the stream response carries an error_message
 * (which err->msg quotes). */
enum pts_status ptperf_grpc_response_check(const uint8_t *buf, size_t len, bool stream,
                                           struct ptperf_grpc_reply *out, struct pts_error *err);

/* "OK", "INVALID_ARGUMENT", ... for a gRPC status code; "UNKNOWN" beyond. */
const char *ptperf_grpc_status_name(int code);

#endif
