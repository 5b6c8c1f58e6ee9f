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
 * headers; any loop thread may call them.
 */
#ifndef PTS_FRONTEND_GRPC_RESTRICT_GRPC_H
#define PTS_FRONTEND_GRPC_RESTRICT_GRPC_H

#include <stdbool.h>
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

/* tritonserver's gRPC form of a restricted key: the header a client sends
 * for --grpc-restricted-protocol=...:<key>=<value> is
 * "triton-grpc-protocol-<key>" (HTTP's is the bare key). */
#define PTS_GRPC_RESTRICTED_PREFIX "triton-grpc-protocol-"

/* A call of a restricted group (`rs`, from pts_restriction_for) is let in
 * when one of its request headers is the restriction's key with the value:
 * pts_grpc_restriction_key says whether the header `name` (namelen bytes,
 * not NUL-terminated) is that key, as tritonserver names it
 * ("triton-grpc-protocol-<key>") or bare (as HTTP does, and as a client
 * plugin such as tritonclient's BasicAuth sends "authorization");
 * pts_grpc_restriction_header whether it is the key with exactly the
 * value. The refusal is UNAVAILABLE with tritonserver's message "This
 * protocol is restricted, expecting header 'triton-grpc-protocol-<key>'"
 * (h2_call.c). */
bool pts_grpc_restriction_key(const struct pts_restriction *rs, const char *name, size_t namelen);
bool pts_grpc_restriction_header(const struct pts_restriction *rs, const char *name,
                                 size_t namelen, const char *value, size_t valuelen);

#endif
