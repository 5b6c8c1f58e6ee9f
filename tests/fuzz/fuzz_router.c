/* tests/fuzz/fuzz_router.c — the small string parsers of the HTTP frontend:
 * the URL router with percent-decoding, the API group of a path and the
 * --http-restricted-api syntax, the model-name check, Content-Encoding and
 * Accept-Encoding values. The input is one string (cut at the first NUL).
 * (Request heads are parsed by http-parser in the transport, which
 * fuzz_http reaches with raw bytes.)
 *
 * Properties: a decoded model name never contains a NUL byte; a route that
 * needs a model has one; errors carry a message. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/name.h"
#include "frontend/http/compress.h"
#include "frontend/http/restrict.h"
#include "frontend/http/router.h"
#include "fuzz_common.h"

static bool needs_model(enum pts_http_route_kind k) {
  return k == PTS_ROUTE_MODEL_METADATA || k == PTS_ROUTE_MODEL_READY ||
         k == PTS_ROUTE_MODEL_CONFIG || k == PTS_ROUTE_MODEL_INFER || k == PTS_ROUTE_REPO_LOAD ||
         k == PTS_ROUTE_REPO_UNLOAD;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
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
