/* frontend/http/conn.c — see conn.h and docs/internals/http.md.
 *
 * Why not evhttp: libevent's HTTP server cost about 32k instructions per
 * small request, this transport (with http-parser doing the parsing) about
 * a third of that; docs/experiments/http-transport measured both. The socket
 * is read into a fixed buffer per connection and written through an evbuffer
 * (binary outputs go in by reference); the loop, events and evbuffers are
 * libevent's.
 *
 * A connection is freed on a turn of the loop of its own (conn_kill marks
 * it and activates its write event), never inside code that may still
 * look at it: a handler that writes a reply, a parser callback.
 */
#include "frontend/http/conn.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fmt.h"
#include "core/log.h"
#include "core/overload.h"
#include "core/pinned.h"
#include "frontend/http/v2_json.h"
#include "net/listen.h"

/* Input buffer per connection: a head, or the start of a body, in one read. */
#define IN_CAP ((size_t)16 << 10)
/* Head buffer per connection to start with; grown to --http-max-header-size. */
#define HB_INITIAL ((size_t)1024)
#define HDRS_INITIAL 16
/* A declared body with at least this much left is read from the socket
 * straight into its buffer, in reads as large as what is left. */
#define DIRECT_MIN (IN_CAP / 2)
/* ... but at most this much per readiness, so that one fast client with a
 * huge body does not hold the loop (and the other connections on it). */
#define BODY_READ_PASS_MAX ((size_t)4 << 20)
/* A refused connection is closed after this long without input, or when
 * it still sends this long after the answer, or this much more: a client
 * stops once it reads the answer, but what it sent before that (socket
 * buffers hold megabytes) must be read, or the close would reset the
 * connection and destroy the answer before the client reads it. */
#define REFUSE_LINGER_S 2
#define REFUSE_DISCARD_MAX ((size_t)64 << 20)

#define STR_(x) #x
#define STR(x) STR_(x)

enum { PIECE_NONE, PIECE_URL, PIECE_FIELD, PIECE_VALUE };

static void conn_run(struct conn *cn);
static void conn_flush(struct conn *cn);

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

static time_t monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static const char *reason_phrase(int code) {
  switch (code) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}

/* Sets the connection's share of the memory budget to `want` bytes. */
static void recharge(struct conn *cn, size_t want) {
  if (want > cn->charged)
    pts_overload_charge(want - cn->charged);
  else
    pts_overload_release(cn->charged - want);
  cn->charged = want;
}

static void reading_on(struct conn *cn, unsigned timeout_s) {
  if (cn->reading) return;
  struct timeval tv = {(time_t)timeout_s, 0};
  if (event_add(cn->rev, timeout_s ? &tv : NULL) == 0) cn->reading = true;
}

static void reading_off(struct conn *cn) {
  if (!cn->reading) return;
  event_del(cn->rev);
  cn->reading = false;
}

/* ------------------------------------------------------------------ */
/* lifetime                                                            */

static void conn_free(struct conn *cn) {
  struct loop *lp = cn->lp;
  struct pts_http *h = lp->h;
  if (cn->prev)
    cn->prev->next = cn->next;
  else
    lp->conns = cn->next;
  if (cn->next) cn->next->prev = cn->prev;
  if (cn->ctx) lp->handlers->orphan(cn->ctx);
  cn->ctx = NULL;
  if (cn->reply_pending) lp->handlers->reply_end(cn);
  if (cn->rev) event_free(cn->rev);
  if (cn->wev) event_free(cn->wev);
  if (cn->fd >= 0) close(cn->fd);
  if (cn->reply) evbuffer_free(cn->reply);
  if (cn->out) evbuffer_free(cn->out); /* releases binary outputs held by reference */
  pts_buf_release(cn->body);
  pts_free(cn->chunks);
  pts_free(cn->in);
  pts_free(cn->hb);
  pts_free(cn->hdrs);
  pts_free(cn->refuse_msg);
  pts_overload_release(cn->charged);
  if (cn->has_slot) atomic_fetch_sub(&h->admitted, 1);
  pts_overload_count(PTS_OVERLOAD_HTTP_CONNECTIONS, -1);
  pts_free(cn);
}

/* Closes the connection: nothing more is read or written; what is in the
 * core is orphaned now, the memory is freed on the loop's next turn. */
