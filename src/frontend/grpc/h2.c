/* frontend/grpc/h2.c — see h2.h. The connections and the transport's
 * life: sockets, each one's HTTP/2 session, what it has to send flushed
 * once per loop callback, keepalive, the client's pings, connection age,
 * shutdown. The calls on a connection are h2_call.c's; the structures both
 * halves share are in h2_priv.h. */
#include "frontend/grpc/h2.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/overload.h"
#include "frontend/grpc/h2_priv.h"
#include "net/tls.h"
#include "scheduler/request.h"

/* Bytes one recv() takes at most: a loop's read buffer (struct
 * pts_grpc_h2's rbuf). A request of an image (600 KB) was 37 reads of
 * 16 KiB, each a turn of the loop (epoll_wait, recv, nghttp2); the HTTP
 * frontend reads bodies in one piece (docs/internals/http.md). */
#define READ_CHUNK (256u << 10)
/* Bytes one readable callback takes from a connection before the loop
 * turns to the others: the buffer is read again while recv fills it. */
#define READ_PASS_MAX (4u << 20)
/* The least of a DATA frame's payload read straight into its message
 * (direct_room): below it the copy costs less than the recv() more that
 * ending a read at the frame's end may take. */
#define DIRECT_MIN (16u << 10)
/* HTTP/2 settings: the flow-control windows (a stream's, the
 * connection's); no limit on concurrent streams (CONN_CALLS_MAX in
 * h2_priv.h says why). gRPC core's
 * defaults move a 1 MiB request without waiting on WINDOW_UPDATEs; so do
 * these. */
#define H2_STREAM_WINDOW (1 << 20)
#define H2_CONN_WINDOW (16 << 20)
/* The largest frame a client may send (HTTP/2's default is 16 KiB): gRPC
 * core clients then send a large message in a few DATA frames, not one
 * per 16 KiB, each of them a callback here and a header there. */
#define H2_MAX_FRAME (1 << 20)

/* ------------------------------------------------------------------ */
/* connections                                                         */

static void conn_free(struct conn *cn) {
  struct pts_grpc_h2 *h = cn->h;
  pts_grpc_h2_conn_calls_release(cn);
  if (cn->prev) cn->prev->next = cn->next;
  else if (h->conns == cn) h->conns = cn->next;
  if (cn->next) cn->next->prev = cn->prev;
  if (cn->rd) event_free(cn->rd);
  if (cn->wr) event_free(cn->wr);
  if (cn->ka_ev) event_free(cn->ka_ev);
  if (cn->age_ev) event_free(cn->age_ev);
  if (cn->out) evbuffer_free(cn->out);
  nghttp2_session_del(cn->s);
  pts_tls_free(cn->tls); /* close_notify, when the session is whole */
  if (cn->fd >= 0) close(cn->fd);
  atomic_fetch_sub(&h->live, 1);
  pts_free(cn);
}

/* The session failed (nghttp2_session_mem_recv or _mem_send returned a
 * fatal error): the connection is closed without a GOAWAY, and every call
 * on it ends for its client with UNAVAILABLE. A client's own violation
 * (a bad preface, a flood) is logged at verbosity 1, as gRPC core does; a
 * failure of the server's (a callback, memory) is a warning and counted,
 * since it takes down healthy calls. */
static void session_failed(struct conn *cn, int rv, const char *where) {
  bool ours = rv == NGHTTP2_ERR_CALLBACK_FAILURE || rv == NGHTTP2_ERR_NOMEM;
  cn->dead = true;
  if (!ours) {
    PTS_LOG_VERBOSE(1, "gRPC: closing a connection: %s (%s)", nghttp2_strerror(rv), where);
    return;
  }
  pts_overload_count(PTS_OVERLOAD_GRPC_CONN_FAILED, 1);
  static struct pts_log_limit limit;
  unsigned long dropped;
  if (pts_log_limit_allow(&limit, 1000000000u, &dropped))
    PTS_LOG_WARN("gRPC: closing a connection, its session failed in %s: %s (%lu more since the "
                 "last such line)",
                 where, nghttp2_strerror(rv), dropped);
}

/* The connection's reads and writes: the socket's own, or TLS's
 * (net/tls.h), with the same contracts. A plaintext connection pays one
 * test of cn->tls and nothing else. */
static ssize_t conn_recv(struct conn *cn, uint8_t *buf, size_t want) {
  return cn->tls ? pts_tls_read(cn->tls, buf, want) : recv(cn->fd, buf, want, 0);
}

