/* trace/profile.c — see profile.h.
 *
 * `P.mu` guards the armed sessions (one per model at most); each session
 * has its own mutex for the events its executions add, since executions of
 * different instances may finish at the same time.
 */
#include "trace/profile.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "trace/tbuf.h"
#include "trace/trace_impl.h"

/* One table row: calls of an operator with one input signature. */
struct row {
  char *name, *shapes, *dtypes;
  uint64_t calls, cpu_ns, device_ns;
  bool device_seen;
};

/* One event kept for the Chrome trace. */
struct event {
  char *name, *shapes, *dtypes;
  uint64_t start_ns, dur_ns;
  int64_t exec;
  bool on_device;
};

struct exec_info {
  int64_t version, batch_size;
  char *instance;
};

struct profile_session {
  pthread_mutex_t mu;
  char *model, *dir;
  uint64_t seq;
  int64_t wanted, taken, done;
  bool closed; /* no more tickets: written once done == taken */
  char *note;
  struct row *rows;
  size_t n_rows, cap_rows;
  struct event *events;
  size_t n_events, cap_events;
  struct exec_info *execs; /* wanted entries */
  bool oom;                /* some events could not be kept */
};

struct pts_profile_ticket {
  struct profile_session *s;
  int64_t exec;
};

struct armed {
  struct profile_session *s;
  struct armed *next;
};

static struct {
  pthread_mutex_t mu;
  struct armed *armed;
  char *dir; /* owned; NULL = working directory */
  uint64_t next_seq;
} P = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_seq = 1};

static atomic_int n_armed;

/* ------------------------------------------------------------ sessions */

static void session_write(struct profile_session *s); /* the files: below */

static void session_free(struct profile_session *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_rows; i++) {
    pts_free(s->rows[i].name);
    pts_free(s->rows[i].shapes);
    pts_free(s->rows[i].dtypes);
  }
  for (size_t i = 0; i < s->n_events; i++) {
    pts_free(s->events[i].name);
    pts_free(s->events[i].shapes);
    pts_free(s->events[i].dtypes);
  }
  for (int64_t i = 0; s->execs && i < s->wanted; i++) pts_free(s->execs[i].instance);
  pts_free(s->execs);
  pts_free(s->rows);
  pts_free(s->events);
  pts_free(s->note);
  pts_free(s->model);
  pts_free(s->dir);
  pthread_mutex_destroy(&s->mu);
  pts_free(s);
}

/* The writer thread (writer.c): a finished session's files, then the
 * session. */
static void write_session_job(void *arg) {
  session_write(arg);
  session_free(arg);
}

static struct profile_session *session_new(const char *model, int64_t n) {
  struct profile_session *s = pts_calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_init(&s->mu, NULL);
  s->model = pts_strdup(model);
  s->dir = pts_strdup(P.dir ? P.dir : ".");
  s->execs = pts_calloc((size_t)n, sizeof *s->execs);
  if (!s->model || !s->dir || !s->execs) {
    session_free(s);
    return NULL;
  }
  s->wanted = n;
  s->seq = P.next_seq++;
  return s;
}

/* Closes an armed session (P.mu held): it is written when its running
 * executions are done, or now, or dropped when it recorded nothing. */
static void close_session(struct profile_session *s) {
  pthread_mutex_lock(&s->mu);
  s->closed = true;
  bool ready = s->done == s->taken;
  bool empty = s->taken == 0;
  pthread_mutex_unlock(&s->mu);
  if (!ready) return;
  if (empty)
    session_free(s);
  else
    trace_writer_submit(write_session_job, s);
}

static struct armed **find_armed(const char *model) {
  struct armed **at = &P.armed;
  while (*at && strcmp((*at)->s->model, model) != 0) at = &(*at)->next;
  return at;
}

static void unlink_armed(struct armed **at) {
  struct armed *a = *at;
  *at = a->next;
  pts_free(a);
  atomic_fetch_sub(&n_armed, 1);
}

enum pts_status pts_profile_arm(const char *model, int64_t n, struct pts_error *err) {
  if (n < 0)
    return pts_error_set(
        err, PTS_INVALID_ARG,
        "model '%s': the number of executions to profile must be >= 0, got %" PRId64, model, n);
  pthread_mutex_lock(&P.mu);
  struct armed **at = find_armed(model);
  if (*at) {
    struct profile_session *old = (*at)->s;
    unlink_armed(at);
    close_session(old);
  }
  enum pts_status st = PTS_OK;
  if (n > 0) {
    struct armed *a = pts_calloc(1, sizeof *a);
    if (a) a->s = session_new(model, n);
    if (!a || !a->s) {
      pts_free(a);
      st = pts_error_set(err, PTS_NOMEM, "out of memory arming the profiler for model '%s'", model);
    } else {
      a->next = P.armed;
      P.armed = a;
      atomic_fetch_add(&n_armed, 1);
      PTS_LOG_INFO("model '%s': recording the next %" PRId64
                   " executions with the operator "
                   "profiler (output in '%s')",
                   model, n, a->s->dir);
    }
  }
  pthread_mutex_unlock(&P.mu);
  return st;
}

