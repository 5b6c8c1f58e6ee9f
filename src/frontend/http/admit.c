/* frontend/http/admit.c — see admit.h and docs/internals/http.md
 * ("Overload").
 *
 * How a connection is followed without a hook in libevent 2.1 for it:
 * evhttp asks evhttp_set_bevcb's callback for each new connection's
 * bufferevent. We create it, keep a reference to it and note it on the
 * loop's `fresh` list. Right after the accept callback returns, `adopt_ev`
 * finds the evhttp_connection that now owns the bufferevent (it is the
 * bufferevent's callback argument) and sets the connection's close
 * callback, which is how we learn that it is gone. The reference makes a
 * connection that evhttp freed in between safe to look at: its callbacks
 * are cleared then.
 *
 * An evbuffer callback on the bufferevent's input sees every byte as it is
 * read from the socket, before evhttp parses it (bufferevent_readcb calls
 * evbuffer callbacks from evbuffer_read, then evhttp's read callback). That
 * is where bytes are charged to the memory budget and where a request's
 * head is checked before its body is read.
 *
 * It is also where a large body is read. libevent 2.1 reads a socket at
 * most 4096 bytes at a time (EVBUFFER_MAX_READ in buffer.c; neither
 * bufferevent_set_max_single_read nor anything else in 2.1 raises it), one
 * read per loop iteration: a 300 KB body cost ~77 iterations (epoll_wait,
 * FIONREAD, readv each). Once the head is admitted, body_read reads the
 * rest of the declared body straight into the bufferevent's input, in
 * reads as large as what is left of it, so evhttp's read callback, which
 * runs right after this one, finds the whole body at once. */
#include "frontend/http/admit.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/overload.h"
#include "frontend/http/head.h"
#include "frontend/http/v2_json.h"

/* A refused connection is closed after this long without input, or when
 * it still sends this long after the answer, or this much more: a client
 * stops once it reads the answer, but what it sent before that (socket
 * buffers hold megabytes) must be read, or the close would reset the
 * connection and destroy the answer before the client reads it. */
#define REFUSE_LINGER_S 2
#define REFUSE_DISCARD_MAX ((size_t)64 << 20)

/* What libevent 2.1 reads from a socket at once (EVBUFFER_MAX_READ). A
 * body with no more than this left is left to libevent's next read: it
 * takes it in one read anyway, and reading it here could only add a read
 * that finds nothing. */
#define LIBEVENT_READ_MAX 4096
/* body_read moves at most this much per call, so that one fast client with
 * a huge body does not hold the loop (and the other connections on it) for
 * long; the rest comes with the loop's next read event. */
#define BODY_READ_PASS_MAX ((size_t)4 << 20)

#define STR_(x) #x
#define STR(x) STR_(x)

/* ------------------------------------------------------------------ */
/* connections by socket                                               */

static bool table_put(struct loop *lp, int fd, struct conn *cn) {
  if (fd < 0) return false;
  if ((size_t)fd >= lp->by_fd_cap) {
    size_t cap = lp->by_fd_cap ? lp->by_fd_cap : 64;
    while (cap <= (size_t)fd) cap *= 2;
    struct conn **grown = pts_realloc(lp->by_fd, cap * sizeof *grown);
    if (!grown) return false;
    memset(grown + lp->by_fd_cap, 0, (cap - lp->by_fd_cap) * sizeof *grown);
    lp->by_fd = grown;
    lp->by_fd_cap = cap;
  }
  lp->by_fd[fd] = cn;
  return true;
}

static void table_remove(struct loop *lp, struct conn *cn) {
  if (cn->fd >= 0 && (size_t)cn->fd < lp->by_fd_cap && lp->by_fd[cn->fd] == cn)
    lp->by_fd[cn->fd] = NULL;
}

struct conn *pts_admit_conn_of(struct loop *lp, struct evhttp_request *req) {
  struct evhttp_connection *evcon = evhttp_request_get_connection(req);
  struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
  int fd = bev ? bufferevent_getfd(bev) : -1;
  if (fd < 0 || (size_t)fd >= lp->by_fd_cap) return NULL;
  struct conn *cn = lp->by_fd[fd];
  return cn && cn->evcon == evcon ? cn : NULL;
}

/* ------------------------------------------------------------------ */
/* the budget share of one connection                                  */