static int conn_write(struct conn *cn) {
  return cn->tls ? pts_tls_write(cn->tls, cn->out) : evbuffer_write(cn->out, cn->fd);
}

/* The client's address, "1.2.3.4:5678" or "[::1]:5678", for a log line. */
static void peer_name(int fd, char *out, size_t size) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET) {
      struct sockaddr_in *a = (struct sockaddr_in *)&ss;
      inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
      port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
      inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
      port = ntohs(a->sin6_port);
      snprintf(out, size, "[%s]:%d", host, port);
      return;
    }
  }
  snprintf(out, size, "%s:%d", host, port);
}

/* A TLS session failed (a read or write returned EPROTO): most often the
 * client's doing (it speaks no TLS, sends no certificate or one the roots
 * did not sign, or distrusts the server's), so only its connection is
 * closed. The reason is a warning, at most once a second (a client that
 * retries must not flood the log), as gRPC core logs its handshake
 * failures: an operator must be able to tell a client with the wrong CA
 * from a network fault. Those beyond go to verbosity 1. A client that
 * merely goes away mid-handshake (a port probe) is no TLS failure and says
 * nothing. */
static void tls_failed(struct conn *cn) {
  const char *why = pts_tls_failure(cn->tls);
  if (!why) return;
  static struct pts_log_limit limit;
  unsigned long dropped;
  char peer[INET6_ADDRSTRLEN + 16];
  peer_name(cn->fd, peer, sizeof peer);
  if (pts_log_limit_allow(&limit, 1000000000u, &dropped))
    PTS_LOG_WARN("gRPC: closing the connection from %s: %s (%lu more since the last such line)",
                 peer, why, dropped);
  else
    PTS_LOG_VERBOSE(1, "gRPC: closing the connection from %s: %s", peer, why);
}

/* A TLS connection's events. A read that waits to write (the handshake's
 * answer did not fit in the socket) waits for the socket to be writable,
 * with reading off meanwhile: the read would only wait again, and a
 * readable socket would call it at every turn. A write that waits for the
 * client's bytes waits for reading, which is always on, with the write
 * event off: a writable socket would call it at every turn. */
static void tls_events(struct conn *cn) {
  bool rd_waits = pts_tls_read_wants_write(cn->tls);
  if (rd_waits || (evbuffer_get_length(cn->out) && !pts_tls_write_wants_read(cn->tls)))
    event_add(cn->wr, NULL);
  else
    event_del(cn->wr);
  if (rd_waits != cn->rd_paused) {
    cn->rd_paused = rd_waits;
    if (rd_waits)
      event_del(cn->rd);
    else
      event_add(cn->rd, NULL);
  }
}

/* What nghttp2 has to send, to the socket, as far as it takes it now;
 * `dead` when the session or the socket failed. */
static void send_out(struct conn *cn) {
  while (!cn->dead) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(cn->s, &data);
    if (n < 0) session_failed(cn, (int)n, "nghttp2_session_mem_send");
    if (n <= 0) break;
    if (evbuffer_add(cn->out, data, (size_t)n) != 0) cn->dead = true;
  }
  while (!cn->dead && evbuffer_get_length(cn->out)) {
    int w = conn_write(cn);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      if (cn->tls && errno == EPROTO) tls_failed(cn);
      cn->dead = true;
    }
    break;
  }
}

/* send_out, then the connection closes when neither side has anything
 * more to say, or the socket failed. */
static void flush(struct conn *cn) {
  send_out(cn);
  bool written = evbuffer_get_length(cn->out) == 0;
  if (cn->dead || (written && cn->close_after_send) ||
      (written && !nghttp2_session_want_read(cn->s) && !nghttp2_session_want_write(cn->s))) {
    conn_free(cn);
    return;
  }
  if (cn->tls)
    tls_events(cn);
  else if (evbuffer_get_length(cn->out))
    event_add(cn->wr, NULL);
  else
    event_del(cn->wr);
}

/* At the end of each loop callback: every connection that has something
 * to send (or has died). Frees happen only here. */
static void flush_dirty(struct pts_grpc_h2 *h) {
  while (h->dirty) {
    struct conn *cn = h->dirty;
    h->dirty = cn->dirty_next;
    cn->dirty = false;
    flush(cn);
  }
}