int64_t pts_profile_pending(const char *model) {
  pthread_mutex_lock(&P.mu);
  struct armed *a = *find_armed(model);
  int64_t left = 0;
  if (a) {
    pthread_mutex_lock(&a->s->mu);
    left = a->s->wanted - a->s->taken;
    pthread_mutex_unlock(&a->s->mu);
  }
  pthread_mutex_unlock(&P.mu);
  return left;
}

struct pts_profile_ticket *pts_profile_take(const char *model, int64_t version,
                                            const char *instance, int64_t batch_size) {
  if (atomic_load_explicit(&n_armed, memory_order_relaxed) == 0) return NULL;
  struct pts_profile_ticket *t = pts_calloc(1, sizeof *t);
  if (!t) return NULL; /* this execution goes unrecorded; a later one is taken */
  pthread_mutex_lock(&P.mu);
  struct armed **at = find_armed(model);
  if (!*at) {
    pthread_mutex_unlock(&P.mu);
    pts_free(t);
    return NULL;
  }
  struct profile_session *s = (*at)->s;
  pthread_mutex_lock(&s->mu);
  t->s = s;
  t->exec = s->taken++;
  s->execs[t->exec].version = version;
  s->execs[t->exec].batch_size = batch_size;
  s->execs[t->exec].instance = instance ? pts_strdup(instance) : NULL;
  bool last = s->taken == s->wanted;
  if (last) s->closed = true;
  pthread_mutex_unlock(&s->mu);
  if (last) unlink_armed(at); /* the session lives on until its tickets are done */
  pthread_mutex_unlock(&P.mu);
  return t;
}

static bool same(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

static char *dup_or_empty(const char *s) { return pts_strdup(s ? s : ""); }

static bool add_row(struct profile_session *s, const struct pts_profile_op *op) {
  for (size_t i = 0; i < s->n_rows; i++) {
    struct row *r = &s->rows[i];
    if (!same(r->name, op->name) || !same(r->shapes, op->shapes) || !same(r->dtypes, op->dtypes))
      continue;
    r->calls++;
    r->cpu_ns += op->cpu_ns;
    r->device_ns += op->device_ns;
    r->device_seen |= op->device_ns > 0;
    return true;
  }
  if (s->n_rows == s->cap_rows) {
    size_t cap = s->cap_rows ? s->cap_rows * 2 : 32;
    struct row *grown = pts_realloc(s->rows, cap * sizeof *grown);
    if (!grown) return false;
    s->rows = grown;
    s->cap_rows = cap;
  }
  struct row r = {.name = dup_or_empty(op->name),
                  .shapes = dup_or_empty(op->shapes),
                  .dtypes = dup_or_empty(op->dtypes),
                  .calls = 1,
                  .cpu_ns = op->cpu_ns,
                  .device_ns = op->device_ns,
                  .device_seen = op->device_ns > 0};
  if (!r.name || !r.shapes || !r.dtypes) {
    pts_free(r.name);
    pts_free(r.shapes);
    pts_free(r.dtypes);
    return false;
  }
  s->rows[s->n_rows++] = r;
  return true;
}

static bool add_event(struct profile_session *s, const struct pts_profile_op *op, int64_t exec) {
  if (s->n_events == s->cap_events) {
    size_t cap = s->cap_events ? s->cap_events * 2 : 256;
    struct event *grown = pts_realloc(s->events, cap * sizeof *grown);
    if (!grown) return false;
    s->events = grown;
    s->cap_events = cap;
  }
  struct event e = {.name = dup_or_empty(op->name),
                    .shapes = dup_or_empty(op->shapes),
                    .dtypes = dup_or_empty(op->dtypes),
                    .start_ns = op->start_ns,
                    .dur_ns = op->cpu_ns,
                    .exec = exec,
                    .on_device = op->on_device};
  if (!e.name || !e.shapes || !e.dtypes) {
    pts_free(e.name);
    pts_free(e.shapes);
    pts_free(e.dtypes);
    return false;
  }
  s->events[s->n_events++] = e;
  return true;
}

void pts_profile_add(struct pts_profile_ticket *t, const struct pts_profile_op *ops, size_t n) {
  if (!t) return;
  struct profile_session *s = t->s;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < n; i++) {
    bool ok = add_event(s, &ops[i], t->exec);
    if (ok && !ops[i].on_device) ok = add_row(s, &ops[i]);
    if (!ok) s->oom = true;
  }
  pthread_mutex_unlock(&s->mu);
}

