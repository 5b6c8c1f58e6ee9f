/* frontend/http/router.c — see router.h. */
#include "frontend/http/router.h"

#include <stdbool.h>
#include <string.h>

#include "core/alloc.h"

/* No route has more segments than
 * /v2/repository/{repo}/models/{m}/unload (6). */
#define MAX_SEGMENTS 8

struct seg {
  const char *p;
  size_t n;
};

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

enum pts_status pts_http_percent_decode(const char *s, size_t n, char **out, size_t *out_len,
                                        struct pts_error *err) {
  char *d = pts_malloc(n + 1);
  if (!d) return pts_error_set(err, PTS_NOMEM, "out of memory decoding the request path");
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '%') {
      d[j++] = s[i];
      continue;
    }
    int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
    int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      pts_free(d);
      return pts_error_set(err, PTS_INVALID_ARG,
                           "malformed percent-encoding at offset %zu of path segment '%.*s'", i,
                           (int)(n > 200 ? 200 : n), s);
    }
    if (hi == 0 && lo == 0) {
      /* A NUL would silently cut the name short and address another model. */
      pts_free(d);
      return pts_error_set(err, PTS_INVALID_ARG, "path segment '%.*s' encodes a NUL byte",
                           (int)(n > 200 ? 200 : n), s);
    }
    d[j++] = (char)(hi * 16 + lo);
    i += 2;
  }
  d[j] = '\0';
  *out = d;
  if (out_len) *out_len = j;
  return PTS_OK;
}

static bool seg_is(const struct seg *s, const char *lit) {
  size_t n = strlen(lit);
  return s->n == n && memcmp(s->p, lit, n) == 0;
}

/* Splits "/a/b/c" into segments. Empty segments ("//", a trailing '/') make
 * the path unknown, as Triton's [^/]+ patterns never match them. Returns
 * the count, or -1 when the path can not be a route. */
static int split(const char *path, struct seg *segs) {
  if (path[0] != '/') return -1;
  int n = 0;
  const char *p = path + 1;
  for (;;) {
    const char *slash = strchr(p, '/');
    size_t len = slash ? (size_t)(slash - p) : strlen(p);
    if (len == 0 || n == MAX_SEGMENTS) return -1;
    segs[n].p = p;
    segs[n].n = len;
    n++;
    if (!slash) return n;
    p = slash + 1;
  }
}

/* A version segment: digits only (else the path is unknown, *ok = false),
 * and within int64 (else an error). */
static enum pts_status parse_version(const struct seg *s, int64_t *v, bool *ok,
                                     struct pts_error *err) {
  *ok = false;
  int64_t x = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (s->p[i] < '0' || s->p[i] > '9') return PTS_OK;
  }
  for (size_t i = 0; i < s->n; i++) {
    int d = s->p[i] - '0';
    if (x > (INT64_MAX - d) / 10)
      return pts_error_set(err, PTS_INVALID_ARG, "model version '%.*s' is out of range",
                           (int)(s->n > 40 ? 40 : s->n), s->p);
    x = x * 10 + d;
  }
  *v = x;
  *ok = true;
  return PTS_OK;
}

static enum pts_status take_name(const struct seg *s, char **out, struct pts_error *err) {
  return pts_http_percent_decode(s->p, s->n, out, NULL, err);
}

/* /v2/models/{m}[/versions/{v}][/ready|/config|/infer|/generate|
 * /generate_stream|/stats] (segments after "models"). */
static enum pts_status route_model(const struct seg *s, int n, struct pts_http_route *r,
                                   struct pts_error *err) {
  int i = 1;
  if (n >= 3 && seg_is(&s[1], "versions")) {
    bool ok;
    enum pts_status st = parse_version(&s[2], &r->version, &ok, err);
    if (st != PTS_OK || !ok) return st;
    i = 3;
  }
  if (i == n) {
    r->kind = PTS_ROUTE_MODEL_METADATA;
  } else if (i + 1 == n && seg_is(&s[i], "ready")) {
    r->kind = PTS_ROUTE_MODEL_READY;
  } else if (i + 1 == n && seg_is(&s[i], "config")) {
    r->kind = PTS_ROUTE_MODEL_CONFIG;
  } else if (i + 1 == n && seg_is(&s[i], "infer")) {
    r->kind = PTS_ROUTE_MODEL_INFER;
  } else if (i + 1 == n && seg_is(&s[i], "generate")) {
    r->kind = PTS_ROUTE_MODEL_GENERATE;
  } else if (i + 1 == n && seg_is(&s[i], "generate_stream")) {
    r->kind = PTS_ROUTE_MODEL_GENERATE_STREAM;
  } else if (i + 1 == n && seg_is(&s[i], "stats")) {
    r->kind = PTS_ROUTE_MODEL_STATS;
  } else if (i == 1 && n == 3 && seg_is(&s[1], "trace") && seg_is(&s[2], "setting")) {
    /* §1.1: no /versions/ segment here (that path is simply unknown). */
    r->kind = PTS_ROUTE_TRACE_SETTING;
  } else {
    return PTS_OK;
  }
  /* §1.1: /v2/models/stats (every model) wins over a model named "stats". */
  if (n == 1 && seg_is(&s[0], "stats")) {
    r->kind = PTS_ROUTE_MODEL_STATS;
    return PTS_OK;
  }
  return take_name(&s[0], &r->model, err);
}

/* /v2/repository[/{repo}]/index and /v2/repository[/{repo}]/models/{m}/load|unload
 * (segments after "repository"). */