static void conn_kill(struct conn *cn) {
  if (cn->state == CONN_DEAD) return;
  cn->state = CONN_DEAD;
  reading_off(cn);
  event_del(cn->wev);
  if (cn->ctx) cn->lp->handlers->orphan(cn->ctx);
  cn->ctx = NULL;
  event_active(cn->wev, EV_WRITE, 0);
}

/* Forgets the current request once it is answered (or refused). */
static void reset_request(struct conn *cn) {
  cn->hb_len = 0;
  cn->piece = PIECE_NONE;
  cn->path = 0;
  cn->n_hdrs = 0;
  if (cn->hb_cap > HB_INITIAL) { /* a large head does not stay with the connection */
    char *small = pts_realloc(cn->hb, HB_INITIAL);
    if (small) {
      cn->hb = small;
      cn->hb_cap = HB_INITIAL;
    }
  }
  pts_buf_release(cn->body);
  cn->body = NULL;
  cn->body_len = 0;
  pts_free(cn->chunks);
  cn->chunks = NULL;
  cn->chunks_cap = 0;
  cn->chunked = false;
  cn->complete = cn->head_reply = false;
  cn->xh_len = 0;
  evbuffer_drain(cn->reply, evbuffer_get_length(cn->reply));
  recharge(cn, 0);
}

/* ------------------------------------------------------------------ */
/* refusing                                                            */

/* Decided inside a parser callback: the callback then returns -1, which
 * stops the parser, and conn_run carries the refusal out. */