void pts_profile_note(struct pts_profile_ticket *t, const char *note) {
  if (!t || !note) return;
  pthread_mutex_lock(&t->s->mu);
  if (!t->s->note) t->s->note = pts_strdup(note);
  pthread_mutex_unlock(&t->s->mu);
}

void pts_profile_done(struct pts_profile_ticket *t) {
  if (!t) return;
  struct profile_session *s = t->s;
  pts_free(t);
  pthread_mutex_lock(&s->mu);
  s->done++;
  bool ready = s->closed && s->done == s->taken;
  pthread_mutex_unlock(&s->mu);
  if (ready) trace_writer_submit(write_session_job, s);
}

/* ------------------------------------------------------------ init */

enum pts_status profile_init(const char *dir, struct pts_error *err) {
  pthread_mutex_lock(&P.mu);
  pts_free(P.dir);
  P.dir = NULL;
  if (dir && *dir) {
    P.dir = pts_strdup(dir);
    if (!P.dir) {
      pthread_mutex_unlock(&P.mu);
      return pts_error_set(err, PTS_NOMEM, "out of memory starting the profiler");
    }
  }
  pthread_mutex_unlock(&P.mu);
  return PTS_OK;
}

void profile_shutdown(void) {
  pthread_mutex_lock(&P.mu);
  while (P.armed) {
    struct profile_session *s = P.armed->s;
    unlink_armed(&P.armed);
    close_session(s);
  }
  pts_free(P.dir);
  P.dir = NULL;
  pthread_mutex_unlock(&P.mu);
}

/* ------------------------------------------------------------ reports */

static int by_cpu_desc(const void *a, const void *b) {
  const struct row *x = a, *y = b;
  if (x->cpu_ns != y->cpu_ns) return x->cpu_ns < y->cpu_ns ? 1 : -1;
  return strcmp(x->name, y->name);
}

