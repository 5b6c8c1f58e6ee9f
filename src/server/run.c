/* server/run.c — pts_server_run: starts the frontends, sleeps until
 * pts_server_stop, then shuts down in the order that keeps every in-flight
 * request answerable: fail readiness (and keep serving for
 * --exit-drain-secs, so a load balancer can take the replica out first),
 * stop accepting inference, drain the queues, then stop the frontends.
 * Kept apart from server.c so the core links without HTTP. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/overload.h"
#include "frontend/grpc/grpc.h"
#include "frontend/http/cloud.h"
#include "frontend/http/http.h"
#include "metrics/metrics.h"
#include "server/server_impl.h"

/* How often the main thread does the memory budget's housekeeping while
 * it waits (core/overload.h: memory back to the system after a burst). */
#define HOUSEKEEPING_MS 1000

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits for pts_server_stop (timeout_ms < 0: for ever) and empties the
 * pipe, waking every HOUSEKEEPING_MS for the budget's housekeeping.
 * Returns whether a stop came. */
static bool wait_for_stop(struct pts_server *s, int timeout_ms) {
  struct pollfd p = {.fd = s->stop_pipe[0], .events = POLLIN};
  uint64_t until = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
  int rc;
  for (;;) {
    uint64_t now = now_ms();
    if (now >= until) return false;
    uint64_t left = until - now;
    rc = poll(&p, 1, left < HOUSEKEEPING_MS ? (int)left : HOUSEKEEPING_MS);
    if (rc > 0) break;
    if (rc < 0 && errno != EINTR) return false;
    if (rc == 0) pts_overload_tick();
  }
  char buf[16];
  while (read(s->stop_pipe[0], buf, sizeof buf) > 0) {
  }
  return true;
}

/* SageMaker's and Vertex AI's listeners (frontend/http/cloud.h), each with
 * the settings it reads from the environment. */
struct clouds {
  struct pts_cloud sagemaker, vertex;
  struct pts_http *sagemaker_http, *vertex_http;
};

/* Vertex AI's default model is checked against the models ready now, as
 * tritonserver checks its index when the service starts. */
static enum pts_status vertex_settings(struct pts_server *s, struct pts_cloud *out,
                                       struct pts_error *err) {
  struct pts_index_entry *entries = NULL;
  size_t n = 0;
  enum pts_status st = pts_server_index(s, true, &entries, &n, err);
  if (st != PTS_OK) return st;
  const char **names = pts_calloc(n ? n : 1, sizeof *names);
  if (!names) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory starting Vertex AI's listener");
  } else {
    for (size_t i = 0; i < n; i++) names[i] = entries[i].name;
    st = pts_cloud_vertex_ai(out, s->opts.vertex_ai_default_model, names, n, err);
  }
  pts_free(names);
  pts_server_index_free(entries, n);
  return st;
}

static enum pts_status clouds_start(struct pts_server *s, struct clouds *c, struct pts_error *err) {
  memset(c, 0, sizeof *c);
  const struct pts_server_options *o = &s->opts;
  enum pts_status st = PTS_OK;
  if (o->allow_sagemaker) {
    st = pts_cloud_sagemaker(&c->sagemaker, err);
    if (st == PTS_OK)
      st = pts_http_start_cloud(s, o, &c->sagemaker, o->sagemaker_port,
                                o->sagemaker_thread_count, &c->sagemaker_http, err);
    if (st != PTS_OK) return st;
    PTS_LOG_INFO("Started Sagemaker HTTPService at 0.0.0.0:%d (model '%s', %s)",
                 pts_http_port(c->sagemaker_http), c->sagemaker.model,
                 c->sagemaker.invoke == PTS_ROUTE_MODEL_INFER      ? "infer"
                 : c->sagemaker.invoke == PTS_ROUTE_MODEL_GENERATE ? "generate"
                                                                   : "generate_stream");
  }
  if (o->allow_vertex_ai) {
    st = vertex_settings(s, &c->vertex, err);
    if (st == PTS_OK)
      st = pts_http_start_cloud(s, o, &c->vertex, o->vertex_ai_port, o->vertex_ai_thread_count,
                                &c->vertex_http, err);
    if (st != PTS_OK) return st;
    PTS_LOG_INFO("Started Vertex AI HTTPService at 0.0.0.0:%d (model '%s', health %s, predict "
                 "%s)",
                 pts_http_port(c->vertex_http), c->vertex.model, c->vertex.health_route,
                 c->vertex.predict_route);
  }
  return PTS_OK;
}

