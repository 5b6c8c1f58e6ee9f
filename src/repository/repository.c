/* repository/repository.c — see repository.h.
 *
 * Start-up path: scan (collect model directories from every repository,
 * sort by name, flag duplicates) → for each model: load its config once to
 * learn the version policy, list the numeric version directories, and load
 * each selected version (config, backend model, instances + scheduler). */
#include "repository/repository.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "config/model_config.h"
#include "core/alloc.h"
#include "core/log.h"

struct pts_model {
  atomic_int refs;
  atomic_int state; /* enum pts_model_state */
  char *name;
  int64_t version;                /* -1 when no version is known */
  char *reason;                   /* "" when none */
  Inference__ModelConfig *config; /* owned; NULL when the config failed */
  const struct pts_backend *backend;
  void *backend_state;             /* non-NULL once model_load succeeded */
  struct pts_scheduler *scheduler; /* non-NULL while READY */
};

struct model_slot {
  struct pts_repository_model pub;
  char *name;
  size_t cap;
};

struct pts_repository {
  size_t n_models;
  struct model_slot *models;
  bool any_failed;
};

/* A model directory found by the scan. */
struct candidate {
  char *name;
  char *dir;
  const char *repo; /* borrowed from the caller's list */
};

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
const char *pts_model_reason(const struct pts_model *m) { return m->reason ? m->reason : ""; }
const Inference__ModelConfig *pts_model_config(const struct pts_model *m) { return m->config; }
struct pts_scheduler *pts_model_scheduler(const struct pts_model *m) {
  return m->scheduler;
}

struct pts_model *pts_model_retain(struct pts_model *m) {
  if (m) atomic_fetch_add(&m->refs, 1);
  return m;
}

static void model_unload(struct pts_model *m) {
  if (m->scheduler) {
    atomic_store(&m->state, PTS_MODEL_UNLOADING);
    pts_scheduler_destroy(m->scheduler);
    m->scheduler = NULL;
  }
  if (m->backend_state) {
    if (m->backend->model_unload) m->backend->model_unload(m->backend_state);
    m->backend_state = NULL;
  }
}

void pts_model_release(struct pts_model *m) {
  if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
  /* The repository unloads before it drops its reference, so this only
   * frees memory; it never joins threads (it may run on an instance thread). */
  model_unload(m);
  if (m->config) pts_model_config_free(m->config);
  pts_free(m->reason);
  pts_free(m->name);
  pts_free(m);
}

static struct pts_model *model_new(const char *name, int64_t version) {
  struct pts_model *m = pts_calloc(1, sizeof *m);
  if (!m) return NULL;
  atomic_init(&m->refs, 1);
  atomic_init(&m->state, PTS_MODEL_LOADING);
  m->version = version;
  m->name = pts_strdup(name);
  m->reason = pts_strdup("");
  if (!m->name || !m->reason) {
    pts_model_release(m);
    return NULL;
  }
  return m;
}

/* Marks the model UNAVAILABLE with Triton's reason form "<Code>: <message>"
 * ("Invalid argument: ..."), and logs it. */
static void model_fail(struct pts_model *m, const struct pts_error *err) {
  const char *text = pts_status_text(err->code);
  size_t len = strlen(text) + strlen(err->msg) + 3;
  char *reason = pts_malloc(len);
  if (reason) {
    snprintf(reason, len, "%s: %s", text, err->msg);
    if (reason[0] >= 'a' && reason[0] <= 'z') reason[0] = (char)(reason[0] - 'a' + 'A');
    pts_free(m->reason);
    m->reason = reason;
  }
  atomic_store(&m->state, PTS_MODEL_UNAVAILABLE);
  if (m->version >= 0)
    PTS_LOG_ERROR("failed to load '%s' version %lld: %s", m->name, (long long)m->version,
                  pts_model_reason(m));
  else
    PTS_LOG_ERROR("failed to load '%s': %s", m->name, pts_model_reason(m));
}