static void us(struct tbuf *b, uint64_t ns) {
  tbuf_printf(b, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

static void avg_us(struct tbuf *b, uint64_t ns, uint64_t calls) {
  us(b, calls ? (ns + calls / 2) / calls : 0);
}

static void header_lines(struct tbuf *b, const struct profile_session *s) {
  int64_t recorded = s->taken;
  tbuf_printf(b, "- executions recorded: %" PRId64 " (asked for %" PRId64 ")\n", recorded,
              s->wanted);
  tbuf_cstr(b, "- executions (version / instance / batch size):");
  for (int64_t i = 0; i < recorded; i++)
    tbuf_printf(b, "%s %" PRId64 "/%s/%" PRId64, i ? "," : "", s->execs[i].version,
                s->execs[i].instance ? s->execs[i].instance : "?", s->execs[i].batch_size);
  tbuf_cstr(b, "\n");
  tbuf_printf(b, "- profiler: %s\n", s->note ? s->note : "the backend recorded no operators");
  tbuf_cstr(b,
            "- CPU time: host time inside the operator, children included; "
            "device time: kernel time attributed to the operator (\"-\": none seen)\n");
  if (s->oom) tbuf_cstr(b, "- WARNING: out of memory; some events are missing\n");
}

static void render_md(struct tbuf *b, const struct profile_session *s) {
  tbuf_printf(b, "# Operator profile of model '%s' (session %" PRIu64 ")\n\n", s->model, s->seq);
  header_lines(b, s);
  tbuf_cstr(b,
            "\n| operator | input shapes | input dtypes | calls | CPU total (us) | "
            "CPU avg (us) | device total (us) | device avg (us) |\n"
            "|---|---|---|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < s->n_rows; i++) {
    const struct row *r = &s->rows[i];
    tbuf_printf(b, "| %s | %s | %s | %" PRIu64 " | ", r->name, r->shapes, r->dtypes, r->calls);
    us(b, r->cpu_ns);
    tbuf_cstr(b, " | ");
    avg_us(b, r->cpu_ns, r->calls);
    tbuf_cstr(b, " | ");
    if (r->device_seen) {
      us(b, r->device_ns);
      tbuf_cstr(b, " | ");
      avg_us(b, r->device_ns, r->calls);
    } else {
      tbuf_cstr(b, "- | -");
    }
    tbuf_cstr(b, " |\n");
  }
}

static void render_csv(struct tbuf *b, const struct profile_session *s) {
  tbuf_cstr(b,
            "operator,input_shapes,input_dtypes,calls,cpu_total_us,cpu_avg_us,"
            "device_total_us,device_avg_us\n");
  for (size_t i = 0; i < s->n_rows; i++) {
    const struct row *r = &s->rows[i];
    tbuf_csv_field(b, r->name);
    tbuf_cstr(b, ",");
    tbuf_csv_field(b, r->shapes);
    tbuf_cstr(b, ",");
    tbuf_csv_field(b, r->dtypes);
    tbuf_printf(b, ",%" PRIu64 ",", r->calls);
    us(b, r->cpu_ns);
    tbuf_cstr(b, ",");
    avg_us(b, r->cpu_ns, r->calls);
    tbuf_cstr(b, ",");
    if (r->device_seen) {
      us(b, r->device_ns);
      tbuf_cstr(b, ",");
      avg_us(b, r->device_ns, r->calls);
    } else {
      tbuf_cstr(b, ",");
    }
    tbuf_cstr(b, "\n");
  }
}

/* One process (the model), per execution a host row and a device row. */
static void render_chrome(struct tbuf *b, const struct profile_session *s) {
  tbuf_cstr(b,
            "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"ptserve operator "
            "profiler\"},\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,"
            "\"tid\":0,\"args\":{\"name\":");
  struct tbuf name;
  tbuf_init(&name);
  tbuf_printf(&name, "model %s operators", s->model);
  tbuf_json_str(b, name.data ? name.data : "model");
  tbuf_free(&name);
  tbuf_cstr(b, "}}");
  for (int64_t i = 0; i < s->taken; i++) {
    tbuf_printf(b,
                ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%" PRId64
                ",\"args\":{\"name\":\"execution %" PRId64 " (batch %" PRId64 ")\"}}",
                2 * i + 1, i + 1, s->execs[i].batch_size);
    bool device = false;
    for (size_t k = 0; k < s->n_events && !device; k++)
      device = s->events[k].exec == i && s->events[k].on_device;
    if (device)
      tbuf_printf(b,
                  ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%" PRId64
                  ",\"args\":{\"name\":\"execution %" PRId64 " device\"}}",
                  2 * i + 2, i + 1);
  }
  for (size_t i = 0; i < s->n_events; i++) {
    const struct event *e = &s->events[i];
    tbuf_cstr(b, ",\n{\"name\":");
    tbuf_json_str(b, e->name);
    tbuf_printf(b, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":", e->on_device ? "device" : "cpu_op");
    us(b, e->start_ns);
    tbuf_cstr(b, ",\"dur\":");
    us(b, e->dur_ns);
    tbuf_printf(b, ",\"pid\":1,\"tid\":%" PRId64 ",\"args\":{\"input shapes\":",
                2 * e->exec + (e->on_device ? 2 : 1));
    tbuf_json_str(b, e->shapes);
    tbuf_cstr(b, ",\"input dtypes\":");
    tbuf_json_str(b, e->dtypes);
    tbuf_cstr(b, "}}");
  }
  tbuf_cstr(b, "\n]}\n");
}

static bool save(const char *dir, const char *model, uint64_t seq, const char *suffix,
                 const struct tbuf *b, char *path, size_t path_size) {
  snprintf(path, path_size, "%s/%s.profile%" PRIu64 ".%s", dir, model, seq, suffix);
  if (b->failed) {
    PTS_LOG_ERROR("out of memory rendering the operator profile '%s'", path);
    return false;
  }
  FILE *f = fopen(path, "w");
  bool ok = f && fwrite(b->data ? b->data : "", 1, b->len, f) == b->len;
  if (f && fclose(f) != 0) ok = false;
  if (!ok) PTS_LOG_ERROR("failed to write the operator profile '%s': %s", path, strerror(errno));
  return ok;
}

static void session_write(struct profile_session *s) {
  if (s->n_rows > 1) qsort(s->rows, s->n_rows, sizeof *s->rows, by_cpu_desc);
  struct tbuf md, csv, chrome;
  tbuf_init(&md);
  tbuf_init(&csv);
  tbuf_init(&chrome);
  render_md(&md, s);
  render_csv(&csv, s);
  render_chrome(&chrome, s);
  char p1[4096], p2[4096], p3[4096];
  bool ok = save(s->dir, s->model, s->seq, "trace.json", &chrome, p1, sizeof p1);
  ok = save(s->dir, s->model, s->seq, "ops.md", &md, p2, sizeof p2) && ok;
  ok = save(s->dir, s->model, s->seq, "ops.csv", &csv, p3, sizeof p3) && ok;
  if (ok)
    PTS_LOG_INFO("model '%s': operator profile of %" PRId64 " executions written: %s, %s, %s",
                 s->model, s->taken, p1, p2, p3);
  tbuf_free(&md);
  tbuf_free(&csv);
  tbuf_free(&chrome);
}
