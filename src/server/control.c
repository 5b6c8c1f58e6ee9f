/* server/control.c — model control: --model-control-mode, the start-up
 * loads, the load/unload/index requests of the model repository extension,
 * and the repository poll.
 *
 * Two work queues (core/workq.h): the load queue, with
 * --model-load-thread-count threads, runs loads and unloads, so models load
 * in parallel (one model's operations are serialised by the repository);
 * the repository queue, with one thread, refreshes the index and runs the
 * poll, so an index request or a poll never waits behind a long load.
 * Frontends only queue work and get their answer through a callback.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "core/log.h"
#include "core/name.h"
#include "ensemble/ensemble.h"
#include "server/server_impl.h"

/* ------------------------------------------------------------------ jobs */

enum job_kind { JOB_LOAD, JOB_UNLOAD, JOB_INDEX, JOB_STARTUP };

/* How the start-up loads report back to pts_control_start. */
struct startup {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  size_t left, failed;
};

struct job {
  enum job_kind kind;
  struct pts_server *s;
  char *name;
  struct pts_load_params params;
  bool ready_only;
  pts_server_control_done_fn done;
  pts_server_index_done_fn index_done;
  void *ctx;
  struct startup *startup;
  bool unload_dependents;
};

static void job_free(struct job *j) {
  pts_free(j->name);
  pts_load_params_clear(&j->params);
  pts_free(j);
}

/* ------------------------------------------------------------ ensembles */

/* Ensembles nest at most this deep (an ensemble of ensembles of ...). */
enum { MAX_ENSEMBLE_DEPTH = 16, MAX_COMPOSING = 256 };

/* Loads `name`; an ensemble's composing models first, as Triton does, so
 * that the ensemble, which is ready only when they are, can load. `chain`
 * holds the ensembles being loaded above this one (on this thread), to
 * refuse a cycle between ensembles before it could wait on itself (*cycle
 * is set then: that answer wins over every other). `ensure`: leave a model
 * with a READY version as it is (composing models, and every model at
 * start-up, where another load thread may have loaded it for an ensemble
 * already). A composing model that fails to load does not stop the
 * ensemble's own load: that fails too, and says which step and model, and
 * records it in the index; the composing model's own reason is logged and
 * in its index entry. */
static enum pts_status load_model(struct pts_server *s, const char *name,
                                  const struct pts_load_params *params, const char **chain,
                                  size_t depth, bool ensure, bool *cycle, struct pts_error *err) {
  for (size_t i = 0; i < depth; i++) {
    if (strcmp(chain[i], name) != 0) continue;
    char path[PTS_ERROR_MSG_MAX / 2];
    size_t used = 0;
    path[0] = '\0';
    for (size_t j = i; j < depth; j++) {
      int w = snprintf(path + used, sizeof path - used, "'%s' -> ", chain[j]);
      if (w < 0 || (size_t)w >= sizeof path - used) break;
      used += (size_t)w;
    }
    *cycle = true;
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to load '%s': circular dependency between ensembles: %s'%s'",
                         chain[0], path, name);
  }
  if (depth >= MAX_ENSEMBLE_DEPTH) {
    *cycle = true;
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to load '%s': ensembles are nested more than %d deep", chain[0],
                         MAX_ENSEMBLE_DEPTH);
  }
  Inference__ModelConfig *cfg = NULL;
  struct pts_error cerr;
  /* A config that can not be read is the load's own failure, below. */
  if (pts_repository_read_config(s->repo, name, params, &cfg, &cerr) == PTS_OK &&
      pts_model_config_is_ensemble(cfg)) {
    const char *deps[MAX_COMPOSING];
    size_t n = pts_ensemble_composing_models(cfg, deps, MAX_COMPOSING);
    chain[depth] = name;
    for (size_t i = 0; i < n && !*cycle; i++) {
      if (strcmp(deps[i], name) == 0) continue; /* the config check names it */
      struct pts_error derr;
      if (load_model(s, deps[i], NULL, chain, depth + 1, true, cycle, &derr) == PTS_OK) continue;
      if (*cycle)
        *err = derr;
      else
        PTS_LOG_ERROR("ensemble '%s' needs model '%s', which failed to load: %s", name, deps[i],
                      derr.msg);
    }
  }
  pts_model_config_free(cfg);
  if (*cycle) return err->code;
  if (ensure && !(params && (params->config || params->n_files)))
    return pts_repository_ensure_loaded(s->repo, name, err);
  return pts_repository_load(s->repo, name, params, err);
}