/* What the connection holds: the bytes of the current request that
 * arrived (they sit in evhttp's buffers), its copy of a partial head, or
 * the reservation made at the head check when that is more. */
static void recharge(struct conn *cn) {
  size_t want = cn->arrived + cn->head_cap;
  if (cn->reserved > want) want = cn->reserved;
  if (want > cn->charged)
    pts_overload_charge(want - cn->charged);
  else
    pts_overload_release(cn->charged - want);
  cn->charged = want;
}

static void drop_head(struct conn *cn) {
  pts_free(cn->head);
  cn->head = NULL;
  cn->head_len = cn->head_cap = 0;
}

static void reset_request(struct conn *cn) {
  drop_head(cn);
  cn->arrived = cn->reserved = 0;
  cn->admitted = cn->chunked = false;
  recharge(cn);
}

static void conn_free(struct conn *cn) {
  struct pts_http *h = cn->lp->h;
  drop_head(cn);
  if (cn->written_ev) event_free(cn->written_ev); /* also when still active */
  pts_overload_release(cn->charged);
  if (cn->has_slot) atomic_fetch_sub(&h->admitted, 1);
  pts_overload_count(PTS_OVERLOAD_HTTP_CONNECTIONS, -1);
  pts_free(cn);
}

/* ------------------------------------------------------------------ */
/* refusing                                                            */

static const char *reason_of(int code) {
  return code == 413 ? "Payload Too Large" : code == 503 ? "Service Unavailable" : "Error";
}

static time_t monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static void schedule_reap(struct conn *cn) {
  if (cn->reaping) return;
  cn->reaping = true;
  cn->next = cn->lp->reap;
  cn->lp->reap = cn;
  event_active(cn->lp->reap_ev, EV_READ, 0);
}

/* Answers on the socket itself — evhttp has not parsed the request, so it
 * has no request to answer — and closes the sending side; the input is
 * then read and thrown away until the client closes (so the answer is not
 * lost to a reset), for at most REFUSE_LINGER_S of silence. */
static void refuse(struct conn *cn, int code, bool retry, const char *msg) {
  size_t jlen = 0;
  char *json = pts_v2_error_json(msg, &jlen);
  static const char oom[] = "{\"error\":\"out of memory\"}";
  char head[256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                   "%sConnection: close\r\n\r\n",
                   code, reason_of(code), json ? jlen : sizeof oom - 1,
                   retry ? "Retry-After: " STR(PTS_ADMIT_RETRY_AFTER_S) "\r\n" : "");
  struct evbuffer *out = bufferevent_get_output(cn->bev);
  evbuffer_drain(out, evbuffer_get_length(out)); /* nothing may follow the answer */
  struct iovec iov[2] = {{head, (size_t)n}, {json ? json : (char *)oom, json ? jlen : sizeof oom - 1}};
  struct msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = iov;
  mh.msg_iovlen = 2;
  /* A fresh socket's send buffer takes a few hundred bytes at once; if it
   * does not, the client gets less than the answer and the close. */
  (void)sendmsg(cn->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)shutdown(cn->fd, SHUT_WR);
  pts_free(json);
  cn->state = CONN_REFUSING;
  reset_request(cn);
  struct evbuffer *in = bufferevent_get_input(cn->bev);
  evbuffer_drain(in, evbuffer_get_length(in));
  evhttp_connection_set_timeout(cn->evcon, REFUSE_LINGER_S);
  cn->refused_at = monotonic_s();
}

static void refuse_memory(struct conn *cn, const char *why) {
  char msg[PTS_ERROR_MSG_MAX];
  snprintf(msg, sizeof msg,
           "%s: the request memory budget is exhausted (%zu of %zu bytes held; "
           "--request-memory-budget); retry later",
           why, pts_overload_held(), pts_overload_budget());
  pts_overload_count(PTS_OVERLOAD_HTTP_MEMORY_REFUSED, 1);
  refuse(cn, 503, true, msg);
}

static void on_reap(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct loop *lp = arg;
  struct conn *cn;
  while ((cn = lp->reap) != NULL) {
    lp->reap = cn->next;
    cn->next = NULL;
    cn->reaping = false;
    evhttp_connection_free(cn->evcon); /* its close callback frees cn */
  }
}

static bool adopt_one(struct conn *cn);

/* ------------------------------------------------------------------ */
/* the head check                                                      */

