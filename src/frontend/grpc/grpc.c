/* frontend/grpc/grpc.c — the frontend's start and stop: the listener, and
 * --grpc-infer-thread-count libevent loops that serve gRPC on nghttp2
 * (h2.h), the connections dealt to them in turn. The wire conversions live
 * in infer.c and admit.c, the small rpcs in rpc.c. */
#include "frontend/grpc/grpc.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/log.h"
#include "frontend/grpc/h2.h"
#include "frontend/grpc/listen_grpc.h"
#include "frontend/grpc/restrict_grpc.h"
#include "net/libevent.h"
#include "net/tls.h"

/* At shutdown, how long running calls (open streams, mostly) may go on
 * after every connection got its GOAWAY. */
#define STOP_GRACE_S 5

/* One loop of the transport. */
struct h2_loop {
  struct pts_grpc_h2 *h2;  /* owned */
  struct event_base *base; /* owned, but loop 0's: the listener's */
  struct event *stop_ev;   /* owned; NULL for loop 0 */
  pthread_t thread;
  bool started;
};

struct pts_grpc {
  struct pts_server *server; /* borrowed */
  int port;
  /* --grpc-restricted-protocol; read-only while the loops run */
  struct pts_restrictions restrictions;
  struct pts_grpc_listen *listen; /* owned: accepts the connections */
  struct pts_tls_ctx *tls;        /* owned, freed after the loops; NULL: plaintext */
  struct h2_loop *loops;          /* owned, n_loops of them; loop 0 is the listener's */
  size_t n_loops;
  size_t next_loop; /* listener thread: round robin of new connections */
};

/* The listener's thread: a new connection, to the loops in turn; loop 0 is
 * this thread's own. */
static void take_fd(void *ctx, int fd) {
  struct pts_grpc *g = ctx;
  size_t i = g->next_loop++ % g->n_loops;
  if (i == 0)
    pts_grpc_h2_accept(g->loops[0].h2, fd);
  else
    pts_grpc_h2_give(g->loops[i].h2, fd);
}

static void on_loop_stop(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  event_base_loopbreak(arg);
}

static void *loop_main(void *arg) {
  event_base_loop(arg, EVLOOP_NO_EXIT_ON_EMPTY);
  return NULL;
}

/* Stops the loops (the listener's with the listener) and frees the
 * transports; false when one is left behind (a call still held by an
 * instance). */
static bool stop_loops(struct pts_grpc *g) {
  pts_grpc_listen_halt(g->listen);
  for (size_t i = 1; i < g->n_loops; i++) {
    struct h2_loop *lp = &g->loops[i];
    if (!lp->started) continue;
    event_active(lp->stop_ev, EV_READ, 0);
    pthread_join(lp->thread, NULL);
  }
  bool all = true;
  for (size_t i = 0; i < g->n_loops; i++) all &= pts_grpc_h2_free(g->loops[i].h2);
  if (!all) return false;
  for (size_t i = 1; i < g->n_loops; i++) {
    if (g->loops[i].stop_ev) event_free(g->loops[i].stop_ev);
    if (g->loops[i].base) event_base_free(g->loops[i].base);
  }
  pts_grpc_listen_stop(g->listen);
  pts_restrictions_clear(&g->restrictions);
  pts_tls_ctx_free(g->tls);
  pts_free(g->loops);
  pts_free(g);
  return true;
}

/* --grpc-infer-thread-count libevent loops, the first the listener's own. */
static enum pts_status start_loops(struct pts_grpc *g, const struct pts_server_options *o,
                                   size_t n, struct pts_grpc **out, struct pts_error *err) {
  g->n_loops = n;
  g->loops = pts_calloc(g->n_loops, sizeof *g->loops);
  enum pts_status st = g->loops ? PTS_OK
                                : pts_error_set(err, PTS_NOMEM, "out of memory starting gRPC");
  for (size_t i = 0; st == PTS_OK && i < g->n_loops; i++) {
    struct h2_loop *lp = &g->loops[i];
    lp->base = i == 0 ? pts_grpc_listen_base(g->listen) : pts_libevent_loop_base();
    if (i > 0 && lp->base) lp->stop_ev = event_new(lp->base, -1, 0, on_loop_stop, lp->base);
    if (!lp->base || (i > 0 && !lp->stop_ev))
      st = pts_error_set(err, PTS_NOMEM, "out of memory starting gRPC");
    else
      st = pts_grpc_h2_new(g->server, o, &g->restrictions, lp->base, &lp->h2, err);
    if (st == PTS_OK && g->tls) pts_grpc_h2_set_tls(lp->h2, g->tls);
    if (st == PTS_OK && i > 0) {
      int rc = pthread_create(&lp->thread, NULL, loop_main, lp->base);
      if (rc != 0)
        st = pts_error_set(err, PTS_INTERNAL, "failed to start gRPC loop %zu: %s", i, strerror(rc));
      lp->started = rc == 0;
    }
  }
  if (st == PTS_OK) st = pts_grpc_listen_run(g->listen, take_fd, g, err);
  if (st != PTS_OK) {
    if (g->loops) {
      stop_loops(g);
    } else {
      pts_grpc_listen_stop(g->listen);
      pts_restrictions_clear(&g->restrictions);
      pts_tls_ctx_free(g->tls);
      pts_free(g);
    }
    return st;
  }
  PTS_LOG_INFO("gRPC: serving on nghttp2, %zu loop%s%s", g->n_loops,
               g->n_loops == 1 ? "" : "s",
               !g->tls                   ? ", without TLS"
               : o->grpc_use_ssl_mutual ? ", over TLS, client certificates required"
                                        : ", over TLS");
  *out = g;
  return PTS_OK;
}