static int refuse_later(struct conn *cn, int code, bool retry, const char *fmt, ...) {
  if (cn->refuse_code) return -1;
  cn->refuse_code = code;
  cn->refuse_retry = retry;
  pts_free(cn->refuse_msg);
  cn->refuse_msg = pts_malloc(PTS_ERROR_MSG_MAX);
  if (cn->refuse_msg) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cn->refuse_msg, PTS_ERROR_MSG_MAX, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static int refuse_memory_later(struct conn *cn, const char *why) {
  pts_overload_count(PTS_OVERLOAD_HTTP_MEMORY_REFUSED, 1);
  return refuse_later(cn, 503, true,
                      "%s: the request memory budget is exhausted (%zu of %zu bytes held; "
                      "--request-memory-budget); retry later",
                      why, pts_overload_held(), pts_overload_budget());
}

/* Answers with `code` and a JSON error, shuts the sending side, and reads
 * and drops the input until the client closes (so the answer is not lost
 * to a reset), for at most REFUSE_LINGER_S of silence. */
static void refuse(struct conn *cn, int code, bool retry, const char *msg) {
  size_t jlen = 0;
  char *json = pts_v2_error_json(msg ? msg : "request refused", &jlen);
  static const char oom[] = "{\"error\":\"out of memory\"}";
  char head[256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                   "%sConnection: close\r\n\r\n",
                   code, reason_phrase(code), json ? jlen : sizeof oom - 1,
                   retry ? "Retry-After: " STR(PTS_CONN_RETRY_AFTER_S) "\r\n" : "");
  evbuffer_drain(cn->out, evbuffer_get_length(cn->out)); /* nothing may follow the answer */
  evbuffer_add(cn->out, head, (size_t)n);
  evbuffer_add(cn->out, json ? json : oom, json ? jlen : sizeof oom - 1);
  pts_free(json);
  reset_request(cn);
  cn->in_pos = cn->in_len = 0;
  cn->state = CONN_REFUSING;
  cn->refused_at = monotonic_s();
  cn->discarded = 0;
  reading_off(cn);
  if (!cn->peer_eof) reading_on(cn, REFUSE_LINGER_S);
  conn_flush(cn);
}

/* ------------------------------------------------------------------ */
/* parser callbacks                                                    */

/* Ends the piece the parser delivered last with a NUL. */
static int hb_end_piece(struct conn *cn) {
  if (cn->piece == PIECE_NONE) return 0;
  if (cn->hb_len == cn->hb_cap) {
    char *grown = pts_realloc(cn->hb, cn->hb_cap + 64);
    if (!grown) return refuse_memory_later(cn, "request refused (out of memory)");
    cn->hb = grown;
    cn->hb_cap += 64;
  }
  cn->hb[cn->hb_len++] = '\0';
  return 0;
}

/* Appends to the head buffer: every byte of the URL and the headers,
 * bounded by --http-max-header-size. */
static int hb_put(struct conn *cn, const char *at, size_t len) {
  struct pts_http *h = cn->lp->h;
  if (cn->hb_len + len + 1 > h->max_header)
    return refuse_later(cn, 413, false,
                        "the request's URL and headers exceed %zu bytes "
                        "(--http-max-header-size)",
                        h->max_header);
  if (cn->hb_len + len + 1 > cn->hb_cap) {
    size_t cap = cn->hb_cap * 2;
    while (cap < cn->hb_len + len + 1) cap *= 2;
    if (cap > h->max_header + 64) cap = h->max_header + 64;
    char *grown = pts_realloc(cn->hb, cap);
    if (!grown) return refuse_memory_later(cn, "request refused (out of memory)");
    cn->hb = grown;
    cn->hb_cap = cap;
  }
  memcpy(cn->hb + cn->hb_len, at, len);
  cn->hb_len += len;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  struct conn *cn = p->data;
  cn->piece = PIECE_URL;
  return hb_put(cn, at, len);
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  struct conn *cn = p->data;
  if (cn->piece != PIECE_FIELD) { /* a new header */
    if (hb_end_piece(cn) != 0) return -1;
    if (cn->n_hdrs == cn->hdrs_cap) {
      struct conn_header *grown = pts_realloc(cn->hdrs, 2 * cn->hdrs_cap * sizeof *grown);
      if (!grown) return refuse_memory_later(cn, "request refused (out of memory)");
      cn->hdrs = grown;
      cn->hdrs_cap *= 2;
    }
    cn->hdrs[cn->n_hdrs].name = (uint32_t)cn->hb_len;
    cn->hdrs[cn->n_hdrs].value = UINT32_MAX;
    cn->n_hdrs++;
    cn->piece = PIECE_FIELD;
  }
  return hb_put(cn, at, len);
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  struct conn *cn = p->data;
  if (cn->piece != PIECE_VALUE) {
    if (hb_end_piece(cn) != 0) return -1;
    cn->hdrs[cn->n_hdrs - 1].value = (uint32_t)cn->hb_len;
    cn->piece = PIECE_VALUE;
  }
  return hb_put(cn, at, len);
}

/* The URL (the head buffer's first string) cut to its path: cn->path is
 * its offset, the query and fragment dropped. Clients send origin-form
 * targets ("/v2/models/m/infer?x"), whose path is everything before '?'
 * or '#': the parser has already checked their bytes, so a strpbrk finds
 * it (http_parser_parse_url took 0.7k instructions a request, walking the
 * URL again for a scheme, host and port that are not there). Any other
 * form (absolute, authority, "*") goes through http_parser_parse_url; one
 * without a path gets the empty string after the URL. */
static void find_path(struct conn *cn, bool connect) {
  if (!connect && cn->hb[0] == '/') {
    cn->path = 0;
    char *end = strpbrk(cn->hb, "?#");
    if (end) *end = '\0';
    return;
  }
  size_t url_len = strlen(cn->hb);
  struct http_parser_url u;
  http_parser_url_init(&u);
  cn->path = url_len;
  if (http_parser_parse_url(cn->hb, url_len, connect, &u) == 0 &&
      (u.field_set & (1u << UF_PATH))) {
    cn->path = u.field_data[UF_PATH].off;
    cn->hb[u.field_data[UF_PATH].off + u.field_data[UF_PATH].len] = '\0';
  }
}

/* The head is complete: find the path, then admit the body or refuse it
 * before any of it is kept. */
static int on_headers_complete(http_parser *p) {
  struct conn *cn = p->data;
  struct pts_http *h = cn->lp->h;
  /* A header with no value ("X-A:" then the end) still gets one. */
  if (cn->piece == PIECE_FIELD && cn->n_hdrs > 0) {
    if (hb_end_piece(cn) != 0) return -1;
    cn->hdrs[cn->n_hdrs - 1].value = (uint32_t)cn->hb_len;
    cn->piece = PIECE_VALUE;
  }
  if (hb_end_piece(cn) != 0) return -1;
  if (cn->hb_len == 0) cn->hb[cn->hb_len++] = '\0'; /* no URL came: an empty one */
  find_path(cn, p->method == HTTP_CONNECT);
  cn->head_reply = p->method == HTTP_HEAD;
  size_t head = cn->hb_len;
  if (p->flags & F_CHUNKED) {
    /* No length to reserve: charged as it arrives (on_body). With a
     * Content-Length too (python-requests sends both when told to chunk,
     * and Triton's QA does), RFC 9112 §6.3 lets the server read the body
     * by Transfer-Encoding alone, as Triton does, provided it closes the
     * connection after answering: no second request can hide in the body
     * a length-reading proxy passed on. */
    if (p->flags & F_CONTENTLENGTH) cn->close_after = true;
    cn->chunked = true;
    recharge(cn, head);
    return 0;
  }
  if (!(p->flags & F_CONTENTLENGTH)) {
    recharge(cn, head);
    return 0;
  }
  uint64_t len = p->content_length;
  if (len > h->max_input)
    return refuse_later(cn, 413, false,
                        "request body of %llu bytes exceeds the maximum allowed input size of "
                        "%zu bytes (--http-max-input-size)",
                        (unsigned long long)len, h->max_input);
  size_t budget = pts_overload_budget();
  if (len > budget) {
    pts_overload_count(PTS_OVERLOAD_HTTP_MEMORY_REFUSED, 1);
    return refuse_later(cn, 413, false,
                        "request body of %llu bytes exceeds the request memory budget of %zu "
                        "bytes (--request-memory-budget)",
                        (unsigned long long)len, budget);
  }
  size_t want = head + (size_t)len;
  if (want > cn->charged) {
    if (!pts_overload_try_charge(want - cn->charged)) {
      char why[96];
      snprintf(why, sizeof why, "request body of %llu bytes refused", (unsigned long long)len);
      return refuse_memory_later(cn, why);
    }
    cn->charged = want;
  } else {
    recharge(cn, want);
  }
  if (len > 0) {
    cn->body = pts_buf_new_io((size_t)len); /* pinned when large and a GPU reads it */
    if (!cn->body) return refuse_memory_later(cn, "request refused (out of memory)");
    /* RFC 9110 §10.1.1: a client that waits for this before sending the
     * body (curl does, for bodies above 1 MB) gets it once admitted. */
    const char *expect = pts_conn_header(cn, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && p->http_major == 1 &&
        p->http_minor >= 1) {
      static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
      evbuffer_add(cn->out, cont, sizeof cont - 1);
      conn_flush(cn);
      if (cn->state == CONN_DEAD) return -1; /* the client is gone */
    }
  }
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  struct conn *cn = p->data;
  if (cn->chunked) {
    struct pts_http *h = cn->lp->h;
    size_t need = cn->body_len + len;
    if (need > h->max_input)
      return refuse_later(cn, 413, false,
                          "request body of more than %zu bytes exceeds the maximum allowed input "
                          "size of %zu bytes (--http-max-input-size)",
                          cn->body_len, h->max_input);
    if (need > cn->chunks_cap) {
      size_t cap = cn->chunks_cap ? cn->chunks_cap * 2 : 4096;
      while (cap < need) cap *= 2;
      if (cap > h->max_input) cap = h->max_input;
      char *grown = pts_realloc(cn->chunks, cap);
      if (!grown) return refuse_memory_later(cn, "request body refused (out of memory)");
      cn->chunks = grown;
      recharge(cn, cn->charged + (cap - cn->chunks_cap));
      cn->chunks_cap = cap;
      if (pts_overload_held() > pts_overload_budget())
        return refuse_memory_later(cn, "request body refused");
    }
    memcpy(cn->chunks + cn->body_len, at, len);
    cn->body_len = need;
    return 0;
  }
  if (!cn->body || len > cn->body->size - cn->body_len) return -1; /* the parser counts it */
  char *dst = (char *)cn->body->data + cn->body_len;
  if (at != dst) memcpy(dst, at, len); /* read straight into the body: already there */
  cn->body_len += len;
  return 0;
}

static int on_message_complete(http_parser *p) {
  struct conn *cn = p->data;
  cn->complete = true;
  if (!http_should_keep_alive(p) || p->upgrade) cn->close_after = true;
  http_parser_pause(p, 1); /* the next request waits until this one is answered */
  return 0;
}

static const http_parser_settings SETTINGS = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ------------------------------------------------------------------ */
/* reading                                                             */

static void release_chunks(void *ctx, void *data) {
  (void)ctx;
  pts_free(data);
}

/* A complete request: to the frontend. */
static void dispatch(struct conn *cn) {
  cn->complete = false;
  http_parser_pause(&cn->parser, 0);
  cn->state = CONN_HANDLING;
  if (cn->chunked && cn->body_len > 0) {
    cn->body = pts_buf_wrap(cn->chunks, cn->body_len, release_chunks, NULL);
    if (cn->body) cn->chunks = NULL; /* charged still through chunks_cap */
  }
  cn->lp->handlers->on_request(cn);
}

/* Feeds data[0..len) to the parser; false when the connection stopped
 * reading requests (refused, or malformed input answered). */
static bool conn_feed(struct conn *cn, const char *data, size_t len, size_t *used) {
  size_t n = http_parser_execute(&cn->parser, &SETTINGS, data, len);
  *used = n;
  if (cn->state == CONN_DEAD) return false; /* a write inside a callback failed */
  enum http_errno e = HTTP_PARSER_ERRNO(&cn->parser);
  if (cn->complete) { /* paused at the end of a request (or an upgrade) */
    dispatch(cn);
    return true;
  }
  if (e == HPE_OK) return true;
  if (cn->refuse_code) {
    int code = cn->refuse_code;
    cn->refuse_code = 0;
    refuse(cn, code, cn->refuse_retry, cn->refuse_msg);
    return false;
  }
  char msg[PTS_ERROR_MSG_MAX];
  snprintf(msg, sizeof msg, "malformed HTTP request: %s (%s)", http_errno_description(e),
           http_errno_name(e));
  refuse(cn, 400, false, msg);
  return false;
}

/* Parses what the input holds, handing over each complete request, while
 * the connection is reading requests. */
static void conn_run(struct conn *cn) {
  while (cn->state == CONN_READING && cn->in_pos < cn->in_len) {
    size_t used = 0;
    if (!conn_feed(cn, cn->in + cn->in_pos, cn->in_len - cn->in_pos, &used)) return;
    cn->in_pos += used;
  }
  if (cn->in_pos == cn->in_len) cn->in_pos = cn->in_len = 0;
}

/* After reading or writing: what the read event should do next. */
static void conn_settle(struct conn *cn) {
  struct pts_http *h = cn->lp->h;
  if (cn->state == CONN_READING) {
    /* Everything buffered was parsed: the client sends nothing more. */
    if (cn->peer_eof) {
      conn_kill(cn);
      return;
    }
    reading_on(cn, h->timeout_s);
  } else if (cn->state == CONN_HANDLING) {
    if (cn->in_pos == 0 && cn->in_len == IN_CAP) reading_off(cn); /* full until answered */
  }
}

static void conn_process(struct conn *cn) {
  cn->in_process = true;
  conn_run(cn);
  cn->in_process = false;
  conn_settle(cn);
}

/* Reads the rest of a declared body straight into its buffer. False when
 * the connection is gone. */
static bool read_body_direct(struct conn *cn) {
  size_t moved = 0;
  while (cn->state == CONN_READING && cn->body && moved < BODY_READ_PASS_MAX) {
    size_t want = cn->body->size - cn->body_len;
    if (want == 0) break;
    if (want > BODY_READ_PASS_MAX - moved) want = BODY_READ_PASS_MAX - moved;
    char *dst = (char *)cn->body->data + cn->body_len;
    ssize_t got = read(cn->fd, dst, want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (got <= 0) {
      if (got < 0) {
        conn_kill(cn);
        return false;
      }
      cn->peer_eof = true; /* mid-body: conn_settle closes */
      reading_off(cn);
      break;
    }
    size_t used = 0;
    if (!conn_feed(cn, dst, (size_t)got, &used)) break;
    moved += (size_t)got;
    if ((size_t)got < want) break; /* the socket is drained */
  }
  return true;
}

static void on_refusing_input(struct conn *cn) {
  for (;;) {
    ssize_t got = read(cn->fd, cn->in, IN_CAP);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (got <= 0) {
      conn_kill(cn);
      return;
    }
    cn->discarded += (size_t)got;
    if ((size_t)got < IN_CAP) break;
  }
  if (cn->discarded > REFUSE_DISCARD_MAX || monotonic_s() - cn->refused_at > REFUSE_LINGER_S)
    conn_kill(cn);
}

static void on_read(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  struct conn *cn = arg;
  if (cn->state == CONN_DEAD) return;
  if (what & EV_TIMEOUT) {
    /* Silent for --http-timeout-secs (or the linger of a refusal). A
     * request being handled may take longer: the timer starts again. */
    if (cn->state != CONN_HANDLING) conn_kill(cn);
    return;
  }
  if (cn->state == CONN_REFUSING) {
    on_refusing_input(cn);
    return;
  }
  cn->in_process = true;
  if (cn->state == CONN_READING && !cn->chunked && cn->body && cn->in_pos == cn->in_len &&
      cn->body->size - cn->body_len >= DIRECT_MIN) {
    bool alive = read_body_direct(cn);
    cn->in_process = false;
    if (alive) conn_settle(cn);
    return;
  }
  if (cn->in_pos == cn->in_len) {
    cn->in_pos = cn->in_len = 0;
  } else if (cn->in_pos > 0) { /* keep the unparsed bytes at the front */
    memmove(cn->in, cn->in + cn->in_pos, cn->in_len - cn->in_pos);
    cn->in_len -= cn->in_pos;
    cn->in_pos = 0;
  }
  if (cn->in_len == IN_CAP) { /* full of a next request: wait for the answer */
    cn->in_process = false;
    reading_off(cn);
    return;
  }
  ssize_t got;
  do {
    got = read(cn->fd, cn->in + cn->in_len, IN_CAP - cn->in_len);
  } while (got < 0 && errno == EINTR);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    cn->in_process = false;
    return;
  }
  if (got < 0) { /* reset: whatever was running for it is orphaned */
    cn->in_process = false;
    conn_kill(cn);
    return;
  }
  if (got == 0) {
    cn->peer_eof = true; /* answer what was sent, then close */
    reading_off(cn);
  } else {
    cn->in_len += (size_t)got;
  }
  if (cn->state == CONN_READING) conn_run(cn);
  cn->in_process = false;
  conn_settle(cn);
}

/* ------------------------------------------------------------------ */
/* writing                                                             */

/* All of `out` is written. */
static void conn_written(struct conn *cn) {
  if (cn->state == CONN_REFUSING) {
    (void)shutdown(cn->fd, SHUT_WR);
    if (cn->peer_eof) conn_kill(cn); /* nothing left to read and drop */
    return;
  }
  if (cn->state != CONN_HANDLING || !cn->sent) return; /* a 100 Continue */
  cn->sent = false;
  if (cn->reply_pending) cn->lp->handlers->reply_end(cn);
  reset_request(cn);
  if (cn->close_after) {
    conn_kill(cn);
    return;
  }
  /* A client that shut its side is closed by conn_settle once what it
   * sent before is answered. */
  cn->state = CONN_READING;
  if (!cn->in_process) conn_process(cn);
}

static void conn_flush(struct conn *cn) {
  while (evbuffer_get_length(cn->out) > 0) {
    int n = evbuffer_write(cn->out, cn->fd);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pts_http *h = cn->lp->h;
      struct timeval tv = {(time_t)h->timeout_s, 0};
      if (!cn->writing && event_add(cn->wev, h->timeout_s ? &tv : NULL) == 0) cn->writing = true;
      return;
    }
    conn_kill(cn); /* the client is gone */
    return;
  }
  if (cn->writing) {
    event_del(cn->wev);
    cn->writing = false;
  }
  conn_written(cn);
}

