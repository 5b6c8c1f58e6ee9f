/* frontend/grpc/infer.h — ModelInferRequest / ModelInferResponse wire format
 * <-> the native request and response.
 *
 * Pure functions over memory: no gRPC, no server. The transport (grpc.c)
 * gathers a received message into one pts_buf, calls the decoder, hands the
 * request to the core, and turns the encoder's pieces into gRPC slices.
 *
 * Zero copy in both directions:
 * - raw_input_contents entries become input tensors that are views of the
 *   message buffer (each holds a reference). The common message is read in
 *   one pass without protobuf-c (infer_fast.h); for any other the
 *   top-level fields are split by hand so that protobuf-c (which copies
 *   every `bytes` field) only sees the small header fields. Typed
 *   `contents` are decoded once into a little-endian buffer of exactly the
 *   tensor's size.
 * - an encoded response is a list of pieces: the header (everything but
 *   raw_output_contents, written here in the form protobuf-c packs), then
 *   per output a small length prefix and the output bytes themselves, a
 *   view of the backend's output buffer. Repeated fields may be split
 *   around other fields on the wire, so appending the raw entries after the
 *   header is a valid encoding.
 *
 * Checks made here are the wire-level ones (protocol-facts §2.4): message
 * well-formedness, datatype names, shapes, typed contents against datatype
 * and element count, raw and typed together, one raw entry per input,
 * reserved and typed parameters. Checks against the model config are the
 * core's (pts_server_infer_async), shared with HTTP.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_FRONTEND_GRPC_INFER_H
#define PTS_FRONTEND_GRPC_INFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "core/buf.h"
#include "core/status.h"
#include "scheduler/request.h"

/* Request-level options that are not part of the native request. */
struct pts_grpc_infer_opts {
  bool empty_final_response; /* triton_enable_empty_final_response */
};

/* Decodes the ModelInferRequest in msg->data[0..msg->size) into `req`:
 * model name and version, id, parameters (priority, timeout), inputs and
 * requested outputs. Raw inputs are views of `msg` (each holds a reference;
 * `msg` itself stays borrowed). On error `req` may be partly filled; the
 * caller frees it as usual (pts_infer_request_free). `opts` may be NULL. */
enum pts_status pts_grpc_decode_infer(struct pts_buf *msg, struct pts_infer_request *req,
                                      struct pts_grpc_infer_opts *opts, struct pts_error *err);

/* The same through the full decoder alone (hand split + protobuf-c).
 * pts_grpc_decode_infer tries the one-pass decoder of the common message
 * first (infer_fast.h) and comes here when it declines; the tests compare
 * the two. */
enum pts_status pts_grpc_decode_infer_full(struct pts_buf *msg, struct pts_infer_request *req,
                                           struct pts_grpc_infer_opts *opts,
                                           struct pts_error *err);

/* One contiguous part of an encoded message. */
struct pts_grpc_piece {
  const void *data; /* points into buf->data */
  size_t size;
  struct pts_buf *buf; /* one reference held */
};

/* An encoded message: the concatenation of its pieces. */
struct pts_grpc_reply {
  size_t n_pieces;
  struct pts_grpc_piece *pieces; /* owned array */
  size_t size;                   /* total bytes */
};

/* Releases every piece and the array; leaves *r empty. NULL-safe. */
void pts_grpc_reply_clear(struct pts_grpc_reply *r);

/* Encodes `resp` as a ModelInferResponse: model_name, model_version (decimal
 * string), id, outputs (name, datatype, shape), raw_output_contents always
 * (one entry per output, in order; never `contents`). With `stream`, the
 * message is a ModelStreamInferResponse wrapping it, and the response
 * carries parameter triton_final_response=true (each request answers once).
 * Both arguments are borrowed; output data is referenced, not copied, when
 * the tensor has a buffer. *out is filled only on success. */
enum pts_status pts_grpc_encode_infer(const struct pts_infer_request *req,
                                      const struct pts_infer_response *resp, bool stream,
                                      struct pts_grpc_reply *out, struct pts_error *err);

/* A ModelStreamInferResponse reporting `msg` in error_message, with the
 * request id in infer_response.id so that the client can tell which request
 * failed (`id` may be NULL). */
enum pts_status pts_grpc_encode_stream_error(const char *id, const char *msg,
                                             struct pts_grpc_reply *out, struct pts_error *err);

/* Packs any protobuf-c message into a one-piece reply. */
enum pts_status pts_grpc_pack(const ProtobufCMessage *m, struct pts_grpc_reply *out,
                              struct pts_error *err);

/* A protobuf-c allocator over pts_malloc/pts_free, for every unpack (so
 * allocation failure injection reaches the decoders too); free unpacked
 * messages with it. */
ProtobufCAllocator *pts_grpc_pb_allocator(void);

/* Unpacks `data` as a message of type `d` with that allocator. NULL with
 * INVALID_ARG ("failed to parse <Message>: ...") for bytes that are not
 * such a message, or NOMEM when an allocation failed. */
ProtobufCMessage *pts_grpc_unpack(const ProtobufCMessageDescriptor *d, const void *data, size_t len,
                                  struct pts_error *err);

#endif
