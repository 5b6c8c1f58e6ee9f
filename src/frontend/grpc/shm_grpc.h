/* frontend/grpc/shm_grpc.h — the six shared-memory rpcs of
 * GRPCInferenceService (protocol-facts §2.2, §2.3): System/CudaSharedMemory
 * Status, Register and Unregister. They decode the request message, call the
 * server's region registry (shm/shm.h) and encode the answer; the regions
 * and every check are the registry's, shared with HTTP. Status answers a
 * map keyed by region name; an empty name in Status or Unregister means
 * every region of the kind.
 *
 * Threading: as rpc.h (thread-safe, never blocks).
 */
#ifndef PTS_FRONTEND_GRPC_SHM_GRPC_H
#define PTS_FRONTEND_GRPC_SHM_GRPC_H

#include "frontend/grpc/rpc.h"

enum pts_status pts_grpc_system_shm_status(struct pts_server *s, const struct pts_buf *in,
                                           struct pts_grpc_reply *out, struct pts_error *err);
enum pts_status pts_grpc_system_shm_register(struct pts_server *s, const struct pts_buf *in,
                                             struct pts_grpc_reply *out, struct pts_error *err);
enum pts_status pts_grpc_system_shm_unregister(struct pts_server *s, const struct pts_buf *in,
                                               struct pts_grpc_reply *out, struct pts_error *err);
enum pts_status pts_grpc_cuda_shm_status(struct pts_server *s, const struct pts_buf *in,
                                         struct pts_grpc_reply *out, struct pts_error *err);
enum pts_status pts_grpc_cuda_shm_register(struct pts_server *s, const struct pts_buf *in,
                                           struct pts_grpc_reply *out, struct pts_error *err);
enum pts_status pts_grpc_cuda_shm_unregister(struct pts_server *s, const struct pts_buf *in,
                                             struct pts_grpc_reply *out, struct pts_error *err);

#endif