/* Shutdown: GOAWAY on every connection, the grace for running calls, then
 * the loops stop and what is left is closed. */
static void drain_and_stop(struct pts_grpc *g) {
  for (size_t i = 0; i < g->n_loops; i++) pts_grpc_h2_drain(g->loops[i].h2);
  struct timespec step = {0, 10 * 1000 * 1000};
  for (int k = 0; k < STOP_GRACE_S * 100; k++) {
    size_t live = 0;
    for (size_t i = 0; i < g->n_loops; i++) live += pts_grpc_h2_live(g->loops[i].h2);
    if (live == 0) break;
    nanosleep(&step, NULL);
  }
  stop_loops(g); /* a transport left behind says so */
}

enum pts_status pts_grpc_tls_new(const struct pts_server_options *o, struct pts_tls_ctx **out,
                                 struct pts_error *err) {
  *out = NULL;
  if (!o->grpc_use_ssl) return PTS_OK;
  /* tritonserver hands gRPC core an empty string for a flag not given (or
   * a file it can not read), which no handshake can use; here start-up
   * fails instead, naming the flag. */
  if (!o->grpc_server_cert || !o->grpc_server_key)
    return pts_error_set(err, PTS_INVALID_ARG, "gRPC over TLS (%s) needs %s",
                         o->grpc_use_ssl_mutual ? "--grpc-use-ssl-mutual" : "--grpc-use-ssl",
                         !o->grpc_server_cert && !o->grpc_server_key
                             ? "--grpc-server-cert and --grpc-server-key"
                         : !o->grpc_server_cert ? "--grpc-server-cert"
                                                : "--grpc-server-key");
  if (o->grpc_use_ssl_mutual && !o->grpc_root_cert)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "--grpc-use-ssl-mutual needs --grpc-root-cert: the roots that sign the "
                         "clients' certificates");
  struct pts_tls_config c = {
      .cert_file = o->grpc_server_cert,
      .key_file = o->grpc_server_key,
      .ca_file = o->grpc_root_cert,
      .verify_client = o->grpc_use_ssl_mutual,
      .alpn = "h2",
      .cert_flag = "--grpc-server-cert",
      .key_flag = "--grpc-server-key",
      .ca_flag = "--grpc-root-cert",
  };
  return pts_tls_ctx_new(&c, out, err);
}

enum pts_status pts_grpc_start(struct pts_server *s, const struct pts_server_options *o,
                               struct pts_grpc **out, struct pts_error *err) {
  struct pts_grpc *g = pts_calloc(1, sizeof *g);
  if (!g) return pts_error_set(err, PTS_NOMEM, "out of memory starting the gRPC frontend");
  /* Not given: one loop per core, as the HTTP loops (a connection stays on
   * one, so the loops are independent). */
  size_t n = o->grpc_infer_thread_count > 0 ? (size_t)o->grpc_infer_thread_count
                                            : (size_t)pts_server_default_loops();
  enum pts_status st = pts_grpc_restrictions_parse(
      o->grpc_restricted_protocol, o->n_grpc_restricted_protocol, &g->restrictions, err);
  if (st == PTS_OK) st = pts_grpc_tls_new(o, &g->tls, err);
  /* The port is ours, not nghttp2's: listen_grpc.h says why. */
  if (st == PTS_OK) st = pts_grpc_listen_open(o, &g->listen, &g->port, err);
  if (st != PTS_OK) {
    pts_restrictions_clear(&g->restrictions);
    pts_tls_ctx_free(g->tls);
    pts_free(g);
    return st;
  }
  g->server = s;
  return start_loops(g, o, n, out, err);
}

unsigned long pts_grpc_max_connections(const struct pts_grpc *g) {
  return g ? pts_grpc_listen_max_connections(g->listen) : 0;
}

int pts_grpc_port(const struct pts_grpc *g) { return g ? g->port : 0; }

void pts_grpc_stop(struct pts_grpc *g) {
  if (g) drain_and_stop(g);
}
