/* repository/model.c — one model version: see model.h. */
#include "repository/model.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_api/backend.h"
#include "config/model_config.h"
#include "config/model_config_sequence.h"
#include "core/alloc.h"
#include "core/log.h"
#include "core/name.h"
#include "repository/scan.h"

/* "<Code>: <message>" of the longest error, with room to spare. */
#define REASON_MAX (PTS_ERROR_MSG_MAX + 64)

struct pts_model {
  atomic_int refs;
  atomic_int state; /* enum pts_model_state */
  char *name;
  int64_t version;                /* -1 when no version is known */
  Inference__ModelConfig *config; /* owned; NULL when the config failed */
  const struct pts_backend *backend;
  void *backend_state;             /* non-NULL once model_load succeeded */
  /* sequence_batching: what the backend runs (config/model_config_sequence.h);
   * owned, from start to unload; NULL otherwise. */
  Inference__ModelConfig *exec_config;
  struct pts_scheduler *scheduler; /* non-NULL from start to unload */
  struct pts_override_dir *override;
  /* `mu` guards reason and failed, and is the lock of `drained`, which
   * pts_model_release signals while an unload waits (`draining`). */
  pthread_mutex_t mu;
  pthread_cond_t drained;
  atomic_bool draining;
  bool failed;
  char reason[REASON_MAX];
};

/* ------------------------------------------------------- override dirs */

struct pts_override_dir {
  atomic_int refs;
  char *path;
};

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  if (remove(path) != 0) PTS_LOG_WARN("failed to remove '%s': %s", path, strerror(errno));
  return 0;
}

static void rmtree(const char *root) { nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

const char *pts_override_dir_path(const struct pts_override_dir *d) { return d->path; }

struct pts_override_dir *pts_override_dir_retain(struct pts_override_dir *d) {
  if (d) atomic_fetch_add(&d->refs, 1);
  return d;
}

void pts_override_dir_release(struct pts_override_dir *d) {
  if (!d || atomic_fetch_sub(&d->refs, 1) != 1) return;
  if (d->path) rmtree(d->path);
  pts_free(d->path);
  pts_free(d);
}

/* Checks "<a>/<b>/<c>": relative, every component a safe name. */
static enum pts_status check_override_path(const char *model, const char *path,
                                           struct pts_error *err) {
  const char *p = path;
  if (!*p || *p == '/')
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to load '%s': file override 'file:%s' must be a relative path "
                         "'<version>/<file name>'",
                         model, path);
  while (*p) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    char comp[256];
    if (n == 0 || n >= sizeof comp)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "failed to load '%s': file override 'file:%s' has an empty or "
                           "too long path component",
                           model, path);
    memcpy(comp, p, n);
    comp[n] = '\0';
    if (!pts_name_is_safe(comp) || strcmp(comp, ".") == 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "failed to load '%s': file override 'file:%s' may not contain '%s': "
                           "the files of a load stay inside its own directory",
                           model, path, comp);
    p += n;
    if (*p == '/') p++;
    if (slash && !*p)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "failed to load '%s': file override 'file:%s' names a directory, not "
                           "a file",
                           model, path);
  }
  return PTS_OK;
}

/* mkdir -p of the directories above root/rel, each 0700. */
static enum pts_status make_parents(const char *root, const char *rel, struct pts_error *err) {
  size_t lr = strlen(root), n = strlen(rel);
  char *path = pts_malloc(lr + n + 2);
  if (!path) return pts_error_set(err, PTS_NOMEM, "out of memory writing a file override");
  snprintf(path, lr + n + 2, "%s/%s", root, rel);
  enum pts_status st = PTS_OK;
  for (char *q = path + lr + 1; *q && st == PTS_OK; q++) {
    if (*q != '/') continue;
    *q = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
      st = pts_error_set(err, PTS_INTERNAL, "failed to create the directory of file override "
                         "'%s': %s", rel, strerror(errno));
    *q = '/';
  }
  pts_free(path);
  return st;
}

