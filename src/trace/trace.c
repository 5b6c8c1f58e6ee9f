/* trace/trace.c — settings, sampling and the per-request record (trace.h).
 *
 * One mutex guards the settings and the collections. The global settings
 * are a node like a model's; a model gets its own node (own sampling
 * counter, own count and own collection) once one of its fields is set, and
 * loses it when the last one is cleared. A model without a node samples
 * through the global node. `any_on` lets the request path skip the mutex
 * entirely while nothing is traced.
 */
#include "trace/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/log.h"
#include "tensor/bytes.h"
#include "trace/profile.h"
#include "trace/tbuf.h"
#include "trace/trace_impl.h"

/* Fields a model may set. */
enum { F_LEVEL = 1, F_RATE = 2, F_COUNT = 4, F_FREQ = 8 };

struct values {
  unsigned level;
  uint64_t rate;
  int64_t count; /* -1 = unlimited */
  uint64_t log_frequency;
};

struct node {
  char *model;  /* owned; NULL for the global node */
  unsigned set; /* model nodes: fields given for this model */
  struct values v;
  uint64_t seen;     /* requests counted toward the rate */
  int64_t remaining; /* traces still to take; -1 = unlimited */
  struct pts_trace *head, *tail;
  uint64_t n_collected;
  struct node *next;
};

static struct {
  pthread_mutex_t mu;
  bool running;
  struct values startup; /* what --trace-config said (global clear returns here) */
  struct node global;
  struct node *models;
  char *file; /* owned; "" = none */
  uint64_t file_index;
} T = {.mu = PTHREAD_MUTEX_INITIALIZER};

static atomic_bool any_on;
static atomic_uint_fast64_t next_id = 1;

static const struct values DEFAULTS = {.level = 0, .rate = 1000, .count = -1, .log_frequency = 0};

/* ------------------------------------------------------------ parsing */

static bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-' || *s == '+') return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno == ERANGE) return false;
  *out = v;
  return true;
}

static bool parse_i64(const char *s, int64_t *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end || errno == ERANGE) return false;
  *out = v;
  return true;
}

/* One level name into bits (OFF adds nothing); case-insensitive on the
 * command line, exact over the network (as Triton). */
static bool level_bit(const char *s, bool any_case, unsigned *bit) {
  int (*cmp)(const char *, const char *) = any_case ? strcasecmp : strcmp;
  if (cmp(s, "OFF") == 0) return *bit = 0, true;
  if (cmp(s, "TIMESTAMPS") == 0) return *bit = PTS_TRACE_TIMESTAMPS, true;
  if (cmp(s, "TENSORS") == 0) return *bit = PTS_TRACE_TENSORS, true;
  return false;
}

static bool key_is(const char *kv, size_t klen, const char *lit) {
  return klen == strlen(lit) && strncmp(kv, lit, klen) == 0;
}

/* --trace-config: one "[triton,]key=value" into v / file. */
static enum pts_status apply_config(const char *spec, struct values *v, const char **file,
                                    struct pts_error *err) {
  const char *kv = spec;
  const char *comma = strchr(spec, ',');
  const char *eq = strchr(spec, '=');
  if (comma && (!eq || comma < eq)) {
    size_t n = (size_t)(comma - spec);
    if (n == 6 && strncmp(spec, "triton", 6) == 0) {
      kv = comma + 1;
    } else if (n == 13 && strncmp(spec, "opentelemetry", 13) == 0) {
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--trace-config '%s': ptserve supports only the 'triton' trace mode",
                           spec);
    } else {
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--trace-config '%s': unknown trace mode '%.*s' (expected 'triton')",
                           spec, (int)n, spec);
    }
    eq = strchr(kv, '=');
  }
  if (!eq || eq == kv)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "--trace-config '%s': expected [triton,]<setting>=<value>", spec);
  size_t klen = (size_t)(eq - kv);
  const char *val = eq + 1;
  if (key_is(kv, klen, "level")) {
    unsigned bit;
    if (!level_bit(val, true, &bit))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--trace-config '%s': level must be OFF, TIMESTAMPS or TENSORS", spec);
    v->level = bit ? (v->level | bit) : 0;
  } else if (key_is(kv, klen, "rate")) {
    if (!parse_u64(val, &v->rate) || v->rate == 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--trace-config '%s': rate must be a positive integer", spec);
  } else if (key_is(kv, klen, "count")) {
    if (!parse_i64(val, &v->count) || v->count < -1)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--trace-config '%s': count must be -1 (unlimited) or a whole number",
                           spec);
  } else if (key_is(kv, klen, "log-frequency") || key_is(kv, klen, "log_frequency")) {
    if (!parse_u64(val, &v->log_frequency))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--trace-config '%s': log-frequency must be a whole number", spec);
  } else if (key_is(kv, klen, "file")) {
    *file = val;
  } else if (key_is(kv, klen, "mode")) {
    if (strcmp(val, "triton") != 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--trace-config '%s': ptserve supports only the 'triton' trace mode",
                           spec);
  } else {
    return pts_error_set(err, PTS_INVALID_ARG,
                         "--trace-config '%s': unknown setting '%.*s' (expected level, rate, "
                         "count, mode, file or log-frequency)",
                         spec, (int)klen, kv);
  }
  return PTS_OK;
}

