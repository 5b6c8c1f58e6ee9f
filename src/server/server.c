/* server/server.c — see server.h. Models, health, index and inference;
 * run.c holds the frontend side (pts_server_run), so unit tests can drive
 * the whole core without linking a frontend. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "core/alloc.h"
#include "core/log.h"
#include "core/name.h"
#include "core/overload.h"
#include "backend_api/backend.h"
#include "scheduler/validate.h"
#include "server/server_impl.h"
#include "server/shm_resolve.h"
#include "shm/shm.h"
#include "trace/trace.h"

/* One event loop per core, 2 to 8. More loops than cores only add
 * context switches (a loop runs small models itself: run to completion,
 * docs/internals/scheduler.md); 8 is tritonserver's HTTP default, kept as
 * the ceiling so that large machines behave as before. */
int pts_server_default_loops(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 2 ? 2 : n > 8 ? 8 : (int)n;
}

void pts_server_options_default(struct pts_server_options *o) {
  memset(o, 0, sizeof *o);
  o->strict_readiness = true;
  o->exit_on_error = true;
  o->allow_http = true;
  o->http_address = "0.0.0.0";
  o->http_port = 8000;
  o->http_thread_count = pts_server_default_loops();
  o->http_max_input_size = 64u * 1024 * 1024;
  o->exit_timeout_secs = 30;
  o->exit_drain_secs = 0; /* tritonserver's behaviour: refuse new inference at once */
  o->http_max_header_size = 64u * 1024;
  o->sagemaker_port = 8080;
  o->sagemaker_thread_count = 8;
  o->sagemaker_safe_port_lo = o->sagemaker_safe_port_hi = -1;
  o->vertex_ai_port = 8080;
  o->vertex_ai_thread_count = 8;
  o->http_timeout_secs = 60;
  o->default_max_queue_size = PTS_OVERLOAD_DEFAULT_QUEUE_CAP;
  o->allow_grpc = true;
  o->grpc_address = "0.0.0.0";
  o->grpc_port = 8001;
  /* 0: chosen by the transport when the frontend starts (pts_grpc_start):
   * nghttp2's loops are the HTTP loops' model, one per core; gRPC core gets
   * one completion-queue thread, because its pollers hand each event to the
   * queue of its call and a second queue adds a thread switch to most
   * requests (docs/benchmarks.md#http-loops-and-grpc-threads). */
  o->grpc_infer_thread_count = 0;
  o->grpc_keepalive_time_ms = 7200000;
  /* gRPC on nghttp2: the same service for fewer instructions per call
   * than gRPC core (docs/internals/grpc.md) */
  o->grpc_keepalive_timeout_ms = 20000;
  o->grpc_http2_max_pings_without_data = 2;
  o->grpc_http2_min_recv_ping_interval_ms = 300000;
  o->grpc_http2_max_ping_strikes = 2;
  o->grpc_max_connection_age_ms = -1;
  o->grpc_max_connection_age_grace_ms = -1;
  o->allow_metrics = true;
  o->allow_cpu_metrics = true;
  o->allow_gpu_metrics = true;
  o->metrics_port = 8002;
  o->metrics_interval_ms = 2000;
  o->model_control_mode = PTS_MODEL_CONTROL_NONE;
  o->repository_poll_secs = 15;
  o->model_load_thread_count = 4;
}

const char *pts_server_version(void) { return PTS_VERSION; }

const char *pts_server_id(const struct pts_server *s) { return s->server_id; }

/* ------------------------------------------------------------ the table */

struct table_row {
  const char *name;
  char version[24];
  const char *state;
  const char *reason;
};

static size_t row_status_len(const struct table_row *r) {
  return strlen(r->state) + (r->reason[0] ? 2 + strlen(r->reason) : 0);
}

/* The table as text, one '\n'-terminated line per row, into a growing
 * buffer (caller frees). */
struct text {
  char *s;
  size_t len, cap;
  bool failed;
};