/* Flushes an answer now, or, when other events of this turn of the loop
 * are still to run, once they have: requests that arrived on other
 * connections in the same epoll_wait are answered first, and the answers
 * leave back to back. A client waiting on several connections is then
 * woken once for them, not once per answer; on a VM a wake-up of a thread
 * on a halted virtual CPU is the dearest part of a small request
 * (docs/benchmarks.md, docs/experiments/floor), and the writer pays for it. With
 * nothing else ready (one connection, c=1) it writes at once. The write
 * event, activated by hand, runs conn_flush through on_write. */
static void conn_flush_soon(struct conn *cn) {
  if (event_base_get_num_events(cn->lp->base, EVENT_BASE_COUNT_ACTIVE) == 0) {
    conn_flush(cn);
    return;
  }
  event_active(cn->wev, EV_WRITE, 0);
}

static void on_write(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  struct conn *cn = arg;
  if (cn->state == CONN_DEAD) {
    conn_free(cn);
    return;
  }
  if (what & EV_TIMEOUT) { /* a client that does not read */
    conn_kill(cn);
    return;
  }
  conn_flush(cn);
}

/* ------------------------------------------------------------------ */
/* the handler's side                                                  */

enum pts_http_method pts_conn_method(const struct conn *cn) {
  switch (cn->parser.method) {
    case HTTP_GET:
      return PTS_HTTP_GET;
    case HTTP_POST:
      return PTS_HTTP_POST;
    default:
      return PTS_HTTP_OTHER;
  }
}