/* The head p[0..head_len) of the current request is complete and evhttp
 * has not parsed it yet: reserve its declared body, or refuse it. */
static void check_head(struct conn *cn, const char *p, size_t head_len) {
  struct pts_http *h = cn->lp->h;
  struct pts_http_head hd;
  pts_http_head_parse(p, head_len, &hd);
  drop_head(cn); /* p may point into it: parsed now */
  size_t body_limit = 0;
  cn->state = CONN_BODY;
  cn->admitted = true;
  cn->reserved = head_len;
  switch (hd.body) {
    case PTS_HTTP_BODY_NONE:
    case PTS_HTTP_BODY_INVALID: /* evhttp answers it; 0 refuses any body it finds */
      break;
    case PTS_HTTP_BODY_CHUNKED:
      /* No length to reserve: charged as it arrives, refused when a chunk
       * arrives while the budget is spent. */
      cn->chunked = true;
      body_limit = h->body_cap;
      break;
    case PTS_HTTP_BODY_LENGTH: {
      uint64_t len = hd.content_length;
      size_t budget = pts_overload_budget();
      if (len > h->body_cap) {
        /* evhttp refuses it itself (413) and reads it only to drop it. */
        cn->state = CONN_PASS;
        cn->admitted = false;
        reset_request(cn);
        return;
      }
      if (len > budget) {
        char msg[PTS_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg,
                 "request body of %llu bytes exceeds the request memory budget of %zu bytes "
                 "(--request-memory-budget)",
                 (unsigned long long)len, budget);
        pts_overload_count(PTS_OVERLOAD_HTTP_MEMORY_REFUSED, 1);
        refuse(cn, 413, false, msg);
        return;
      }
      size_t want = head_len + (size_t)len;
      size_t extra = want > cn->charged ? want - cn->charged : 0;
      if (!pts_overload_try_charge(extra)) {
        char why[96];
        snprintf(why, sizeof why, "request body of %llu bytes refused",
                 (unsigned long long)len);
        refuse_memory(cn, why);
        return;
      }
      cn->charged += extra;
      cn->reserved = want;
      body_limit = (size_t)len;
      break;
    }
  }
  recharge(cn);
  /* evhttp reads no more than was reserved: a length it reads differently
   * from this check is refused (413), never admitted past the budget. */
  evhttp_connection_set_max_body_size(cn->evcon, (ev_ssize_t)body_limit);
}

/* The longest head worth looking for: evhttp refuses longer ones. */
static size_t head_scan_max(const struct pts_http *h) { return h->max_header + 3; }

/* The first bytes of a request arrived on an idle connection. */
static void start_request(struct conn *cn, struct evbuffer *in, const struct evbuffer_cb_info *info) {
  struct pts_http *h = cn->lp->h;
  reset_request(cn);
  size_t len = evbuffer_get_length(in);
  cn->arrived = len;
  recharge(cn);
  if (info->orig_size != 0) {
    /* Bytes that arrived with an earlier request (pipelining): where this
     * request begins is evhttp's business; the budget is checked when it
     * has been read (pts_admit_request_read). */
    cn->state = CONN_UNCHECKED;
    return;
  }
  /* Usually the whole head is in the first chain: no copy. */
  struct evbuffer_iovec first;
  size_t end = 0;
  if (evbuffer_peek(in, -1, NULL, &first, 1) >= 1)
    end = pts_http_head_end(first.iov_base, first.iov_len);
  if (end) {
    check_head(cn, first.iov_base, end);
    return;
  }
  size_t scan = len < head_scan_max(h) ? len : head_scan_max(h);
  const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)scan);
  end = p ? pts_http_head_end(p, scan) : 0;
  if (end) {
    check_head(cn, p, end);
    return;
  }
  if (!p || len >= head_scan_max(h)) {
    cn->state = CONN_UNCHECKED; /* evhttp refuses the head as too long */
    return;
  }
  /* The head is still arriving: evhttp consumes its lines as they come,
   * so keep a copy until the blank line is there. */
  cn->head_cap = len < 512 ? 512 : len;
  cn->head = pts_malloc(cn->head_cap);
  if (!cn->head) {
    cn->head_cap = 0;
    cn->state = CONN_UNCHECKED;
    return;
  }
  memcpy(cn->head, p, len);
  cn->head_len = len;
  cn->state = CONN_HEAD;
  recharge(cn);
}

