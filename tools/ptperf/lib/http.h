/* ptperf/lib/http.h — the smallest HTTP/1.1 client ptperf needs.
 *
 * ptperf talks to one server over a handful of keep-alive connections; the
 * load loop (load.h) writes pre-built requests and feeds what it reads to
 * ptperf_http_parse, which is a pure function so that every framing case
 * (Content-Length, chunked, split reads, Connection: close) is unit tested
 * without sockets. ptperf_http_get is a blocking one-shot GET for the
 * metadata, config and statistics documents.
 *
 * Threading: every function is thread-safe; a socket belongs to one thread.
 */
#ifndef PTPERF_HTTP_H
#define PTPERF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "core/status.h"

/* Where the server is: resolved once, copied into every connect. */
struct ptperf_addr {
  struct sockaddr_storage sa;
  socklen_t len;
  char host[256]; /* for the Host header and messages */
  char port[16];
};

enum ptperf_parse_result {
  PTPERF_PARSE_MORE,  /* the response is not complete yet */
  PTPERF_PARSE_DONE,  /* one whole response is in the buffer */
  PTPERF_PARSE_ERROR, /* not a response we can read (message in err) */
};

/* One parsed response. Offsets index the buffer given to ptperf_http_parse. */
struct ptperf_http_response {
  int status;         /* 200, 404, ... */
  size_t header_len;  /* status line + headers + blank line */
  size_t message_len; /* header_len + the body as framed on the wire */
  size_t body_len;    /* Content-Length, or the sum of chunk sizes */
  bool chunked;
  bool keep_alive;       /* false after "Connection: close" */
  long infer_header_len; /* Inference-Header-Content-Length, or -1 */
};

/* Parses the response at the start of buf[0..len). With DONE, *out is
 * filled and bytes past out->message_len belong to the next response. A
 * response without Content-Length or chunked framing is an ERROR: ptperf
 * keeps connections alive, so "read until close" can not be told apart
 * from a stalled server. */
enum ptperf_parse_result ptperf_http_parse(const char *buf, size_t len,
                                           struct ptperf_http_response *out, struct pts_error *err);

/* The body of a DONE response as one NUL-terminated string (chunks joined).
 * Caller frees *body with pts_free. */
enum pts_status ptperf_http_body(const char *buf, const struct ptperf_http_response *r, char **body,
                                 size_t *body_len, struct pts_error *err);

/* Resolves "host:port" ("[::1]:8000", "localhost:8000", or "host" for port
 * 8000). */
enum pts_status ptperf_addr_resolve(const char *url, struct ptperf_addr *out,
                                    struct pts_error *err);

/* Opens a TCP connection with TCP_NODELAY (a request is one write; Nagle
 * would only add latency). Blocking connect; the caller may then make the
 * socket non-blocking. Returns the fd, or -1 with err set. */
int ptperf_connect(const struct ptperf_addr *a, struct pts_error *err);

/* GET `path` on a fresh connection, waiting at most `timeout_ms`. On OK the
 * status is in *status and the body (NUL-terminated) in *body, which the
 * caller frees with pts_free; transport failures are UNAVAILABLE. */
enum pts_status ptperf_http_get(const struct ptperf_addr *a, const char *path, int timeout_ms,
                                int *status, char **body, struct pts_error *err);

/* POST `body` (JSON) to `path`, like ptperf_http_get otherwise. */
enum pts_status ptperf_http_post(const struct ptperf_addr *a, const char *path, const char *body,
                                 size_t body_len, int timeout_ms, int *status, char **reply,
                                 struct pts_error *err);

#endif
