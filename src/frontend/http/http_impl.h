/* frontend/http/http_impl.h — the HTTP frontend's state, shared by http.c
 * (the transport and the handlers) and admit.c (connections: the limit,
 * the memory budget while requests are read, accept under descriptor
 * exhaustion). Private to src/frontend/http/.
 *
 * Threading: a `struct loop` and every `struct conn` of it belong to the
 * loop's thread, except `pending` (guarded by the frontend's mutex). The
 * fields of `struct pts_http` are fixed after start, or atomics, or guarded
 * by `mu` as marked.
 */
#ifndef PTS_FRONTEND_HTTP_HTTP_IMPL_H
#define PTS_FRONTEND_HTTP_HTTP_IMPL_H

#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "core/restrict.h"
#include "frontend/http/restrict.h"
#include "server/server.h"

/* Spare request contexts a loop keeps (struct loop's `spare`): about one
 * per connection it serves at once is enough. */
#define PTS_HTTP_CTX_POOL 32

struct infer_ctx;
struct conn;
struct pts_accept_pause;

struct loop {
  struct pts_http *h;
  struct event_base *base;
  struct evhttp *http;
  struct evconnlistener *lev; /* owned by `http` (evhttp_bind_listener) */
  struct pts_accept_pause *pause; /* accept() failures pause lev (net/listen.h) */
  struct event *stop_ev;
  /* admit.c */
  struct event *adopt_ev;  /* links connections accepted by evhttp to their conn */
  struct event *reap_ev;   /* closes refused connections that keep sending */
  struct conn *fresh;      /* accepted, not adopted yet */
  struct conn *reap;       /* to be closed by reap_ev */
  struct conn **by_fd;     /* adopted connections, indexed by socket */
  size_t by_fd_cap;
  pthread_t thread;
  bool thread_started;
  struct infer_ctx *pending; /* requests in the core; guarded by h->mu */
  /* Contexts of answered requests kept for the next ones, each with its
   * event (one calloc and one event_new less per request: issue #13).
   * Owned; loop thread only; freed by loop_destroy. Poisoned for ASan
   * while here (core/asan.h). */
  struct infer_ctx *spare[PTS_HTTP_CTX_POOL];
  /* spare_ev[i] is spare[i]'s event, also kept here: LeakSanitizer does not
   * look for pointers inside poisoned memory, so a check while a spare is
   * pooled (libFuzzer runs one whenever an input allocates more than it
   * frees) would take the event for a leak. Borrowed from the spare. */
  struct event *spare_ev[PTS_HTTP_CTX_POOL];
  size_t n_spare;
};

struct pts_http {
  struct pts_server *server;
  size_t max_input;
  size_t body_cap;     /* evhttp's own body limit: above max_input, see http.c */
  struct pts_restrictions restrictions; /* --http-restricted-api */
  size_t max_header;   /* --http-max-header-size */
  unsigned timeout_s;  /* --http-timeout-secs, 0 = none */
  unsigned long max_connections; /* --http-max-connections (resolved) */
  atomic_ulong admitted;         /* connections holding one of those slots */
  int port;
  size_t n_loops;
  struct loop *loops;
  atomic_bool stopping;
  atomic_int refs; /* the owner's, plus one per live infer_ctx */
  pthread_mutex_t mu;
  pthread_cond_t drained;
  size_t in_flight; /* guarded by mu */
};

/* Where a connection is in reading its current request (admit.c). */
enum conn_state {
  CONN_IDLE,     /* between requests: nothing of the next one has arrived */
  CONN_HEAD,     /* the head is arriving; a copy is kept until it is complete */
  CONN_BODY,     /* the head was admitted; the body is arriving */
  CONN_UNCHECKED, /* bytes the head check did not see (pipelined); checked when read */
  CONN_PASS,     /* evhttp refuses this request itself (over --http-max-input-size) */
  CONN_REFUSING, /* answered with an error; input is discarded until the peer goes */
};

/* One accepted HTTP connection, from evhttp's bufferevent callback to its
 * close callback. */
struct conn {
  struct loop *lp;
  struct bufferevent *bev;         /* evhttp's; our reference is held until adopted */
  struct evhttp_connection *evcon; /* NULL until adopted */
  int fd;                          /* -1 until adopted */
  enum conn_state state;
  bool has_slot;      /* holds one of --http-max-connections' slots */
  bool refuse_on_adopt;
  bool reaping;       /* on lp->reap */
  bool admitted;      /* the current request passed the head check */
  bool chunked;       /* the current request's body has no declared length */
  bool body_reading;  /* body_read (admit.c) is on the stack: the input callback
                         its own commits cause only counts bytes */
  size_t arrived;     /* bytes of the current request that arrived */
  size_t reserved;    /* head plus declared body, reserved at the head check */
  size_t charged;     /* what this connection holds of the memory budget */
  size_t discarded;   /* CONN_REFUSING: bytes thrown away */
  time_t refused_at;  /* CONN_REFUSING: when (monotonic seconds) */
  char *head;         /* CONN_HEAD: the head so far (owned) */
  size_t head_len, head_cap;
  /* http.c */
  struct infer_ctx *ctx; /* the inference of this connection in the core */
  bool reply_pending;    /* its reply is being written (counts in h->in_flight) */
  size_t reply_charged;  /* bytes of that reply charged to the memory budget until written:
                            a client that never reads holds them, and the budget refuses
                            new work rather than let such clients pin unbounded memory */
  struct event *written_ev; /* http.c write_now: tells evhttp its reply is out (owned;
                               made on first use, freed with the connection) */
  struct conn *next;        /* on lp->fresh or lp->reap */
};

/* http.c: an accepted inference's reply has been written, or its
 * connection is gone (loop thread). */
void pts_http_reply_finished(struct pts_http *h);
/* http.c: the reply pending on `cn` (reply_pending) is written or its
 * connection is gone: returns its budget charge, then reply_finished. */
void pts_http_reply_end(struct conn *cn);
/* http.c: the connection of a pending inference closed (loop thread). */
void pts_http_ctx_orphan_conn(struct infer_ctx *c);

#endif