/* More of a head kept in cn->head arrived: the last n bytes of `in`. */
static void head_more(struct conn *cn, struct evbuffer *in, size_t n) {
  struct pts_http *h = cn->lp->h;
  size_t old = cn->head_len;
  cn->arrived += n;
  if (old + n > head_scan_max(h)) {
    drop_head(cn);
    cn->state = CONN_UNCHECKED; /* evhttp refuses the head as too long */
    recharge(cn);
    return;
  }
  if (old + n > cn->head_cap) {
    size_t cap = cn->head_cap * 2 > old + n ? cn->head_cap * 2 : old + n;
    if (cap > head_scan_max(h)) cap = head_scan_max(h);
    char *grown = pts_realloc(cn->head, cap);
    if (!grown) {
      drop_head(cn);
      cn->state = CONN_UNCHECKED;
      recharge(cn);
      return;
    }
    cn->head = grown;
    cn->head_cap = cap;
  }
  struct evbuffer_ptr at;
  size_t len = evbuffer_get_length(in);
  if (evbuffer_ptr_set(in, &at, len - n, EVBUFFER_PTR_SET) != 0 ||
      evbuffer_copyout_from(in, &at, cn->head + old, n) != (ev_ssize_t)n) {
    drop_head(cn);
    cn->state = CONN_UNCHECKED;
    recharge(cn);
    return;
  }
  cn->head_len = old + n;
  recharge(cn);
  /* A blank line completed by the new bytes starts at most 2 bytes back. */
  size_t from = old >= 2 ? old - 2 : 0;
  size_t end = pts_http_head_end(cn->head + from, cn->head_len - from);
  if (end) check_head(cn, cn->head, from + end);
}

/* Bytes no reservation covers (a chunked body, pipelined requests): kept
 * while the budget has room; when it is spent the connection is refused. */
static void uncovered(struct conn *cn, const char *what) {
  if (pts_overload_held() > pts_overload_budget()) refuse_memory(cn, what);
}

/* The current request's head was admitted with a declared length and
 * more of its body is missing than libevent's next read would take: read
 * what the socket holds of it into `in` directly, in large reads.
 *
 * It runs inside on_input, i.e. inside evbuffer_read within libevent's
 * bufferevent_readcb: the only place where a socket bufferevent's input is
 * not frozen at its end (reserve and commit fail elsewhere, and nothing is
 * read). Each commit runs the input callbacks again, so on_input counts
 * these bytes as it counts libevent's — the budget charge stays exact —,
 * and body_reading keeps that nested call from reading in turn.
 *
 * It never reads past the declared length (cn->reserved - cn->arrived):
 * the bytes of a pipelined next request stay in the socket, for libevent
 * to read once this request is answered. It stops at EAGAIN or a short
 * read (the socket is drained; the next read event brings the rest), and
 * on EOF or an error without consuming anything: libevent's next read on
 * the socket sees the EOF (or the error again) and evhttp closes the
 * connection as it would have. */
static void body_read(struct conn *cn, struct evbuffer *in) {
  size_t moved = 0;
  cn->body_reading = true;
  while (cn->state == CONN_BODY && cn->arrived < cn->reserved && moved < BODY_READ_PASS_MAX) {
    size_t want = cn->reserved - cn->arrived;
    if (want > BODY_READ_PASS_MAX - moved) want = BODY_READ_PASS_MAX - moved;
    /* Two vectors: the space left in the last chain, then one new chain
     * for the rest (one allocation per pass; later reserves of this body
     * use what the pass left of it). */
    struct evbuffer_iovec vec[2];
    int nvec = evbuffer_reserve_space(in, (ev_ssize_t)want, vec, 2);
    if (nvec <= 0) break; /* frozen (not within libevent's read) or out of memory */
    /* The last vector is the whole chain's space: cut the vectors to want. */
    struct iovec iov[2];
    int niov = 0;
    size_t left = want;
    for (int i = 0; i < nvec && left > 0; i++) {
      size_t l = vec[i].iov_len < left ? vec[i].iov_len : left;
      iov[niov].iov_base = vec[i].iov_base;
      iov[niov].iov_len = l;
      niov++;
      left -= l;
    }
    ssize_t got;
    do {
      got = readv(cn->fd, iov, niov);
    } while (got < 0 && errno == EINTR);
    if (got <= 0) break; /* EAGAIN; or EOF / an error, left for libevent to see */
    size_t rest = (size_t)got;
    for (int i = 0; i < nvec; i++) {
      size_t l = vec[i].iov_len < rest ? vec[i].iov_len : rest;
      vec[i].iov_len = l;
      rest -= l;
    }
    if (evbuffer_commit_space(in, vec, nvec) != 0) {
      /* Cannot happen (nothing touched the input between reserve and
       * commit), but the bytes read would be lost and the stream corrupt:
       * end the connection's input, so evhttp sees EOF and closes it. */
      PTS_LOG_ERROR("HTTP: could not keep %zd bytes read from a request body; closing", got);
      (void)shutdown(cn->fd, SHUT_RD);
      break;
    }
    moved += (size_t)got;
    if ((size_t)got < want) break; /* the socket held less: drained */
  }
  cn->body_reading = false;
}