static void text_printf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_printf(struct text *t, const char *fmt, ...) {
  if (t->failed) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    t->failed = true;
    return;
  }
  size_t need = t->len + (size_t)n + 1;
  if (need > t->cap) {
    char *grown = pts_realloc(t->s, need * 2);
    if (!grown) {
      t->failed = true;
      return;
    }
    t->s = grown;
    t->cap = need * 2;
  }
  va_start(ap, fmt);
  vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

static void text_rule(struct text *t, const size_t *widths) {
  for (int c = 0; c < 3; c++) {
    text_printf(t, "+");
    for (size_t i = 0; i < widths[c] + 2; i++) text_printf(t, "-");
  }
  text_printf(t, "+\n");
}

/* Logs the text in pieces of whole lines, each piece one log record that
 * starts on a fresh line, as tritonserver prints its table (the record
 * prefix alone on the first line, the table rows unprefixed below). */
static void log_lines(const char *s) {
  enum { PIECE = 3000 }; /* below the logger's line buffer */
  while (*s) {
    size_t n = 0;
    const char *p = s;
    while (*p) {
      const char *nl = strchr(p, '\n');
      size_t line = nl ? (size_t)(nl - p) + 1 : strlen(p);
      if (n > 0 && n + line > PIECE) break;
      n += line;
      p += line;
    }
    size_t shown = n > 0 && s[n - 1] == '\n' ? n - 1 : n; /* the logger ends the line */
    PTS_LOG_INFO("\n%.*s", (int)shown, s);
    s += n;
  }
}

/* tritonserver's start-up table: every model version and its state, column
 * widths fitted to the content. Models never loaded (explicit mode) are not
 * rows, as in tritonserver's. */
static void print_model_table(struct pts_server *s) {
  struct pts_index_entry *idx = NULL;
  size_t n_idx = 0;
  struct pts_error err;
  if (pts_repository_index(s->repo, false, &idx, &n_idx, &err) != PTS_OK) {
    PTS_LOG_ERROR("%s", err.msg);
    return;
  }
  struct table_row *rows = pts_calloc(n_idx + 1, sizeof *rows);
  if (!rows) {
    pts_server_index_free(idx, n_idx);
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < n_idx; i++) {
    const struct pts_index_entry *e = &idx[i];
    if (e->version < 0 && e->state == PTS_MODEL_UNKNOWN) continue;
    struct table_row *r = &rows[n++];
    r->name = e->name;
    if (e->version >= 0)
      snprintf(r->version, sizeof r->version, "%lld", (long long)e->version);
    else
      snprintf(r->version, sizeof r->version, "-");
    r->state = pts_model_state_name(e->state);
    r->reason = e->state == PTS_MODEL_READY ? "" : e->reason;
  }
  size_t w[3] = {strlen("Model"), strlen("Version"), strlen("Status")};
  for (size_t i = 0; i < n; i++) {
    const struct table_row *r = &rows[i];
    if (strlen(r->name) > w[0]) w[0] = strlen(r->name);
    if (strlen(r->version) > w[1]) w[1] = strlen(r->version);
    if (row_status_len(r) > w[2]) w[2] = row_status_len(r);
  }
  struct text t = {0};
  text_rule(&t, w);
  text_printf(&t, "| %-*s | %-*s | %-*s |\n", (int)w[0], "Model", (int)w[1], "Version", (int)w[2],
              "Status");
  text_rule(&t, w);
  for (size_t i = 0; i < n; i++) {
    const struct table_row *r = &rows[i];
    int pad = (int)(w[2] - row_status_len(r));
    text_printf(&t, "| %-*s | %-*s | %s%s%s%*s |\n", (int)w[0], r->name, (int)w[1], r->version,
                r->state, r->reason[0] ? ": " : "", r->reason, pad, "");
  }
  text_rule(&t, w);
  if (!t.failed && t.s) log_lines(t.s);
  pts_free(t.s);
  pts_free(rows);
  pts_server_index_free(idx, n_idx);
}

/* ----------------------------------------------------- create / destroy */

