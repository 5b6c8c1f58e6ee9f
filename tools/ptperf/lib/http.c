/* ptperf/lib/http.c — response framing, address resolution, connect, GET. */
#include "ptperf/lib/http.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"

/* Headers larger than this are not a server we want to measure. */
#define MAX_HEADER_BYTES (64 * 1024)

static const char *find_crlf(const char *p, const char *end) {
  for (; p + 1 < end; p++)
    if (p[0] == '\r' && p[1] == '\n') return p;
  return NULL;
}

/* Value of a header line "Name: value" if the name matches, trimmed. */
static bool header_is(const char *line, size_t n, const char *name, const char **val,
                      size_t *val_n) {
  size_t k = strlen(name);
  if (n <= k || line[k] != ':' || strncasecmp(line, name, k) != 0) return false;
  const char *v = line + k + 1, *e = line + n;
  while (v < e && (*v == ' ' || *v == '\t')) v++;
  while (e > v && (e[-1] == ' ' || e[-1] == '\t')) e--;
  *val = v;
  *val_n = (size_t)(e - v);
  return true;
}

static bool contains_token(const char *v, size_t n, const char *token) {
  size_t k = strlen(token);
  for (size_t i = 0; i + k <= n; i++)
    if (strncasecmp(v + i, token, k) == 0) return true;
  return false;
}

/* A decimal header value that must fit a long. */
static bool parse_decimal(const char *v, size_t n, long *out) {
  if (n == 0 || n > 18) return false;
  long x = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return false;
    x = x * 10 + (v[i] - '0');
  }
  *out = x;
  return true;
}

/* Walks chunked framing from `p`. Copies data into dst when it is not NULL.
 * On DONE, *body_len is the data size and *end points past the trailers. */
static enum ptperf_parse_result walk_chunks(const char *p, const char *end, char *dst,
                                            size_t *body_len, const char **stop,
                                            struct pts_error *err) {
  size_t total = 0;
  for (;;) {
    const char *eol = find_crlf(p, end);
    if (!eol) return PTPERF_PARSE_MORE;
    size_t size = 0;
    const char *q = p;
    int digits = 0;
    for (; q < eol && *q != ';'; q++, digits++) {
      int d;
      if (*q >= '0' && *q <= '9')
        d = *q - '0';
      else if (*q >= 'a' && *q <= 'f')
        d = *q - 'a' + 10;
      else if (*q >= 'A' && *q <= 'F')
        d = *q - 'A' + 10;
      else if (*q == ' ' || *q == '\t')
        break;
      else
        d = -1;
      if (d < 0 || digits >= 15) {
        pts_error_set(err, PTS_INVALID_ARG, "bad chunk size line in the response");
        return PTPERF_PARSE_ERROR;
      }
      size = size * 16 + (size_t)d;
    }
    if (digits == 0) {
      pts_error_set(err, PTS_INVALID_ARG, "empty chunk size line in the response");
      return PTPERF_PARSE_ERROR;
    }
    p = eol + 2;
    if (size == 0) {
      /* Trailers, then an empty line. */
      for (;;) {
        const char *t = find_crlf(p, end);
        if (!t) return PTPERF_PARSE_MORE;
        bool empty = t == p;
        p = t + 2;
        if (empty) break;
      }
      *body_len = total;
      *stop = p;
      return PTPERF_PARSE_DONE;
    }
    if ((size_t)(end - p) < size + 2) return PTPERF_PARSE_MORE;
    if (p[size] != '\r' || p[size + 1] != '\n') {
      pts_error_set(err, PTS_INVALID_ARG, "chunk of %zu bytes is not followed by CRLF", size);
      return PTPERF_PARSE_ERROR;
    }
    if (dst) memcpy(dst + total, p, size);
    total += size;
    p += size + 2;
  }
}

static enum ptperf_parse_result parse_status_line(const char *buf, const char *eol,
                                                  struct ptperf_http_response *out, bool *http10,
                                                  struct pts_error *err) {
  size_t n = (size_t)(eol - buf);
  if (n < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ') {
    pts_error_set(err, PTS_INVALID_ARG, "response does not start with an HTTP/1.x status line");
    return PTPERF_PARSE_ERROR;
  }
  int code = 0;
  for (int i = 9; i < 12; i++) {
    if (buf[i] < '0' || buf[i] > '9') {
      pts_error_set(err, PTS_INVALID_ARG, "bad status code in the response's status line");
      return PTPERF_PARSE_ERROR;
    }
    code = code * 10 + (buf[i] - '0');
  }
  out->status = code;
  *http10 = buf[7] == '0';
  return PTPERF_PARSE_DONE;
}