static void on_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg) {
  struct conn *cn = arg;
  if (info->n_added == 0) return; /* evhttp consuming what it parsed */
  if (!cn->evcon) {
    /* Data before adopt_ev ran (it normally runs first): adopt now. */
    for (struct conn **p = &cn->lp->fresh; *p; p = &(*p)->next)
      if (*p == cn) {
        *p = cn->next;
        cn->next = NULL;
        break;
      }
    if (!adopt_one(cn)) return;
  }
  size_t n = info->n_added;
  switch (cn->state) {
    case CONN_IDLE:
      start_request(cn, in, info);
      break;
    case CONN_HEAD:
      head_more(cn, in, n);
      break;
    case CONN_BODY:
      cn->arrived += n;
      recharge(cn);
      if (cn->chunked || cn->arrived > cn->reserved) uncovered(cn, "request body refused");
      break;
    case CONN_UNCHECKED:
      cn->arrived += n;
      recharge(cn);
      uncovered(cn, "request refused");
      break;
    case CONN_PASS:
      break;
    case CONN_REFUSING:
      cn->discarded += evbuffer_get_length(in);
      evbuffer_drain(in, evbuffer_get_length(in));
      if (cn->discarded > REFUSE_DISCARD_MAX || monotonic_s() - cn->refused_at > REFUSE_LINGER_S)
        schedule_reap(cn);
      break;
  }
  /* A head admitted above (or before) with a declared body of which more
   * is missing than libevent's next read takes. */
  if (cn->state == CONN_BODY && !cn->chunked && !cn->body_reading &&
      cn->arrived < cn->reserved && cn->reserved - cn->arrived > LIBEVENT_READ_MAX)
    body_read(cn, in);
}

size_t pts_admit_request_read(struct conn *cn, bool *checked) {
  *checked = false;
  if (!cn) return 0;
  *checked = cn->admitted && cn->state == CONN_BODY;
  /* Bytes already in the input belong to the next request(s). */
  size_t next = evbuffer_get_length(bufferevent_get_input(cn->bev));
  size_t keep = next < cn->charged ? next : cn->charged;
  size_t give = cn->charged - keep;
  drop_head(cn);
  cn->charged = keep;
  cn->arrived = next;
  cn->reserved = 0;
  cn->admitted = cn->chunked = false;
  cn->state = next ? CONN_UNCHECKED : CONN_IDLE;
  /* Until the next head check: evhttp's own limit. */
  evhttp_connection_set_max_body_size(cn->evcon, (ev_ssize_t)cn->lp->h->body_cap);
  return give;
}

/* ------------------------------------------------------------------ */
/* accepting                                                           */

static void on_closed(struct evhttp_connection *evcon, void *arg) {
  (void)evcon;
  struct conn *cn = arg;
  struct loop *lp = cn->lp;
  if (cn->ctx) pts_http_ctx_orphan_conn(cn->ctx);
  if (cn->reply_pending) pts_http_reply_end(cn);
  if (cn->reaping) {
    for (struct conn **p = &lp->reap; *p; p = &(*p)->next)
      if (*p == cn) {
        *p = cn->next;
        break;
      }
  }
  table_remove(lp, cn);
  evbuffer_remove_cb(bufferevent_get_input(cn->bev), on_input, cn);
  conn_free(cn);
}

/* Links `cn` (off lp->fresh) to the evhttp_connection that owns its
 * bufferevent. False when evhttp already freed it (cn is freed). */