static enum pts_status route_repository(const struct seg *s, int n, struct pts_http_route *r,
                                        struct pts_error *err) {
  int i = 0;
  /* The repository segment is present when what follows still matches. */
  bool with_repo = (n == 2 && seg_is(&s[1], "index")) || (n == 4 && seg_is(&s[1], "models"));
  if (with_repo) i = 1;
  enum pts_http_route_kind kind = PTS_ROUTE_NOT_FOUND;
  if (n - i == 1 && seg_is(&s[i], "index")) {
    kind = PTS_ROUTE_REPO_INDEX;
  } else if (n - i == 3 && seg_is(&s[i], "models")) {
    if (seg_is(&s[i + 2], "load")) kind = PTS_ROUTE_REPO_LOAD;
    if (seg_is(&s[i + 2], "unload")) kind = PTS_ROUTE_REPO_UNLOAD;
  }
  if (kind == PTS_ROUTE_NOT_FOUND) return PTS_OK;
  if (with_repo) {
    enum pts_status st = take_name(&s[0], &r->repo, err);
    if (st != PTS_OK) return st;
  }
  if (kind != PTS_ROUTE_REPO_INDEX) {
    enum pts_status st = take_name(&s[i + 1], &r->model, err);
    if (st != PTS_OK) return st;
  }
  r->kind = kind;
  return PTS_OK;
}

/* /v2/{system,cuda}sharedmemory[/region/{r}]/status|unregister and
 * /v2/{system,cuda}sharedmemory/region/{r}/register (segments after the
 * extension's segment). */
static enum pts_status route_shm(const struct seg *s, int n, bool cuda,
                                 struct pts_http_route *r, struct pts_error *err) {
  int i = 0;
  if (n == 3 && seg_is(&s[0], "region")) i = 2;
  if (n - i != 1) return PTS_OK;
  enum pts_http_route_kind kind = PTS_ROUTE_NOT_FOUND;
  if (seg_is(&s[i], "status")) kind = PTS_ROUTE_SHM_STATUS;
  if (seg_is(&s[i], "unregister")) kind = PTS_ROUTE_SHM_UNREGISTER;
  if (seg_is(&s[i], "register") && i == 2) kind = PTS_ROUTE_SHM_REGISTER;
  if (kind == PTS_ROUTE_NOT_FOUND) return PTS_OK;
  if (i == 2) {
    enum pts_status st = take_name(&s[1], &r->region, err);
    if (st != PTS_OK) return st;
  }
  r->kind = kind;
  r->cuda = cuda;
  return PTS_OK;
}

enum pts_status pts_http_route_parse(const char *path, struct pts_http_route *out,
                                     struct pts_error *err) {
  memset(out, 0, sizeof *out);
  out->kind = PTS_ROUTE_NOT_FOUND;
  out->version = -1;
  struct seg s[MAX_SEGMENTS];
  int n = path ? split(path, s) : -1;
  if (n < 1 || !seg_is(&s[0], "v2")) return PTS_OK;
  enum pts_status st = PTS_OK;
  if (n == 1) {
    out->kind = PTS_ROUTE_SERVER_METADATA;
  } else if (n == 3 && seg_is(&s[1], "health")) {
    if (seg_is(&s[2], "live")) out->kind = PTS_ROUTE_HEALTH_LIVE;
    if (seg_is(&s[2], "ready")) out->kind = PTS_ROUTE_HEALTH_READY;
  } else if (n >= 3 && seg_is(&s[1], "models")) {
    st = route_model(s + 2, n - 2, out, err);
  } else if (n >= 3 && seg_is(&s[1], "repository")) {
    st = route_repository(s + 2, n - 2, out, err);
  } else if (n == 3 && seg_is(&s[1], "trace") && seg_is(&s[2], "setting")) {
    out->kind = PTS_ROUTE_TRACE_SETTING;
  } else if (n == 2 && seg_is(&s[1], "logging")) {
    out->kind = PTS_ROUTE_LOGGING;
  } else if (n >= 3 && (seg_is(&s[1], "systemsharedmemory") || seg_is(&s[1], "cudasharedmemory"))) {
    st = route_shm(s + 2, n - 2, seg_is(&s[1], "cudasharedmemory"), out, err);
  }
  if (st != PTS_OK) {
    pts_http_route_clear(out);
    return st;
  }
  return PTS_OK;
}

void pts_http_route_clear(struct pts_http_route *r) {
  if (!r) return;
  pts_free(r->model);
  pts_free(r->repo);
  pts_free(r->region);
  memset(r, 0, sizeof *r);
  r->kind = PTS_ROUTE_NOT_FOUND;
  r->version = -1;
}

enum pts_http_method pts_http_route_method(enum pts_http_route_kind kind) {
  switch (kind) {
    case PTS_ROUTE_MODEL_INFER:
    case PTS_ROUTE_MODEL_GENERATE:
    case PTS_ROUTE_MODEL_GENERATE_STREAM:
    case PTS_ROUTE_REPO_INDEX:
    case PTS_ROUTE_REPO_LOAD:
    case PTS_ROUTE_REPO_UNLOAD:
    case PTS_ROUTE_SHM_REGISTER:
    case PTS_ROUTE_SHM_UNREGISTER:
      return PTS_HTTP_POST;
    default:
      return PTS_HTTP_GET;
  }
}

bool pts_http_route_allows(enum pts_http_route_kind kind, enum pts_http_method m) {
  if (kind == PTS_ROUTE_TRACE_SETTING || kind == PTS_ROUTE_LOGGING)
    return m == PTS_HTTP_GET || m == PTS_HTTP_POST;
  return m == pts_http_route_method(kind);
}
