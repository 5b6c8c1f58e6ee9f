/* core/restrict.c — see restrict.h. */
#include "core/restrict.h"

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

const char *pts_api_name(enum pts_api api) {
  return api > PTS_API_NONE && api < PTS_API_COUNT ? API_NAMES[api] : "";
}

static enum pts_api api_from_name(const char *s, size_t n) {
  for (int i = 0; i < PTS_API_COUNT; i++)
    if (strlen(API_NAMES[i]) == n && memcmp(API_NAMES[i], s, n) == 0) return (enum pts_api)i;
  return PTS_API_NONE;
}

/* "<api>,<api>:<key>=<value>": the part before the first ':' lists the
 * groups (group names never contain ':'), the rest is the key pair. */
static enum pts_status parse_one(const char *flag, struct pts_restrictions *r, const char *spec,
                                 struct pts_restriction *slot, struct pts_error *err) {
  const char *colon = strchr(spec, ':');
  const char *eq = colon ? strchr(colon + 1, '=') : NULL;
  if (!colon || !eq || eq == colon + 1 || eq[1] == '\0' || colon == spec)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "invalid %s '%s': expected "
                         "<api>[,<api>...]:<header>=<value> with a non-empty header and value",
                         flag, spec);
  slot->header = pts_strndup(colon + 1, (size_t)(eq - colon - 1));
  slot->value = pts_strdup(eq + 1);
  if (!slot->header || !slot->value)
    return pts_error_set(err, PTS_NOMEM, "out of memory reading %s", flag);
  for (const char *p = spec; p < colon;) {
    const char *end = memchr(p, ',', (size_t)(colon - p));
    size_t n = end ? (size_t)(end - p) : (size_t)(colon - p);
    enum pts_api api = api_from_name(p, n);
    if (api == PTS_API_NONE)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "invalid %s '%s': unknown API '%.*s' (known: health, "
                           "metadata, inference, shared-memory, model-config, model-repository, "
                           "statistics, trace, logging)",
                           flag, spec, (int)n, p);
    if (r->by_api[api])
      return pts_error_set(err, PTS_INVALID_ARG,
                           "invalid %s '%s': API '%s' is already restricted "
                           "(each API may appear in one restriction only)",
                           flag, spec, API_NAMES[api]);
    r->by_api[api] = slot;
    p = end ? end + 1 : colon;
  }
  return PTS_OK;
}

enum pts_status pts_restrictions_parse(const char *flag, const char *const *specs, size_t n,
                                       struct pts_restrictions *out, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  if (n == 0) return PTS_OK;
  out->owned = pts_calloc(n, sizeof *out->owned);
  if (!out->owned) return pts_error_set(err, PTS_NOMEM, "out of memory reading %s", flag);
  out->n_owned = n;
  for (size_t i = 0; i < n; i++) {
    enum pts_status st = parse_one(flag, out, specs[i], &out->owned[i], err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

void pts_restrictions_clear(struct pts_restrictions *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_owned; i++) {
    pts_free(r->owned[i].header);
    pts_free(r->owned[i].value);
  }
  pts_free(r->owned);
  memset(r, 0, sizeof *r);
}

const struct pts_restriction *pts_restriction_for(const struct pts_restrictions *r,
                                                  enum pts_api api) {
  if (!r || api <= PTS_API_NONE || api >= PTS_API_COUNT) return NULL;
  return r->by_api[api];
}