/* ------------------------------------------------------------- utilities */

static char *path_join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  bool slash = la > 0 && a[la - 1] == '/';
  char *p = pts_malloc(la + lb + 2);
  if (!p) return NULL;
  memcpy(p, a, la);
  if (!slash) p[la++] = '/';
  memcpy(p + la, b, lb + 1);
  return p;
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Triton's rule: a version directory is named by a positive decimal number
 * without a leading zero; anything else is ignored. */
static bool parse_version(const char *name, int64_t *out) {
  if (name[0] < '1' || name[0] > '9') return false;
  int64_t v = 0;
  for (const char *p = name; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    if (v > (INT64_MAX - (*p - '0')) / 10) return false;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return true;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The numeric version directories of a model, ascending (caller frees). */
static enum pts_status list_versions(const char *dir, int64_t **out, size_t *n,
                                     struct pts_error *err) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d)
    return pts_error_set(err, PTS_INTERNAL, "failed to open model directory '%s': %s", dir,
                         strerror(errno));
  size_t cap = 0;
  struct dirent *e;
  enum pts_status st = PTS_OK;
  while ((e = readdir(d)) != NULL) {
    int64_t v;
    if (!parse_version(e->d_name, &v)) continue;
    char *p = path_join(dir, e->d_name);
    bool dir_ok = p && is_dir(p);
    pts_free(p);
    if (!dir_ok) continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 8;
      int64_t *grown = pts_realloc(*out, cap * sizeof **out);
      if (!grown) {
        st = pts_error_set(err, PTS_NOMEM, "out of memory listing '%s'", dir);
        break;
      }
      *out = grown;
    }
    (*out)[(*n)++] = v;
  }
  closedir(d);
  if (st != PTS_OK) {
    pts_free(*out);
    *out = NULL;
    *n = 0;
    return st;
  }
  if (*n) qsort(*out, *n, sizeof **out, cmp_i64);
  return PTS_OK;
}

/* ------------------------------------------------------------ the table */

static enum pts_status slot_add(struct pts_repository *r, const char *name, struct pts_model *m,
                                struct pts_error *err) {
  struct model_slot *slot = r->n_models ? &r->models[r->n_models - 1] : NULL;
  if (!slot || strcmp(slot->name, name) != 0) {
    struct model_slot *grown = pts_realloc(r->models, (r->n_models + 1) * sizeof *grown);
    if (!grown) goto nomem;
    r->models = grown;
    slot = &r->models[r->n_models];
    memset(slot, 0, sizeof *slot);
    slot->name = pts_strdup(name);
    if (!slot->name) goto nomem;
    slot->pub.name = slot->name;
    r->n_models++;
  }
  if (slot->pub.n_versions == slot->cap) {
    size_t cap = slot->cap ? slot->cap * 2 : 2;
    struct pts_model **grown = pts_realloc(slot->pub.versions, cap * sizeof *grown);
    if (!grown) goto nomem;
    slot->pub.versions = grown;
    slot->cap = cap;
  }
  slot->pub.versions[slot->pub.n_versions++] = m;
  if (pts_model_state(m) != PTS_MODEL_READY) r->any_failed = true;
  return PTS_OK;
nomem:
  pts_model_release(m);
  return pts_error_set(err, PTS_NOMEM, "out of memory registering model '%s'", name);
}

/* Adds an UNAVAILABLE entry: the model (or one version of it) failed. */
static enum pts_status add_failed(struct pts_repository *r, const char *name, int64_t version,
                                  Inference__ModelConfig *cfg, const struct pts_error *why,
                                  struct pts_error *err) {
  struct pts_model *m = model_new(name, version);
  if (!m) {
    if (cfg) pts_model_config_free(cfg);
    return pts_error_set(err, PTS_NOMEM, "out of memory registering model '%s'", name);
  }
  m->config = cfg;
  model_fail(m, why);
  return slot_add(r, name, m, err);
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
  char **names;
};