static enum pts_status write_override(const char *root, const struct pts_load_file *f,
                                      struct pts_error *err) {
  enum pts_status st = make_parents(root, f->path, err);
  if (st != PTS_OK) return st;
  size_t len = strlen(root) + strlen(f->path) + 2;
  char *path = pts_malloc(len);
  if (!path) return pts_error_set(err, PTS_NOMEM, "out of memory writing a file override");
  snprintf(path, len, "%s/%s", root, f->path);
  /* O_EXCL: a path given twice (or one that is also another's directory)
   * fails here instead of overwriting. */
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  pts_free(path);
  if (fd < 0)
    return pts_error_set(err, errno == EEXIST || errno == ENOTDIR ? PTS_INVALID_ARG : PTS_INTERNAL,
                         "failed to write file override 'file:%s': %s", f->path,
                         errno == EEXIST ? "the path is given twice" : strerror(errno));
  size_t done = 0;
  while (done < f->size) {
    ssize_t w = write(fd, f->data + done, f->size - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      close(fd);
      return pts_error_set(err, PTS_INTERNAL, "failed to write file override 'file:%s': %s",
                           f->path, strerror(e));
    }
    done += (size_t)w;
  }
  if (close(fd) != 0)
    return pts_error_set(err, PTS_INTERNAL, "failed to write file override 'file:%s': %s",
                         f->path, strerror(errno));
  return PTS_OK;
}

enum pts_status pts_override_dir_create(const char *model, const struct pts_load_file *files,
                                        size_t n_files, struct pts_override_dir **out,
                                        struct pts_error *err) {
  *out = NULL;
  for (size_t i = 0; i < n_files; i++) {
    enum pts_status st = check_override_path(model, files[i].path, err);
    if (st != PTS_OK) return st;
  }
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  struct pts_override_dir *d = pts_calloc(1, sizeof *d);
  size_t len = strlen(tmp) + 32;
  if (d) d->path = pts_malloc(len);
  if (!d || !d->path) {
    pts_free(d);
    return pts_error_set(err, PTS_NOMEM, "out of memory loading '%s'", model);
  }
  atomic_init(&d->refs, 1);
  snprintf(d->path, len, "%s/ptserve-load-XXXXXX", tmp);
  if (!mkdtemp(d->path)) { /* mkdtemp makes it 0700 */
    enum pts_status st = pts_error_set(err, PTS_INTERNAL,
                                       "failed to load '%s': can not create a directory for its "
                                       "file overrides: %s",
                                       model, strerror(errno));
    pts_free(d->path);
    pts_free(d);
    return st;
  }
  for (size_t i = 0; i < n_files; i++) {
    enum pts_status st = write_override(d->path, &files[i], err);
    if (st != PTS_OK) {
      pts_error_prefix(err, "failed to load '%s'", model);
      pts_override_dir_release(d);
      return st;
    }
  }
  *out = d;
  return PTS_OK;
}

/* ------------------------------------------------------------- pts_model */

static const char *const state_names[] = {"UNKNOWN", "READY", "UNAVAILABLE", "LOADING",
                                          "UNLOADING"};

const char *pts_model_state_name(enum pts_model_state s) {
  return (unsigned)s < sizeof state_names / sizeof state_names[0] ? state_names[s] : "UNKNOWN";
}

const char *pts_model_name(const struct pts_model *m) { return m->name; }
int64_t pts_model_version(const struct pts_model *m) { return m->version; }
enum pts_model_state pts_model_state(const struct pts_model *m) {
  return (enum pts_model_state)atomic_load(&((struct pts_model *)m)->state);
}

size_t pts_model_reason(const struct pts_model *m, char *buf, size_t size) {
  struct pts_model *mm = (struct pts_model *)m;
  pthread_mutex_lock(&mm->mu);
  size_t n = strlen(mm->reason);
  if (size > 0) {
    size_t k = n < size - 1 ? n : size - 1;
    memcpy(buf, mm->reason, k);
    buf[k] = '\0';
  }
  pthread_mutex_unlock(&mm->mu);
  return n;
}

const Inference__ModelConfig *pts_model_config(const struct pts_model *m) { return m->config; }
struct pts_scheduler *pts_model_scheduler(const struct pts_model *m) { return m->scheduler; }