static bool adopt_one(struct conn *cn) {
  struct loop *lp = cn->lp;
  void *arg = NULL;
  bufferevent_getcb(cn->bev, NULL, NULL, NULL, &arg);
  struct evhttp_connection *evcon = arg;
  if (!evcon) {
    /* Freed before we looked (evhttp failed to set it up). */
    evbuffer_remove_cb(bufferevent_get_input(cn->bev), on_input, cn);
    bufferevent_decref(cn->bev);
    conn_free(cn);
    return false;
  }
  cn->evcon = evcon;
  cn->fd = bufferevent_getfd(cn->bev);
  /* Small replies must not wait for Nagle's timer; set once per
   * connection (it was once per request). A failure (a non-TCP socket)
   * costs only latency. */
  int one = 1;
  if (cn->fd >= 0) (void)setsockopt(cn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  evhttp_connection_set_closecb(evcon, on_closed, cn);
  bufferevent_decref(cn->bev); /* evcon owns it; on_closed comes first */
  if (!table_put(lp, cn->fd, cn)) {
    PTS_LOG_ERROR("HTTP: out of memory tracking a connection; closing it");
    evhttp_connection_free(evcon); /* on_closed frees cn */
    return false;
  }
  if (cn->refuse_on_adopt) {
    char msg[PTS_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg,
             "the server has reached its limit of %lu open HTTP connections "
             "(--http-max-connections); retry later",
             lp->h->max_connections);
    pts_overload_count(PTS_OVERLOAD_HTTP_CONN_REFUSED, 1);
    refuse(cn, 503, true, msg);
  }
  return true;
}

static void on_adopt(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct loop *lp = arg;
  struct conn *cn;
  while ((cn = lp->fresh) != NULL) {
    lp->fresh = cn->next;
    cn->next = NULL;
    adopt_one(cn);
  }
}

/* evhttp_set_bevcb: evhttp accepted a connection and wants its
 * bufferevent (libevent's default kind, as evhttp would make it). */
static struct bufferevent *on_new_bev(struct event_base *base, void *arg) {
  struct loop *lp = arg;
  struct pts_http *h = lp->h;
  struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
  if (!bev) return NULL;
  struct conn *cn = pts_calloc(1, sizeof *cn);
  if (!cn || !evbuffer_add_cb(bufferevent_get_input(bev), on_input, cn)) {
    /* Untracked: served, but pts_admit_conn_of finds nothing for it. */
    pts_free(cn);
    return bev;
  }
  cn->lp = lp;
  cn->bev = bev;
  cn->fd = -1;
  cn->state = CONN_IDLE;
  bufferevent_incref(bev);
  pts_overload_count(PTS_OVERLOAD_HTTP_CONNECTIONS, 1);
  if (atomic_fetch_add(&h->admitted, 1) < h->max_connections) {
    cn->has_slot = true;
  } else {
    atomic_fetch_sub(&h->admitted, 1);
    cn->refuse_on_adopt = true;
  }
  cn->next = lp->fresh;
  lp->fresh = cn;
  event_active(lp->adopt_ev, EV_READ, 0);
  return bev;
}

/* ------------------------------------------------------------------ */
/* loop set-up                                                         */

enum pts_status pts_admit_loop_init(struct loop *lp, struct pts_error *err) {
  lp->adopt_ev = event_new(lp->base, -1, 0, on_adopt, lp);
  lp->reap_ev = event_new(lp->base, -1, 0, on_reap, lp);
  if (!lp->adopt_ev || !lp->reap_ev)
    return pts_error_set(err, PTS_INTERNAL, "failed to create the HTTP frontend's events");
  evhttp_set_bevcb(lp->http, on_new_bev, lp);
  return PTS_OK;
}

void pts_admit_loop_destroy(struct loop *lp) {
  struct conn *cn;
  while ((cn = lp->fresh) != NULL) {
    lp->fresh = cn->next;
    evbuffer_remove_cb(bufferevent_get_input(cn->bev), on_input, cn);
    bufferevent_decref(cn->bev);
    conn_free(cn);
  }
  if (lp->adopt_ev) event_free(lp->adopt_ev);
  if (lp->reap_ev) event_free(lp->reap_ev);
  lp->adopt_ev = lp->reap_ev = NULL;
  pts_free(lp->by_fd);
  lp->by_fd = NULL;
  lp->by_fd_cap = 0;
}