static enum pts_status parse_config(const char *const *config, size_t n, struct values *v,
                                    const char **file, struct pts_error *err) {
  *v = DEFAULTS;
  *file = "";
  for (size_t i = 0; i < n; i++) {
    enum pts_status st = apply_config(config[i], v, file, err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

enum pts_status pts_trace_check_config(const char *const *config, size_t n, struct pts_error *err) {
  struct values v;
  const char *file;
  return parse_config(config, n, &v, &file, err);
}

/* ------------------------------------------------------------ nodes */

static struct values effective(const struct node *n) {
  struct values v = T.global.v;
  if (n == &T.global) return v;
  if (n->set & F_LEVEL) v.level = n->v.level;
  if (n->set & F_RATE) v.rate = n->v.rate;
  if (n->set & F_COUNT) v.count = n->v.count;
  if (n->set & F_FREQ) v.log_frequency = n->v.log_frequency;
  return v;
}

static struct node *find_node(const char *model) {
  if (!model) return NULL;
  for (struct node *n = T.models; n; n = n->next)
    if (strcmp(n->model, model) == 0) return n;
  return NULL;
}

/* The node whose settings `model` samples under. */
static struct node *node_for(const char *model) {
  struct node *n = find_node(model);
  return n ? n : &T.global;
}

static void recompute_any_on(void) {
  bool on = T.global.v.level != 0;
  for (struct node *n = T.models; n && !on; n = n->next) on = effective(n).level != 0;
  atomic_store(&any_on, on && T.running && T.file && T.file[0]);
}

static void collect(struct node *n, struct pts_trace *list, uint64_t count) {
  if (!list) return;
  if (n->tail)
    n->tail->next = list;
  else
    n->head = list;
  while (list->next) list = list->next;
  n->tail = list;
  n->n_collected += count;
}

/* "<file>.<index>" for the next flush of a log_frequency > 0 setting. */
static char *indexed_path(void) {
  size_t len = strlen(T.file) + 24;
  char *p = pts_malloc(len);
  if (p) snprintf(p, len, "%s.%" PRIu64, T.file, T.file_index++);
  return p;
}

/* A collection on its way to the writer thread. */
struct traces_job {
  char *path;              /* owned: the Triton file */
  struct pts_trace *list;  /* owned */
};

/* The writer thread: the files, then the records. */
static void write_traces_job(void *arg) {
  struct traces_job *j = arg;
  trace_write_files(j->path, j->list);
  trace_free_list(j->list);
  pts_free(j->path);
  pts_free(j);
}

static void flush_node(struct node *n, bool to_index) {
  if (!n->head) return;
  char *path = to_index ? indexed_path() : pts_strdup(T.file);
  struct pts_trace *list = n->head;
  n->head = n->tail = NULL;
  n->n_collected = 0;
  struct traces_job *j = path ? pts_malloc(sizeof *j) : NULL;
  if (!j) {
    PTS_LOG_ERROR("out of memory writing traces; %s", "dropping them");
    pts_free(path);
    trace_free_list(list);
    return;
  }
  j->path = path;
  j->list = list;
  trace_writer_submit(write_traces_job, j);
}

static void node_free(struct node *n) {
  trace_free_list(n->head);
  pts_free(n->model);
  pts_free(n);
}

/* A model node without overrides goes; its collected traces join the
 * global collection so that none is lost. */
static void drop_node_if_empty(struct node *n) {
  if (n->set) return;
  for (struct node **at = &T.models; *at; at = &(*at)->next) {
    if (*at != n) continue;
    *at = n->next;
    collect(&T.global, n->head, n->n_collected);
    n->head = n->tail = NULL;
    node_free(n);
    return;
  }
}

/* ------------------------------------------------------------ lifecycle */

enum pts_status pts_trace_init(const struct pts_trace_options *o, struct pts_error *err) {
  struct values v;
  const char *file;
  enum pts_status st = parse_config(o ? o->config : NULL, o ? o->n_config : 0, &v, &file, err);
  if (st != PTS_OK) return st;
  pthread_mutex_lock(&T.mu);
  if (T.running) {
    pthread_mutex_unlock(&T.mu);
    return pts_error_set(err, PTS_ALREADY_EXISTS, "the tracer is already running");
  }
  T.file = pts_strdup(file);
  if (!T.file) {
    pthread_mutex_unlock(&T.mu);
    return pts_error_set(err, PTS_NOMEM, "out of memory starting the tracer");
  }
  const char *pdir = o ? o->profile_dir : NULL;
  char *from_file = NULL;
  if ((!pdir || !*pdir) && file[0]) {
    const char *slash = strrchr(file, '/');
    from_file = slash ? pts_strdup(file) : NULL;
    if (from_file) from_file[slash == file ? 1 : slash - file] = '\0';
    pdir = slash ? from_file : NULL;
  }
  st = profile_init(pdir, err);
  pts_free(from_file);
  if (st == PTS_OK) st = trace_writer_start(err);
  if (st != PTS_OK) {
    profile_shutdown();
    pts_free(T.file);
    T.file = NULL;
    pthread_mutex_unlock(&T.mu);
    return st;
  }
  T.startup = v;
  memset(&T.global, 0, sizeof T.global);
  T.global.v = v;
  T.global.remaining = v.count;
  T.models = NULL;
  T.file_index = 0;
  T.running = true;
  recompute_any_on();
  pthread_mutex_unlock(&T.mu);
  if (v.level && !file[0])
    PTS_LOG_WARN(
        "tracing is on (--trace-config level) but no trace file is set "
        "(--trace-config triton,file=<path>): nothing will be traced");
  return PTS_OK;
}

void pts_trace_shutdown(void) {
  pthread_mutex_lock(&T.mu);
  if (!T.running) {
    pthread_mutex_unlock(&T.mu);
    return;
  }
  T.running = false;
  atomic_store(&any_on, false);
  /* log_frequency 0: everything to the trace file; else the next index. */
  struct node all = {0};
  for (struct node *n = &T.global; n; n = n == &T.global ? T.models : n->next) {
    if (effective(n).log_frequency > 0) {
      flush_node(n, true);
      continue;
    }
    collect(&all, n->head, n->n_collected);
    n->head = n->tail = NULL;
    n->n_collected = 0;
  }
  flush_node(&all, false);
  while (T.models) {
    struct node *n = T.models;
    T.models = n->next;
    node_free(n);
  }
  pthread_mutex_unlock(&T.mu);
  profile_shutdown(); /* hands unfinished profiles to the writer */
  trace_writer_stop();
  pthread_mutex_lock(&T.mu);
  pts_free(T.file);
  T.file = NULL;
  pthread_mutex_unlock(&T.mu);
}

/* ------------------------------------------------------------ settings */

/* One update parsed, not yet applied. */
struct staged {
  unsigned set, clear;
  struct values v;
  bool profile;
  int64_t profile_n;
};

static enum pts_status one_value(const struct pts_trace_update *u, struct pts_error *err) {
  if (u->n_values == 1 && u->values[0]) return PTS_OK;
  return pts_error_set(err, PTS_INVALID_ARG, "trace setting '%s' expects a single value, got %zu",
                       u->key, u->n_values);
}

static enum pts_status stage_level(const struct pts_trace_update *u, struct staged *s,
                                   struct pts_error *err) {
  if (u->n_values == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "trace setting 'trace_level' needs at least one level (OFF, TIMESTAMPS "
                         "or TENSORS)");
  unsigned level = 0;
  for (size_t i = 0; i < u->n_values; i++) {
    unsigned bit;
    if (!u->values[i] || !level_bit(u->values[i], false, &bit))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "trace setting 'trace_level' has unknown level '%.60s': expected "
                           "OFF, TIMESTAMPS or TENSORS",
                           u->values[i] ? u->values[i] : "");
    level |= bit;
  }
  s->v.level = level;
  s->set |= F_LEVEL;
  return PTS_OK;
}

static enum pts_status stage_number(const struct pts_trace_update *u, struct staged *s,
                                    struct pts_error *err) {
  enum pts_status st = one_value(u, err);
  if (st != PTS_OK) return st;
  const char *val = u->values[0];
  if (strcmp(u->key, "trace_rate") == 0) {
    if (!parse_u64(val, &s->v.rate) || s->v.rate == 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "trace setting 'trace_rate' must be a positive integer, got '%.60s'",
                           val);
    s->set |= F_RATE;
  } else if (strcmp(u->key, "trace_count") == 0) {
    if (!parse_i64(val, &s->v.count) || s->v.count < -1)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "trace setting 'trace_count' must be -1 (unlimited) or a whole "
                           "number, got '%.60s'",
                           val);
    s->set |= F_COUNT;
  } else if (strcmp(u->key, "log_frequency") == 0) {
    if (!parse_u64(val, &s->v.log_frequency))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "trace setting 'log_frequency' must be a whole number, got '%.60s'",
                           val);
    s->set |= F_FREQ;
  } else {
    uint64_t n;
    if (!parse_u64(val, &n) || n > INT64_MAX)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "trace setting 'profile_executions' must be a whole number, got "
                           "'%.60s'",
                           val);
    s->profile = true;
    s->profile_n = (int64_t)n;
  }
  return PTS_OK;
}

