/* frontend/http/restrict.c — see restrict.h. */
#include "frontend/http/restrict.h"

#include <stdbool.h>
#include <string.h>

#include "core/alloc.h"

static const char *const API_NAMES[PTS_API_COUNT] = {
    [PTS_API_HEALTH] = "health",
    [PTS_API_METADATA] = "metadata",
    [PTS_API_INFERENCE] = "inference",
    [PTS_API_SHARED_MEMORY] = "shared-memory",
    [PTS_API_MODEL_CONFIG] = "model-config",
    [PTS_API_MODEL_REPOSITORY] = "model-repository",
    [PTS_API_STATISTICS] = "statistics",
    [PTS_API_TRACE] = "trace",
    [PTS_API_LOGGING] = "logging",
};

const char *pts_http_api_name(enum pts_http_api api) {
  return api > PTS_API_NONE && api < PTS_API_COUNT ? API_NAMES[api] : "";
}

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
static enum pts_http_api models_api(const struct segs *s) {
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

enum pts_http_api pts_http_api_of_path(const char *path) {
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

static enum pts_http_api api_from_name(const char *s, size_t n) {
  for (int i = 0; i < PTS_API_COUNT; i++)
    if (strlen(API_NAMES[i]) == n && memcmp(API_NAMES[i], s, n) == 0) return (enum pts_http_api)i;
  return PTS_API_NONE;
}

/* "<api>,<api>:<header>=<value>": the part before the first ':' lists the
 * groups (group names never contain ':'), the rest is the header pair. */
static enum pts_status parse_one(struct pts_http_restrictions *r, const char *spec,
                                 struct pts_http_restriction *slot, struct pts_error *err) {
  const char *colon = strchr(spec, ':');
  const char *eq = colon ? strchr(colon + 1, '=') : NULL;
  if (!colon || !eq || eq == colon + 1 || eq[1] == '\0' || colon == spec)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "invalid --http-restricted-api '%s': expected "
                         "<api>[,<api>...]:<header>=<value> with a non-empty header and value",
                         spec);
  slot->header = pts_strndup(colon + 1, (size_t)(eq - colon - 1));
  slot->value = pts_strdup(eq + 1);
  if (!slot->header || !slot->value)
    return pts_error_set(err, PTS_NOMEM, "out of memory reading --http-restricted-api");
  for (const char *p = spec; p < colon;) {
    const char *end = memchr(p, ',', (size_t)(colon - p));
    size_t n = end ? (size_t)(end - p) : (size_t)(colon - p);
    enum pts_http_api api = api_from_name(p, n);
    if (api == PTS_API_NONE)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "invalid --http-restricted-api '%s': unknown API '%.*s' (known: health, "
                           "metadata, inference, shared-memory, model-config, model-repository, "
                           "statistics, trace, logging)",
                           spec, (int)n, p);
    if (r->by_api[api])
      return pts_error_set(err, PTS_INVALID_ARG,
                           "invalid --http-restricted-api '%s': API '%s' is already restricted "
                           "(each API may appear in one restriction only)",
                           spec, API_NAMES[api]);
    r->by_api[api] = slot;
    p = end ? end + 1 : colon;
  }
  return PTS_OK;
}

enum pts_status pts_http_restrictions_parse(const char *const *specs, size_t n,
                                            struct pts_http_restrictions *out,
                                            struct pts_error *err) {
  memset(out, 0, sizeof *out);
  if (n == 0) return PTS_OK;
  out->owned = pts_calloc(n, sizeof *out->owned);
  if (!out->owned)
    return pts_error_set(err, PTS_NOMEM, "out of memory reading --http-restricted-api");
  out->n_owned = n;
  for (size_t i = 0; i < n; i++) {
    enum pts_status st = parse_one(out, specs[i], &out->owned[i], err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

void pts_http_restrictions_clear(struct pts_http_restrictions *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_owned; i++) {
    pts_free(r->owned[i].header);
    pts_free(r->owned[i].value);
  }
  pts_free(r->owned);
  memset(r, 0, sizeof *r);
}

const struct pts_http_restriction *pts_http_restriction_for(const struct pts_http_restrictions *r,
                                                            enum pts_http_api api) {
  if (!r || api <= PTS_API_NONE || api >= PTS_API_COUNT) return NULL;
  return r->by_api[api];
}
