/* frontend/grpc/rpc.h — the method table of the gRPC frontend and the
 * unary rpcs that are answered from the core's in-memory state.
 *
 * Every rpc of GRPCInferenceService (protocol-facts §2.2) and
 * grpc.health.v1.Health/Check has a row. Unary handlers take the request
 * message bytes and produce the response message, or an error whose code is
 * mapped to the gRPC status through the one status table; they never block
 * (health, metadata, config and index read in-memory state). ModelInfer and
 * ModelStreamInfer go through the scheduler and are driven by the transport
 * (grpc.c), so their rows carry no handler. The repository rpcs (index,
 * load, unload) read files and load models, so they are PTS_GRPC_ASYNC:
 * their handler hands the work to a server thread, which answers the call.
 * The shared-memory rpcs are shm_grpc.h's.
 *
 * Threading: the handlers are thread-safe (they use only thread-safe server
 * functions) and run on a completion-queue thread; async `done` callbacks
 * run on server threads.
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
  PTS_GRPC_ASYNC,  /* unary, answered later from a server thread (repository rpcs) */
};

/* Decodes `in` (the request message, borrowed), answers into *out (filled
 * only on success; clear with pts_grpc_reply_clear). */
typedef enum pts_status (*pts_grpc_unary_fn)(struct pts_server *s, const struct pts_buf *in,
                                             struct pts_grpc_reply *out, struct pts_error *err);

/* The answer of an async rpc: *reply (taken; may be empty) when err is OK,
 * else the error. Called exactly once, from any thread. */
typedef void (*pts_grpc_async_done)(struct pts_grpc_reply *reply, const struct pts_error *err,
                                    void *call);
/* Decodes `in` and hands the work to the server. OK: `done` will be called
 * with `call`; an error is returned at once and `done` is never called. */
typedef enum pts_status (*pts_grpc_async_fn)(struct pts_server *s, const struct pts_buf *in,
                                             pts_grpc_async_done done, void *call,
                                             struct pts_error *err);

struct pts_grpc_rpc {
  const char *path; /* "/inference.GRPCInferenceService/ServerLive" */
  enum pts_grpc_rpc_kind kind;
  pts_grpc_unary_fn fn;    /* PTS_GRPC_UNARY only */
  pts_grpc_async_fn start; /* PTS_GRPC_ASYNC only */
};

/* ModelInfer's path, which the frontend registers with gRPC core. */
#define PTS_GRPC_INFER_PATH "/inference.GRPCInferenceService/ModelInfer"

/* The row for a method path of `len` bytes (not NUL-terminated), or NULL
 * for a method ptserve does not serve (the transport answers UNIMPLEMENTED). */
const struct pts_grpc_rpc *pts_grpc_rpc_find(const char *path, size_t len);

/* The extensions reported by ServerMetadata, as over HTTP. */
extern const char *const PTS_GRPC_EXTENSIONS[];
extern const size_t PTS_GRPC_N_EXTENSIONS;

#endif