/* How many of the `len` bytes at `p` (the next input) go to nghttp2
 * next: those up to the end of the next DATA frame, where a request
 * message may end, or all of them. It follows the client's preface and
 * each frame header's type and length, nothing else: nghttp2 checks
 * everything, and parses the same whatever the pieces, so a wrong guess
 * (a client that is not speaking HTTP/2) only changes when answers are
 * written. */
static size_t frame_piece(struct conn *cn, const uint8_t *p, size_t len) {
  size_t at = 0;
  while (at < len) {
    size_t n;
    if (cn->preface_left) {
      n = len - at < cn->preface_left ? len - at : cn->preface_left;
      cn->preface_left -= n;
      at += n;
      continue;
    }
    if (cn->frame_left) {
      n = len - at < cn->frame_left ? len - at : cn->frame_left;
      cn->frame_left -= n;
      at += n;
      if (cn->frame_left == 0 && cn->frame_data) return at;
      continue;
    }
    const uint8_t *head = p + at; /* a whole header in this read, most often */
    if (cn->head_len > 0 || len - at < sizeof cn->head) {
      while (cn->head_len < sizeof cn->head && at < len) cn->head[cn->head_len++] = p[at++];
      if (cn->head_len < sizeof cn->head) return at; /* the header goes on in the next read */
      cn->head_len = 0;
      head = cn->head;
    } else {
      at += sizeof cn->head;
    }
    cn->frame_left = (size_t)head[0] << 16 | (size_t)head[1] << 8 | head[2];
    cn->frame_data = head[3] == NGHTTP2_DATA;
    cn->frame_padded = (head[4] & NGHTTP2_FLAG_PADDED) != 0;
    cn->frame_stream = (int32_t)(((uint32_t)head[5] << 24 | (uint32_t)head[6] << 16 |
                                  (uint32_t)head[7] << 8 | head[8]) & 0x7fffffffu);
    if (cn->frame_left == 0 && cn->frame_data) return at;
  }
  return at;
}

/* frame_piece over all `len` bytes at `p`, for input that goes to
 * nghttp2 in one piece: its place is kept. Returns len. */
static size_t frame_walk(struct conn *cn, const uint8_t *p, size_t len) {
  for (size_t at = 0; at < len;) at += frame_piece(cn, p + at, len - at);
  return len;
}

/* Where the next recv() should put its bytes: straight into a request
 * message, when they are the middle of a DATA frame whose call has a
 * message under way and at least DIRECT_MIN of both are left; NULL, into
 * the loop's buffer. nghttp2 then parses them in place, and the DATA
 * callback finds them where it would have copied them to: a 600 KB image
 * comes in one frame from gRPC core clients, read in 64 KiB pieces, all
 * but the first of them this way (the HTTP frontend reads bodies so).
 * *want is at most what the frame and the message have left: the read
 * ends where either does, so no byte that nghttp2 has still to parse lies
 * in a message that its completion may hand to the core and free. Padded
 * frames are left to the copy (their payload is not all message). A
 * wrong guess costs a copy, never a byte: the callback copies whatever
 * is not already in place. */
static uint8_t *direct_room(struct conn *cn, size_t *want) {
  /* frame_left > 0: past the preface and a whole frame header */
  if (!cn->frame_data || cn->frame_padded || cn->frame_left < DIRECT_MIN) return NULL;
  size_t room;
  uint8_t *dst = pts_grpc_h2_call_room(cn, cn->frame_stream, &room);
  if (!dst || room < DIRECT_MIN) return NULL;
  *want = room < cn->frame_left ? room : cn->frame_left;
  return dst;
}

/* A read's frames go to nghttp2 a DATA frame at a time until one of them
 * ends a request message whose answer is ready at once (the request ran to
 * completion on this thread: scheduler.c); that answer is written before
 * the rest of the read is parsed, in one piece, and the rest's answers
 * leave together at the end of the callback, as the other connections'.
 * gRPC clients send the messages of several calls in one write: answered
 * all together, the client and the server took turns, each idle while the
 * other worked (4 calls on one connection: 1.4-1.6x the throughput with
 * the first answer early, docs/experiments/grpc-first-answer). Every answer
 * early cost more than it gave from 16 calls up, where reads hold many
 * requests and one write for all is what keeps the cost per request low.
 *
 * Over TLS a read returns one record or a few (16 KiB each at most), so
 * "the read filled the buffer" says little: reads go on while the session
 * holds bytes it took from the socket (pts_tls_pending), and a read that
 * found nothing still flushes, since the handshake it advanced may have
 * released a write that waited on it. */