static enum pts_status copy_options(struct pts_server *s, const struct pts_server_options *o,
                                    struct pts_error *err) {
  s->opts = *o;
  s->repo_paths = pts_calloc(o->n_model_repositories, sizeof *s->repo_paths);
  s->http_address = pts_strdup(o->http_address ? o->http_address : "0.0.0.0");
  s->server_id = pts_strdup(o->server_id ? o->server_id : "ptserve");
  if (!s->repo_paths || !s->http_address || !s->server_id)
    return pts_error_set(err, PTS_NOMEM, "out of memory copying the server options");
  for (size_t i = 0; i < o->n_model_repositories; i++) {
    s->repo_paths[i] = pts_strdup(o->model_repositories[i]);
    if (!s->repo_paths[i])
      return pts_error_set(err, PTS_NOMEM, "out of memory copying the server options");
  }
  s->opts.model_repositories = (const char **)s->repo_paths;
  s->opts.http_address = s->http_address;
  s->opts.server_id = s->server_id;
  return PTS_OK;
}

static enum pts_status open_stop_pipe(struct pts_server *s, struct pts_error *err) {
  if (pipe(s->stop_pipe) != 0) {
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    return pts_error_set(err, PTS_INTERNAL, "failed to create the stop pipe: %s", strerror(errno));
  }
  for (int i = 0; i < 2; i++) {
    fcntl(s->stop_pipe[i], F_SETFD, FD_CLOEXEC);
    fcntl(s->stop_pipe[i], F_SETFL, O_NONBLOCK);
  }
  return PTS_OK;
}

/* The tracer is process-wide; a second server in one process (unit tests)
 * shares the first one's. */
static enum pts_status start_tracing(struct pts_server *s, const struct pts_server_options *o,
                                     struct pts_error *err) {
  struct pts_trace_options to = {
      .config = o->trace_config, .n_config = o->n_trace_config, .profile_dir = o->profile_dir};
  struct pts_error terr;
  enum pts_status st = pts_trace_init(&to, &terr);
  if (st == PTS_ALREADY_EXISTS) {
    PTS_LOG_VERBOSE(1, "%s: this server shares it", terr.msg);
    return PTS_OK;
  }
  if (st != PTS_OK) {
    if (err) *err = terr;
    return st;
  }
  s->owns_trace = true;
  return PTS_OK;
}

/* The response cache is process-wide too, and made before any model
 * loads (each takes it at load); a second server shares the first one's. */
static enum pts_status start_cache(struct pts_server *s, const struct pts_server_options *o,
                                   struct pts_error *err) {
  if (o->response_cache_bytes == 0 || pts_cache_process()) return PTS_OK;
  enum pts_status st = pts_cache_start(o->response_cache_bytes, err);
  if (st != PTS_OK) return st;
  s->owns_cache = true;
  PTS_LOG_INFO("Response cache: local, %zu bytes", o->response_cache_bytes);
  return PTS_OK;
}

