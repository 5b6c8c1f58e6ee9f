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

#include "core/alloc.h"
#include "core/log.h"
#include "core/name.h"
#include "scheduler/validate.h"
#include "server/server_impl.h"
#include "trace/trace.h"

void pts_server_options_default(struct pts_server_options *o) {
  memset(o, 0, sizeof *o);
  o->strict_readiness = true;
  o->exit_on_error = true;
  o->allow_http = true;
  o->http_address = "0.0.0.0";
  o->http_port = 8000;
  o->http_thread_count = 8;
  o->http_max_input_size = 64u * 1024 * 1024;
  o->exit_timeout_secs = 30;
  o->exit_drain_secs = 0; /* tritonserver's behaviour: refuse new inference at once */
  o->http_max_header_size = 64u * 1024;
  o->http_timeout_secs = 60;
  o->allow_grpc = true;
  o->grpc_address = "0.0.0.0";
  o->grpc_port = 8001;
  o->grpc_infer_thread_count = 2;
  o->grpc_keepalive_time_ms = 7200000;
  o->grpc_keepalive_timeout_ms = 20000;
  o->grpc_http2_max_pings_without_data = 2;
  o->grpc_http2_min_recv_ping_interval_ms = 300000;
  o->grpc_http2_max_ping_strikes = 2;
  o->grpc_max_connection_age_ms = -1;
  o->grpc_max_connection_age_grace_ms = -1;
  o->allow_metrics = true;
  o->allow_cpu_metrics = true;
  o->metrics_port = 8002;
  o->metrics_interval_ms = 2000;
}

const char *pts_server_version(void) { return PTS_VERSION; }

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
 * widths fitted to the content. */
