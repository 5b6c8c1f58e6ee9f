/* ptperf/lib/grpc_load.h — closed-loop load over gRPC (gRPC core C API).
 *
 * N in-flight slots, each with exactly one request outstanding; when its
 * response is in, the slot sends the next request at once (perf_analyzer's
 * concurrency mode, as over HTTP in load.h). Two ways to send:
 *
 * - unary: each request is one ModelInfer call. Every call is multiplexed
 *   over `channels` HTTP/2 connections (slot i uses channel i % channels);
 *   one is what a client normally does.
 * - streaming: each slot opens one bidirectional ModelStreamInfer stream
 *   and sends its requests on it one after another, as perf_analyzer's
 *   --streaming does (each of its in-flight contexts owns a stream). The
 *   streams share the channels the same way.
 *
 * One thread drives one completion queue: it dequeues every completion and
 * starts the next call or message from there, so the client adds no
 * hand-offs of its own. Where one thread is not enough, ptperf runs several
 * loads side by side (--threads), each with its own channels and queue,
 * recording into one recorder. A call that ends with a status other than OK, a
 * response that is not a well-formed ModelInferResponse with its outputs, a
 * stream response with an error_message, and a stream that ends while a
 * request is outstanding each count as one error (the stream is then
 * reopened).
 *
 * Threading: start/stop are called from one controlling thread; the load
 * runs on its own thread between start and stop and records into the
 * options' recorder, which other loads may share (samples.h: it has its own
 * lock).
 */
#ifndef PTPERF_GRPC_LOAD_H
#define PTPERF_GRPC_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "ptperf/lib/samples.h"

struct ptperf_grpc_load;

struct ptperf_grpc_options {
  const char *target; /* "host:port", borrowed for the call to start */
  bool streaming;
  int channels; /* >= 1 */
  int concurrency;
  int connect_timeout_ms; /* the first connection must be READY by then */
  struct ptperf_recorder *rec; /* borrowed until ptperf_grpc_load_stop */
};

/* The messages (packed ModelInferRequests, grpc_msg.h) are borrowed until
 * ptperf_grpc_load_stop and sent in turn. Fails (UNAVAILABLE) when the
 * server can not be reached within the connect timeout. Caller frees *out
 * with ptperf_grpc_load_stop. */
enum pts_status ptperf_grpc_load_start(const struct ptperf_grpc_options *o,
                                       uint8_t *const *messages, const size_t *message_lens,
                                       size_t n_messages, struct ptperf_grpc_load **out,
                                       struct pts_error *err);

/* Cancels what is in flight, waits for every call to end, joins the
 * thread, closes the channels and frees l. NULL-safe. */
void ptperf_grpc_load_stop(struct ptperf_grpc_load *l);

#endif