/* The READY ensembles other than `except` with a step on `name`, each
 * once. With `out`, their names go there (new strings, pts_free each; at
 * most `cap`); without, the search stops at the first (1). -1 when the
 * table could not be read. */
static long ensembles_using(struct pts_server *s, const char *name, const char *except,
                            char **out, size_t cap) {
  struct pts_model **models = NULL;
  size_t n = 0;
  long k = 0;
  if (pts_repository_snapshot(s->repo, NULL, true, &models, &n, NULL) != PTS_OK) return -1;
  for (size_t i = 0; i < n && (out ? (size_t)k < cap : k == 0); i++) {
    const char *ens = pts_model_name(models[i]);
    const Inference__ModelConfig *cfg = pts_model_config(models[i]);
    if (!pts_model_config_is_ensemble(cfg) || strcmp(ens, except) == 0) continue;
    const char *deps[MAX_COMPOSING];
    size_t nd = pts_ensemble_composing_models(cfg, deps, MAX_COMPOSING);
    bool uses = false;
    for (size_t j = 0; j < nd && !uses; j++) uses = strcmp(deps[j], name) == 0;
    if (!uses) continue;
    if (!out) {
      k = 1;
      continue;
    }
    bool listed = false; /* a snapshot holds every READY version */
    for (long j = 0; j < k && !listed; j++) listed = strcmp(out[j], ens) == 0;
    if (!listed && (out[k] = pts_strdup(ens))) k++;
  }
  pts_repository_snapshot_free(models, n);
  return k;
}

/* Unloads `name`; with `dependents` (Triton's unload_dependents), an
 * ensemble's composing models too, each unless another loaded ensemble
 * still uses it. The ensembles that run `name` go as well, as in Triton,
 * whose dependency graph takes an ensemble down with a model it needs:
 * left READY, they would only fail every request at that step. */
static enum pts_status unload_model(struct pts_server *s, const char *name, bool dependents,
                                    size_t depth, struct pts_error *err) {
  char *deps[MAX_COMPOSING]; /* copies: the names must outlive the unloaded version */
  size_t n = 0;
  struct pts_model *m = NULL;
  if (dependents && depth < MAX_ENSEMBLE_DEPTH &&
      pts_repository_get(s->repo, name, -1, true, &m, NULL) == PTS_OK &&
      pts_model_config_is_ensemble(pts_model_config(m))) {
    const char *names[MAX_COMPOSING];
    size_t k = pts_ensemble_composing_models(pts_model_config(m), names, MAX_COMPOSING);
    for (size_t i = 0; i < k; i++)
      if ((deps[n] = pts_strdup(names[i]))) n++;
  }
  pts_model_release(m);
  enum pts_status st = pts_repository_unload(s->repo, name, err);
  char *users[MAX_COMPOSING];
  long n_users = st == PTS_OK && depth < MAX_ENSEMBLE_DEPTH
                     ? ensembles_using(s, name, name, users, MAX_COMPOSING)
                     : 0;
  for (long i = 0; i < n_users; i++) {
    struct pts_error uerr;
    PTS_LOG_INFO("unloading ensemble '%s': its step model '%s' was unloaded", users[i], name);
    if (unload_model(s, users[i], false, depth + 1, &uerr) != PTS_OK)
      PTS_LOG_WARN("unloading ensemble '%s', which runs '%s': %s", users[i], name, uerr.msg);
    pts_free(users[i]);
  }
  for (size_t i = 0; i < n && st == PTS_OK; i++) {
    /* kept while another loaded ensemble uses it (or that is unknown) */
    if (strcmp(deps[i], name) == 0 || ensembles_using(s, deps[i], name, NULL, 0) != 0) continue;
    struct pts_error derr;
    if (unload_model(s, deps[i], true, depth + 1, &derr) != PTS_OK)
      PTS_LOG_WARN("unloading '%s', a composing model of '%s': %s", deps[i], name, derr.msg);
  }
  for (size_t i = 0; i < n; i++) pts_free(deps[i]);
  return st;
}