enum ptperf_parse_result ptperf_http_parse(const char *buf, size_t len,
                                           struct ptperf_http_response *out,
                                           struct pts_error *err) {
  memset(out, 0, sizeof *out);
  out->infer_header_len = -1;
  const char *end = buf + len;
  const char *hdr_end = NULL;
  for (const char *p = buf; p + 3 < end; p++) {
    if (p[0] == '\r' && p[1] == '\n' && p[2] == '\r' && p[3] == '\n') {
      hdr_end = p;
      break;
    }
  }
  if (!hdr_end) {
    if (len > MAX_HEADER_BYTES) {
      pts_error_set(err, PTS_INVALID_ARG, "response headers exceed %d bytes", MAX_HEADER_BYTES);
      return PTPERF_PARSE_ERROR;
    }
    return PTPERF_PARSE_MORE;
  }
  const char *eol = find_crlf(buf, hdr_end + 2);
  bool http10 = false;
  if (parse_status_line(buf, eol, out, &http10, err) == PTPERF_PARSE_ERROR)
    return PTPERF_PARSE_ERROR;
  out->header_len = (size_t)(hdr_end + 4 - buf);
  out->keep_alive = !http10;

  long content_length = -1;
  for (const char *line = eol + 2; line < hdr_end + 2;) {
    const char *le = find_crlf(line, hdr_end + 2);
    size_t n = (size_t)(le - line);
    const char *v;
    size_t vn;
    if (header_is(line, n, "Content-Length", &v, &vn)) {
      if (!parse_decimal(v, vn, &content_length)) {
        pts_error_set(err, PTS_INVALID_ARG, "bad Content-Length '%.*s' in the response",
                      (int)(vn > 40 ? 40 : vn), v);
        return PTPERF_PARSE_ERROR;
      }
    } else if (header_is(line, n, "Transfer-Encoding", &v, &vn)) {
      out->chunked = contains_token(v, vn, "chunked");
    } else if (header_is(line, n, "Connection", &v, &vn)) {
      if (contains_token(v, vn, "close")) out->keep_alive = false;
      if (contains_token(v, vn, "keep-alive")) out->keep_alive = true;
    } else if (header_is(line, n, "Inference-Header-Content-Length", &v, &vn)) {
      if (!parse_decimal(v, vn, &out->infer_header_len)) out->infer_header_len = -1;
    }
    line = le + 2;
  }

  /* RFC 9112 §6.3: these never have a body. */
  if (out->status / 100 == 1 || out->status == 204 || out->status == 304) {
    out->message_len = out->header_len;
    return PTPERF_PARSE_DONE;
  }
  if (out->chunked) {
    const char *stop;
    enum ptperf_parse_result r =
        walk_chunks(buf + out->header_len, end, NULL, &out->body_len, &stop, err);
    if (r == PTPERF_PARSE_DONE) out->message_len = (size_t)(stop - buf);
    return r;
  }
  if (content_length < 0) {
    pts_error_set(err, PTS_INVALID_ARG,
                  "response (status %d) has neither Content-Length nor chunked framing",
                  out->status);
    return PTPERF_PARSE_ERROR;
  }
  out->body_len = (size_t)content_length;
  out->message_len = out->header_len + out->body_len;
  return len >= out->message_len ? PTPERF_PARSE_DONE : PTPERF_PARSE_MORE;
}

enum pts_status ptperf_http_body(const char *buf, const struct ptperf_http_response *r, char **body,
                                 size_t *body_len, struct pts_error *err) {
  char *b = pts_malloc(r->body_len + 1);
  if (!b) return pts_error_set(err, PTS_NOMEM, "no memory for a %zu-byte body", r->body_len);
  if (r->chunked) {
    const char *stop;
    size_t n = 0;
    walk_chunks(buf + r->header_len, buf + r->message_len, b, &n, &stop, err);
  } else {
    memcpy(b, buf + r->header_len, r->body_len);
  }
  b[r->body_len] = '\0';
  *body = b;
  if (body_len) *body_len = r->body_len;
  return PTS_OK;
}

enum pts_status ptperf_addr_resolve(const char *url, struct ptperf_addr *out,
                                    struct pts_error *err) {
  memset(out, 0, sizeof *out);
  const char *s = url;
  if (strncmp(s, "http://", 7) == 0) s += 7;
  const char *host = s, *host_end, *port = "8000";
  size_t port_n = 4;
  if (*s == '[') { /* [v6]:port */
    host = s + 1;
    host_end = strchr(host, ']');
    if (!host_end) return pts_error_set(err, PTS_INVALID_ARG, "url '%s': missing ']'", url);
    if (host_end[1] == ':') {
      port = host_end + 2;
      port_n = strcspn(port, "/");
    }
  } else {
    host_end = s + strcspn(s, ":/");
    if (*host_end == ':') {
      port = host_end + 1;
      port_n = strcspn(port, "/");
    }
  }
  size_t host_n = (size_t)(host_end - host);
  if (host_n == 0 || host_n >= sizeof out->host || port_n == 0 || port_n >= sizeof out->port)
    return pts_error_set(err, PTS_INVALID_ARG, "url '%s': expected HOST:PORT", url);
  memcpy(out->host, host, host_n);
  memcpy(out->port, port, port_n);

  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  int rc = getaddrinfo(out->host, out->port, &hints, &ai);
  if (rc != 0 || !ai)
    return pts_error_set(err, PTS_UNAVAILABLE, "url '%s': can not resolve '%s' port '%s': %s", url,
                         out->host, out->port, gai_strerror(rc));
  memcpy(&out->sa, ai->ai_addr, ai->ai_addrlen);
  out->len = ai->ai_addrlen;
  freeaddrinfo(ai);
  return PTS_OK;
}

