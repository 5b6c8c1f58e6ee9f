/* frontend/grpc/listen_grpc.c — see listen_grpc.h. */
#include "frontend/grpc/listen_grpc.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/overload.h"
#include "net/libevent.h"
#include "net/listen.h"

/* How often open connections are counted for the gauge. */
#define SWEEP_MS 1000
/* At most one log line about refused connections per this many seconds. */
#define REFUSE_LOG_INTERVAL_S 10

/* A socket handed to the transport: the same descriptor with another inode is a
 * new socket, so this one was closed. */
struct handed {
  int fd;
  dev_t dev;
  ino_t ino;
};

struct pts_grpc_listen {
  pts_grpc_take_fn take;
  void *take_ctx;
  int fd; /* listening socket until the listener owns it */
  struct event_base *base;
  struct evconnlistener *lev;
  struct pts_accept_pause *pause;
  struct event *stop_ev, *sweep_ev;
  pthread_t thread;
  bool thread_started;
  unsigned long max;
  struct handed *open; /* loop thread */
  size_t n_open, cap_open;
  struct pts_log_limit refuse_log;
};

/* Drops the sockets the transport has closed; updates the gauge. */
static void sweep(struct pts_grpc_listen *l) {
  size_t before = l->n_open;
  for (size_t i = 0; i < l->n_open;) {
    struct stat st;
    struct handed *h = &l->open[i];
    if (fstat(h->fd, &st) == 0 && st.st_dev == h->dev && st.st_ino == h->ino) {
      i++;
      continue;
    }
    l->open[i] = l->open[--l->n_open];
  }
  pts_overload_count(PTS_OVERLOAD_GRPC_CONNECTIONS, (int64_t)l->n_open - (int64_t)before);
}

static void remember(struct pts_grpc_listen *l, int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return;
  if (l->n_open == l->cap_open) {
    size_t cap = l->cap_open ? 2 * l->cap_open : 64;
    struct handed *grown = pts_realloc(l->open, cap * sizeof *grown);
    if (!grown) return; /* not counted: the limit errs on the side of serving */
    l->open = grown;
    l->cap_open = cap;
  }
  l->open[l->n_open++] = (struct handed){fd, st.st_dev, st.st_ino};
  pts_overload_count(PTS_OVERLOAD_GRPC_CONNECTIONS, 1);
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int socklen, void *arg) {
  (void)lev;
  (void)sa;
  (void)socklen;
  struct pts_grpc_listen *l = arg;
  if (l->n_open >= l->max) sweep(l);
  if (l->n_open >= l->max) {
    close(fd);
    pts_overload_count(PTS_OVERLOAD_GRPC_CONN_REFUSED, 1);
    unsigned long dropped = 0;
    if (pts_log_limit_allow(&l->refuse_log, (uint64_t)REFUSE_LOG_INTERVAL_S * 1000000000u,
                            &dropped))
      PTS_LOG_WARN("gRPC: closed a new connection: %lu are open (--grpc-max-connections)%s",
                   l->max, dropped ? "; more were closed since the last message" : "");
    return;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  remember(l, fd);
  l->take(l->take_ctx, fd); /* the transport's now */
}

static void on_sweep(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  sweep(arg);
}

static void on_stop(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct pts_grpc_listen *l = arg;
  event_base_loopbreak(l->base);
}

static void *loop_main(void *arg) {
  struct pts_grpc_listen *l = arg;
  event_base_loop(l->base, EVLOOP_NO_EXIT_ON_EMPTY);
  return NULL;
}

/* --grpc-max-connections, or what the descriptor limit leaves (a quarter
 * of it beside HTTP: core/overload.h). */
static unsigned long max_connections(const struct pts_server_options *o) {
  if (o->grpc_max_connections > 0) return (unsigned long)o->grpc_max_connections;
  struct rlimit rl;
  uint64_t nofile = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    nofile = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
  return pts_overload_default_connections(nofile, o->allow_http ? 25 : 100);
}

enum pts_status pts_grpc_listen_open(const struct pts_server_options *o,
                                     struct pts_grpc_listen **out, int *port,
                                     struct pts_error *err) {
  pts_libevent_init();
  struct pts_grpc_listen *l = pts_calloc(1, sizeof *l);
  if (!l) return pts_error_set(err, PTS_NOMEM, "out of memory starting the gRPC listener");
  l->fd = -1;
  l->max = max_connections(o);
  enum pts_status st = pts_listen_open("gRPC", "--grpc-address",
                                       o->grpc_address ? o->grpc_address : "0.0.0.0",
                                       o->grpc_port, o->reuse_grpc_port, &l->fd, port, err);
  if (st != PTS_OK) {
    pts_free(l);
    return st;
  }
  /* Lock-aware (pts_libevent_init), so instance threads may wake it. */
  l->base = pts_libevent_loop_base();
  if (!l->base) {
    close(l->fd);
    pts_free(l);
    return pts_error_set(err, PTS_NOMEM, "out of memory starting the gRPC listener");
  }
  *out = l;
  return PTS_OK;
}

struct event_base *pts_grpc_listen_base(struct pts_grpc_listen *l) { return l->base; }

enum pts_status pts_grpc_listen_run(struct pts_grpc_listen *l, pts_grpc_take_fn take, void *ctx,
                                    struct pts_error *err) {
  l->take = take;
  l->take_ctx = ctx;
  l->stop_ev = event_new(l->base, -1, 0, on_stop, l);
  l->sweep_ev = event_new(l->base, -1, EV_PERSIST, on_sweep, l);
  if (!l->stop_ev || !l->sweep_ev) goto fail;
  evutil_make_socket_nonblocking(l->fd);
  /* Backlog 0: already listening (-1 would listen again with 128). */
  l->lev = evconnlistener_new(l->base, on_accept, l, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                              0, l->fd);
  if (!l->lev) goto fail;
  l->fd = -1; /* the listener's now */
  l->pause = pts_accept_pause_attach(l->lev, "gRPC");
  if (!l->pause) goto fail;
  struct timeval tv = {SWEEP_MS / 1000, (SWEEP_MS % 1000) * 1000};
  event_add(l->sweep_ev, &tv);
  int rc = pthread_create(&l->thread, NULL, loop_main, l);
  if (rc != 0)
    return pts_error_set(err, PTS_INTERNAL, "failed to start the gRPC listener thread: %s",
                         strerror(rc));
  l->thread_started = true;
  return PTS_OK;
fail:
  return pts_error_set(err, PTS_NOMEM, "out of memory starting the gRPC listener");
}

unsigned long pts_grpc_listen_max_connections(const struct pts_grpc_listen *l) {
  return l ? l->max : 0;
}

void pts_grpc_listen_halt(struct pts_grpc_listen *l) {
  if (!l || !l->thread_started) return;
  event_active(l->stop_ev, EV_READ, 0);
  pthread_join(l->thread, NULL);
  l->thread_started = false;
}

void pts_grpc_listen_stop(struct pts_grpc_listen *l) {
  if (!l) return;
  pts_grpc_listen_halt(l);
  pts_accept_pause_free(l->pause);
  if (l->lev) evconnlistener_free(l->lev);
  if (l->fd >= 0) close(l->fd);
  if (l->sweep_ev) event_free(l->sweep_ev);
  if (l->stop_ev) event_free(l->stop_ev);
  if (l->base) event_base_free(l->base);
  /* Connections still open stay the transport's; they leave the gauge
   * with us. */
  pts_overload_count(PTS_OVERLOAD_GRPC_CONNECTIONS, -(int64_t)l->n_open);
  pts_free(l->open);
  pts_free(l);
}