enum pts_status pts_server_create(const struct pts_server_options *o, struct pts_server **out,
                                  struct pts_error *err) {
  *out = NULL;
  if (o->n_model_repositories == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "no model repository given: --model-repository must be specified");
  struct pts_server *s = pts_calloc(1, sizeof *s);
  if (!s) return pts_error_set(err, PTS_NOMEM, "out of memory creating the server");
  s->stop_pipe[0] = s->stop_pipe[1] = -1;
  atomic_init(&s->ready_state, false);
  atomic_init(&s->shutting_down, false);
  atomic_init(&s->stopping, false);
  atomic_init(&s->entering, 0);
  atomic_init(&s->control_stopping, false);
  /* Before any model loads: every queue is capped from its first request. */
  pts_overload_set_queue_cap(o->default_max_queue_size);
  enum pts_status st = copy_options(s, o, err);
  if (st == PTS_OK) st = open_stop_pipe(s, err);
  if (st == PTS_OK) st = start_tracing(s, o, err); /* before models: PROFILE_EXECUTIONS arms */
  if (st == PTS_OK) st = start_cache(s, o, err);
  if (st == PTS_OK) {
    s->shm = pts_shm_registry_new(o->allow_client_shm, pts_backend_cuda_shm_ops());
    if (!s->shm) st = pts_error_set(err, PTS_NOMEM, "out of memory creating the server");
  }
  if (st == PTS_OK)
    st = pts_repository_create((const char *const *)s->repo_paths, o->n_model_repositories,
                               &s->repo, err);
  if (st == PTS_OK) {
    s->ensemble.repo = s->repo;
    pts_repository_set_ensemble(s->repo, &pts_ensemble_backend, &s->ensemble);
    pts_repository_set_load_retries(s->repo, o->model_load_retry_count);
  }
  size_t failed = 0;
  if (st == PTS_OK) st = pts_control_start(s, o, &failed, err);
  if (st == PTS_OK) {
    print_model_table(s);
    if (o->exit_on_error && failed)
      st = pts_error_set(err, PTS_UNAVAILABLE, "failed to load all models");
  }
  if (st == PTS_OK) st = pts_control_start_polling(s, err);
  if (st != PTS_OK) {
    pts_server_destroy(s);
    return st;
  }
  atomic_store(&s->ready_state, true);
  *out = s;
  return PTS_OK;
}

void pts_server_stop(struct pts_server *s) {
  if (!s || s->stop_pipe[1] < 0) return;
  char c = 1;
  /* A full pipe already holds a wake-up; nothing else can go wrong here. */
  ssize_t n = write(s->stop_pipe[1], &c, 1);
  (void)n;
}

void pts_server_refuse_inference(struct pts_server *s) {
  atomic_store(&s->ready_state, false);
  atomic_store(&s->stopping, true);
}

size_t pts_server_drain(struct pts_server *s, unsigned timeout_s) {
  pts_server_refuse_inference(s);
  /* Let calls that passed the stopping check finish queueing. */
  while (atomic_load(&s->entering) > 0) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  uint64_t deadline = pts_now_ns() + (uint64_t)timeout_s * 1000000000u;
  size_t left = 0;
  struct pts_model **models = NULL;
  size_t n = 0;
  if (s->repo && pts_repository_snapshot(s->repo, NULL, false, &models, &n, NULL) == PTS_OK) {
    for (size_t i = 0; i < n; i++) {
      struct pts_scheduler *sched = pts_model_scheduler(models[i]);
      if (sched) left += pts_scheduler_wait_idle(sched, deadline);
    }
    pts_repository_snapshot_free(models, n);
  }
  return left;
}

void pts_server_destroy(struct pts_server *s) {
  if (!s) return;
  pts_control_stop(s); /* no load or unload runs past this point */
  if (s->repo) pts_server_drain(s, s->opts.exit_timeout_secs);
  pts_repository_destroy(s->repo);
  pts_shm_registry_free(s->shm); /* after the models: no request uses a region now */
  for (int i = 0; i < 2; i++)
    if (s->stop_pipe[i] >= 0) close(s->stop_pipe[i]);
  for (size_t i = 0; s->repo_paths && i < s->opts.n_model_repositories; i++)
    pts_free(s->repo_paths[i]);
  pts_free(s->repo_paths);
  pts_free(s->http_address);
  pts_free(s->server_id);
  if (s->owns_trace) pts_trace_shutdown(); /* after the models: their traces are written */
  if (s->owns_cache) pts_cache_stop();     /* after the models: none looks it up now */
  pts_free(s);
}

struct pts_shm_registry *pts_server_shm(struct pts_server *s) { return s->shm; }

/* --------------------------------------------------------------- health */

bool pts_server_is_live(struct pts_server *s) { return s != NULL; }

bool pts_server_is_shutting_down(struct pts_server *s) {
  return s && atomic_load(&s->shutting_down);
}

bool pts_server_is_ready(struct pts_server *s) {
  if (!s || !atomic_load(&s->ready_state)) return false;
  if (!s->opts.strict_readiness) return true;
  return pts_repository_all_ready(s->repo);
}

