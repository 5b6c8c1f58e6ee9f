/* frontend/http/head.c — see head.h. Each rule below names the evhttp 2.1
 * behaviour it follows. */
#include "frontend/http/head.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

size_t pts_http_head_end(const char *p, size_t len) {
  /* evbuffer_readln(EVBUFFER_EOL_CRLF): a line ends at LF, a CR just
   * before it is dropped; the head ends at the first empty line. */
  const char *end = p + len;
  for (const char *nl = memchr(p, '\n', len); nl; nl = memchr(nl + 1, '\n', (size_t)(end - nl - 1))) {
    if (nl + 1 < end && nl[1] == '\n') return (size_t)(nl + 2 - p);
    if (nl + 2 < end && nl[1] == '\r' && nl[2] == '\n') return (size_t)(nl + 3 - p);
    if (nl + 1 >= end) break;
  }
  return 0;
}

/* One header value, as evhttp keeps it: a C string (evhttp works on
 * NUL-terminated lines), continuation lines appended after a space. Long
 * values are cut; they can only be invalid lengths or unknown codings. */
struct value {
  bool seen;
  char text[96];
  size_t len;
};

static void value_append(struct value *v, const char *s, size_t n) {
  size_t room = sizeof v->text - 1 - v->len;
  if (n > room) n = room;
  memcpy(v->text + v->len, s, n);
  v->len += n;
  v->text[v->len] = '\0';
}

/* evutil_rtrim_lws_: trailing spaces, tabs, CR and LF. */
static size_t rtrim_lws(const char *s, size_t n) {
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) n--;
  return n;
}

static bool key_is(const char *key, size_t n, const char *name) {
  return n == strlen(name) && strncasecmp(key, name, n) == 0;
}

void pts_http_head_parse(const char *p, size_t head_len, struct pts_http_head *out) {
  out->body = PTS_HTTP_BODY_NONE;
  out->content_length = 0;
  struct value cl = {0}, te = {0};
  struct value *last = NULL; /* the header a continuation line extends */
  bool other_last = false;   /* the last header was neither of ours */
  bool may_have_body = false;
  size_t pos = 0;
  for (int line_no = 0; pos < head_len; line_no++) {
    const char *nl = memchr(p + pos, '\n', head_len - pos);
    size_t raw = nl ? (size_t)(nl - (p + pos)) : head_len - pos;
    const char *line = p + pos;
    pos += raw + 1;
    size_t n = raw;
    if (n && line[n - 1] == '\r') n--;
    n = strnlen(line, n); /* evhttp sees the line as a C string */
    if (line_no == 0) {
      /* evhttp_parse_request_line: the method is the text before the
       * first space; evhttp_method_may_have_body_: only these read a body. */
      const char *sp = memchr(line, ' ', n);
      size_t m = sp ? (size_t)(sp - line) : n;
      may_have_body = (m == 4 && memcmp(line, "POST", 4) == 0) ||
                      (m == 3 && memcmp(line, "PUT", 3) == 0) ||
                      (m == 5 && memcmp(line, "PATCH", 5) == 0);
      continue;
    }
    if (n == 0) break; /* the blank line */
    if (line[0] == ' ' || line[0] == '\t') {
      /* evhttp_append_to_last_header: " " + the line without blanks. */
      if (!last && !other_last) {
        out->body = PTS_HTTP_BODY_INVALID; /* a continuation of nothing */
        return;
      }
      if (last) {
        size_t s = 0;
        while (s < n && (line[s] == ' ' || line[s] == '\t')) s++;
        value_append(last, " ", 1);
        value_append(last, line + s, rtrim_lws(line + s, n - s));
      }
      continue;
    }
    const char *colon = memchr(line, ':', n);
    if (!colon) {
      out->body = PTS_HTTP_BODY_INVALID; /* evhttp_parse_headers_ fails the request */
      return;
    }
    size_t klen = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vlen = n - klen - 1;
    while (vlen && *v == ' ') v++, vlen--; /* strspn(value, " "): spaces only */
    vlen = rtrim_lws(v, vlen);
    last = NULL;
    other_last = true;
    /* evhttp_find_header: the first header of that name, in any case. */
    struct value *which = key_is(line, klen, "Content-Length")      ? &cl
                          : key_is(line, klen, "Transfer-Encoding") ? &te
                                                                     : NULL;
    if (which && !which->seen) {
      which->seen = true;
      value_append(which, v, vlen);
      last = which;
      other_last = false;
    }
  }
  if (!may_have_body) return;
  /* evhttp_get_body: chunked wins over any Content-Length. */
  if (te.seen && strcasecmp(te.text, "chunked") == 0) {
    out->body = PTS_HTTP_BODY_CHUNKED;
    return;
  }
  if (!cl.seen) return; /* no length and not chunked: no body */
  /* evhttp_get_body_length: evutil_strtoll, nothing after the number, not
   * negative. A value cut by value_append has no digits at its end to
   * agree on, so it is invalid here too. */
  char *end;
  errno = 0;
  long long len = strtoll(cl.text, &end, 10);
  if (cl.text[0] == '\0' || *end != '\0' || len < 0 || cl.len == sizeof cl.text - 1) {
    out->body = PTS_HTTP_BODY_INVALID;
    return;
  }
  out->body = PTS_HTTP_BODY_LENGTH;
  out->content_length = (uint64_t)len;
}
