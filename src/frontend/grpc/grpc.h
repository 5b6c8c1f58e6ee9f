/* frontend/grpc/grpc.h — the KServe v2 gRPC frontend (GRPCInferenceService
 * and grpc.health.v1.Health): its start and stop, and its two transports.
 *
 * The default (--grpc-transport nghttp2) is h2.h's: --grpc-infer-thread-count
 * libevent loops, the first the listener's, each serving the connections
 * dealt to it. The other (--grpc-transport core) is the gRPC core C API:
 * --grpc-infer-thread-count completion-queue threads, each with its own
 * queue registered with one grpc_server. Every call is driven by batches on
 * the queue of the thread that accepted it; unary rpcs are answered there.
 * Inference completions come back from scheduler instance threads: the done
 * callback encodes the response and starts the send batch itself
 * (grpc_call_start_batch is thread-safe when batches on a call are
 * serialized, which a per-call mutex does), and the batch's completion
 * returns to the call's queue thread, where the call is released.
 *
 * Threading: pts_grpc_start and pts_grpc_stop run on the main thread.
 */
#ifndef PTS_FRONTEND_GRPC_GRPC_H
#define PTS_FRONTEND_GRPC_GRPC_H

#include "core/status.h"
#include "server/server.h"

struct pts_grpc;

/* Binds o->grpc_address:o->grpc_port with o's keepalive, reuse-port and
 * compression settings, and starts the queue threads. The server is borrowed
 * and must outlive the frontend. A port that can not be bound is
 * UNAVAILABLE (tritonserver fails start-up the same way). */
enum pts_status pts_grpc_start(struct pts_server *s, const struct pts_server_options *o,
                               struct pts_grpc **out, struct pts_error *err);
/* The port actually bound (useful with --grpc-port 0). */
int pts_grpc_port(const struct pts_grpc *g);
/* The connection limit in force (--grpc-max-connections or its default). */
unsigned long pts_grpc_max_connections(const struct pts_grpc *g);
/* Stops accepting calls, lets running calls finish (open streams are
 * cancelled after a grace period), joins the threads, frees. NULL-safe. */
void pts_grpc_stop(struct pts_grpc *g);

#endif