static unsigned field_of(const char *key) {
  if (strcmp(key, "trace_level") == 0) return F_LEVEL;
  if (strcmp(key, "trace_rate") == 0) return F_RATE;
  if (strcmp(key, "trace_count") == 0) return F_COUNT;
  if (strcmp(key, "log_frequency") == 0) return F_FREQ;
  return 0;
}

static enum pts_status stage(const char *model, const struct pts_trace_update *u, struct staged *s,
                             struct pts_error *err) {
  if (!u->key) return pts_error_set(err, PTS_INVALID_ARG, "trace setting without a name");
  if (strcmp(u->key, "trace_file") == 0) {
    if (u->clear) return PTS_OK;
    return pts_error_set(err, PTS_UNSUPPORTED,
                         "trace file location can not be updated through network protocol");
  }
  if (strcmp(u->key, "trace_mode") == 0) {
    if (u->clear) return PTS_OK;
    enum pts_status st = one_value(u, err);
    if (st == PTS_OK && strcmp(u->values[0], "triton") != 0)
      st = pts_error_set(err, PTS_INVALID_ARG,
                         "trace setting 'trace_mode' is '%.40s', but ptserve supports only "
                         "'triton'",
                         u->values[0]);
    return st;
  }
  if (strcmp(u->key, "profile_executions") == 0) {
    if (!model)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "'profile_executions' is a per-model setting: use "
                           "/v2/models/<model>/trace/setting");
    if (u->clear) {
      s->profile = true;
      s->profile_n = 0;
      return PTS_OK;
    }
    return stage_number(u, s, err);
  }
  unsigned f = field_of(u->key);
  if (!f)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "unknown trace setting '%.60s': expected trace_level, trace_rate, "
                         "trace_count, log_frequency, trace_file, trace_mode or (per model) "
                         "profile_executions",
                         u->key);
  if (u->clear) {
    s->clear |= f;
    s->set &= ~f;
    return PTS_OK;
  }
  s->clear &= ~f;
  return f == F_LEVEL ? stage_level(u, s, err) : stage_number(u, s, err);
}

