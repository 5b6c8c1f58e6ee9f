/* core/restrict.h — API groups protected by a request header, shared by
 * tritonserver's --http-restricted-api and --grpc-restricted-protocol.
 *
 * Both flags take `<group>[,<group>...]:<key>=<value>` and may be given
 * several times, each for different groups; a group named twice, an unknown
 * group, or a missing key or value is a start-up error naming the flag. A
 * call to a restricted group must carry <key> (HTTP header or gRPC metadata)
 * with exactly <value>. Each frontend maps its endpoints to the groups and
 * words the refusal its own way (frontend/http/restrict.h,
 * frontend/grpc/restrict_grpc.h).
 *
 * Groups (tritonserver's names): health, metadata, inference, shared-memory,
 * model-config, model-repository, statistics, trace, logging.
 *
 * Threading: parse and clear on one thread; pts_restriction_for is a pure
 * read and may be called from any thread while the table lives.
 */
#ifndef PTS_CORE_RESTRICT_H
#define PTS_CORE_RESTRICT_H

#include <stddef.h>

#include "core/status.h"

enum pts_api {
  PTS_API_NONE = -1, /* not part of any group: never restricted */
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

/* tritonserver's name of a group ("model-config"), or "" for NONE.
 * Static storage. */
const char *pts_api_name(enum pts_api api);

/* One key requirement. */
struct pts_restriction {
  char *header; /* owned; the header / metadata key */
  char *value;  /* owned */
};

/* The key requirement of each group (NULL = open). */
struct pts_restrictions {
  struct pts_restriction *by_api[PTS_API_COUNT]; /* borrowed from `owned` */
  struct pts_restriction *owned;                 /* one per flag value */
  size_t n_owned;
};

/* Parses the values of `flag` ("--grpc-restricted-protocol", used in the
 * messages; borrowed). On success *out holds the table; free it with
 * pts_restrictions_clear, also after an error. INVALID_ARG names the flag,
 * the value and what is wrong with it. */
enum pts_status pts_restrictions_parse(const char *flag, const char *const *specs, size_t n,
                                       struct pts_restrictions *out, struct pts_error *err);
void pts_restrictions_clear(struct pts_restrictions *r);

/* The requirement for `api`, or NULL when it is open. Borrowed from r. */
const struct pts_restriction *pts_restriction_for(const struct pts_restrictions *r,
                                                  enum pts_api api);

#endif