/* --------------------------------------------------------------- models */

/* Every frontend's model lookup comes through here: a name with '/' or
 * '..' is refused before it is looked up (an empty one is simply
 * unknown). */
static enum pts_status lookup_name_check(const char *name, struct pts_error *err) {
  return name[0] ? pts_name_check("model name", name, err) : PTS_OK;
}

enum pts_status pts_server_model_get(struct pts_server *s, const char *name, int64_t version,
                                     bool any_state, struct pts_model **out,
                                     struct pts_error *err) {
  *out = NULL;
  const char *n = name ? name : "";
  if (lookup_name_check(n, err) != PTS_OK) return PTS_INVALID_ARG;
  return pts_repository_get(s->repo, n, version, any_state, out, err);
}

enum pts_status pts_server_model_ready(struct pts_server *s, const char *name, int64_t version,
                                       bool *ready, struct pts_error *err) {
  *ready = false;
  const char *n = name ? name : "";
  if (lookup_name_check(n, err) != PTS_OK) return PTS_INVALID_ARG;
  return pts_repository_ready(s->repo, n, version, ready, err);
}

enum pts_status pts_server_model_versions(struct pts_server *s, const char *name,
                                          int64_t **versions, size_t *n, struct pts_error *err) {
  return pts_repository_ready_versions(s->repo, name ? name : "", versions, n, err);
}

enum pts_status pts_server_index(struct pts_server *s, bool ready_only,
                                 struct pts_index_entry **entries, size_t *n,
                                 struct pts_error *err) {
  return pts_repository_index(s->repo, ready_only, entries, n, err);
}

void pts_server_index_free(struct pts_index_entry *entries, size_t n) {
  for (size_t i = 0; entries && i < n; i++) {
    pts_free(entries[i].name);
    pts_free(entries[i].reason);
  }
  pts_free(entries);
}

/* ------------------------------------------------------------ inference */

static enum pts_status infer_model(struct pts_server *s, struct pts_infer_request *req,
                                   struct pts_error *err) {
  struct pts_model *m;
  pts_trace_record(req->trace, PTS_TRACE_REQUEST_START, pts_now_ns());
  pts_trace_set_request_id(req->trace, req->id);
  enum pts_status st = pts_server_model_get(s, req->model_name, req->model_version, false, &m, err);
  if (st != PTS_OK) return st;
  pts_trace_set_model(req->trace, pts_model_name(m), pts_model_version(m));
  int64_t batch = 0;
  const Inference__ModelConfig *cfg = pts_model_config(m);
  const struct pts_backend *backend = cfg ? pts_backend_find(cfg->backend) : NULL;
  st = pts_shm_resolve(s->shm, req, backend && backend->device_inputs, err);
  pts_infer_request_note_pinned(req);
  if (st == PTS_OK) st = pts_validate_request(cfg, pts_model_name(m), req, &batch, err);
  if (st == PTS_OK) st = pts_model_enqueue(m, req, batch, err);
  if (st != PTS_OK) {
    pts_model_release(m); /* on OK the request holds it */
    /* The caller answers the error and frees the request later: its
     * regions must not look in use once that answer is out. */
    pts_infer_request_release_shm(req);
  }
  return st;
}

enum pts_status pts_server_infer_async(struct pts_server *s, struct pts_infer_request *req,
                                       struct pts_error *err) {
  if (!req || !req->model_name)
    return pts_error_set(err, PTS_INVALID_ARG, "inference request names no model");
  if (!req->done)
    return pts_error_set(err, PTS_INTERNAL,
                         "inference request for model '%s' has no completion callback",
                         req->model_name);
  atomic_fetch_add(&s->entering, 1);
  enum pts_status st;
  if (atomic_load(&s->stopping))
    st = pts_error_set(err, PTS_UNAVAILABLE,
                       "Server is shutting down: request for model '%s' not accepted",
                       req->model_name);
  else
    st = infer_model(s, req, err);
  atomic_fetch_sub(&s->entering, 1);
  return st;
}