/* An unload waits for the loads under way and a load for the unload under
 * way, as tritonserver orders them: otherwise an unload of a composing
 * model could land between the loads of an ensemble's steps and the
 * ensemble's own, which then fails (or comes up over a model that is
 * gone). Loads run together (--model-load-thread-count); an unload runs
 * alone, and waiting writers go first, so a stream of loads can not hold
 * one off for ever. Process-wide: one server's jobs, or a test's servers
 * one after another. */
static pthread_rwlock_t order = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

static void run_job(void *arg, bool cancelled) {
  struct job *j = arg;
  struct pts_error err;
  pts_error_clear(&err);
  if (cancelled) {
    pts_error_set(&err, PTS_UNAVAILABLE,
                  "the server is shutting down: the %s of '%s' was not started",
                  j->kind == JOB_UNLOAD ? "unload" : j->kind == JOB_INDEX ? "index" : "load",
                  j->name ? j->name : "the repository");
  } else if (j->kind == JOB_UNLOAD) {
    pthread_rwlock_wrlock(&order);
    unload_model(j->s, j->name, j->unload_dependents, 0, &err);
    pthread_rwlock_unlock(&order);
  } else if (j->kind == JOB_LOAD || j->kind == JOB_STARTUP) {
    const char *chain[MAX_ENSEMBLE_DEPTH];
    bool cycle = false;
    pthread_rwlock_rdlock(&order);
    load_model(j->s, j->name, j->params.config || j->params.n_files ? &j->params : NULL, chain,
               0, j->kind == JOB_STARTUP, &cycle, &err);
    pthread_rwlock_unlock(&order);
  }
  switch (j->kind) {
    case JOB_STARTUP:
      if (err.code != PTS_OK) PTS_LOG_ERROR("%s", err.msg);
      pthread_mutex_lock(&j->startup->mu);
      j->startup->failed += err.code != PTS_OK;
      j->startup->left--;
      pthread_cond_broadcast(&j->startup->cv);
      pthread_mutex_unlock(&j->startup->mu);
      break;
    case JOB_INDEX: {
      struct pts_index_entry *entries = NULL;
      size_t n = 0;
      if (err.code == PTS_OK && pts_repository_rescan(j->s->repo, &err) == PTS_OK)
        pts_repository_index(j->s->repo, j->ready_only, &entries, &n, &err);
      j->index_done(entries, n, &err, j->ctx);
      break;
    }
    default:
      if (j->done)
        j->done(&err, j->ctx);
      else if (err.code != PTS_OK)
        PTS_LOG_ERROR("repository poll: %s", err.msg);
      break;
  }
  job_free(j);
}

static struct job *job_new(struct pts_server *s, enum job_kind kind, const char *name,
                           struct pts_error *err) {
  struct job *j = pts_calloc(1, sizeof *j);
  if (j && name && !(j->name = pts_strdup(name))) {
    pts_free(j);
    j = NULL;
  }
  if (!j) {
    pts_error_set(err, PTS_NOMEM, "out of memory queueing a repository request");
    return NULL;
  }
  j->kind = kind;
  j->s = s;
  return j;
}

/* Queues j on q; on error j is freed and nothing will be called. */
static enum pts_status submit(struct pts_server *s, struct pts_workq *q, struct job *j,
                              struct pts_error *err) {
  if (atomic_load(&s->control_stopping) || !q) {
    job_free(j);
    return pts_error_set(err, PTS_UNAVAILABLE, "the server is shutting down");
  }
  enum pts_status st = pts_workq_submit(q, run_job, j, err);
  if (st != PTS_OK) job_free(j);
  return st;
}

