/* frontend/http/head.h — what the memory-budget check needs from a request
 * head before libevent parses it: where the head ends, and how long the
 * body will be.
 *
 * libevent 2.1's evhttp offers no hook between the headers and the body
 * (2.2's evhttp_set_newreqcb is that hook), so the admission check of
 * admit.c reads the head bytes itself as they arrive. This is not a second
 * HTTP parser: it only finds the blank line and reads Content-Length and
 * Transfer-Encoding the way evhttp 2.1 does (http.c: evhttp_parse_headers_,
 * evhttp_get_body, evhttp_get_body_length), so both agree on the body
 * length. Where they could disagree, the caller makes evhttp's own body
 * limit the result of this scan, so a disagreement can only refuse a body,
 * never admit more than was reserved.
 *
 * Threading: pure functions over memory, thread-safe.
 */
#ifndef PTS_FRONTEND_HTTP_HEAD_H
#define PTS_FRONTEND_HTTP_HEAD_H

#include <stddef.h>
#include <stdint.h>

enum pts_http_body_kind {
  PTS_HTTP_BODY_NONE,    /* no body (no Content-Length, or a method without one) */
  PTS_HTTP_BODY_LENGTH,  /* Content-Length: content_length bytes */
  PTS_HTTP_BODY_CHUNKED, /* Transfer-Encoding: chunked — the length is unknown */
  PTS_HTTP_BODY_INVALID, /* evhttp will refuse the request (bad Content-Length, bad head) */
};

struct pts_http_head {
  enum pts_http_body_kind body;
  uint64_t content_length; /* PTS_HTTP_BODY_LENGTH only */
};

/* The length of the head in p[0..len) — up to and including the blank line
 * that ends it ("\n\n" or "\n\r\n", as evhttp reads lines ending in LF with
 * an optional CR) — or 0 when the blank line has not arrived yet. */
size_t pts_http_head_end(const char *p, size_t len);

/* Reads the complete head p[0..head_len) (head_len from pts_http_head_end).
 * The body is PTS_HTTP_BODY_NONE unless the method is POST, PUT or PATCH
 * (evhttp reads no body for the others); then the first Transfer-Encoding
 * header equal to "chunked" (any case) makes it CHUNKED, else the first
 * Content-Length header gives its length (strtoll, as evhttp: a sign or
 * leading blanks are allowed, anything after the digits is not). */
void pts_http_head_parse(const char *p, size_t head_len, struct pts_http_head *out);

#endif