const char *pts_conn_path(const struct conn *cn) { return cn->hb + cn->path; }

const char *pts_conn_header(const struct conn *cn, const char *name) {
  for (size_t i = 0; i < cn->n_hdrs; i++)
    if (cn->hdrs[i].value != UINT32_MAX && strcasecmp(cn->hb + cn->hdrs[i].name, name) == 0)
      return cn->hb + cn->hdrs[i].value;
  return NULL;
}

bool pts_conn_header_at(const struct conn *cn, size_t i, const char **name, size_t *name_len,
                        const char **value) {
  if (i >= cn->n_hdrs || cn->hdrs[i].value == UINT32_MAX) return false;
  *name = cn->hb + cn->hdrs[i].name;
  *name_len = cn->hdrs[i].value - cn->hdrs[i].name - 1;
  *value = cn->hb + cn->hdrs[i].value;
  return true;
}

struct pts_buf *pts_conn_body(struct conn *cn) {
  return cn->body ? pts_buf_retain(cn->body) : pts_buf_new(0);
}

size_t pts_conn_take_charge(struct conn *cn) {
  size_t n = cn->charged;
  cn->charged = 0;
  cn->chunks_cap = 0; /* its charge went with the rest */
  return n;
}

void pts_conn_add_header(struct conn *cn, const char *name, const char *value) {
  size_t nl = strlen(name), vl = strlen(value);
  if (cn->xh_len + nl + vl + 4 > sizeof cn->xh) {
    PTS_LOG_ERROR("HTTP: reply header '%s' dropped: no room", name);
    return;
  }
  char *p = cn->xh + cn->xh_len;
  memcpy(p, name, nl);
  p[nl] = ':';
  p[nl + 1] = ' ';
  memcpy(p + nl + 2, value, vl);
  p[nl + 2 + vl] = '\r';
  p[nl + 3 + vl] = '\n';
  cn->xh_len += nl + vl + 4;
}