static void print_model_table(const struct pts_repository *repo) {
  size_t n = 0;
  for (size_t i = 0; i < pts_repository_count(repo); i++)
    n += pts_repository_at(repo, i)->n_versions;
  struct table_row *rows = pts_calloc(n ? n : 1, sizeof *rows);
  if (!rows) return;
  size_t w[3] = {strlen("Model"), strlen("Version"), strlen("Status")}, k = 0;
  for (size_t i = 0; i < pts_repository_count(repo); i++) {
    const struct pts_repository_model *rm = pts_repository_at(repo, i);
    for (size_t v = 0; v < rm->n_versions; v++, k++) {
      const struct pts_model *m = rm->versions[v];
      struct table_row *r = &rows[k];
      r->name = rm->name;
      if (pts_model_version(m) >= 0)
        snprintf(r->version, sizeof r->version, "%lld", (long long)pts_model_version(m));
      else
        snprintf(r->version, sizeof r->version, "-");
      r->state = pts_model_state_name(pts_model_state(m));
      r->reason = pts_model_state(m) == PTS_MODEL_READY ? "" : pts_model_reason(m);
      if (strlen(r->name) > w[0]) w[0] = strlen(r->name);
      if (strlen(r->version) > w[1]) w[1] = strlen(r->version);
      if (row_status_len(r) > w[2]) w[2] = row_status_len(r);
    }
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
}

/* ----------------------------------------------------- create / destroy */

static enum pts_status copy_options(struct pts_server *s, const struct pts_server_options *o,
                                    struct pts_error *err) {
  s->opts = *o;
  s->repo_paths = pts_calloc(o->n_model_repositories, sizeof *s->repo_paths);
  s->http_address = pts_strdup(o->http_address ? o->http_address : "0.0.0.0");
  if (!s->repo_paths || !s->http_address)
    return pts_error_set(err, PTS_NOMEM, "out of memory copying the server options");
  for (size_t i = 0; i < o->n_model_repositories; i++) {
    s->repo_paths[i] = pts_strdup(o->model_repositories[i]);
    if (!s->repo_paths[i])
      return pts_error_set(err, PTS_NOMEM, "out of memory copying the server options");
  }
  s->opts.model_repositories = (const char **)s->repo_paths;
  s->opts.http_address = s->http_address;
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
  enum pts_status st = copy_options(s, o, err);
  if (st == PTS_OK) st = open_stop_pipe(s, err);
  if (st == PTS_OK) st = start_tracing(s, o, err); /* before models: PROFILE_EXECUTIONS arms */
  if (st == PTS_OK)
    st = pts_repository_create((const char *const *)s->repo_paths, o->n_model_repositories,
                               &s->repo, err);
  if (st == PTS_OK) {
    print_model_table(s->repo);
    if (o->exit_on_error && pts_repository_any_failed(s->repo))
      st = pts_error_set(err, PTS_UNAVAILABLE, "failed to load all models");
  }
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

size_t pts_server_drain(struct pts_server *s, unsigned timeout_s) {
  atomic_store(&s->ready_state, false);
  atomic_store(&s->stopping, true);
  /* Let calls that passed the stopping check finish queueing. */
  while (atomic_load(&s->entering) > 0) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  uint64_t deadline = pts_now_ns() + (uint64_t)timeout_s * 1000000000u;
  size_t left = 0;
  for (size_t i = 0; s->repo && i < pts_repository_count(s->repo); i++) {
    const struct pts_repository_model *rm = pts_repository_at(s->repo, i);
    for (size_t v = 0; v < rm->n_versions; v++) {
      struct pts_scheduler *sched = pts_model_scheduler(rm->versions[v]);
      if (sched) left += pts_scheduler_wait_idle(sched, deadline);
    }
  }
  return left;
}

void pts_server_destroy(struct pts_server *s) {
  if (!s) return;
  if (s->repo) pts_server_drain(s, s->opts.exit_timeout_secs);
  pts_repository_destroy(s->repo);
  for (int i = 0; i < 2; i++)
    if (s->stop_pipe[i] >= 0) close(s->stop_pipe[i]);
  for (size_t i = 0; s->repo_paths && i < s->opts.n_model_repositories; i++)
    pts_free(s->repo_paths[i]);
  pts_free(s->repo_paths);
  pts_free(s->http_address);
  if (s->owns_trace) pts_trace_shutdown(); /* after the models: their traces are written */
  pts_free(s);
}

/* --------------------------------------------------------------- health */

bool pts_server_is_live(struct pts_server *s) { return s != NULL; }

bool pts_server_is_shutting_down(struct pts_server *s) {
  return s && atomic_load(&s->shutting_down);
}

bool pts_server_is_ready(struct pts_server *s) {
  if (!s || !atomic_load(&s->ready_state)) return false;
  if (!s->opts.strict_readiness) return true;
  for (size_t i = 0; i < pts_repository_count(s->repo); i++) {
    const struct pts_repository_model *rm = pts_repository_at(s->repo, i);
    for (size_t v = 0; v < rm->n_versions; v++)
      if (pts_model_state(rm->versions[v]) != PTS_MODEL_READY) return false;
  }
  return true;
}

/* --------------------------------------------------------------- models */

static struct pts_model *latest(const struct pts_repository_model *rm, bool any_state) {
  for (size_t v = rm->n_versions; v-- > 0;)
    if (pts_model_state(rm->versions[v]) == PTS_MODEL_READY) return rm->versions[v];
  return any_state ? rm->versions[rm->n_versions - 1] : NULL;
}

enum pts_status pts_server_model_get(struct pts_server *s, const char *name, int64_t version,
                                     bool any_state, struct pts_model **out,
                                     struct pts_error *err) {
  *out = NULL;
  const char *n = name ? name : "";
  /* Every frontend comes through here: a name with '/' or '..' is refused
   * before it is looked up (an empty one is simply unknown). */
  if (n[0] && pts_name_check("model name", n, err) != PTS_OK) return PTS_INVALID_ARG;
  const struct pts_repository_model *rm = pts_repository_find(s->repo, n);
  if (!rm)
    return pts_error_set(err, PTS_NOT_FOUND, "Request for unknown model: '%s' is not found", n);
  struct pts_model *m = NULL;
  if (version < 0) {
    m = latest(rm, any_state);
    if (!m)
      return pts_error_set(err, PTS_NOT_FOUND,
                           "Request for unknown model: '%s' has no available versions", n);
  } else {
    for (size_t v = 0; v < rm->n_versions && !m; v++)
      if (pts_model_version(rm->versions[v]) == version) m = rm->versions[v];
    if (!m)
      return pts_error_set(err, PTS_NOT_FOUND,
                           "Request for unknown model: '%s' version %lld is not found", n,
                           (long long)version);
    if (!any_state && pts_model_state(m) != PTS_MODEL_READY)
      return pts_error_set(err, PTS_UNAVAILABLE,
                           "Request for unknown model: '%s' version %lld is not at ready state", n,
                           (long long)version);
  }
  *out = pts_model_retain(m);
  return PTS_OK;
}

enum pts_status pts_server_model_versions(struct pts_server *s, const char *name,
                                          int64_t **versions, size_t *n, struct pts_error *err) {
  *versions = NULL;
  *n = 0;
  const struct pts_repository_model *rm = pts_repository_find(s->repo, name);
  if (!rm)
    return pts_error_set(err, PTS_NOT_FOUND, "Request for unknown model: '%s' is not found",
                         name ? name : "");
  int64_t *out = pts_calloc(rm->n_versions, sizeof *out);
  if (!out) return pts_error_set(err, PTS_NOMEM, "out of memory listing versions of '%s'", name);
  size_t k = 0;
  for (size_t v = 0; v < rm->n_versions; v++)
    if (pts_model_state(rm->versions[v]) == PTS_MODEL_READY)
      out[k++] = pts_model_version(rm->versions[v]);
  *versions = out;
  *n = k;
  return PTS_OK;
}

enum pts_status pts_server_index(struct pts_server *s, bool ready_only,
                                 struct pts_index_entry **entries, size_t *n,
                                 struct pts_error *err) {
  *entries = NULL;
  *n = 0;
  size_t total = 0;
  for (size_t i = 0; i < pts_repository_count(s->repo); i++)
    total += pts_repository_at(s->repo, i)->n_versions;
  struct pts_index_entry *out = pts_calloc(total ? total : 1, sizeof *out);
  if (!out) return pts_error_set(err, PTS_NOMEM, "out of memory building the repository index");
  size_t k = 0;
  for (size_t i = 0; i < pts_repository_count(s->repo); i++) {
    const struct pts_repository_model *rm = pts_repository_at(s->repo, i);
    for (size_t v = 0; v < rm->n_versions; v++) {
      const struct pts_model *m = rm->versions[v];
      enum pts_model_state state = pts_model_state(m);
      if (ready_only && state != PTS_MODEL_READY) continue;
      struct pts_index_entry *e = &out[k];
      e->name = pts_strdup(rm->name);
      e->reason = pts_strdup(state == PTS_MODEL_READY ? "" : pts_model_reason(m));
      e->version = pts_model_version(m);
      e->state = state;
      k++;
      if (!e->name || !e->reason) {
        pts_server_index_free(out, k);
        return pts_error_set(err, PTS_NOMEM, "out of memory building the repository index");
      }
    }
  }
  *entries = out;
  *n = k;
  return PTS_OK;
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
  st = pts_validate_request(pts_model_config(m), pts_model_name(m), req, &batch, err);
  if (st == PTS_OK) {
    struct pts_scheduler *sched = pts_model_scheduler(m);
    if (!sched)
      st = pts_error_set(err, PTS_UNAVAILABLE, "model '%s' version %lld is not ready",
                         pts_model_name(m), (long long)pts_model_version(m));
    else
      st = pts_scheduler_enqueue(sched, req, batch, m, err);
  }
  if (st != PTS_OK) pts_model_release(m); /* on OK the scheduler holds it */
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
