/* frontend/http/router.h — maps a request path to an endpoint.
 *
 * The URL map is protocol-facts §1.1. Segments are split on '/' first and
 * then percent-decoded, so a model name may contain an encoded '/'. A
 * version segment must be all digits, as in Triton's router: anything else
 * there is simply an unknown path (404 "Not Found"). The method is checked
 * by the caller against pts_http_route_method(), after the path matched, so
 * a known path with the wrong method gets 405 and an unknown one 404.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_FRONTEND_HTTP_ROUTER_H
#define PTS_FRONTEND_HTTP_ROUTER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

enum pts_http_route_kind {
  PTS_ROUTE_NOT_FOUND,
  PTS_ROUTE_HEALTH_LIVE,
  PTS_ROUTE_HEALTH_READY,
  PTS_ROUTE_SERVER_METADATA,
  PTS_ROUTE_MODEL_METADATA,
  PTS_ROUTE_MODEL_READY,
  PTS_ROUTE_MODEL_CONFIG,
  PTS_ROUTE_MODEL_INFER,
  /* Triton's generate extension (§1.17): one JSON object in, one out, or
   * Server-Sent Events for generate_stream (frontend/http/generate.h). */
  PTS_ROUTE_MODEL_GENERATE,
  PTS_ROUTE_MODEL_GENERATE_STREAM,
  PTS_ROUTE_REPO_INDEX,
  PTS_ROUTE_REPO_LOAD,
  PTS_ROUTE_REPO_UNLOAD,
  PTS_ROUTE_MODEL_STATS, /* model NULL for /v2/models/stats (every model) */
  PTS_ROUTE_TRACE_SETTING, /* GET|POST; model NULL for /v2/trace/setting (global) */
  PTS_ROUTE_LOGGING,       /* GET|POST /v2/logging */
  /* Shared memory (§1.1), system or CUDA (route.cuda), region optional
   * except for register: GET .../status, POST .../register, .../unregister */
  PTS_ROUTE_SHM_STATUS,
  PTS_ROUTE_SHM_REGISTER,
  PTS_ROUTE_SHM_UNREGISTER,
};

enum pts_http_method { PTS_HTTP_GET, PTS_HTTP_POST, PTS_HTTP_OTHER };

struct pts_http_route {
  enum pts_http_route_kind kind;
  char *model;     /* owned (pts_free), decoded; NULL when the route has none */
  int64_t version; /* -1 when the path has no /versions/ segment */
  char *repo;      /* owned, decoded; the optional /v2/repository/{repo}/ part */
  char *region;    /* owned, decoded; the optional /region/{r}/ part of shared memory */
  bool cuda;       /* shared-memory routes: /v2/cudasharedmemory (else system) */
};

/* Parses `path` (the URI path, still percent-encoded, without the query).
 * Unknown paths give OK with kind PTS_ROUTE_NOT_FOUND; errors (INVALID_ARG)
 * are malformed percent escapes and versions too large for int64. On error
 * *out holds nothing to free. Otherwise clear it with pts_http_route_clear. */
enum pts_status pts_http_route_parse(const char *path, struct pts_http_route *out,
                                     struct pts_error *err);
void pts_http_route_clear(struct pts_http_route *r);

/* The one method each endpoint answers (GET for the settings endpoints,
 * which also take POST: see pts_http_route_allows). */
enum pts_http_method pts_http_route_method(enum pts_http_route_kind kind);
/* Whether the endpoint answers `m` (GET and POST for trace and logging
 * settings, else only pts_http_route_method's). */
bool pts_http_route_allows(enum pts_http_route_kind kind, enum pts_http_method m);

/* Percent-decodes s[0..n) into a new NUL-terminated string (pts_free) and
 * stores its length in *out_len (may be NULL). A '%' not followed by two hex
 * digits is an INVALID_ARG; '+' stays '+' (paths are not forms). */
enum pts_status pts_http_percent_decode(const char *s, size_t n, char **out, size_t *out_len,
                                        struct pts_error *err);

#endif