struct evbuffer *pts_conn_reply_body(struct conn *cn) { return cn->reply; }

void pts_conn_close_after(struct conn *cn) { cn->close_after = true; }

static char *put(char *p, const char *s, size_t n) {
  memcpy(p, s, n);
  return p + n;
}
#define PUT(p, lit) put((p), (lit), sizeof(lit) - 1)

void pts_conn_send(struct conn *cn, int code) {
  if (cn->state != CONN_HANDLING || cn->sent) {
    evbuffer_drain(cn->reply, evbuffer_get_length(cn->reply));
    return;
  }
  /* status line, Content-Length, Date, the handler's headers, Connection */
  char head[160 + sizeof cn->xh];
  char *p = head;
  bool http10 = cn->parser.http_major == 1 && cn->parser.http_minor == 0;
  p = http10 ? PUT(p, "HTTP/1.0 ") : PUT(p, "HTTP/1.1 ");
  char num[PTS_FMT_INT_MAX];
  p = put(p, num, pts_fmt_u64(num, (uint64_t)code));
  *p++ = ' ';
  const char *reason = reason_phrase(code);
  p = put(p, reason, strlen(reason));
  p = PUT(p, "\r\nContent-Length: ");
  size_t len = evbuffer_get_length(cn->reply);
  p = put(p, num, pts_fmt_u64(num, len));
  p = PUT(p, "\r\nDate: ");
  const char *date = pts_fmt_http_date_now();
  p = put(p, date, strlen(date));
  p = PUT(p, "\r\n");
  p = put(p, cn->xh, cn->xh_len);
  if (cn->close_after)
    p = PUT(p, "Connection: close\r\n");
  else if (http10)
    p = PUT(p, "Connection: keep-alive\r\n");
  p = PUT(p, "\r\n");
  evbuffer_add(cn->out, head, (size_t)(p - head));
  if (cn->head_reply)
    evbuffer_drain(cn->reply, len);
  else
    evbuffer_add_buffer(cn->out, cn->reply);
  cn->sent = true;
  conn_flush_soon(cn);
}