/* ---------------------------------------------------------------- start */

static enum pts_status startup_names(struct pts_server *s, const struct pts_server_options *o,
                                     char ***names, size_t *n, struct pts_error *err) {
  bool all = o->model_control_mode != PTS_MODEL_CONTROL_EXPLICIT;
  for (size_t i = 0; i < o->n_load_models; i++) all = all || strcmp(o->load_models[i], "*") == 0;
  if (all) return pts_repository_names(s->repo, names, n, err);
  *names = pts_calloc(o->n_load_models + 1, sizeof **names);
  *n = 0;
  if (!*names) return pts_error_set(err, PTS_NOMEM, "out of memory listing the start-up models");
  for (size_t i = 0; i < o->n_load_models; i++) {
    bool dup = false;
    for (size_t k = 0; k < *n; k++) dup = dup || strcmp((*names)[k], o->load_models[i]) == 0;
    if (dup) continue;
    if (!((*names)[*n] = pts_strdup(o->load_models[i])))
      return pts_error_set(err, PTS_NOMEM, "out of memory listing the start-up models");
    (*n)++;
  }
  return PTS_OK;
}

enum pts_status pts_control_start(struct pts_server *s, const struct pts_server_options *o,
                                  size_t *failed, struct pts_error *err) {
  *failed = 0;
  size_t threads = o->model_load_thread_count > 0 ? (size_t)o->model_load_thread_count : 1;
  enum pts_status st = pts_workq_create("model load", threads, 0, NULL, NULL, &s->load_q, err);
  if (st != PTS_OK) return st;
  char **names = NULL;
  size_t n = 0;
  st = startup_names(s, o, &names, &n, err);
  struct startup su = {.left = 0};
  pthread_mutex_init(&su.mu, NULL);
  pthread_cond_init(&su.cv, NULL);
  for (size_t i = 0; st == PTS_OK && i < n; i++) {
    if (pts_name_check("model name", names[i], err) != PTS_OK) {
      PTS_LOG_ERROR("--load-model: %s", err->msg);
      su.failed++;
      continue;
    }
    struct job *j = job_new(s, JOB_STARTUP, names[i], err);
    if (!j) {
      st = err->code;
      break;
    }
    j->startup = &su;
    pthread_mutex_lock(&su.mu);
    su.left++;
    pthread_mutex_unlock(&su.mu);
    st = pts_workq_submit(s->load_q, run_job, j, err);
    if (st != PTS_OK) {
      job_free(j);
      pthread_mutex_lock(&su.mu);
      su.left--;
      pthread_mutex_unlock(&su.mu);
    }
  }
  /* Wait for what was queued, even after an error: the jobs point at su. */
  pthread_mutex_lock(&su.mu);
  while (su.left > 0) pthread_cond_wait(&su.cv, &su.mu);
  pthread_mutex_unlock(&su.mu);
  pthread_mutex_destroy(&su.mu);
  pthread_cond_destroy(&su.cv);
  for (size_t i = 0; names && i < n; i++) pts_free(names[i]);
  pts_free(names);
  *failed = su.failed;
  return st;
}

/* The repository thread's tick in poll mode: queue a load for every new or
 * changed model and an unload for every vanished one. */
static void poll_tick(void *ctx) {
  struct pts_server *s = ctx;
  struct pts_repository_action *acts = NULL;
  size_t n = 0;
  struct pts_error err;
  if (pts_repository_poll(s->repo, &acts, &n, &err) != PTS_OK) {
    PTS_LOG_ERROR("repository poll: %s", err.msg);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    bool load = acts[i].kind == PTS_REPOSITORY_LOAD;
    PTS_LOG_VERBOSE(1, "repository poll: %s '%s'", load ? "loading" : "unloading", acts[i].name);
    struct job *j = job_new(s, load ? JOB_LOAD : JOB_UNLOAD, acts[i].name, &err);
    if (!j || submit(s, s->load_q, j, &err) != PTS_OK)
      PTS_LOG_WARN("repository poll: '%s' not queued: %s", acts[i].name, err.msg);
  }
  pts_repository_actions_free(acts, n);
}