/* Global fields changed: model nodes that follow the global count restart
 * from it, as the count is "traces left to take". */
static void apply_global(const struct staged *s) {
  struct values *v = &T.global.v;
  unsigned fields = s->set | s->clear;
  if (fields & F_LEVEL) v->level = (s->set & F_LEVEL) ? s->v.level : T.startup.level;
  if (fields & F_RATE) v->rate = (s->set & F_RATE) ? s->v.rate : T.startup.rate;
  if (fields & F_FREQ)
    v->log_frequency = (s->set & F_FREQ) ? s->v.log_frequency : T.startup.log_frequency;
  if (fields & F_COUNT) {
    v->count = (s->set & F_COUNT) ? s->v.count : T.startup.count;
    T.global.remaining = v->count;
    for (struct node *n = T.models; n; n = n->next)
      if (!(n->set & F_COUNT)) n->remaining = v->count;
  }
}

static enum pts_status apply_model(const char *model, const struct staged *s,
                                   struct pts_error *err) {
  struct node *n = find_node(model);
  if (!n && s->set) {
    n = pts_calloc(1, sizeof *n);
    if (n) n->model = pts_strdup(model);
    if (!n || !n->model) {
      pts_free(n);
      return pts_error_set(err, PTS_NOMEM, "out of memory updating the trace settings of '%s'",
                           model);
    }
    n->remaining = T.global.remaining;
    n->next = T.models;
    T.models = n;
  }
  if (!n) return PTS_OK;
  n->set = (n->set | s->set) & ~s->clear;
  if (s->set & F_LEVEL) n->v.level = s->v.level;
  if (s->set & F_RATE) n->v.rate = s->v.rate;
  if (s->set & F_FREQ) n->v.log_frequency = s->v.log_frequency;
  if (s->set & F_COUNT) {
    n->v.count = s->v.count;
    n->remaining = s->v.count;
  } else if (s->clear & F_COUNT) {
    n->remaining = T.global.remaining;
  }
  drop_node_if_empty(n);
  return PTS_OK;
}