bool pts_model_failed(const struct pts_model *m) {
  struct pts_model *mm = (struct pts_model *)m;
  pthread_mutex_lock(&mm->mu);
  bool f = mm->failed;
  pthread_mutex_unlock(&mm->mu);
  return f;
}

bool pts_model_loaded(const struct pts_model *m) { return m->scheduler != NULL; }

void pts_model_set_state(struct pts_model *m, enum pts_model_state s) {
  atomic_store(&m->state, (int)s);
}

struct pts_model *pts_model_retain(struct pts_model *m) {
  if (m) atomic_fetch_add(&m->refs, 1);
  return m;
}

/* Frees what start made; nothing may use the scheduler any more. */
static void unload_now(struct pts_model *m) {
  if (m->scheduler) {
    pts_scheduler_destroy(m->scheduler);
    m->scheduler = NULL;
  }
  if (m->backend_state) {
    if (m->backend->model_unload) m->backend->model_unload(m->backend_state);
    m->backend_state = NULL;
  }
  pts_model_config_free(m->exec_config);
  m->exec_config = NULL;
  pts_override_dir_release(m->override);
  m->override = NULL;
}

void pts_model_release(struct pts_model *m) {
  if (!m) return;
  int left = atomic_fetch_sub(&m->refs, 1) - 1;
  if (left > 0) {
    /* An unload may be waiting for this one. */
    if (atomic_load(&m->draining)) {
      pthread_mutex_lock(&m->mu);
      pthread_cond_broadcast(&m->drained);
      pthread_mutex_unlock(&m->mu);
    }
    return;
  }
  /* The repository unloads before it drops its reference, so this only
   * frees memory; it never joins threads (it may run on an instance
   * thread). teardown is a no-op then, kept for a model that was never
   * published. */
  unload_now(m);
  if (m->config) pts_model_config_free(m->config);
  pthread_cond_destroy(&m->drained);
  pthread_mutex_destroy(&m->mu);
  pts_free(m->name);
  pts_free(m);
}

struct pts_model *pts_model_new(const char *name, int64_t version) {
  struct pts_model *m = pts_calloc(1, sizeof *m);
  if (!m) return NULL;
  m->name = pts_strdup(name);
  if (!m->name) {
    pts_free(m);
    return NULL;
  }
  atomic_init(&m->refs, 1);
  atomic_init(&m->state, PTS_MODEL_LOADING);
  atomic_init(&m->draining, false);
  m->version = version;
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->drained, NULL);
  return m;
}

void pts_model_set_config(struct pts_model *m, Inference__ModelConfig *cfg) {
  if (m->config) pts_model_config_free(m->config);
  m->config = cfg;
}

void pts_model_fail(struct pts_model *m, const struct pts_error *why) {
  pthread_mutex_lock(&m->mu);
  snprintf(m->reason, sizeof m->reason, "%s: %s", pts_status_text(why->code), why->msg);
  /* Triton capitalises the code: "Invalid argument: ...". */
  if (m->reason[0] >= 'a' && m->reason[0] <= 'z') m->reason[0] = (char)(m->reason[0] - 'a' + 'A');
  m->failed = true;
  pthread_mutex_unlock(&m->mu);
  atomic_store(&m->state, PTS_MODEL_UNAVAILABLE);
  char reason[REASON_MAX];
  pts_model_reason(m, reason, sizeof reason);
  if (m->version >= 0)
    PTS_LOG_ERROR("failed to load '%s' version %lld: %s", m->name, (long long)m->version, reason);
  else
    PTS_LOG_ERROR("failed to load '%s': %s", m->name, reason);
}

void pts_model_poll_failed(struct pts_model *m, const char *reason) {
  struct pts_error why = {.code = PTS_INVALID_ARG};
  snprintf(why.msg, sizeof why.msg, "%s", reason);
  pts_model_fail(m, &why);
  pthread_mutex_lock(&m->mu);
  snprintf(m->reason, sizeof m->reason, "%s", reason);
  m->failed = false;
  pthread_mutex_unlock(&m->mu);
}