enum pts_status pts_control_start_polling(struct pts_server *s, struct pts_error *err) {
  bool poll = s->opts.model_control_mode == PTS_MODEL_CONTROL_POLL;
  unsigned secs = s->opts.repository_poll_secs;
  if (poll && secs == 0)
    PTS_LOG_INFO("--repository-poll-secs=0: the repositories are not polled");
  unsigned tick_ms = poll && secs ? (secs > 4000000u ? 4000000000u : secs * 1000u) : 0;
  return pts_workq_create("repository", 1, tick_ms, tick_ms ? poll_tick : NULL, s, &s->repo_q,
                          err);
}

void pts_control_stop(struct pts_server *s) {
  atomic_store(&s->control_stopping, true);
  /* The repository thread first: a poll may still queue loads. */
  pts_workq_destroy(s->repo_q);
  s->repo_q = NULL;
  pts_workq_destroy(s->load_q);
  s->load_q = NULL;
}

/* ------------------------------------------------------------- requests */

/* Triton refuses load and unload unless the mode is explicit, with this
 * text (and UNAVAILABLE) for both NONE and POLL. */
static enum pts_status check_explicit(struct pts_server *s, struct pts_error *err) {
  if (s->opts.model_control_mode == PTS_MODEL_CONTROL_EXPLICIT) return PTS_OK;
  return pts_error_set(err, PTS_UNAVAILABLE,
                       "explicit model load / unload is not allowed if polling is enabled (the "
                       "model control mode is %s; start ptserve with "
                       "--model-control-mode=explicit)",
                       s->opts.model_control_mode == PTS_MODEL_CONTROL_POLL ? "POLL" : "NONE");
}

enum pts_status pts_server_model_load_async(struct pts_server *s, const char *name,
                                            struct pts_load_params *params,
                                            pts_server_control_done_fn done, void *ctx,
                                            struct pts_error *err) {
  const char *n = name ? name : "";
  enum pts_status st = check_explicit(s, err);
  if (st == PTS_OK) st = pts_name_check("model name", n, err);
  if (st == PTS_OK && params && params->n_files && !params->config)
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "failed to load '%s': file overrides ('file:' parameters) need the "
                       "'config' parameter too",
                       n);
  struct job *j = st == PTS_OK ? job_new(s, JOB_LOAD, n, err) : NULL;
  if (!j) {
    pts_load_params_clear(params);
    return err->code;
  }
  if (params) {
    j->params = *params;
    memset(params, 0, sizeof *params);
  }
  j->done = done;
  j->ctx = ctx;
  st = submit(s, s->load_q, j, err);
  return st;
}

enum pts_status pts_server_model_unload_async(struct pts_server *s, const char *name,
                                              bool unload_dependents,
                                              pts_server_control_done_fn done, void *ctx,
                                              struct pts_error *err) {
  const char *n = name ? name : "";
  enum pts_status st = check_explicit(s, err);
  if (st == PTS_OK) st = pts_name_check("model name", n, err);
  if (st != PTS_OK) return st;
  struct job *j = job_new(s, JOB_UNLOAD, n, err);
  if (!j) return err->code;
  j->unload_dependents = unload_dependents;
  j->done = done;
  j->ctx = ctx;
  return submit(s, s->load_q, j, err);
}

enum pts_status pts_server_index_async(struct pts_server *s, bool ready_only,
                                       pts_server_index_done_fn done, void *ctx,
                                       struct pts_error *err) {
  struct job *j = job_new(s, JOB_INDEX, NULL, err);
  if (!j) return err->code;
  j->ready_only = ready_only;
  j->index_done = done;
  j->ctx = ctx;
  return submit(s, s->repo_q, j, err);
}