static void on_read(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct conn *cn = arg;
  ssize_t rv = 0, n;
  bool answered = false; /* an answer of this read is written */
  size_t taken = 0, want;
  do {
    want = READ_CHUNK;
    uint8_t *buf = direct_room(cn, &want);
    if (!buf) buf = cn->h->rbuf;
    n = conn_recv(cn, buf, want);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (taken || cn->tls) break; /* what came is parsed; nothing more for now */
      return;
    }
    if (n < 0 && cn->tls && errno == EPROTO) tls_failed(cn);
    for (size_t off = 0; n > 0 && off < (size_t)n && rv >= 0 && !cn->dead;) {
      size_t left = (size_t)n - off;
      size_t piece = answered ? frame_walk(cn, buf + off, left) : frame_piece(cn, buf + off, left);
      rv = nghttp2_session_mem_recv(cn->s, buf + off, piece);
      off += piece;
      if (!answered && rv >= 0 && off < (size_t)n &&
          atomic_load_explicit(&cn->h->any_ready, memory_order_relaxed)) {
        pts_grpc_h2_take_ready(cn->h); /* other connections' too: they wait */
        if (cn->dirty) {
          send_out(cn); /* never frees cn: flush_dirty below may */
          answered = true;
        }
      }
    }
    if (rv < 0 && !cn->dead) session_failed(cn, (int)rv, "nghttp2_session_mem_recv");
    if (n <= 0) cn->dead = true;
    if (n > 0) taken += (size_t)n;
    /* A short read took all there was: no second recv to learn EAGAIN
     * (small calls, the common case, cost one recv as before). */
  } while (!cn->dead && ((size_t)n == want || (cn->tls && pts_tls_pending(cn->tls))) &&
           taken < READ_PASS_MAX);
  /* The turn's share is read, and the session holds more: the socket may
   * not become readable for it again, so the loop is told to come back. */
  if (cn->tls && !cn->dead && n > 0 && taken >= READ_PASS_MAX && pts_tls_pending(cn->tls))
    event_active(cn->rd, EV_READ, 0);
  pts_grpc_h2_mark_dirty(cn);
  pts_grpc_h2_take_ready(cn->h);
  flush_dirty(cn->h);
}

static void on_write(evutil_socket_t fd, short what, void *arg) {
  struct conn *cn = arg;
  if (cn->tls && pts_tls_read_wants_write(cn->tls)) {
    on_read(fd, what, cn); /* the read that waited goes on; it flushes too */
    return;
  }
  pts_grpc_h2_mark_dirty(cn);
  flush_dirty(cn->h);
}

static void on_wake(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct pts_grpc_h2 *h = arg;
  pts_grpc_h2_take_ready(h);
  flush_dirty(h);
}

static void on_drain(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct pts_grpc_h2 *h = arg;
  h->draining = true;
  for (struct conn *cn = h->conns; cn; cn = cn->next) {
    nghttp2_submit_goaway(cn->s, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(cn->s),
                          NGHTTP2_NO_ERROR, NULL, 0);
    pts_grpc_h2_mark_dirty(cn);
  }
  flush_dirty(h);
}

static void arm(struct event *ev, int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  evtimer_add(ev, &tv);
}

/* Keepalive: a PING every --grpc-keepalive-time (while calls run, or
 * always with --grpc-keepalive-permit-without-calls; at most
 * --grpc-http2-max-pings-without-data in a row while the client sends
 * nothing), and the connection closed when its ACK does not come within
 * --grpc-keepalive-timeout. */
static void on_keepalive(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct conn *cn = arg;
  struct pts_grpc_h2 *h = cn->h;
  if (cn->ka_waiting) {
    PTS_LOG_VERBOSE(1, "gRPC: closing a connection: no keepalive ACK in %d ms",
                    h->ka_timeout_ms);
    cn->dead = true;
  } else if ((cn->calls || h->ka_without_calls) &&
             (h->max_pings_without_data == 0 ||
              cn->pings_without_data < h->max_pings_without_data) &&
             nghttp2_submit_ping(cn->s, NGHTTP2_FLAG_NONE, NULL) == 0) {
    cn->ka_waiting = true;
    cn->pings_without_data++;
    arm(cn->ka_ev, h->ka_timeout_ms);
  } else {
    arm(cn->ka_ev, h->ka_time_ms);
  }
  pts_grpc_h2_mark_dirty(cn);
  flush_dirty(h);
}

