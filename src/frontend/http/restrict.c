/* frontend/http/restrict.c — see restrict.h. */
#include "frontend/http/restrict.h"

#include <stdbool.h>
#include <string.h>

/* ------------------------------------------------------------ the path */

/* Segment i of a '/'-separated path (0-based, after the leading '/'). */
struct segs {
  const char *p[8];
  size_t n[8];
  int count; /* capped at 8; more segments than that are never an endpoint */
};

static void split(const char *path, struct segs *s) {
  s->count = 0;
  if (!path || path[0] != '/') return;
  const char *p = path + 1;
  while (s->count < 8) {
    const char *slash = strchr(p, '/');
    size_t len = slash ? (size_t)(slash - p) : strlen(p);
    s->p[s->count] = p;
    s->n[s->count] = len;
    s->count++;
    if (!slash) return;
    p = slash + 1;
  }
}

static bool is(const struct segs *s, int i, const char *lit) {
  return i < s->count && s->n[i] == strlen(lit) && memcmp(s->p[i], lit, s->n[i]) == 0;
}

/* /v2/models/... : the last segment names the endpoint; a lone segment is
 * a model's metadata, except the statistics of every model. */
static enum pts_api models_api(const struct segs *s) {
  int last = s->count - 1;
  if (s->count == 3) return is(s, 2, "stats") ? PTS_API_STATISTICS : PTS_API_METADATA;
  if (is(s, last, "ready")) return PTS_API_HEALTH;
  if (is(s, last, "config")) return PTS_API_MODEL_CONFIG;
  if (is(s, last, "infer") || is(s, last, "generate") || is(s, last, "generate_stream"))
    return PTS_API_INFERENCE;
  if (is(s, last, "stats")) return PTS_API_STATISTICS;
  if (is(s, last, "setting") && is(s, last - 1, "trace")) return PTS_API_TRACE;
  return PTS_API_METADATA;
}

enum pts_api pts_http_api_of_path(const char *path) {
  struct segs s;
  split(path, &s);
  if (s.count < 1 || !is(&s, 0, "v2")) return PTS_API_NONE;
  if (s.count == 1) return PTS_API_METADATA;
  if (is(&s, 1, "health")) return PTS_API_HEALTH;
  if (is(&s, 1, "models")) return s.count >= 3 ? models_api(&s) : PTS_API_NONE;
  if (is(&s, 1, "repository")) return PTS_API_MODEL_REPOSITORY;
  if (is(&s, 1, "systemsharedmemory") || is(&s, 1, "cudasharedmemory"))
    return PTS_API_SHARED_MEMORY;
  if (is(&s, 1, "trace")) return PTS_API_TRACE;
  if (is(&s, 1, "logging")) return PTS_API_LOGGING;
  return PTS_API_NONE;
}

/* ------------------------------------------------------------ the flag */

enum pts_status pts_http_restrictions_parse(const char *const *specs, size_t n,
                                            struct pts_restrictions *out, struct pts_error *err) {
  return pts_restrictions_parse("--http-restricted-api", specs, n, out, err);
}
