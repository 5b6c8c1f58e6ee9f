/* frontend/grpc/restrict_grpc.h — tritonserver's --grpc-restricted-protocol.
 *
 * `--grpc-restricted-protocol=<group>[,<group>...]:<key>=<value>` (flag
 * syntax and groups shared with HTTP, core/restrict.h) makes every rpc of the
 * named groups fail with gRPC status UNAVAILABLE and the message
 * "This protocol is restricted, expecting header '<key>'" unless the call's
 * request metadata carries <key> with exactly <value>. The check happens
 * when the call arrives, before any message is read, so a ModelStreamInfer
 * stream is refused as a whole.
 *
 * Metadata keys travel lower-case on HTTP/2, so <key> is matched without
 * regard to case; the value must match byte for byte.
 *
 * Threading: the functions are pure reads of the table and the call's
 * metadata; any completion-queue thread may call them.
 */
#ifndef PTS_FRONTEND_GRPC_RESTRICT_GRPC_H
#define PTS_FRONTEND_GRPC_RESTRICT_GRPC_H

#include <grpc/grpc.h>
#include <stddef.h>

#include "core/restrict.h"
#include "core/status.h"

/* The group of the method at `path` (`len` bytes, not NUL-terminated, e.g.
 * "/inference.GRPCInferenceService/ModelInfer"), or PTS_API_NONE for a
 * method ptserve does not serve. */
enum pts_api pts_grpc_api_of_method(const char *path, size_t len);

/* pts_restrictions_parse for the values of --grpc-restricted-protocol. */
enum pts_status pts_grpc_restrictions_parse(const char *const *specs, size_t n,
                                            struct pts_restrictions *out, struct pts_error *err);

/* PTS_OK when the method is open or `md` (borrowed) carries the key with the
 * value; otherwise UNAVAILABLE with tritonserver's message in err. */
enum pts_status pts_grpc_restriction_check(const struct pts_restrictions *r, const char *path,
                                           size_t len, const grpc_metadata_array *md,
                                           struct pts_error *err);

#endif