void pts_model_absent(struct pts_model *m, const struct pts_error *why) {
  pts_model_fail(m, why);
  pthread_mutex_lock(&m->mu);
  m->failed = false;
  pthread_mutex_unlock(&m->mu);
}

void pts_model_mark_unloaded(struct pts_model *m, const char *reason) {
  pthread_mutex_lock(&m->mu);
  snprintf(m->reason, sizeof m->reason, "%s", reason);
  m->failed = false;
  pthread_mutex_unlock(&m->mu);
  atomic_store(&m->state, PTS_MODEL_UNAVAILABLE);
}

/* ------------------------------------------------------------ loading */

static void instance_kind_device(const Inference__ModelInstanceGroup *g, size_t gpu_index,
                                 Inference__ModelInstanceGroup__Kind *kind, int *device) {
  *kind = g->kind;
  if (g->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU && g->n_gpus > 0)
    *device = g->gpus[gpu_index];
  else if (g->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU ||
           g->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO)
    *device = 0; /* the backend decides what it really gets */
  else
    *device = -1;
}

struct instance_plan {
  size_t n;
  struct pts_backend_instance_desc *descs;
  char **names; /* owned: each "<name>\0<host policy>\0", both pointed at by its desc */
};

static void plan_free(struct instance_plan *p) {
  for (size_t i = 0; i < p->n; i++) pts_free(p->names[i]);
  pts_free(p->names);
  pts_free(p->descs);
  memset(p, 0, sizeof *p);
}

/* `policy`: the group's host_policy, NULL or "" for Triton's default by
 * kind ("cpu", "gpu_<id>", "model"). */
static enum pts_status plan_add(struct instance_plan *p, size_t cap, const char *group,
                                int index_in_group, Inference__ModelInstanceGroup__Kind kind,
                                int device, const char *policy,
                                const Inference__ModelRateLimiter *rate_limiter,
                                struct pts_error *err) {
  if (p->n == cap) return pts_error_set(err, PTS_INTERNAL, "instance count overflow");
  char fallback[32];
  if (!policy || !*policy) {
    if (kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU)
      snprintf(fallback, sizeof fallback, "gpu_%d", device);
    else
      snprintf(fallback, sizeof fallback, "%s",
               kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_MODEL ? "model" : "cpu");
    policy = fallback;
  }
  size_t len = strlen(group) + 24, plen = strlen(policy) + 1;
  char *name = pts_malloc(len + plen);
  if (!name) return pts_error_set(err, PTS_NOMEM, "out of memory naming instances");
  snprintf(name, len, "%s_%d", group, index_in_group);
  memcpy(name + len, policy, plen);
  p->names[p->n] = name;
  p->descs[p->n] = (struct pts_backend_instance_desc){.name = name,
                                                      .kind = kind,
                                                      .device_id = device,
                                                      .index = (int)p->n,
                                                      .host_policy = name + len,
                                                      .rate_limiter = rate_limiter};
  p->n++;
  return PTS_OK;
}

/* Triton's instance layout: for a KIND_GPU group listing gpus, `count`
 * instances on each listed GPU; otherwise `count` instances. Instances are
 * named "<group name>_<index within the group>". */
