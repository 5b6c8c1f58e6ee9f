/* server/run.c — pts_server_run: starts the frontends, sleeps until
 * pts_server_stop, then shuts down in the order that keeps every in-flight
 * request answerable: stop accepting inference, drain the queues, then stop
 * the frontends. Kept apart from server.c so the core links without HTTP. */
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "core/log.h"
#include "frontend/http/http.h"
#include "server/server_impl.h"

/* Seconds to wait for in-flight requests at shutdown (tritonserver's
 * --exit-timeout-secs default). */
#define EXIT_TIMEOUT_S 30

static void wait_for_stop(struct pts_server *s) {
  struct pollfd p = {.fd = s->stop_pipe[0], .events = POLLIN};
  for (;;) {
    int rc = poll(&p, 1, -1);
    if (rc > 0) break;
    if (rc < 0 && errno != EINTR) break;
  }
  char buf[16];
  while (read(s->stop_pipe[0], buf, sizeof buf) > 0) {
  }
}

enum pts_status pts_server_run(struct pts_server *s, struct pts_error *err) {
  struct pts_http *http = NULL;
  if (s->opts.allow_http) {
    enum pts_status st = pts_http_start(s, &s->opts, &http, err);
    if (st != PTS_OK) return st;
    PTS_LOG_INFO("Started HTTPService at %s:%d", s->opts.http_address, pts_http_port(http));
  }
  wait_for_stop(s);
  PTS_LOG_INFO("Waiting for in-flight requests to complete.");
  size_t left = pts_server_drain(s, EXIT_TIMEOUT_S);
  if (left)
    PTS_LOG_WARN("%zu requests still in flight after %d s; stopping anyway", left, EXIT_TIMEOUT_S);
  pts_http_stop(http);
  return PTS_OK;
}