static void plan_free(struct instance_plan *p) {
  for (size_t i = 0; i < p->n; i++) pts_free(p->names[i]);
  pts_free(p->names);
  pts_free(p->descs);
  memset(p, 0, sizeof *p);
}

static enum pts_status plan_add(struct instance_plan *p, size_t cap, const char *group,
                                int index_in_group, Inference__ModelInstanceGroup__Kind kind,
                                int device, struct pts_error *err) {
  if (p->n == cap) return pts_error_set(err, PTS_INTERNAL, "instance count overflow");
  size_t len = strlen(group) + 24;
  char *name = pts_malloc(len);
  if (!name) return pts_error_set(err, PTS_NOMEM, "out of memory naming instances");
  snprintf(name, len, "%s_%d", group, index_in_group);
  p->names[p->n] = name;
  p->descs[p->n] = (struct pts_backend_instance_desc){
      .name = name, .kind = kind, .device_id = device, .index = (int)p->n};
  p->n++;
  return PTS_OK;
}

/* Triton's instance layout: for a KIND_GPU group listing gpus, `count`
 * instances on each listed GPU; otherwise `count` instances. Instances are
 * named "<group name>_<index within the group>". */
static enum pts_status plan_instances(const char *model, const Inference__ModelConfig *cfg,
                                      struct instance_plan *p, struct pts_error *err) {
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
  if (total == 0) total = 1;
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
        st = plan_add(p, total, gname, index++, kind, device, err);
      }
    }
  }
  if (st == PTS_OK && cfg->n_instance_group == 0) {
    /* Config completion normally fills instance_group; stay usable if not. */
    snprintf(fallback, sizeof fallback, "%s_0", model);
    st = plan_add(p, total, fallback, 0, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO, 0, err);
  }
  if (st != PTS_OK) plan_free(p);
  return st;
}

static enum pts_status start_model(struct pts_model *m, const char *model_dir,
                                   struct pts_error *err) {
  const Inference__ModelConfig *cfg = m->config;
  m->backend = pts_backend_find(cfg->backend);
  if (!m->backend) {
    char have[128];
    pts_backend_list(have, sizeof have);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "unable to find backend '%s' for model '%s'; ptserve provides %s",
                         cfg->backend ? cfg->backend : "", m->name, have);
  }
  enum pts_status rs = pts_model_config_resolve_devices(
      m->config, m->backend->gpu_count ? m->backend->gpu_count() : 0, err);
  if (rs != PTS_OK) return rs;
  char vname[24];
  snprintf(vname, sizeof vname, "%lld", (long long)m->version);
  const char *file = cfg->default_model_filename && *cfg->default_model_filename
                         ? cfg->default_model_filename
                         : "model.pt";
  char *version_dir = path_join(model_dir, vname);
  char *model_path = version_dir ? path_join(version_dir, file) : NULL;
  if (!model_path) {
    pts_free(version_dir);
    return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", m->name);
  }
  struct pts_backend_model_desc desc = {.name = m->name,
                                        .version = m->version,
                                        .config = cfg,
                                        .model_dir = model_dir,
                                        .version_dir = version_dir,
                                        .model_path = model_path};
  enum pts_status st = m->backend->model_load(&desc, &m->backend_state, err);
  pts_free(model_path);
  pts_free(version_dir);
  if (st != PTS_OK) {
    m->backend_state = NULL;
    if (err && err->code == PTS_OK) pts_error_set(err, st, "backend '%s' failed", m->backend->name);
    return st;
  }

  struct instance_plan plan;
  st = plan_instances(m->name, cfg, &plan, err);
  if (st != PTS_OK) return st;
  struct pts_scheduler_params sp = {.model_name = m->name,
                                    .version = m->version,
                                    .config = cfg,
                                    .backend = m->backend,
                                    .model_state = m->backend_state,
                                    .n_instances = plan.n,
                                    .instances = plan.descs,
                                    .model_dir = model_dir};
  st = pts_scheduler_create(&sp, &m->scheduler, err);
  plan_free(&plan);
  return st;
}