enum pts_status pts_trace_update(const char *model, const struct pts_trace_update *u, size_t n,
                                 struct pts_error *err) {
  struct staged s;
  memset(&s, 0, sizeof s);
  for (size_t i = 0; i < n; i++) {
    enum pts_status st = stage(model, &u[i], &s, err);
    if (st != PTS_OK) return st;
  }
  if (s.profile) {
    enum pts_status st = pts_profile_arm(model, s.profile_n, err);
    if (st != PTS_OK) return st;
  }
  pthread_mutex_lock(&T.mu);
  enum pts_status st = PTS_OK;
  if (!T.running) {
    st = pts_error_set(err, PTS_UNAVAILABLE, "tracing is not running");
  } else if (model) {
    st = apply_model(model, &s, err);
  } else {
    apply_global(&s);
  }
  recompute_any_on();
  bool no_file = st == PTS_OK && T.running && !T.file[0] && (s.set & F_LEVEL) && s.v.level;
  pthread_mutex_unlock(&T.mu);
  if (no_file)
    PTS_LOG_WARN(
        "trace_level was set, but no trace file is configured "
        "(--trace-config triton,file=<path>): nothing will be traced");
  return st;
}

static void add_kv(struct pts_trace_settings *out, const char *key, const char *value) {
  struct pts_trace_kv *kv = &out->kv[out->n++];
  kv->key = key;
  kv->array = false;
  kv->n_values = 1;
  kv->values[0] = value;
}

void pts_trace_get(const char *model, struct pts_trace_settings *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&T.mu);
  const struct node *n = node_for(model);
  struct values v = T.running ? effective(n) : DEFAULTS;
  int64_t remaining = T.running ? n->remaining : DEFAULTS.count;
  snprintf(out->file, sizeof out->file, "%s", T.file ? T.file : "");
  pthread_mutex_unlock(&T.mu);
  snprintf(out->rate, sizeof out->rate, "%" PRIu64, v.rate);
  snprintf(out->count, sizeof out->count, "%" PRId64, remaining);
  snprintf(out->log_frequency, sizeof out->log_frequency, "%" PRIu64, v.log_frequency);
  add_kv(out, "trace_file", out->file);
  struct pts_trace_kv *lv = &out->kv[out->n++];
  lv->key = "trace_level";
  lv->array = true;
  if (v.level & PTS_TRACE_TIMESTAMPS) lv->values[lv->n_values++] = "TIMESTAMPS";
  if (v.level & PTS_TRACE_TENSORS) lv->values[lv->n_values++] = "TENSORS";
  if (lv->n_values == 0) lv->values[lv->n_values++] = "OFF";
  add_kv(out, "trace_rate", out->rate);
  add_kv(out, "trace_count", out->count);
  add_kv(out, "log_frequency", out->log_frequency);
  add_kv(out, "trace_mode", "triton");
  if (model) {
    snprintf(out->profile, sizeof out->profile, "%" PRId64, pts_profile_pending(model));
    add_kv(out, "profile_executions", out->profile);
  }
}

