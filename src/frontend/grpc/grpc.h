/* frontend/grpc/grpc.h — the KServe v2 gRPC frontend (GRPCInferenceService
 * and grpc.health.v1.Health): its start and stop.
 *
 * The transport is h2.h's, on nghttp2: --grpc-infer-thread-count libevent
 * loops, the first the listener's, each serving the connections dealt to
 * it. (gRPC core's C API served it until issue 50 removed it: one
 * transport, measured in docs/internals/grpc.md.)
 *
 * Threading: pts_grpc_start and pts_grpc_stop run on the main thread.
 */
#ifndef PTS_FRONTEND_GRPC_GRPC_H
#define PTS_FRONTEND_GRPC_GRPC_H

#include "core/status.h"
#include "server/server.h"

struct pts_grpc;

/* Binds o->grpc_address:o->grpc_port with o's keepalive, reuse-port and
 * compression settings, and starts the loops. The server is borrowed
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