/* Loads one version; the new model takes ownership of cfg. */
static enum pts_status load_version(struct pts_repository *r, const char *name, const char *dir,
                                    int64_t version, Inference__ModelConfig *cfg,
                                    struct pts_error *err) {
  struct pts_model *m = model_new(name, version);
  if (!m) {
    pts_model_config_free(cfg);
    return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", name);
  }
  m->config = cfg;
  PTS_LOG_INFO("loading: %s:%lld", name, (long long)version);
  struct pts_error why;
  pts_error_clear(&why);
  if (start_model(m, dir, &why) != PTS_OK) {
    model_unload(m);
    if (why.code == PTS_OK) why.code = PTS_INTERNAL;
    model_fail(m, &why);
  } else {
    atomic_store(&m->state, PTS_MODEL_READY);
    PTS_LOG_INFO("successfully loaded '%s' version %lld", name, (long long)version);
  }
  return slot_add(r, name, m, err);
}

/* Versions the policy selects, ascending, into `sel` (caller-allocated with
 * room for n_disk + n_specific). Specific versions that are not on disk go
 * to `missing`. */
static void select_versions(const Inference__ModelConfig *cfg, const int64_t *disk, size_t n_disk,
                            int64_t *sel, size_t *n_sel, int64_t *missing, size_t *n_missing) {
  const Inference__ModelVersionPolicy *vp = cfg->version_policy;
  *n_sel = *n_missing = 0;
  if (vp && vp->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL) {
    if (n_disk) memcpy(sel, disk, n_disk * sizeof *disk);
    *n_sel = n_disk;
    return;
  }
  if (vp && vp->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC) {
    const Inference__ModelVersionPolicy__Specific *sp = vp->specific;
    for (size_t i = 0; i < sp->n_versions; i++) {
      int64_t v = sp->versions[i];
      bool dup = false;
      for (size_t j = 0; j < i; j++) dup = dup || sp->versions[j] == v;
      if (dup) continue;
      bool found = n_disk && bsearch(&v, disk, n_disk, sizeof *disk, cmp_i64) != NULL;
      if (found)
        sel[(*n_sel)++] = v;
      else
        missing[(*n_missing)++] = v;
    }
    qsort(sel, *n_sel, sizeof *sel, cmp_i64);
    qsort(missing, *n_missing, sizeof *missing, cmp_i64);
    return;
  }
  size_t want = 1;
  if (vp && vp->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST)
    want = vp->latest->num_versions;
  size_t take = want < n_disk ? want : n_disk;
  if (take) memcpy(sel, disk + (n_disk - take), take * sizeof *disk);
  *n_sel = take;
}

static enum pts_status load_selected(struct pts_repository *r, const struct candidate *c,
                                     Inference__ModelConfig *cfg, const int64_t *sel, size_t n_sel,
                                     const int64_t *missing, size_t n_missing,
                                     struct pts_error *err) {
  enum pts_status st = PTS_OK;
  /* Both lists are ascending: merge them so the versions stay in order. */
  size_t i = 0, j = 0;
  while (st == PTS_OK && (i < n_sel || j < n_missing)) {
    if (j < n_missing && (i == n_sel || missing[j] < sel[i])) {
      struct pts_error why;
      pts_error_set(&why, PTS_INVALID_ARG,
                    "version %lld is specified for model '%s', but the version directory is "
                    "not present",
                    (long long)missing[j], c->name);
      st = add_failed(r, c->name, missing[j], NULL, &why, err);
      j++;
      continue;
    }
    Inference__ModelConfig *vcfg = cfg;
    cfg = NULL;
    if (!vcfg) {
      /* Every version owns its config: reading it again is cheap and keeps
       * a version's lifetime independent of its siblings'. */
      struct pts_error why;
      pts_error_clear(&why);
      if (pts_model_config_load(c->dir, c->name, &vcfg, &why) != PTS_OK) {
        st = add_failed(r, c->name, sel[i++], NULL, &why, err);
        continue;
      }
    }
    st = load_version(r, c->name, c->dir, sel[i++], vcfg, err);
  }
  if (cfg) pts_model_config_free(cfg);
  return st;
}

