/* frontend/http/restrict.h — tritonserver's --http-restricted-api.
 *
 * `--http-restricted-api=<api>[,<api>...]:<header>=<value>` makes every
 * endpoint of the named API groups answer 403
 * `{"error":"This API is restricted, expecting header '<header>'"}` unless the
 * request carries <header> with exactly <value> (protocol-facts §1.1). The
 * flag may be given several times, each for different groups; a group named
 * twice, an unknown group, or a missing header or value is a start-up error.
 *
 * Groups (tritonserver's names): health, metadata, inference, shared-memory,
 * model-config, model-repository, statistics, trace, logging. An endpoint's
 * group is decided from its URL path alone, so routes added later are covered
 * without touching this module.
 *
 * Threading: parse and free on the main thread; the lookups are pure and may
 * be called from any loop thread while the restrictions live.
 */
#ifndef PTS_FRONTEND_HTTP_RESTRICT_H
#define PTS_FRONTEND_HTTP_RESTRICT_H

#include <stddef.h>

#include "core/status.h"

enum pts_http_api {
  PTS_API_NONE = -1, /* not a /v2 endpoint: never restricted */
  PTS_API_HEALTH,
  PTS_API_METADATA,
  PTS_API_INFERENCE,
  PTS_API_SHARED_MEMORY,
  PTS_API_MODEL_CONFIG,
  PTS_API_MODEL_REPOSITORY,
  PTS_API_STATISTICS,
  PTS_API_TRACE,
  PTS_API_LOGGING,
  PTS_API_COUNT,
};

/* tritonserver's name of a group ("model-config"), or "" for NONE. */
const char *pts_http_api_name(enum pts_http_api api);

/* The group of the endpoint at `path` (the URI path, still percent-encoded,
 * without the query). */
enum pts_http_api pts_http_api_of_path(const char *path);

/* One header requirement. */
struct pts_http_restriction {
  char *header; /* owned */
  char *value;  /* owned */
};

/* The header requirement of each group (NULL = open). */
struct pts_http_restrictions {
  struct pts_http_restriction *by_api[PTS_API_COUNT]; /* borrowed from `owned` */
  struct pts_http_restriction *owned;                 /* one per flag value */
  size_t n_owned;
};

/* Parses the flag values. On success *out holds the table (free it with
 * pts_http_restrictions_clear, also after an error). INVALID_ARG names the
 * flag value and what is wrong with it. */
enum pts_status pts_http_restrictions_parse(const char *const *specs, size_t n,
                                            struct pts_http_restrictions *out,
                                            struct pts_error *err);
void pts_http_restrictions_clear(struct pts_http_restrictions *r);

/* The requirement for `api`, or NULL when it is open. Borrowed from r. */
const struct pts_http_restriction *pts_http_restriction_for(const struct pts_http_restrictions *r,
                                                            enum pts_http_api api);

#endif