static enum pts_status plan_instances(const char *model, const Inference__ModelConfig *cfg,
                                      unsigned default_instances, struct instance_plan *p,
                                      struct pts_error *err) {
  memset(p, 0, sizeof *p);
  size_t total = 0;
  for (size_t g = 0; g < cfg->n_instance_group; g++) {
    const Inference__ModelInstanceGroup *ig = cfg->instance_group[g];
    if (ig->count < 1)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "instance group '%s' of model '%s' has count %d; it must be >= 1",
                           ig->name, model, (int)ig->count);
    size_t per =
        ig->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU && ig->n_gpus ? ig->n_gpus : 1;
    total += per * (size_t)ig->count;
  }
  /* A config without groups (an ensemble's): the backend's default count,
   * named "<model>_<k>" like the instances of one group. */
  size_t n_default = default_instances ? default_instances : 1;
  if (total == 0) total = n_default;
  p->descs = pts_calloc(total, sizeof *p->descs);
  p->names = pts_calloc(total, sizeof *p->names);
  if (!p->descs || !p->names) {
    plan_free(p);
    return pts_error_set(err, PTS_NOMEM, "out of memory planning instances of '%s'", model);
  }
  enum pts_status st = PTS_OK;
  char fallback[256];
  for (size_t g = 0; g < cfg->n_instance_group && st == PTS_OK; g++) {
    const Inference__ModelInstanceGroup *ig = cfg->instance_group[g];
    const char *gname = ig->name;
    if (!gname || !*gname) {
      snprintf(fallback, sizeof fallback, "%s_%zu", model, g);
      gname = fallback;
    }
    size_t per =
        ig->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU && ig->n_gpus ? ig->n_gpus : 1;
    int index = 0;
    for (size_t gi = 0; gi < per && st == PTS_OK; gi++) {
      for (int c = 0; c < ig->count && st == PTS_OK; c++) {
        Inference__ModelInstanceGroup__Kind kind;
        int device;
        instance_kind_device(ig, gi, &kind, &device);
        st = plan_add(p, total, gname, index++, kind, device, ig->host_policy, ig->rate_limiter,
                      err);
      }
    }
  }
  if (st == PTS_OK && cfg->n_instance_group == 0) {
    /* Config completion normally fills instance_group; stay usable if not. */
    snprintf(fallback, sizeof fallback, default_instances ? "%s" : "%s_0", model);
    for (size_t k = 0; k < n_default && st == PTS_OK; k++)
      st = plan_add(p, total, fallback, (int)k,
                    default_instances ? INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU
                                      : INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO,
                    default_instances ? -1 : 0, NULL, NULL, err);
  }
  if (st != PTS_OK) plan_free(p);
  return st;
}

/* The scheduler's release_hold: a request's hold is its reference to the
 * version (pts_model_enqueue). */
static void release_hold(void *hold) { pts_model_release(hold); }

static enum pts_status start(struct pts_model *m, const char *model_dir,
                             const struct pts_model_ensemble *ens, struct pts_error *err) {
  const Inference__ModelConfig *cfg = m->config;
  bool ensemble = pts_model_config_is_ensemble(cfg);
  if (ensemble && (!ens || !ens->backend))
    return pts_error_set(err, PTS_INVALID_ARG, "model '%s' is an ensemble, and this server can "
                         "not run ensembles", m->name);
  m->backend = ensemble ? ens->backend : pts_backend_find(cfg->backend);
  if (!m->backend) {
    char have[128];
    pts_backend_list(have, sizeof have);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "unable to find backend '%s' for model '%s'; ptserve provides %s",
                         cfg->backend ? cfg->backend : "", m->name, have);
  }
  char vname[24];
  snprintf(vname, sizeof vname, "%lld", (long long)m->version);
  const char *file = cfg->default_model_filename && *cfg->default_model_filename
                         ? cfg->default_model_filename
                         : "model.pt";
  char *version_dir = pts_scan_path_join(model_dir, vname);
  char *model_path = version_dir ? pts_scan_path_join(version_dir, file) : NULL;
  if (!model_path) {
    pts_free(version_dir);
    return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", m->name);
  }
  /* A sequence model's backend runs the execution config; what it completes
   * there (KIND_AUTO groups of an AOTInductor package) stays there, so a
   * sequence model lists its inputs and outputs in its config. */
  enum pts_status st = PTS_OK;
  if (cfg->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING)
    st = pts_model_config_sequence_exec(cfg, &m->exec_config, err);
  if (st != PTS_OK) {
    pts_free(model_path);
    pts_free(version_dir);
    return st;
  }
  struct pts_backend_model_desc desc = {.name = m->name,
                                        .version = m->version,
                                        .config = m->exec_config ? m->exec_config : cfg,
                                        .completable = m->exec_config ? m->exec_config : m->config,
                                        .model_dir = model_dir,
                                        .version_dir = version_dir,
                                        .model_path = model_path,
                                        .host = ensemble ? ens->host : NULL};
  st = m->backend->model_load(&desc, &m->backend_state, err);
  pts_free(model_path);
  pts_free(version_dir);
  if (st != PTS_OK) {
    m->backend_state = NULL;
    if (err && err->code == PTS_OK) pts_error_set(err, st, "backend '%s' failed", m->backend->name);
    return st;
  }
  /* After model_load: the backend may have completed the inputs and
   * outputs, and settled KIND_AUTO groups from what the model file runs on
   * (an AOTInductor package is compiled for one device kind). */
  if ((st = pts_model_config_check_completed(cfg, err)) ||
      (st = pts_model_config_resolve_devices(
           m->config, m->backend->gpu_count ? m->backend->gpu_count() : 0, err)) ||
      (m->exec_config &&
       (st = pts_model_config_resolve_devices(
            m->exec_config, m->backend->gpu_count ? m->backend->gpu_count() : 0, err))))
    return st;

  struct instance_plan plan;
  st = plan_instances(m->name, cfg, m->backend->default_instances, &plan, err);
  if (st != PTS_OK) return st;
  struct pts_scheduler_params sp = {.model_name = m->name,
                                    .version = m->version,
                                    .config = cfg,
                                    .exec_config = m->exec_config,
                                    .backend = m->backend,
                                    .model_state = m->backend_state,
                                    .n_instances = plan.n,
                                    .instances = plan.descs,
                                    .model_dir = model_dir,
                                    .release_hold = release_hold};
  st = pts_scheduler_create(&sp, &m->scheduler, err);
  plan_free(&plan);
  return st;
}