static enum pts_status load_model(struct pts_repository *r, const struct candidate *c,
                                  struct pts_error *err) {
  int64_t *disk = NULL;
  size_t n_disk = 0;
  struct pts_error why;
  pts_error_clear(&why);
  Inference__ModelConfig *cfg = NULL;
  if (list_versions(c->dir, &disk, &n_disk, &why) != PTS_OK ||
      pts_model_config_load(c->dir, c->name, &cfg, &why) != PTS_OK) {
    /* Triton shows a bad config against the version it would have served. */
    enum pts_status st = add_failed(r, c->name, n_disk ? disk[n_disk - 1] : -1, NULL, &why, err);
    pts_free(disk);
    return st;
  }

  size_t cap =
      n_disk + (cfg->version_policy && cfg->version_policy->policy_choice_case ==
                                           INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC
                    ? cfg->version_policy->specific->n_versions
                    : 0);
  int64_t *sel = pts_calloc(cap ? cap : 1, sizeof *sel);
  int64_t *missing = pts_calloc(cap ? cap : 1, sizeof *missing);
  enum pts_status st;
  if (!sel || !missing) {
    pts_model_config_free(cfg);
    st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", c->name);
  } else {
    size_t n_sel, n_missing;
    select_versions(cfg, disk, n_disk, sel, &n_sel, missing, &n_missing);
    if (n_sel == 0 && n_missing == 0) {
      pts_error_set(&why, PTS_INVALID_ARG,
                    "at least one version must be available under the version policy of model "
                    "'%s'",
                    c->name);
      st = add_failed(r, c->name, -1, cfg, &why, err);
    } else {
      st = load_selected(r, c, cfg, sel, n_sel, missing, n_missing, err);
    }
  }
  pts_free(sel);
  pts_free(missing);
  pts_free(disk);
  return st;
}

/* ------------------------------------------------------------- scanning */

static void candidates_free(struct candidate *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    pts_free(c[i].name);
    pts_free(c[i].dir);
  }
  pts_free(c);
}

/* A model directory holds config.pbtxt or at least one version directory. */
static bool looks_like_model(const char *dir) {
  char *cfg = path_join(dir, "config.pbtxt");
  bool yes = cfg && is_file(cfg);
  pts_free(cfg);
  if (yes) return true;
  int64_t *versions = NULL;
  size_t n = 0;
  if (list_versions(dir, &versions, &n, NULL) != PTS_OK) return false;
  pts_free(versions);
  return n > 0;
}

static enum pts_status scan_repository(const char *repo, struct candidate **list, size_t *n,
                                       size_t *cap, struct pts_error *err) {
  DIR *d = opendir(repo);
  if (!d)
    return pts_error_set(err, PTS_INVALID_ARG, "failed to open model repository '%s': %s", repo,
                         strerror(errno));
  struct dirent *e;
  enum pts_status st = PTS_OK;
  while (st == PTS_OK && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char *dir = path_join(repo, e->d_name);
    if (!dir) {
      st = pts_error_set(err, PTS_NOMEM, "out of memory scanning '%s'", repo);
      break;
    }
    if (!is_dir(dir) || !looks_like_model(dir)) {
      pts_free(dir);
      continue;
    }
    if (*n == *cap) {
      size_t ncap = *cap ? *cap * 2 : 16;
      struct candidate *grown = pts_realloc(*list, ncap * sizeof *grown);
      if (!grown) {
        pts_free(dir);
        st = pts_error_set(err, PTS_NOMEM, "out of memory scanning '%s'", repo);
        break;
      }
      *list = grown;
      *cap = ncap;
    }
    struct candidate *c = &(*list)[*n];
    c->name = pts_strdup(e->d_name);
    c->dir = dir;
    c->repo = repo;
    if (!c->name) {
      pts_free(dir);
      st = pts_error_set(err, PTS_NOMEM, "out of memory scanning '%s'", repo);
      break;
    }
    (*n)++;
  }
  closedir(d);
  return st;
}

