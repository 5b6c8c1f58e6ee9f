/* metrics/service.c — the metrics listener: one libevent loop on its own
 * thread answering GET /metrics, plus a timer that samples the CPU and the
 * GPUs (NVML) every --metrics-interval-ms. A scrape reads the statistics of every READY model
 * through pts_server_model_stats, which never blocks on a model. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "core/alloc.h"
#include "core/copy.h"
#include "core/log.h"
#include "net/libevent.h"
#include "net/listen.h"
#include "metrics/metrics.h"

struct pts_metrics {
  struct pts_server *server;
  struct event_base *base;
  struct evhttp *http;
  struct event *stop_ev;
  struct event *sample_ev;
  struct pts_accept_pause *pause; /* accept() out of descriptors: pause (net/listen.h) */
  pthread_t thread;
  bool thread_started;
  int port;
  bool cpu_metrics;
  struct pts_nvml *nvml; /* owned; NULL = no GPU metrics */
  /* loop thread only */
  struct pts_gpu_sample gpus[PTS_NVML_MAX_GPUS];
  size_t n_gpus;
  struct pts_cpu_times last_cpu;
  bool have_cpu;
  double cpu_share;
};

/* Reads a small /proc file into buf (NUL-terminated). */
static bool read_proc(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  buf[n] = '\0';
  return n > 0;
}

static void sample_cpu(struct pts_metrics *m) {
  char buf[4096];
  struct pts_cpu_times now;
  if (!read_proc("/proc/stat", buf, sizeof buf) || !pts_metrics_parse_cpu(buf, &now)) return;
  if (m->have_cpu) m->cpu_share = pts_metrics_cpu_share(&m->last_cpu, &now);
  m->last_cpu = now;
  m->have_cpu = true;
}

/* NVML's utilization is already an average over its own sample period
 * (1/6 s to 1 s by board); reading it each interval is what DCGM does for
 * tritonserver. */
static void sample_gpus(struct pts_metrics *m) {
  if (m->nvml) m->n_gpus = pts_nvml_sample(m->nvml, m->gpus, PTS_NVML_MAX_GPUS);
}

static void on_sample(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct pts_metrics *m = arg;
  if (m->cpu_metrics) sample_cpu(m);
  sample_gpus(m);
}

static void host_metrics(struct pts_metrics *m, struct pts_host_metrics *h) {
  memset(h, 0, sizeof *h);
  h->gpus = m->n_gpus ? m->gpus : NULL;
  h->n_gpus = m->n_gpus;
  h->host_copy_bytes = pts_copy_bytes_total();
  if (!m->cpu_metrics) return;
  char buf[8192];
  if (!read_proc("/proc/meminfo", buf, sizeof buf) ||
      !pts_metrics_parse_meminfo(buf, &h->mem_total_bytes, &h->mem_used_bytes))
    return;
  h->cpu_utilization = m->cpu_share;
  h->valid = true;
}

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *body,
                       size_t len) {
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                    "text/plain; charset=utf-8; version=0.0.4");
  evbuffer_add(evhttp_request_get_output_buffer(req), body, len);
  evhttp_send_reply(req, code, reason, NULL);
}

static void on_request(struct evhttp_request *req, void *arg) {
  struct pts_metrics *m = arg;
  const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
  const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
  if (!path || strcmp(path, "/metrics") != 0) {
    static const char msg[] = "Not Found: the metrics endpoint is /metrics\n";
    reply_text(req, 404, "Not Found", msg, sizeof msg - 1);
    return;
  }
  if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
    static const char msg[] = "Method Not Allowed: use GET /metrics\n";
    reply_text(req, 405, "Method Not Allowed", msg, sizeof msg - 1);
    return;
  }
  struct pts_error err;
  struct pts_model_stats *stats = NULL;
  size_t n = 0, len = 0;
  if (pts_server_model_stats(m->server, NULL, -1, &stats, &n, &err) != PTS_OK) {
    reply_text(req, 500, "Internal Server Error", err.msg, strlen(err.msg));
    return;
  }
  struct pts_host_metrics host;
  host_metrics(m, &host);
  struct pts_overload_stats overload;
  pts_overload_snapshot(&overload);
  struct pts_cache_stats cache;
  struct pts_cache *c = pts_cache_process();
  if (c) pts_cache_get_stats(c, &cache);
  char *text = pts_metrics_render(stats, n, &host, &overload, c ? &cache : NULL, &len);
  pts_server_model_stats_free(stats, n);
  if (!text) {
    static const char msg[] = "out of memory rendering the metrics\n";
    reply_text(req, 500, "Internal Server Error", msg, sizeof msg - 1);
    return;
  }
  reply_text(req, 200, "OK", text, len);
  pts_free(text);
}

