/* ptperf/lib/load.c — the poll() loop that keeps N requests in flight. */
#include "ptperf/lib/load.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"

/* A refused connection is retried after this long, not in a busy loop. */
#define RECONNECT_DELAY_NS (100 * 1000 * 1000ULL)
#define READ_CHUNK 16384

struct conn {
  int fd;
  bool in_flight;
  const char *req;
  size_t req_len, sent;
  char *rbuf;
  size_t rlen, rcap;
  uint64_t t0;       /* when the request's first byte was written */
  uint64_t retry_at; /* earliest reconnect after a failure */
};

struct ptperf_load {
  struct ptperf_addr addr;
  char *const *requests;
  const size_t *request_lens;
  size_t n_requests, next_request;
  int n_conns;
  struct conn *conns;
  struct pollfd *pfds;
  int *pfd_conn; /* pfds[i] belongs to conns[pfd_conn[i]] */
  pthread_t thread;
  atomic_bool stop;
  struct ptperf_recorder *rec; /* borrowed */
};

static void conn_close(struct conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->in_flight = false;
  c->rlen = 0;
}

static void conn_fail(struct ptperf_load *l, struct conn *c, const char *why) {
  if (c->in_flight) ptperf_recorder_error(l->rec, "%s", why);
  conn_close(c);
}