/* The client's PINGs: one sooner than --grpc-http2-min-recv-ping-interval-
 * without-data after the last, while no call runs, is a strike; more than
 * --grpc-http2-max-ping-strikes end the connection with GOAWAY
 * ENHANCE_YOUR_CALM "too_many_pings", as gRPC core does (its clients back
 * off on that text). */
static void ping_received(struct conn *cn) {
  struct pts_grpc_h2 *h = cn->h;
  uint64_t now = pts_now_ns();
  if (!cn->calls && cn->last_ping_ns &&
      now - cn->last_ping_ns < (uint64_t)h->min_ping_interval_ms * 1000000u)
    cn->strikes++;
  cn->last_ping_ns = now;
  if (h->max_strikes > 0 && cn->strikes > h->max_strikes && !cn->close_after_send) {
    static const char why[] = "too_many_pings";
    nghttp2_submit_goaway(cn->s, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(cn->s),
                          NGHTTP2_ENHANCE_YOUR_CALM, (const uint8_t *)why, sizeof why - 1);
    cn->close_after_send = true;
  }
}

/* Every frame nghttp2 has read: PINGs are the connection's (keepalive
 * ACKs, the client's pings policed); HEADERS and DATA, the calls'. */
static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *u) {
  (void)s;
  struct conn *cn = u;
  if (f->hd.type == NGHTTP2_PING) {
    if (!(f->hd.flags & NGHTTP2_FLAG_ACK)) {
      ping_received(cn);
    } else if (cn->ka_waiting) {
      cn->ka_waiting = false;
      arm(cn->ka_ev, cn->h->ka_time_ms);
    }
    return 0;
  }
  if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) return 0;
  cn->pings_without_data = 0;
  cn->strikes = 0;
  pts_grpc_h2_call_frame(cn, f);
  return 0;
}

/* Every GOAWAY that leaves: counted by its error code
 * (ptserve_grpc_goaway_total), and logged with its reason. NO_ERROR is
 * ordinary (shutdown, connection age) and logged at verbosity 1; any other
 * code ends the calls on the connection for a fault, the client's or the
 * server's, and is a warning an operator sees. */
static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *u) {
  (void)s;
  (void)u;
  if (f->hd.type != NGHTTP2_GOAWAY) return 0;
  uint32_t code = f->goaway.error_code;
  pts_overload_count(code <= 13 ? PTS_OVERLOAD_GRPC_GOAWAY_FIRST + (int)code
                                : PTS_OVERLOAD_GRPC_GOAWAY_OTHER,
                     1);
  int len = f->goaway.opaque_data_len < 200 ? (int)f->goaway.opaque_data_len : 200;
  const char *why = len ? (const char *)f->goaway.opaque_data : "";
  if (code == NGHTTP2_NO_ERROR) {
    PTS_LOG_VERBOSE(1, "gRPC: sent GOAWAY NO_ERROR (last stream %d)", f->goaway.last_stream_id);
    return 0;
  }
  static struct pts_log_limit limit;
  unsigned long dropped;
  if (pts_log_limit_allow(&limit, 1000000000u, &dropped))
    PTS_LOG_WARN("gRPC: sent GOAWAY %s (%u, last stream %d): '%.*s' (%lu more since the last "
                 "such line)",
                 nghttp2_http2_strerror(code), code, f->goaway.last_stream_id, len, why, dropped);
  return 0;
}

/* nghttp2's own account of what it refused in the client's frames (the
 * reason a GOAWAY or RST_STREAM of its making carries), at verbosity 2. */
static int on_error(nghttp2_session *s, int code, const char *msg, size_t len, void *u) {
  (void)s;
  (void)u;
  PTS_LOG_VERBOSE(2, "gRPC: nghttp2: %.*s (%s)", (int)len, msg, nghttp2_strerror(code));
  return 0;
}

/* --grpc-max-connection-age: GOAWAY (calls already started go on), then
 * after --grpc-max-connection-age-grace the connection is closed. */
static void on_age(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct conn *cn = arg;
  struct pts_grpc_h2 *h = cn->h;
  if (!cn->aged) {
    cn->aged = true;
    nghttp2_submit_goaway(cn->s, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(cn->s), NGHTTP2_NO_ERROR,
                          NULL, 0);
    if (h->age_grace_ms >= 0) arm(cn->age_ev, h->age_grace_ms);
  } else {
    PTS_LOG_VERBOSE(1, "gRPC: closing a connection at the end of its age's grace");
    cn->dead = true;
  }
  pts_grpc_h2_mark_dirty(cn);
  flush_dirty(h);
}