/* ------------------------------------------------------------------ */
/* accepting                                                           */

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int socklen, void *arg) {
  (void)lev;
  (void)sa;
  (void)socklen;
  struct loop *lp = arg;
  struct pts_http *h = lp->h;
  struct conn *cn = pts_calloc(1, sizeof *cn);
  if (cn) {
    cn->lp = lp;
    cn->fd = fd;
    cn->in = pts_malloc(IN_CAP);
    cn->hb = pts_malloc(HB_INITIAL);
    cn->hb_cap = HB_INITIAL;
    cn->hdrs = pts_malloc(HDRS_INITIAL * sizeof *cn->hdrs);
    cn->hdrs_cap = HDRS_INITIAL;
    cn->reply = evbuffer_new();
    cn->out = evbuffer_new();
    cn->rev = event_new(lp->base, fd, EV_READ | EV_PERSIST, on_read, cn);
    cn->wev = event_new(lp->base, fd, EV_WRITE | EV_PERSIST, on_write, cn);
    cn->next = lp->conns;
    if (cn->next) cn->next->prev = cn;
    lp->conns = cn;
    pts_overload_count(PTS_OVERLOAD_HTTP_CONNECTIONS, 1);
  }
  if (!cn || !cn->in || !cn->hb || !cn->hdrs || !cn->reply || !cn->out || !cn->rev || !cn->wev) {
    PTS_LOG_ERROR("HTTP: out of memory accepting a connection; closing it");
    if (cn)
      conn_free(cn);
    else
      close(fd);
    return;
  }
  http_parser_init(&cn->parser, HTTP_REQUEST);
  cn->parser.data = cn;
  cn->parser.allow_chunked_length = 1; /* see on_headers_complete */
  /* Small replies must not wait for Nagle's timer. A failure (a non-TCP
   * socket) costs only latency. */
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (atomic_fetch_add(&h->admitted, 1) < h->max_connections) {
    cn->has_slot = true;
    cn->state = CONN_READING;
    reading_on(cn, h->timeout_s);
    return;
  }
  atomic_fetch_sub(&h->admitted, 1);
  char msg[PTS_ERROR_MSG_MAX];
  snprintf(msg, sizeof msg,
           "the server has reached its limit of %lu open HTTP connections "
           "(--http-max-connections); retry later",
           h->max_connections);
  pts_overload_count(PTS_OVERLOAD_HTTP_CONN_REFUSED, 1);
  refuse(cn, 503, true, msg);
}

enum pts_status pts_conn_listen(struct loop *lp, evutil_socket_t fd,
                                const struct pts_conn_handlers *handlers,
                                struct pts_error *err) {
  lp->handlers = handlers;
  /* Backlog 0: the socket listens already, with 1024 (-1 would make
   * libevent listen again with 128). */
  lp->lev = evconnlistener_new(lp->base, on_accept, lp,
                               LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
  if (!lp->lev) {
    close(fd);
    return pts_error_set(err, PTS_INTERNAL, "failed to listen on the HTTP socket");
  }
  /* accept() out of descriptors: pause, do not spin (net/listen.h). */
  lp->pause = pts_accept_pause_attach(lp->lev, "HTTP");
  if (!lp->pause) return pts_error_set(err, PTS_NOMEM, "out of memory starting the HTTP frontend");
  return PTS_OK;
}

void pts_conn_close_all(struct loop *lp) {
  pts_accept_pause_free(lp->pause); /* before the listener */
  lp->pause = NULL;
  if (lp->lev) evconnlistener_free(lp->lev);
  lp->lev = NULL;
  while (lp->conns) conn_free(lp->conns);
}