static bool conn_open(struct ptperf_load *l, struct conn *c) {
  struct pts_error err;
  int fd = ptperf_connect(&l->addr, &err);
  if (fd < 0) {
    ptperf_recorder_error(l->rec, "%s", err.msg);
    c->retry_at = ptperf_now_ns() + RECONNECT_DELAY_NS;
    return false;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  c->fd = fd;
  return true;
}

static void conn_write(struct ptperf_load *l, struct conn *c) {
  while (c->sent < c->req_len) {
    ssize_t k = send(c->fd, c->req + c->sent, c->req_len - c->sent, MSG_NOSIGNAL);
    if (k > 0) {
      c->sent += (size_t)k;
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      char why[128];
      snprintf(why, sizeof why, "send: %s", k < 0 ? strerror(errno) : "nothing written");
      conn_fail(l, c, why);
      return;
    }
  }
}

static void conn_start_request(struct ptperf_load *l, struct conn *c) {
  size_t i = l->next_request++ % l->n_requests;
  c->req = l->requests[i];
  c->req_len = l->request_lens[i];
  c->sent = 0;
  c->rlen = 0;
  c->in_flight = true;
  c->t0 = ptperf_now_ns();
  conn_write(l, c);
}

/* A complete response is in rbuf: judge it, then keep the loop going. */
static void conn_finish(struct ptperf_load *l, struct conn *c,
                        const struct ptperf_http_response *r) {
  uint64_t lat = ptperf_now_ns() - c->t0;
  c->in_flight = false;
  if (r->status == 200 && r->message_len == c->rlen) {
    ptperf_recorder_ok(l->rec, lat);
  } else if (r->status != 200) {
    char *body = NULL;
    struct pts_error err;
    if (ptperf_http_body(c->rbuf, r, &body, NULL, &err) != PTS_OK) body = NULL;
    ptperf_recorder_error(l->rec, "HTTP %d: %.400s", r->status, body ? body : "");
    pts_free(body);
  } else {
    ptperf_recorder_error(l->rec, "%zu unexpected bytes after a response",
                          c->rlen - r->message_len);
    conn_close(c);
    return;
  }
  if (!r->keep_alive) {
    conn_close(c);
    return;
  }
  conn_start_request(l, c);
}

static void conn_read(struct ptperf_load *l, struct conn *c) {
  if (c->rcap - c->rlen < READ_CHUNK) {
    size_t cap = c->rcap ? c->rcap * 2 : 4 * READ_CHUNK;
    char *b = pts_realloc(c->rbuf, cap);
    if (!b) {
      conn_fail(l, c, "no memory for a response");
      return;
    }
    c->rbuf = b;
    c->rcap = cap;
  }
  ssize_t k = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (k <= 0) {
    char why[128];
    snprintf(why, sizeof why, "connection %s while a request was in flight",
             k == 0 ? "closed by the server" : strerror(errno));
    if (!c->in_flight) why[0] = '\0';
    conn_fail(l, c, why);
    return;
  }
  if (!c->in_flight) { /* nothing was asked: the server is confused */
    ptperf_recorder_error(l->rec, "%zd bytes arrived on an idle connection", k);
    conn_close(c);
    return;
  }
  c->rlen += (size_t)k;
  struct ptperf_http_response r;
  struct pts_error err;
  switch (ptperf_http_parse(c->rbuf, c->rlen, &r, &err)) {
    case PTPERF_PARSE_MORE:
      return;
    case PTPERF_PARSE_DONE:
      conn_finish(l, c, &r);
      return;
    case PTPERF_PARSE_ERROR:
      conn_fail(l, c, err.msg);
      return;
  }
}

/* Opens what is closed, starts what is idle, and lists the sockets to
 * watch. Returns how many and the poll timeout. */
static int prepare_poll(struct ptperf_load *l, int *timeout_ms) {
  int n = 0;
  uint64_t now = ptperf_now_ns(), next_retry = UINT64_MAX;
  for (int i = 0; i < l->n_conns; i++) {
    struct conn *c = &l->conns[i];
    if (c->fd < 0) {
      if (c->retry_at > now) {
        if (c->retry_at < next_retry) next_retry = c->retry_at;
        continue;
      }
      if (!conn_open(l, c)) continue;
    }
    if (!c->in_flight) conn_start_request(l, c);
    if (c->fd < 0) continue;
    l->pfds[n] = (struct pollfd){.fd = c->fd,
                                 .events = (short)(POLLIN | (c->sent < c->req_len ? POLLOUT : 0))};
    l->pfd_conn[n++] = i;
  }
  *timeout_ms = 50; /* how often the stop flag is looked at */
  if (next_retry != UINT64_MAX) {
    uint64_t wait = (next_retry - now) / 1000000 + 1;
    if (wait < (uint64_t)*timeout_ms) *timeout_ms = (int)wait;
  }
  return n;
}

static void *load_main(void *arg) {
  struct ptperf_load *l = arg;
  while (!atomic_load_explicit(&l->stop, memory_order_relaxed)) {
    int timeout;
    int n = prepare_poll(l, &timeout);
    int rc = poll(l->pfds, (nfds_t)n, timeout);
    if (rc <= 0) continue;
    for (int i = 0; i < n; i++) {
      struct conn *c = &l->conns[l->pfd_conn[i]];
      short re = l->pfds[i].revents;
      if (re == 0 || c->fd != l->pfds[i].fd) continue;
      if (re & POLLOUT) conn_write(l, c);
      if (c->fd >= 0 && (re & (POLLIN | POLLERR | POLLHUP))) conn_read(l, c);
    }
  }
  return NULL;
}

static void load_free(struct ptperf_load *l) {
  if (!l) return;
  for (int i = 0; l->conns && i < l->n_conns; i++) {
    conn_close(&l->conns[i]);
    pts_free(l->conns[i].rbuf);
  }
  pts_free(l->conns);
  pts_free(l->pfds);
  pts_free(l->pfd_conn);
  pts_free(l);
}

enum pts_status ptperf_load_start(const struct ptperf_addr *addr, int concurrency,
                                  char *const *requests, const size_t *request_lens,
                                  size_t n_requests, struct ptperf_recorder *rec,
                                  struct ptperf_load **out, struct pts_error *err) {
  *out = NULL;
  if (concurrency < 1 || n_requests == 0)
    return pts_error_set(err, PTS_INVALID_ARG, "concurrency %d with %zu requests: need >= 1",
                         concurrency, n_requests);
  struct ptperf_load *l = pts_calloc(1, sizeof *l);
  if (!l) return pts_error_set(err, PTS_NOMEM, "no memory for the load");
  l->rec = rec;
  l->addr = *addr;
  l->requests = requests;
  l->request_lens = request_lens;
  l->n_requests = n_requests;
  l->n_conns = concurrency;
  l->conns = pts_calloc((size_t)concurrency, sizeof l->conns[0]);
  l->pfds = pts_calloc((size_t)concurrency, sizeof l->pfds[0]);
  l->pfd_conn = pts_calloc((size_t)concurrency, sizeof l->pfd_conn[0]);
  for (int i = 0; l->conns && i < concurrency; i++) l->conns[i].fd = -1;
  if (!l->conns || !l->pfds || !l->pfd_conn) {
    load_free(l);
    return pts_error_set(err, PTS_NOMEM, "no memory for %d connections", concurrency);
  }
  /* Connect up front so that a wrong address fails here, not as errors. */
  for (int i = 0; i < concurrency; i++) {
    l->conns[i].fd = ptperf_connect(addr, err);
    if (l->conns[i].fd < 0) {
      load_free(l);
      return PTS_UNAVAILABLE;
    }
    fcntl(l->conns[i].fd, F_SETFL, fcntl(l->conns[i].fd, F_GETFL) | O_NONBLOCK);
  }
  atomic_init(&l->stop, false);
  if (pthread_create(&l->thread, NULL, load_main, l) != 0) {
    load_free(l);
    return pts_error_set(err, PTS_INTERNAL, "can not start the load thread");
  }
  *out = l;
  return PTS_OK;
}

void ptperf_load_stop(struct ptperf_load *l) {
  if (!l) return;
  atomic_store(&l->stop, true);
  pthread_join(l->thread, NULL);
  load_free(l);
}
