/* tests/fuzz/fuzz_router.c — the small string parsers of the HTTP frontend:
 * the URL router with percent-decoding, the API group of a path and the
 * --http-restricted-api syntax, the model-name check, Content-Encoding and
 * Accept-Encoding values. The input is one string (cut at the first NUL),
 * and, whole (NULs included), a request head for the memory-budget check's
 * scan (head.h).
 *
 * Properties: a decoded model name never contains a NUL byte; a route that
 * needs a model has one; errors carry a message; a head ends with the LF of
 * a blank line inside the input, and a body kind is one of the four. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/name.h"
#include "frontend/http/compress.h"
#include "frontend/http/head.h"
#include "frontend/http/restrict.h"
#include "frontend/http/router.h"
#include "fuzz_common.h"

static bool needs_model(enum pts_http_route_kind k) {
  return k == PTS_ROUTE_MODEL_METADATA || k == PTS_ROUTE_MODEL_READY ||
         k == PTS_ROUTE_MODEL_CONFIG || k == PTS_ROUTE_MODEL_INFER || k == PTS_ROUTE_REPO_LOAD ||
         k == PTS_ROUTE_REPO_UNLOAD;
}

static void head_scan(const char *p, size_t size) {
  size_t end = pts_http_head_end(p, size);
  if (!end) return;
  fuzz_check(end <= size && end >= 2 && p[end - 1] == '\n', "a head that does not end a line");
  struct pts_http_head h;
  pts_http_head_parse(p, end, &h);
  fuzz_check(h.body == PTS_HTTP_BODY_NONE || h.body == PTS_HTTP_BODY_LENGTH ||
                 h.body == PTS_HTTP_BODY_CHUNKED || h.body == PTS_HTTP_BODY_INVALID,
             "unknown body kind");
  fuzz_check(h.body == PTS_HTTP_BODY_LENGTH || h.content_length == 0,
             "a length without a length body");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  head_scan((const char *)data, size);
  char *s = pts_strndup((const char *)data, size);
  if (!s) return 0;
  struct pts_http_route r;
  struct pts_error err;
  pts_error_clear(&err);
  if (pts_http_route_parse(s, &r, &err) == PTS_OK) {
    fuzz_check(!needs_model(r.kind) || r.model != NULL, "model route without a model");
    fuzz_check(r.kind == PTS_ROUTE_NOT_FOUND || pts_http_api_of_path(s) != PTS_API_NONE,
               "a known route outside every API group");
    if (r.model && pts_name_is_safe(r.model))
      fuzz_check(!strchr(r.model, '/') && !strstr(r.model, ".."), "unsafe name passed as safe");
    (void)pts_http_route_method(r.kind);
    pts_http_route_clear(&r);
  } else {
    fuzz_check(err.msg[0] != '\0', "route error without a message");
  }
  struct pts_restrictions rs;
  const char *spec = s;
  if (pts_http_restrictions_parse(&spec, 1, &rs, &err) != PTS_OK)
    fuzz_check(err.msg[0] != '\0', "restriction error without a message");
  pts_restrictions_clear(&rs);
  (void)pts_http_content_encoding(s);
  enum pts_http_encoding e = pts_http_accept_encoding(s);
  fuzz_check(e == PTS_HTTP_ENC_IDENTITY || e == PTS_HTTP_ENC_GZIP || e == PTS_HTTP_ENC_DEFLATE,
             "accept-encoding picked an unknown coding");
  pts_free(s);
  return 0;
}