/* ------------------------------------------------------------ sampling */

struct pts_trace *pts_trace_sample(const char *model) {
  if (!atomic_load_explicit(&any_on, memory_order_relaxed)) return NULL;
  pthread_mutex_lock(&T.mu);
  struct node *n = node_for(model);
  struct values v = effective(n);
  bool take = T.running && v.level != 0 && n->remaining != 0 && (++n->seen % v.rate) == 0;
  if (take && n->remaining > 0) n->remaining--;
  pthread_mutex_unlock(&T.mu);
  if (!take) return NULL;
  struct pts_trace *t = pts_calloc(1, sizeof *t);
  if (t) t->sample_model = pts_strdup(model ? model : "");
  if (!t || !t->sample_model) {
    pts_free(t);
    return NULL; /* a trace is never worth failing a request for */
  }
  t->id = atomic_fetch_add(&next_id, 1);
  t->level = v.level;
  t->version = -1;
  return t;
}

void pts_trace_record(struct pts_trace *t, enum pts_trace_point point, uint64_t ns) {
  if (!t || !(t->level & PTS_TRACE_TIMESTAMPS) || t->n_stamps == TRACE_MAX_STAMPS) return;
  t->stamps[t->n_stamps].point = point;
  t->stamps[t->n_stamps].ns = ns;
  t->n_stamps++;
}

void pts_trace_set_model(struct pts_trace *t, const char *model, int64_t version) {
  if (!t) return;
  char *copy = model ? pts_strdup(model) : NULL;
  if (model && !copy) return;
  pts_free(t->model);
  t->model = copy;
  t->version = version;
}

void pts_trace_set_request_id(struct pts_trace *t, const char *id) {
  if (!t || !id || !*id) return;
  char *copy = pts_strdup(id);
  if (!copy) return;
  pts_free(t->request_id);
  t->request_id = copy;
}

bool pts_trace_wants_tensors(const struct pts_trace *t) {
  return t && (t->level & PTS_TRACE_TENSORS);
}

uint64_t pts_trace_id(const struct pts_trace *t) { return t ? t->id : 0; }

/* ------------------------------------------------------------ tensors */

static float half_to_float(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  float v;
  if (exp == 0)
    v = ldexpf((float)frac, -24);
  else if (exp == 31)
    v = frac ? NAN : INFINITY;
  else
    v = ldexpf((float)(frac | 0x400), exp - 25);
  return sign ? -v : v;
}

static float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* An integer element (little-endian, as on the wire), sign-extended for
 * the signed types. */
static void render_integer(struct tbuf *b, enum pts_dtype dt, const unsigned char *p) {
  size_t size = pts_dtype_size(dt);
  uint64_t u = 0;
  memcpy(&u, p, size);
  bool is_signed = dt == PTS_DTYPE_INT8 || dt == PTS_DTYPE_INT16 || dt == PTS_DTYPE_INT32 ||
                   dt == PTS_DTYPE_INT64;
  if (!is_signed || size == 8) {
    if (is_signed)
      tbuf_printf(b, "%" PRId64, (int64_t)u);
    else
      tbuf_printf(b, "%" PRIu64, u);
    return;
  }
  uint64_t sign = 1ull << (size * 8 - 1);
  int64_t v = (int64_t)(u ^ sign) - (int64_t)sign;
  tbuf_printf(b, "%" PRId64, v);
}

/* One element as Triton's trace shows it: numbers in C's shortest-ish
 * form, booleans as 0/1 (Triton prints them through an integer stream). */