void pts_grpc_h2_accept(struct pts_grpc_h2 *h, int fd) {
  if (!h->loop_known) { /* the first connection: no call exists yet */
    h->loop_thread = pthread_self();
    h->loop_known = true;
  }
  struct conn *cn = h->draining ? NULL : pts_calloc(1, sizeof *cn);
  if (!cn) {
    close(fd);
    return;
  }
  cn->h = h;
  cn->fd = fd;
  cn->preface_left = NGHTTP2_CLIENT_MAGIC_LEN;
  /* The handshake runs inside the first reads and writes (the server's
   * SETTINGS, below, wait for it). */
  bool tls_ok = !h->tls || (cn->tls = pts_tls_new(h->tls, fd)) != NULL;
  atomic_fetch_add(&h->live, 1);
  cn->next = h->conns;
  if (h->conns) h->conns->prev = cn;
  h->conns = cn;
  cn->out = evbuffer_new();
  cn->rd = event_new(h->base, fd, EV_READ | EV_PERSIST, on_read, cn);
  cn->wr = event_new(h->base, fd, EV_WRITE | EV_PERSIST, on_write, cn);
  cn->ka_ev = evtimer_new(h->base, on_keepalive, cn);
  if (cn->ka_ev) arm(cn->ka_ev, h->ka_time_ms);
  if (h->age_ms >= 0) {
    cn->age_ev = evtimer_new(h->base, on_age, cn);
    if (cn->age_ev) arm(cn->age_ev, h->age_ms);
  }
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
                                 {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
                                 {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, H2_MAX_FRAME}};
  if (!tls_ok || !cn->out || !cn->rd || !cn->wr || !cn->ka_ev || (h->age_ms >= 0 && !cn->age_ev) ||
      nghttp2_session_server_new2(&cn->s, h->cbs, cn, h->opt) != 0 ||
      nghttp2_submit_settings(cn->s, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0 ||
      nghttp2_session_set_local_window_size(cn->s, NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW) != 0 ||
      event_add(cn->rd, NULL) != 0) {
    PTS_LOG_ERROR("gRPC: out of memory taking a connection; closed it");
    cn->dead = true;
  }
  pts_grpc_h2_mark_dirty(cn);
  flush_dirty(h);
}

static void on_incoming(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct pts_grpc_h2 *h = arg;
  pthread_mutex_lock(&h->mu);
  struct incoming *in = h->incoming;
  h->incoming = NULL;
  pthread_mutex_unlock(&h->mu);
  while (in) {
    struct incoming *next = in->next;
    pts_grpc_h2_accept(h, in->fd);
    pts_free(in);
    in = next;
  }
}

void pts_grpc_h2_give(struct pts_grpc_h2 *h, int fd) {
  struct incoming *in = pts_malloc(sizeof *in);
  if (!in) {
    PTS_LOG_ERROR("gRPC: out of memory handing a connection to its loop; closed it");
    close(fd);
    return;
  }
  in->fd = fd;
  pthread_mutex_lock(&h->mu);
  in->next = h->incoming;
  h->incoming = in;
  pthread_mutex_unlock(&h->mu);
  event_active(h->incoming_ev, EV_READ, 0);
}

/* ------------------------------------------------------------------ */
/* the transport                                                       */

enum pts_status pts_grpc_h2_new(struct pts_server *s, const struct pts_server_options *o,
                                const struct pts_restrictions *r, struct event_base *base,
                                struct pts_grpc_h2 **out, struct pts_error *err) {
  struct pts_grpc_h2 *h = pts_calloc(1, sizeof *h);
  if (!h) return pts_error_set(err, PTS_NOMEM, "out of memory starting the gRPC transport");
  h->server = s;
  h->restrictions = r;
  h->compression_level = o->grpc_compression_level;
  h->ka_time_ms = o->grpc_keepalive_time_ms;
  h->ka_timeout_ms = o->grpc_keepalive_timeout_ms;
  h->ka_without_calls = o->grpc_keepalive_permit_without_calls;
  h->max_pings_without_data = o->grpc_http2_max_pings_without_data;
  h->min_ping_interval_ms = o->grpc_http2_min_recv_ping_interval_ms;
  h->max_strikes = o->grpc_http2_max_ping_strikes;
  h->age_ms = o->grpc_max_connection_age_ms;
  h->age_grace_ms = o->grpc_max_connection_age_grace_ms;
  h->base = base;
  h->rbuf = pts_malloc(READ_CHUNK);
  pthread_mutex_init(&h->mu, NULL);
  h->wake_ev = event_new(base, -1, 0, on_wake, h);
  h->drain_ev = event_new(base, -1, 0, on_drain, h);
  h->incoming_ev = event_new(base, -1, 0, on_incoming, h);
  if (!h->rbuf || !h->wake_ev || !h->drain_ev || !h->incoming_ev ||
      nghttp2_session_callbacks_new(&h->cbs) != 0 ||
      nghttp2_option_new(&h->opt) != 0) {
    pts_grpc_h2_free(h);
    return pts_error_set(err, PTS_NOMEM, "out of memory starting the gRPC transport");
  }
  nghttp2_option_set_no_auto_window_update(h->opt, 1);
  /* nghttp2's HTTP messaging checks (every header name and value against
   * RFC 9113's characters, pseudo-header order, content-length) were 2.6k
   * of a unary call's 50k instructions. What gRPC needs of a request is
   * checked here: POST, an application/grpc content-type, a known :path
   * (headers_ok); a malformed field can only fail those, and none is
   * echoed back or passed on. */
  nghttp2_option_set_no_http_messaging(h->opt, 1);
  /* Closed streams kept for RFC 7540's priority tree: gRPC never sends
   * priorities (and SETTINGS_NO_RFC7540_PRIORITIES tells it so). */
  nghttp2_option_set_no_closed_streams(h->opt, 1);
#ifdef PTS_NGHTTP2_RESET_LIMIT
  /* nghttp2's answer to Rapid Reset (CVE-2023-44487) is a token bucket of
   * 1000 RST_STREAMs plus 33 a second per connection, past which it sends
   * GOAWAY INTERNAL_ERROR and every call on the connection fails. gRPC
   * clients cancel calls through RST_STREAM, and share one connection per
   * target, so a client that cancels more than 33 calls a second tripped
   * it (issue 52: 3 GOAWAYs in 40 s). The attack is the server working on
   * reset streams without bound; here they stay counted against
   * CONN_CALLS_MAX until their work ends (on_begin_headers in h2_call.c),
   * as gRPC core's overload protection counts them against its limit, so
   * the bucket is made bottomless. */
  nghttp2_option_set_stream_reset_rate_limit(h->opt, UINT64_MAX, UINT64_MAX);
#endif
  pts_grpc_h2_call_callbacks(h->cbs);
  nghttp2_session_callbacks_set_on_frame_recv_callback(h->cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_frame_send_callback(h->cbs, on_frame_send);
  nghttp2_session_callbacks_set_error_callback2(h->cbs, on_error);
  *out = h;
  return PTS_OK;
}

void pts_grpc_h2_set_tls(struct pts_grpc_h2 *h, struct pts_tls_ctx *tls) { h->tls = tls; }

void pts_grpc_h2_drain(struct pts_grpc_h2 *h) { event_active(h->drain_ev, EV_READ, 0); }

size_t pts_grpc_h2_live(struct pts_grpc_h2 *h) { return atomic_load(&h->live); }

bool pts_grpc_h2_free(struct pts_grpc_h2 *h) {
  if (!h) return true;
  while (h->incoming) { /* given, never taken: the loop had stopped */
    struct incoming *in = h->incoming;
    h->incoming = in->next;
    close(in->fd);
    pts_free(in);
  }
  pts_grpc_h2_take_ready(h);
  while (h->conns) conn_free(h->conns);
  size_t left = atomic_load(&h->live);
  if (left) {
    PTS_LOG_WARN("gRPC: %zu calls still in the core at shutdown; leaving the gRPC transport "
                 "behind",
                 left);
    return false;
  }
  if (h->cbs) nghttp2_session_callbacks_del(h->cbs);
  if (h->opt) nghttp2_option_del(h->opt);
  if (h->wake_ev) event_free(h->wake_ev);
  if (h->drain_ev) event_free(h->drain_ev);
  if (h->incoming_ev) event_free(h->incoming_ev);
  pts_free(h->rbuf);
  pthread_mutex_destroy(&h->mu);
  pts_free(h);
  return true;
}