int ptperf_connect(const struct ptperf_addr *a, struct pts_error *err) {
  int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    pts_error_set(err, PTS_UNAVAILABLE, "socket: %s", strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (const struct sockaddr *)&a->sa, a->len) != 0) {
    pts_error_set(err, PTS_UNAVAILABLE, "connect to %s:%s: %s", a->host, a->port, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for `events` on fd until the deadline; false on timeout or error. */
static bool wait_fd(int fd, short events, long long deadline) {
  for (;;) {
    long long left = deadline - now_ms();
    if (left <= 0) return false;
    struct pollfd p = {.fd = fd, .events = events};
    int rc = poll(&p, 1, (int)(left > INT_MAX ? INT_MAX : left));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

static enum pts_status send_all(int fd, const char *p, size_t n, long long deadline,
                                const char *what, struct pts_error *err) {
  while (n > 0) {
    if (!wait_fd(fd, POLLOUT, deadline))
      return pts_error_set(err, PTS_UNAVAILABLE, "%s: timed out sending", what);
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return pts_error_set(err, PTS_UNAVAILABLE, "%s: send: %s", what, strerror(errno));
    p += k;
    n -= (size_t)k;
  }
  return PTS_OK;
}

static enum pts_status read_response(int fd, long long deadline, const char *what, int *status,
                                     char **body, struct pts_error *err) {
  size_t cap = 16384, len = 0;
  char *buf = pts_malloc(cap);
  if (!buf) return pts_error_set(err, PTS_NOMEM, "%s: no memory", what);
  enum pts_status st = PTS_OK;
  struct ptperf_http_response r;
  for (;;) {
    enum ptperf_parse_result pr = ptperf_http_parse(buf, len, &r, err);
    if (pr == PTPERF_PARSE_DONE) break;
    if (pr == PTPERF_PARSE_ERROR) {
      pts_error_prefix(err, "%s", what);
      st = PTS_UNAVAILABLE;
      goto out;
    }
    if (len == cap) {
      char *nb = pts_realloc(buf, cap * 2);
      if (!nb) {
        st = pts_error_set(err, PTS_NOMEM, "%s: no memory for the response", what);
        goto out;
      }
      buf = nb;
      cap *= 2;
    }
    if (!wait_fd(fd, POLLIN, deadline)) {
      st = pts_error_set(err, PTS_UNAVAILABLE, "%s: timed out waiting for the response", what);
      goto out;
    }
    ssize_t k = recv(fd, buf + len, cap - len, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      st = pts_error_set(err, PTS_UNAVAILABLE,
                         "%s: connection closed before the response "
                         "was complete",
                         what);
      goto out;
    }
    len += (size_t)k;
  }
  *status = r.status;
  st = ptperf_http_body(buf, &r, body, NULL, err);
out:
  pts_free(buf);
  return st;
}

enum pts_status ptperf_http_get(const struct ptperf_addr *a, const char *path, int timeout_ms,
                                int *status, char **body, struct pts_error *err) {
  char what[512];
  snprintf(what, sizeof what, "GET %s", path);
  int fd = ptperf_connect(a, err);
  if (fd < 0) {
    pts_error_prefix(err, "%s", what);
    return PTS_UNAVAILABLE;
  }
  char req[1024];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n",
                   path, a->host, a->port);
  enum pts_status st;
  if (n < 0 || (size_t)n >= sizeof req) {
    st = pts_error_set(err, PTS_INVALID_ARG, "%s: path too long", what);
  } else {
    long long deadline = now_ms() + timeout_ms;
    st = send_all(fd, req, (size_t)n, deadline, what, err);
    if (st == PTS_OK) st = read_response(fd, deadline, what, status, body, err);
  }
  close(fd);
  return st;
}

enum pts_status ptperf_http_post(const struct ptperf_addr *a, const char *path, const char *body,
                                 size_t body_len, int timeout_ms, int *status, char **reply,
                                 struct pts_error *err) {
  char what[512];
  snprintf(what, sizeof what, "POST %s", path);
  int fd = ptperf_connect(a, err);
  if (fd < 0) {
    pts_error_prefix(err, "%s", what);
    return PTS_UNAVAILABLE;
  }
  char head[1024];
  int n = snprintf(head, sizeof head,
                   "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                   path, a->host, a->port, body_len);
  enum pts_status st;
  if (n < 0 || (size_t)n >= sizeof head) {
    st = pts_error_set(err, PTS_INVALID_ARG, "%s: path too long", what);
  } else {
    long long deadline = now_ms() + timeout_ms;
    st = send_all(fd, head, (size_t)n, deadline, what, err);
    if (st == PTS_OK && body_len) st = send_all(fd, body, body_len, deadline, what, err);
    if (st == PTS_OK) st = read_response(fd, deadline, what, status, reply, err);
  }
  close(fd);
  return st;
}