static void render_element(struct tbuf *b, enum pts_dtype dt, const unsigned char *p) {
  switch (dt) {
    case PTS_DTYPE_BOOL:
    case PTS_DTYPE_UINT8:
    case PTS_DTYPE_UINT16:
    case PTS_DTYPE_UINT32:
    case PTS_DTYPE_UINT64:
    case PTS_DTYPE_INT8:
    case PTS_DTYPE_INT16:
    case PTS_DTYPE_INT32:
    case PTS_DTYPE_INT64:
      render_integer(b, dt, p);
      return;
    case PTS_DTYPE_FP16: {
      uint16_t h;
      memcpy(&h, p, 2);
      tbuf_printf(b, "%g", (double)half_to_float(h));
      return;
    }
    case PTS_DTYPE_BF16: {
      uint16_t h;
      memcpy(&h, p, 2);
      tbuf_printf(b, "%g", (double)bf16_to_float(h));
      return;
    }
    case PTS_DTYPE_FP32: {
      float f;
      memcpy(&f, p, 4);
      tbuf_printf(b, "%.9g", (double)f);
      return;
    }
    case PTS_DTYPE_FP64: {
      double d;
      memcpy(&d, p, 8);
      tbuf_printf(b, "%.17g", d);
      return;
    }
    default:
      return;
  }
}

/* The tensor's elements, comma-separated; BYTES elements as their text. */
static void render_data(struct tbuf *data, const struct pts_tensor *t) {
  if (!t->data || t->mem == PTS_MEM_DEVICE) return; /* the CPU can not read device memory */
  if (t->dtype == PTS_DTYPE_BYTES) {
    size_t off = 0;
    const char *e;
    uint32_t len;
    bool first = true;
    while (pts_bytes_next(t->data, t->byte_size, &off, &e, &len) == 1) {
      if (!first) tbuf_add(data, ",", 1);
      tbuf_add(data, e, len);
      first = false;
    }
    return;
  }
  size_t size = pts_dtype_size(t->dtype);
  if (size == 0) return;
  size_t n = t->byte_size / size;
  for (size_t i = 0; i < n; i++) {
    if (i) tbuf_add(data, ",", 1);
    render_element(data, t->dtype, (const unsigned char *)t->data + i * size);
  }
}

void pts_trace_tensor(struct pts_trace *t, const char *activity, const struct pts_tensor *tensor) {
  if (!t || !(t->level & PTS_TRACE_TENSORS) || !tensor) return;
  struct tbuf data, shape, json;
  tbuf_init(&data);
  tbuf_init(&shape);
  tbuf_init(&json);
  render_data(&data, tensor);
  for (int i = 0; i < tensor->shape.ndim; i++)
    tbuf_printf(&shape, "%s%" PRId64, i ? "," : "", tensor->shape.dims[i]);
  tbuf_cstr(&json, "{\"name\":");
  tbuf_json_str(&json, tensor->name ? tensor->name : "");
  tbuf_cstr(&json, ",\"data\":");
  /* A BYTES element may hold a NUL: the rendered data by its length. */
  tbuf_json_strn(&json, data.data ? data.data : "", data.len); /* len is 0 without data */
  tbuf_cstr(&json, ",\"shape\":");
  tbuf_json_str(&json, shape.data ? shape.data : "");
  tbuf_cstr(&json, ",\"dtype\":");
  tbuf_json_str(&json, pts_dtype_name(tensor->dtype));
  tbuf_cstr(&json, "}");
  struct trace_tensor *rec = NULL;
  if (!data.failed && !shape.failed && !json.failed) rec = pts_calloc(1, sizeof *rec);
  if (rec) rec->activity = pts_strdup(activity);
  if (rec && rec->activity) {
    rec->json = json.data; /* taken */
    json.data = NULL;
    if (t->tensors_tail)
      t->tensors_tail->next = rec;
    else
      t->tensors = rec;
    t->tensors_tail = rec;
  } else if (rec) {
    pts_free(rec);
  }
  tbuf_free(&data);
  tbuf_free(&shape);
  tbuf_free(&json);
}

/* ------------------------------------------------------------ ending */

void pts_trace_end(struct pts_trace *t) {
  if (!t) return;
  t->next = NULL;
  pthread_mutex_lock(&T.mu);
  if (!T.running) {
    pthread_mutex_unlock(&T.mu);
    trace_free(t);
    return;
  }
  struct node *n = node_for(t->sample_model);
  collect(n, t, 1);
  uint64_t freq = effective(n).log_frequency;
  if (freq > 0 && n->n_collected >= freq) flush_node(n, true);
  pthread_mutex_unlock(&T.mu);
}