static int cmp_candidate(const void *a, const void *b) {
  const struct candidate *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c) return c;
  return strcmp(x->dir, y->dir);
}

/* `c` holds the (at least two) candidates sharing one name. */
static enum pts_status add_duplicate(struct pts_repository *r, const struct candidate *c,
                                     struct pts_error *err) {
  struct pts_error why;
  pts_error_set(&why, PTS_INVALID_ARG,
                "model '%s' appears in more than one model repository ('%s' and '%s'); model "
                "names must be unique",
                c[0].name, c[0].repo, c[1].repo);
  return add_failed(r, c[0].name, -1, NULL, &why, err);
}

enum pts_status pts_repository_create(const char *const *paths, size_t n_paths,
                                      struct pts_repository **out, struct pts_error *err) {
  *out = NULL;
  struct candidate *list = NULL;
  size_t n = 0, cap = 0;
  enum pts_status st = PTS_OK;
  for (size_t i = 0; i < n_paths && st == PTS_OK; i++)
    st = scan_repository(paths[i], &list, &n, &cap, err);
  struct pts_repository *r = NULL;
  if (st == PTS_OK) {
    r = pts_calloc(1, sizeof *r);
    if (!r) st = pts_error_set(err, PTS_NOMEM, "out of memory creating the repository");
  }
  if (st == PTS_OK && n) qsort(list, n, sizeof *list, cmp_candidate);
  for (size_t i = 0; i < n && st == PTS_OK;) {
    size_t same = 1;
    while (i + same < n && strcmp(list[i + same].name, list[i].name) == 0) same++;
    st = same > 1 ? add_duplicate(r, &list[i], err) : load_model(r, &list[i], err);
    i += same;
  }
  candidates_free(list, n);
  if (st != PTS_OK) {
    pts_repository_destroy(r);
    return st;
  }
  *out = r;
  return PTS_OK;
}

void pts_repository_destroy(struct pts_repository *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_models; i++) {
    struct model_slot *slot = &r->models[i];
    for (size_t v = 0; v < slot->pub.n_versions; v++) {
      struct pts_model *m = slot->pub.versions[v];
      bool was_ready = pts_model_state(m) == PTS_MODEL_READY;
      model_unload(m);
      if (was_ready) {
        pts_free(m->reason);
        m->reason = pts_strdup("unloaded");
        atomic_store(&m->state, PTS_MODEL_UNAVAILABLE);
        PTS_LOG_INFO("successfully unloaded '%s' version %lld", m->name, (long long)m->version);
      }
      pts_model_release(m);
    }
    pts_free(slot->pub.versions);
    pts_free(slot->name);
  }
  pts_free(r->models);
  pts_free(r);
}

size_t pts_repository_count(const struct pts_repository *r) { return r->n_models; }

const struct pts_repository_model *pts_repository_at(const struct pts_repository *r, size_t i) {
  return i < r->n_models ? &r->models[i].pub : NULL;
}

const struct pts_repository_model *pts_repository_find(const struct pts_repository *r,
                                                       const char *name) {
  if (!name) return NULL;
  size_t lo = 0, hi = r->n_models;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(name, r->models[mid].name);
    if (c == 0) return &r->models[mid].pub;
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

bool pts_repository_any_failed(const struct pts_repository *r) { return r->any_failed; }
