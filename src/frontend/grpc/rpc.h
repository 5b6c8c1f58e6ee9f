/* frontend/grpc/rpc.h — the method table of the gRPC frontend and the
 * unary rpcs that are answered from the core's in-memory state.
 *
 * Every rpc of GRPCInferenceService (protocol-facts §2.2) and
 * grpc.health.v1.Health/Check has a row. Unary handlers take the request
 * message bytes and produce the response message, or an error whose code is
 * mapped to the gRPC status through the one status table; they never block
 * (health, metadata, config and index read in-memory state). ModelInfer and
 * ModelStreamInfer go through the scheduler and are driven by the transport
 * (grpc.c), so their rows carry no handler. What ptserve can not do yet
 * (shared memory, explicit load/unload) answers
 * UNSUPPORTED (gRPC UNIMPLEMENTED) with a message saying what is missing.
 *
 * Threading: the handlers are thread-safe (they use only thread-safe server
 * functions) and run on a completion-queue thread.
 */
#ifndef PTS_FRONTEND_GRPC_RPC_H
#define PTS_FRONTEND_GRPC_RPC_H

#include <stddef.h>

#include "core/buf.h"
#include "core/status.h"
#include "frontend/grpc/infer.h"
#include "server/server.h"

enum pts_grpc_rpc_kind {
  PTS_GRPC_UNARY,  /* handler below */
  PTS_GRPC_INFER,  /* ModelInfer: decoded by infer.h, scheduled by the core */
  PTS_GRPC_STREAM, /* ModelStreamInfer */
};

/* Decodes `in` (the request message, borrowed), answers into *out (filled
 * only on success; clear with pts_grpc_reply_clear). */
typedef enum pts_status (*pts_grpc_unary_fn)(struct pts_server *s, const struct pts_buf *in,
                                             struct pts_grpc_reply *out, struct pts_error *err);

struct pts_grpc_rpc {
  const char *path; /* "/inference.GRPCInferenceService/ServerLive" */
  enum pts_grpc_rpc_kind kind;
  pts_grpc_unary_fn fn; /* PTS_GRPC_UNARY only */
};

/* The row for a method path of `len` bytes (not NUL-terminated), or NULL
 * for a method ptserve does not serve (the transport answers UNIMPLEMENTED). */
const struct pts_grpc_rpc *pts_grpc_rpc_find(const char *path, size_t len);

/* The extensions reported by ServerMetadata, as over HTTP. */
extern const char *const PTS_GRPC_EXTENSIONS[];
extern const size_t PTS_GRPC_N_EXTENSIONS;

#endif
