/* frontend/http/restrict.h — tritonserver's --http-restricted-api.
 *
 * `--http-restricted-api=<api>[,<api>...]:<header>=<value>` makes every
 * endpoint of the named API groups answer 403
 * `{"error":"This API is restricted, expecting header '<header>'"}` unless the
 * request carries <header> with exactly <value> (protocol-facts §1.1). The
 * flag may be given several times, each for different groups; a group named
 * twice, an unknown group, or a missing header or value is a start-up error.
 *
 * The groups and the flag syntax are shared with gRPC (core/restrict.h). An
 * endpoint's group is decided from its URL path alone, so routes added later
 * are covered without touching this module.
 *
 * Threading: parse and free on the main thread; the lookups are pure and may
 * be called from any loop thread while the restrictions live.
 */
#ifndef PTS_FRONTEND_HTTP_RESTRICT_H
#define PTS_FRONTEND_HTTP_RESTRICT_H

#include <stddef.h>

#include "core/restrict.h"
#include "core/status.h"

/* The group of the endpoint at `path` (the URI path, still percent-encoded,
 * without the query); PTS_API_NONE for a path outside /v2. */
enum pts_api pts_http_api_of_path(const char *path);

/* pts_restrictions_parse for the values of --http-restricted-api. */
enum pts_status pts_http_restrictions_parse(const char *const *specs, size_t n,
                                            struct pts_restrictions *out, struct pts_error *err);

#endif