enum pts_status pts_model_start(struct pts_model *m, const char *model_dir,
                                struct pts_override_dir *override,
                                const struct pts_model_ensemble *ensemble, struct pts_error *err) {
  PTS_LOG_INFO("loading: %s:%lld", m->name, (long long)m->version);
  if (!m->config)
    return pts_error_set(err, PTS_INTERNAL, "model '%s' has no configuration", m->name);
  m->override = pts_override_dir_retain(override);
  enum pts_status st = start(m, model_dir, ensemble, err);
  if (st != PTS_OK) {
    if (err && err->code == PTS_OK) pts_error_set(err, PTS_INTERNAL, "loading failed");
    unload_now(m);
  }
  return st;
}

enum pts_status pts_model_enqueue(struct pts_model *m, struct pts_infer_request *req,
                                  int64_t batch_size, struct pts_error *err) {
  if (!m->scheduler)
    return pts_error_set(err, PTS_UNAVAILABLE, "model '%s' version %lld is not ready", m->name,
                         (long long)m->version);
  /* The caller's reference becomes the request's hold: the scheduler gives
   * it back (release_hold) once the request has been answered. */
  return pts_scheduler_enqueue(m->scheduler, req, batch_size, m, err);
}

void pts_model_unload(struct pts_model *m, int owners) {
  if (m->scheduler && owners < 0) {
    pts_scheduler_wait_idle(m->scheduler, 0);
  } else if (m->scheduler) {
    /* Everything queued or running finishes first (this also lets go of a
     * PTSERVE_DELAY_SCHEDULER hold, which would otherwise wait forever)... */
    pts_scheduler_wait_idle(m->scheduler, 0);
    /* ...then every reference but the owners' goes: a request between its
     * lookup and its enqueue, a frontend reading the config. */
    atomic_store(&m->draining, true);
    pthread_mutex_lock(&m->mu);
    while (atomic_load(&m->refs) > owners) pthread_cond_wait(&m->drained, &m->mu);
    pthread_mutex_unlock(&m->mu);
    atomic_store(&m->draining, false);
    /* A request that was between lookup and enqueue during the first wait
     * has been answered now (it held a reference), but its instance thread
     * may still be counting it out of the batch. */
    pts_scheduler_wait_idle(m->scheduler, 0);
  }
  bool was_loaded = m->scheduler || m->backend_state;
  unload_now(m);
  if (was_loaded && !pts_model_failed(m)) {
    pts_model_mark_unloaded(m, "unloaded");
    PTS_LOG_INFO("successfully unloaded '%s' version %lld", m->name, (long long)m->version);
  }
}