static void clouds_stop(struct clouds *c) {
  pts_http_stop(c->vertex_http);
  pts_http_stop(c->sagemaker_http);
  pts_cloud_clear(&c->vertex);
  pts_cloud_clear(&c->sagemaker);
}

enum pts_status pts_server_run(struct pts_server *s, struct pts_error *err) {
  /* One budget for HTTP and gRPC, before either takes a request. */
  size_t budget = pts_overload_configure(s->opts.request_memory_budget);
  /* gRPC first, as tritonserver does: once HTTP answers ready, both are up. */
  struct pts_grpc *grpc = NULL;
  if (s->opts.allow_grpc) {
    enum pts_status st = pts_grpc_start(s, &s->opts, &grpc, err);
    if (st != PTS_OK) return st;
    PTS_LOG_INFO("Started GRPCInferenceService at %s:%d", s->opts.grpc_address,
                 pts_grpc_port(grpc));
  }
  /* Metrics before HTTP too: a client that saw "ready" can scrape at once. */
  struct pts_metrics *metrics = NULL;
  if (s->opts.allow_metrics) {
    enum pts_status st = pts_metrics_start(s, &s->opts, &metrics, err);
    if (st != PTS_OK) {
      pts_grpc_stop(grpc);
      return st;
    }
    PTS_LOG_INFO("Started Metrics Service at %s:%d",
                 s->opts.metrics_address ? s->opts.metrics_address : s->opts.http_address,
                 pts_metrics_port(metrics));
  }
  struct pts_http *http = NULL;
  if (s->opts.allow_http) {
    enum pts_status st = pts_http_start(s, &s->opts, &http, err);
    if (st != PTS_OK) {
      pts_metrics_stop(metrics);
      pts_grpc_stop(grpc);
      return st;
    }
    PTS_LOG_INFO("Started HTTPService at %s:%d", s->opts.http_address, pts_http_port(http));
  }
  /* The cloud platforms' listeners last, as tritonserver starts them. */
  struct clouds clouds;
  enum pts_status cst = clouds_start(s, &clouds, err);
  if (cst != PTS_OK) {
    clouds_stop(&clouds);
    pts_http_stop(http);
    pts_metrics_stop(metrics);
    pts_grpc_stop(grpc);
    return cst;
  }
  /* What protects the server from overload (docs/reliability.md). */
  PTS_LOG_INFO("Overload limits: HTTP connections %lu (--http-max-connections), gRPC connections "
               "%lu (--grpc-max-connections), request memory budget %zu bytes "
               "(--request-memory-budget), queue cap %llu requests (--default-max-queue-size)",
               pts_http_max_connections(http), pts_grpc_max_connections(grpc), budget,
               (unsigned long long)pts_overload_queue_cap());
  wait_for_stop(s, -1);
  /* Readiness fails first, so health checks take the replica out of its
   * load balancer while requests are still answered. */
  atomic_store(&s->ready_state, false);
  atomic_store(&s->shutting_down, true);
  unsigned drain_s = s->opts.exit_drain_secs;
  if (drain_s > 0) {
    PTS_LOG_INFO("Draining: not ready, still serving inference for %u s (--exit-drain-secs); "
                 "a second signal ends the wait",
                 drain_s);
    if (wait_for_stop(s, (int)drain_s * 1000)) PTS_LOG_INFO("Drain ended by a second signal.");
  }
  /* No load, unload or poll may change the models while they drain; one
   * that runs now finishes first (its requester is answered while the
   * frontends still exist). */
  pts_control_stop(s);
  /* Refused before the line says so: a client that read it knows. */
  pts_server_refuse_inference(s);
  PTS_LOG_INFO("Waiting for in-flight requests to complete.");
  /* --exit-timeout-secs bounds the wait for accepted requests. */
  unsigned timeout_s = s->opts.exit_timeout_secs;
  size_t left = pts_server_drain(s, timeout_s);
  if (left)
    /* A model still running can not be interrupted: tell the caller to
     * leave without the orderly teardown, which would wait for it. */
    return pts_error_set(err, PTS_DEADLINE,
                         "Exit timeout expired. Exiting immediately. (%zu requests still in "
                         "flight after --exit-timeout-secs=%u)",
                         left, timeout_s);
  clouds_stop(&clouds);
  pts_http_stop(http);
  pts_grpc_stop(grpc);
  pts_metrics_stop(metrics);
  return PTS_OK;
}
