/* frontend/grpc/grpc.h — the KServe v2 gRPC frontend (GRPCInferenceService
 * and grpc.health.v1.Health): its start and stop.
 *
 * The transport is h2.h's, on nghttp2: --grpc-infer-thread-count libevent
 * loops, the first the listener's, each serving the connections dealt to
 * it. (gRPC core's C API served it until issue 50 removed it: one
 * transport, measured in docs/internals/grpc.md.)
 *
 * Threading: pts_grpc_tls_new, pts_grpc_start and pts_grpc_stop run on
 * the main thread.
 */
#ifndef PTS_FRONTEND_GRPC_GRPC_H
#define PTS_FRONTEND_GRPC_GRPC_H

#include "core/status.h"
#include "server/server.h"

struct pts_grpc;
struct pts_tls_ctx;

/* The TLS context of o's --grpc-use-ssl flags, their files read and
 * checked (net/tls.h), in *out; NULL there when gRPC is served without
 * TLS. INVALID_ARG, naming the flag and the file, when a file is missing,
 * unreadable or not what its flag says. main.c calls it to refuse a bad
 * command line before any model loads; pts_grpc_start, to serve. Free
 * with pts_tls_ctx_free. */
enum pts_status pts_grpc_tls_new(const struct pts_server_options *o, struct pts_tls_ctx **out,
                                 struct pts_error *err);

/* Binds o->grpc_address:o->grpc_port with o's keepalive, reuse-port,
 * compression and TLS settings, and starts the loops. The server is borrowed
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