static void on_stop(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct pts_metrics *m = arg;
  event_base_loopbreak(m->base);
}

static void *loop_main(void *arg) {
  struct pts_metrics *m = arg;
  event_base_loop(m->base, EVLOOP_NO_EXIT_ON_EMPTY);
  return NULL;
}

static int bound_port(struct evhttp_bound_socket *sock, int fallback) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  evutil_socket_t fd = evhttp_bound_socket_get_fd(sock);
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) return fallback;
  if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  return fallback;
}

static enum pts_status setup(struct pts_metrics *m, const struct pts_server_options *o,
                             struct pts_error *err) {
  const char *address = o->metrics_address ? o->metrics_address : o->http_address;
  if (!address) address = "0.0.0.0";
  m->base = event_base_new();
  m->http = m->base ? evhttp_new(m->base) : NULL;
  m->stop_ev = m->base ? event_new(m->base, -1, 0, on_stop, m) : NULL;
  m->sample_ev = m->base ? event_new(m->base, -1, EV_PERSIST, on_sample, m) : NULL;
  if (!m->http || !m->stop_ev || !m->sample_ev)
    return pts_error_set(err, PTS_INTERNAL, "failed to create the metrics service");
  struct evhttp_bound_socket *sock =
      evhttp_bind_socket_with_handle(m->http, address, (ev_uint16_t)o->metrics_port);
  if (!sock)
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "failed to start Metrics service: could not bind %s:%d (address in use, "
                         "or not an address of this host; see --metrics-address, --metrics-port)",
                         address, o->metrics_port);
  m->port = bound_port(sock, o->metrics_port);
  m->pause = pts_accept_pause_attach(evhttp_bound_socket_get_listener(sock), "metrics");
  if (!m->pause) return pts_error_set(err, PTS_NOMEM, "out of memory starting the metrics service");
  evhttp_set_gencb(m->http, on_request, m);
  evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                          EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
  if (o->allow_gpu_metrics) {
    char why[512];
    m->nvml = pts_nvml_open(why, sizeof why);
    if (!m->nvml)
      PTS_LOG_INFO("GPU metrics: none collected (nv_gpu_* left out): %s", why);
  }
  if (m->cpu_metrics || m->nvml) {
    int ms = o->metrics_interval_ms > 0 ? o->metrics_interval_ms : 2000;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    if (m->cpu_metrics) sample_cpu(m);
    sample_gpus(m);
    event_add(m->sample_ev, &tv);
  }
  return PTS_OK;
}

enum pts_status pts_metrics_start(struct pts_server *s, const struct pts_server_options *o,
                                  struct pts_metrics **out, struct pts_error *err) {
  /* The stop event is activated from the main thread: the base must be
   * lock-aware (and libevent's log lines go through ours). */
  pts_libevent_init();
  *out = NULL;
  struct pts_metrics *m = pts_calloc(1, sizeof *m);
  if (!m) return pts_error_set(err, PTS_NOMEM, "out of memory starting the metrics service");
  m->server = s;
  m->cpu_metrics = o->allow_cpu_metrics;
  enum pts_status st = setup(m, o, err);
  if (st == PTS_OK) {
    int rc = pthread_create(&m->thread, NULL, loop_main, m);
    if (rc != 0)
      st = pts_error_set(err, PTS_INTERNAL, "failed to start the metrics thread: %s", strerror(rc));
    else
      m->thread_started = true;
  }
  if (st != PTS_OK) {
    pts_metrics_stop(m);
    return st;
  }
  *out = m;
  return PTS_OK;
}

int pts_metrics_port(const struct pts_metrics *m) { return m ? m->port : -1; }

void pts_metrics_stop(struct pts_metrics *m) {
  if (!m) return;
  if (m->thread_started) {
    event_active(m->stop_ev, EV_READ, 0);
    pthread_join(m->thread, NULL);
  }
  if (m->sample_ev) event_free(m->sample_ev);
  if (m->stop_ev) event_free(m->stop_ev);
  pts_accept_pause_free(m->pause); /* before evhttp_free frees the listener */
  pts_nvml_close(m->nvml);
  if (m->http) evhttp_free(m->http);
  if (m->base) event_base_free(m->base);
  pts_free(m);
}
