/* frontend/grpc/version.h — a gRPC request's model version string.
 *
 * The rpcs (rpc.c) and both ModelInfer decoders (infer.c, infer_fast.c)
 * read it the same way; a module of its own so that neither decoder
 * calls into the other's file for it.
 *
 * Threading: pure; any thread.
 */
#ifndef PTS_FRONTEND_GRPC_VERSION_H
#define PTS_FRONTEND_GRPC_VERSION_H

#include <stdint.h>

#include "core/status.h"

/* Parses a gRPC model version string: "" = latest (-1), otherwise a decimal
 * integer >= 0. INVALID_ARG naming `model` for anything else. */
enum pts_status pts_grpc_parse_version(const char *s, const char *model, int64_t *out,
                                       struct pts_error *err);

#endif
