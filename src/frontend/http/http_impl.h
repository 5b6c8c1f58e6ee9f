/* frontend/http/http_impl.h — the HTTP frontend's state, shared by http.c
 * (the loops and the handlers) and conn.c (connections: the transport, the limit,
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
struct pts_conn_handlers;
struct pts_accept_pause;

struct loop {
  struct pts_http *h;
  struct event_base *base;
  struct evconnlistener *lev;     /* owned */
  struct pts_accept_pause *pause; /* accept() failures pause lev (net/listen.h) */
  struct event *stop_ev;
  const struct pts_conn_handlers *handlers; /* borrowed: http.c's (conn.h) */
  struct conn *conns;             /* every open connection (conn.c); owned */
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

struct pts_cloud;

struct pts_http {
  struct pts_server *server;
  /* A cloud platform's listener (cloud.h): its routes instead of KServe's;
   * NULL for the KServe one. Borrowed: the caller of pts_http_start_cloud
   * keeps it until pts_http_stop returns. */
  const struct pts_cloud *cloud;
  size_t max_input;
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

/* http.c: an accepted inference's reply has been written, or its
 * connection is gone (loop thread). */
void pts_http_reply_finished(struct pts_http *h);

#endif
