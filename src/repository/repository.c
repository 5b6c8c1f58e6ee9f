/* repository/repository.c — see repository.h.
 *
 * Locks. `r->mu` guards the table: the sorted entry array and, in each
 * entry, its directory, records, failure text, poll bookkeeping. It is held
 * only for pointer work, never across file I/O or a load. Each entry's `op`
 * serialises the operations that change the entry's records (load, unload);
 * it is taken before `r->mu`, never after, and held for a whole load. A
 * record may only be removed from the table by the holder of its entry's
 * `op`, so that holder may use the records without extra references.
 * Entries are never freed before pts_repository_destroy, so a pointer to
 * one stays valid once found.
 */
#include "repository/repository.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "core/log.h"
#include "repository/model.h"
#include "repository/scan.h"

struct entry {
  char *name;
  pthread_mutex_t op; /* one load or unload of this model at a time */
  /* guarded by r->mu: */
  char *dir;              /* the model directory; NULL when absent or duplicated */
  char *dup;              /* non-NULL: in two repositories, and why that is refused */
  bool on_disk;           /* a repository holds it (as of the last scan) */
  struct pts_model **recs; /* one per known version, ascending; a reference each */
  size_t n_recs, cap;
  char *failure; /* non-NULL: the last load failed while older versions kept serving */
  bool queued;   /* poll: a load or unload is queued and has not started */
  bool have_fp;  /* poll: fp holds the files as the last load saw them */
  uint64_t fp;
};

struct pts_repository {
  char **paths;
  size_t n_paths;
  pthread_mutex_t mu;
  struct entry **entries; /* sorted by name */
  size_t n, cap;
  struct pts_model_ensemble ensemble; /* set once, before any load */
  unsigned load_retries;              /* --model-load-retry-count; set before any load */
};

void pts_repository_set_load_retries(struct pts_repository *r, unsigned n) {
  r->load_retries = n;
}

/* Starts one version, again at once after a failure, up to
 * r->load_retries times (tritonserver retries the same way); each failed
 * attempt that is retried is a warning with its reason. */
static enum pts_status start_version(struct pts_repository *r, struct pts_model *m,
                                     const char *dir, struct pts_override_dir *override,
                                     struct pts_error *err) {
  for (unsigned attempt = 0;; attempt++) {
    enum pts_status st = pts_model_start(m, dir, override, &r->ensemble, err);
    if (st == PTS_OK || attempt >= r->load_retries) return st;
    PTS_LOG_WARN("failed to load '%s' version %lld (attempt %u of %u, --model-load-retry-count): "
                 "%s; trying again",
                 pts_model_name(m), (long long)pts_model_version(m), attempt + 1,
                 r->load_retries + 1, err->msg);
    pts_error_clear(err);
  }
}

/* A name no repository holds: Triton's words for what its poll did not
 * find, then ours. NOT_FOUND. */
static enum pts_status no_such_model(const char *name, struct pts_error *err) {
  return pts_error_set(err, PTS_NOT_FOUND,
                       "failed to load '%s', failed to poll from model repository: no model "
                       "repository holds a model named '%s'",
                       name, name);
}

/* ------------------------------------------------------------ the table */

/* Index of `name` in r->entries, or where it would go. r->mu held. */
static size_t lower_bound(const struct pts_repository *r, const char *name, bool *found) {
  size_t lo = 0, hi = r->n;
  *found = false;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(name, r->entries[mid]->name);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

static struct entry *find_locked(const struct pts_repository *r, const char *name) {
  bool found;
  size_t i = lower_bound(r, name, &found);
  return found ? r->entries[i] : NULL;
}

static void entry_free(struct entry *e) {
  if (!e) return;
  for (size_t i = 0; i < e->n_recs; i++) pts_model_release(e->recs[i]);
  pts_free(e->recs);
  pts_free(e->name);
  pts_free(e->dir);
  pts_free(e->dup);
  pts_free(e->failure);
  pthread_mutex_destroy(&e->op);
  pts_free(e);
}

/* The entry for `name`, created when absent. r->mu held. NULL: no memory. */
static struct entry *get_or_add_locked(struct pts_repository *r, const char *name) {
  bool found;
  size_t i = lower_bound(r, name, &found);
  if (found) return r->entries[i];
  if (r->n == r->cap) {
    size_t ncap = r->cap ? r->cap * 2 : 16;
    struct entry **grown = pts_realloc(r->entries, ncap * sizeof *grown);
    if (!grown) return NULL;
    r->entries = grown;
    r->cap = ncap;
  }
  struct entry *e = pts_calloc(1, sizeof *e);
  if (!e || !(e->name = pts_strdup(name))) {
    pts_free(e);
    return NULL;
  }
  pthread_mutex_init(&e->op, NULL);
  memmove(&r->entries[i + 1], &r->entries[i], (r->n - i) * sizeof *r->entries);
  r->entries[i] = e;
  r->n++;
  return e;
}

/* Index of the record of `version`, or -1. r->mu held. */
static long rec_find(const struct entry *e, int64_t version) {
  for (size_t i = 0; i < e->n_recs; i++)
    if (pts_model_version(e->recs[i]) == version) return (long)i;
  return -1;
}

static bool rec_present(const struct entry *e, const struct pts_model *m) {
  for (size_t i = 0; i < e->n_recs; i++)
    if (e->recs[i] == m) return true;
  return false;
}

/* Puts `m` (taking one reference) as the record of its version. Returns the
 * record it replaces, whose table reference the caller now holds, or NULL.
 * *nomem set when the array could not grow (m is not taken then). */
static struct pts_model *rec_put(struct entry *e, struct pts_model *m, bool *nomem) {
  *nomem = false;
  long i = rec_find(e, pts_model_version(m));
  if (i >= 0) {
    struct pts_model *old = e->recs[i];
    if (old == m) return NULL;
    e->recs[i] = pts_model_retain(m);
    return old;
  }
  if (e->n_recs == e->cap) {
    size_t ncap = e->cap ? e->cap * 2 : 4;
    struct pts_model **grown = pts_realloc(e->recs, ncap * sizeof *grown);
    if (!grown) {
      *nomem = true;
      return NULL;
    }
    e->recs = grown;
    e->cap = ncap;
  }
  size_t at = e->n_recs;
  while (at > 0 && pts_model_version(e->recs[at - 1]) > pts_model_version(m)) at--;
  memmove(&e->recs[at + 1], &e->recs[at], (e->n_recs - at) * sizeof *e->recs);
  e->recs[at] = pts_model_retain(m);
  e->n_recs++;
  return NULL;
}

static bool has_ready(const struct entry *e) {
  for (size_t i = 0; i < e->n_recs; i++)
    if (pts_model_state(e->recs[i]) == PTS_MODEL_READY) return true;
  return false;
}

/* A version that serves or is on its way in or out. */
static bool is_live(const struct pts_model *m) {
  enum pts_model_state s = pts_model_state(m);
  return s == PTS_MODEL_READY || s == PTS_MODEL_LOADING || s == PTS_MODEL_UNLOADING;
}

static void set_text(char **slot, const char *text) {
  char *copy = text ? pts_strdup(text) : NULL;
  pts_free(*slot);
  *slot = copy; /* NULL when out of memory: the text is informative only */
}

/* ------------------------------------------------------------- scanning */

/* Records where a model is: `same` candidates of one name (0 = none).
 * r->mu held. */
static enum pts_status place_locked(struct entry *e, const struct pts_scan_candidate *c,
                                    size_t same, struct pts_error *err) {
  bool was_dup = e->dup != NULL;
  e->on_disk = same > 0;
  pts_free(e->dir);
  e->dir = NULL;
  pts_free(e->dup);
  e->dup = NULL;
  if (same == 1 && !(e->dir = pts_strdup(c[0].dir)))
    return pts_error_set(err, PTS_NOMEM, "out of memory scanning for model '%s'", e->name);
  if (same > 1) {
    /* The reason clients read is Triton's exact text (its QA compares the
     * index's reason for equality); which repositories is said once, in
     * the log, when the name stops being unique. */
    if (!(e->dup = pts_strdup("model appears in two or more repositories")))
      return pts_error_set(err, PTS_NOMEM, "out of memory scanning for model '%s'", e->name);
    if (!was_dup)
      PTS_LOG_WARN("model '%s' appears in two or more repositories ('%s' and '%s'); it is not "
                   "served until its name is unique",
                   c[0].name, c[0].repo, c[1].repo);
  }
  return PTS_OK;
}

enum pts_status pts_repository_rescan(struct pts_repository *r, struct pts_error *err) {
  struct pts_scan_candidate *list = NULL;
  size_t n = 0, cap = 0;
  enum pts_status st = PTS_OK;
  for (size_t i = 0; i < r->n_paths && st == PTS_OK; i++)
    st = pts_scan_repository(r->paths[i], &list, &n, &cap, err);
  if (st != PTS_OK) {
    pts_scan_candidates_free(list, n);
    return st;
  }
  if (n) qsort(list, n, sizeof *list, pts_scan_cmp_candidate);
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->n; i++) r->entries[i]->on_disk = false;
  for (size_t i = 0; i < n && st == PTS_OK;) {
    size_t same = 1;
    while (i + same < n && strcmp(list[i + same].name, list[i].name) == 0) same++;
    struct entry *e = get_or_add_locked(r, list[i].name);
    st = e ? place_locked(e, &list[i], same, err)
           : pts_error_set(err, PTS_NOMEM, "out of memory scanning the repositories");
    i += same;
  }
  /* Models no repository holds any more keep serving until unloaded. */
  for (size_t i = 0; i < r->n; i++) {
    struct entry *e = r->entries[i];
    if (e->on_disk) continue;
    pts_free(e->dir);
    e->dir = NULL;
    pts_free(e->dup);
    e->dup = NULL;
  }
  pthread_mutex_unlock(&r->mu);
  pts_scan_candidates_free(list, n);
  return st;
}

/* Looks for one model's directory in every repository and updates (or
 * creates) its entry. *out NULL when no repository holds it and `create`
 * is false. */
static enum pts_status probe_one(struct pts_repository *r, const char *name, bool create,
                                 struct entry **out, struct pts_error *err) {
  *out = NULL;
  struct pts_scan_candidate found[2];
  size_t same = 0;
  enum pts_status st = PTS_OK;
  for (size_t i = 0; i < r->n_paths && st == PTS_OK; i++) {
    char *dir = pts_scan_path_join(r->paths[i], name);
    if (!dir) {
      st = pts_error_set(err, PTS_NOMEM, "out of memory looking for model '%s'", name);
    } else if (name[0] != '.' && pts_scan_is_dir(dir) && pts_scan_is_model(dir) && same < 2) {
      found[same++] =
          (struct pts_scan_candidate){.name = (char *)name, .dir = dir, .repo = r->paths[i]};
      dir = NULL;
    }
    pts_free(dir);
  }
  if (st == PTS_OK) {
    pthread_mutex_lock(&r->mu);
    struct entry *e = same || create ? get_or_add_locked(r, name) : find_locked(r, name);
    if (same || create) {
      if (!e)
        st = pts_error_set(err, PTS_NOMEM, "out of memory looking for model '%s'", name);
      else
        st = place_locked(e, found, same, err);
    } else if (e) {
      st = place_locked(e, found, 0, err);
    }
    pthread_mutex_unlock(&r->mu);
    *out = same || create ? e : NULL;
  }
  for (size_t i = 0; i < same; i++) pts_free(found[i].dir);
  return st;
}

enum pts_status pts_repository_create(const char *const *paths, size_t n_paths,
                                      struct pts_repository **out, struct pts_error *err) {
  *out = NULL;
  struct pts_repository *r = pts_calloc(1, sizeof *r);
  if (!r) return pts_error_set(err, PTS_NOMEM, "out of memory creating the repository");
  pthread_mutex_init(&r->mu, NULL);
  r->paths = pts_calloc(n_paths ? n_paths : 1, sizeof *r->paths);
  enum pts_status st =
      r->paths ? PTS_OK : pts_error_set(err, PTS_NOMEM, "out of memory creating the repository");
  for (size_t i = 0; i < n_paths && st == PTS_OK; i++) {
    if (!(r->paths[i] = pts_strdup(paths[i])))
      st = pts_error_set(err, PTS_NOMEM, "out of memory creating the repository");
    else
      r->n_paths++;
  }
  if (st == PTS_OK) st = pts_repository_rescan(r, err);
  if (st != PTS_OK) {
    pts_repository_destroy(r);
    return st;
  }
  *out = r;
  return PTS_OK;
}

void pts_repository_destroy(struct pts_repository *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n; i++) {
    struct entry *e = r->entries[i];
    for (size_t v = 0; v < e->n_recs; v++) {
      struct pts_model *m = e->recs[v];
      if (!pts_model_loaded(m)) continue;
      pts_model_set_state(m, PTS_MODEL_UNLOADING);
      /* Shutdown: nothing routes requests any more, and a reference held
       * elsewhere (a test's) must not stop the unload. */
      pts_model_unload(m, -1);
    }
    entry_free(e);
  }
  for (size_t i = 0; i < r->n_paths; i++) pts_free(r->paths[i]);
  pts_free(r->paths);
  pts_free(r->entries);
  pthread_mutex_destroy(&r->mu);
  pts_free(r);
}

enum pts_status pts_repository_names(struct pts_repository *r, char ***names, size_t *n,
                                     struct pts_error *err) {
  *names = NULL;
  *n = 0;
  pthread_mutex_lock(&r->mu);
  char **out = pts_calloc(r->n ? r->n : 1, sizeof *out);
  size_t k = 0;
  enum pts_status st = out ? PTS_OK : PTS_NOMEM;
  for (size_t i = 0; i < r->n && st == PTS_OK; i++) {
    if (!r->entries[i]->on_disk) continue;
    if (!(out[k] = pts_strdup(r->entries[i]->name)))
      st = PTS_NOMEM;
    else
      k++;
  }
  pthread_mutex_unlock(&r->mu);
  if (st != PTS_OK) {
    for (size_t i = 0; i < k; i++) pts_free(out[i]);
    pts_free(out);
    return pts_error_set(err, PTS_NOMEM, "out of memory listing the models");
  }
  *names = out;
  *n = k;
  return PTS_OK;
}

/* ------------------------------------------------------------- loading */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
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

/* Where a load reads from: the repository's directory of the model, or the
 * private directory of its file overrides. */
struct source {
  const char *name;
  const char *dir; /* borrowed from dir_copy or override */
  char *dir_copy;
  struct pts_override_dir *override;
  const struct pts_load_params *params; /* borrowed; NULL = none */
};

/* Reads the source's config (each version reads its own: versions share
 * no memory, so one can outlive the others). */
static enum pts_status read_config(const struct source *src, Inference__ModelConfig **cfg,
                                   struct pts_error *err) {
  if (src->params && src->params->config)
    return pts_model_config_from_json(src->params->config, src->params->config_len, src->dir,
                                      src->name, cfg, err);
  return pts_model_config_load(src->dir, src->name, cfg, err);
}

/* What one load did to an entry's records, to be finished outside r->mu. */
struct plan {
  struct pts_model **created; /* the new versions; one reference each */
  bool *background;           /* the version's READY record kept serving while it loaded */
  size_t n_created;
  struct pts_model **missing; /* specific versions without a directory; one reference each */
  size_t n_missing;
  /* Versions to unload once the table no longer routes to them; `held`
   * counts references this load owns and drops afterwards. */
  struct doomed {
    struct pts_model *m;
    int held;
  } *doomed;
  size_t n_doomed;
  struct pts_model **drop; /* references to drop after the table lock */
  size_t n_drop;
};

static void plan_free(struct plan *p) {
  for (size_t i = 0; i < p->n_created; i++) pts_model_release(p->created[i]);
  for (size_t i = 0; i < p->n_missing; i++) pts_model_release(p->missing[i]);
  for (size_t i = 0; i < p->n_drop; i++) pts_model_release(p->drop[i]);
  pts_free(p->created);
  pts_free(p->background);
  pts_free(p->missing);
  pts_free(p->doomed);
  pts_free(p->drop);
  memset(p, 0, sizeof *p);
}

static struct doomed *doomed_find(struct plan *p, const struct pts_model *m) {
  for (size_t i = 0; i < p->n_doomed; i++)
    if (p->doomed[i].m == m) return &p->doomed[i];
  return NULL;
}

/* The arrays are sized up front (see plan_alloc), so these never fail. */
static void doom(struct plan *p, struct pts_model *m, int held) {
  struct doomed *d = doomed_find(p, m);
  if (d) {
    d->held += held;
    return;
  }
  p->doomed[p->n_doomed++] = (struct doomed){m, held};
}

/* A record the table let go of: unload it first when it is loaded. */
static void displaced(struct plan *p, struct pts_model *old) {
  if (!old) return;
  if (pts_model_loaded(old) || doomed_find(p, old))
    doom(p, old, 1);
  else
    p->drop[p->n_drop++] = old;
}

static enum pts_status plan_alloc(struct plan *p, size_t n_new, size_t n_missing, size_t n_old,
                                  struct pts_error *err, const char *name) {
  memset(p, 0, sizeof *p);
  size_t slots = n_new + n_missing + n_old + 1;
  p->created = pts_calloc(n_new + 1, sizeof *p->created);
  p->background = pts_calloc(n_new + 1, sizeof *p->background);
  p->missing = pts_calloc(n_missing + 1, sizeof *p->missing);
  p->doomed = pts_calloc(2 * slots, sizeof *p->doomed);
  p->drop = pts_calloc(2 * slots, sizeof *p->drop);
  if (!p->created || !p->background || !p->missing || !p->doomed || !p->drop) {
    plan_free(p);
    return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", name);
  }
  return PTS_OK;
}

/* Unloads what the plan doomed and drops its references. No lock held. */
static void plan_finish(struct pts_repository *r, struct entry *e, struct plan *p) {
  for (size_t i = 0; i < p->n_doomed; i++) {
    struct doomed *d = &p->doomed[i];
    pthread_mutex_lock(&r->mu);
    bool in_table = rec_present(e, d->m);
    pthread_mutex_unlock(&r->mu);
    /* Only this load removes records of this entry, so in_table holds.
     * The owners: the table's reference, this load's, and the one a new
     * version has from its creation (plan_free drops it). */
    bool created = false;
    for (size_t k = 0; k < p->n_created; k++) created = created || p->created[k] == d->m;
    pts_model_unload(d->m, d->held + (in_table ? 1 : 0) + (created ? 1 : 0));
    for (int k = 0; k < d->held; k++) pts_model_release(d->m);
  }
  p->n_doomed = 0;
  plan_free(p);
}

/* Triton's words for a load whose version failed. */
static enum pts_status load_failed(const char *name, const struct pts_model *m,
                                   struct pts_error *err) {
  char reason[PTS_ERROR_MSG_MAX];
  pts_model_reason(m, reason, sizeof reason);
  return pts_error_set(err, PTS_INVALID_ARG,
                       "load failed for model '%s': version %lld is at UNAVAILABLE state: %s;",
                       name, (long long)pts_model_version(m), reason);
}

/* The load could not even build its versions (config, policy, duplicate):
 * what serves stays; with nothing serving, one UNAVAILABLE record at
 * `version` (the one the default policy would have served, or -1) says
 * why, as Triton's index does. `poll_failure`: what Triton finds while it
 * polls the repository, before any load (a duplicated name, a config file
 * that is missing when configs are not completed): its reason is why->msg
 * as it is and it does not make the server unready (pts_model_poll_failed),
 * and the answer is Triton's "failed to poll from model repository". */
static enum pts_status fail_whole(struct pts_repository *r, struct entry *e, int64_t version,
                                  const struct pts_error *why, bool poll_failure,
                                  struct pts_error *err) {
  struct pts_model *m = pts_model_new(e->name, version);
  if (m && poll_failure)
    pts_model_poll_failed(m, why->msg);
  else if (m)
    pts_model_fail(m, why);
  struct pts_model **old = NULL;
  size_t n_old = 0;
  pthread_mutex_lock(&r->mu);
  if (has_ready(e)) {
    char msg[PTS_ERROR_MSG_MAX + 128];
    snprintf(msg, sizeof msg, "the last load failed, the previously loaded versions still serve: "
             "%s", why->msg);
    set_text(&e->failure, msg);
  } else if (m) {
    /* Nothing serves: the failure replaces the old records. */
    old = e->recs;
    n_old = e->n_recs;
    e->recs = pts_calloc(4, sizeof *e->recs);
    e->cap = e->recs ? 4 : 0;
    e->n_recs = 0;
    bool nomem;
    if (e->recs) rec_put(e, m, &nomem);
  }
  pthread_mutex_unlock(&r->mu);
  for (size_t i = 0; i < n_old; i++) pts_model_release(old[i]);
  pts_free(old);
  pts_model_release(m);
  if (poll_failure)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to load '%s', failed to poll from model repository: %s", e->name,
                         why->msg);
  return pts_error_set(err, why->code == PTS_NOMEM ? PTS_NOMEM : PTS_INVALID_ARG,
                       "load failed for model '%s': %s", e->name, why->msg);
}

/* The highest version directory, or -1 (where Triton shows a bad config). */
static int64_t highest_version(const char *dir) {
  int64_t *disk = NULL;
  size_t n = 0;
  int64_t v = -1;
  if (dir && pts_scan_versions(dir, false, &disk, &n, NULL) == PTS_OK && n) v = disk[n - 1];
  pts_free(disk);
  return v;
}

/* Builds the new versions (state LOADING, config read) into p. */
static enum pts_status build_versions(struct pts_repository *r, struct entry *e,
                                      const struct source *src, struct plan *p,
                                      struct pts_error *why, struct pts_error *err) {
  int64_t *disk = NULL, *sel = NULL, *missing = NULL;
  size_t n_disk = 0, n_sel = 0, n_missing = 0;
  Inference__ModelConfig *cfg = NULL;
  enum pts_status st = read_config(src, &cfg, why);
  if (st == PTS_OK) st = pts_scan_versions(src->dir, true, &disk, &n_disk, why);
  if (st != PTS_OK) {
    pts_model_config_free(cfg);
    pts_free(disk);
    /* NOT_FOUND: no config file where one is required (model_config.h) */
    return fail_whole(r, e, highest_version(src->dir), why, st == PTS_NOT_FOUND, err);
  }
  size_t cap = n_disk + (cfg->version_policy &&
                                 cfg->version_policy->policy_choice_case ==
                                     INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC
                             ? cfg->version_policy->specific->n_versions
                             : 0);
  sel = pts_calloc(cap + 1, sizeof *sel);
  missing = pts_calloc(cap + 1, sizeof *missing);
  if (!sel || !missing) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", e->name);
    goto out;
  }
  select_versions(cfg, disk, n_disk, sel, &n_sel, missing, &n_missing);
  if (n_sel == 0) {
    /* Also when the policy names versions whose directories are all
     * missing: the model has nothing to serve, and fails (Triton's rule;
     * strict readiness then says not ready). */
    char listed[96] = "";
    for (size_t i = 0, at = 0; i < n_missing && at < sizeof listed - 24; i++)
      at += (size_t)snprintf(listed + at, sizeof listed - at, "%s%lld", i ? ", " : "",
                             (long long)missing[i]);
    pts_error_set(why, PTS_INVALID_ARG,
                  "at least one version must be available under the version policy of model "
                  "'%s'%s%s%s",
                  e->name, n_missing ? " (it names versions " : "", listed,
                  n_missing ? ", and none of their directories is present)" : "");
    st = fail_whole(r, e, -1, why, false, err);
    goto out;
  }
  pthread_mutex_lock(&r->mu);
  size_t n_old = e->n_recs;
  pthread_mutex_unlock(&r->mu);
  st = plan_alloc(p, n_sel, n_missing, n_old, err, e->name);
  for (size_t i = 0; st == PTS_OK && i < n_sel; i++) {
    struct pts_model *m = pts_model_new(e->name, sel[i]);
    if (!m) {
      st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", e->name);
      break;
    }
    p->created[p->n_created++] = m;
    if (cfg) {
      pts_model_set_config(m, cfg);
      cfg = NULL;
    } else {
      Inference__ModelConfig *again = NULL;
      struct pts_error cerr;
      if (read_config(src, &again, &cerr) == PTS_OK)
        pts_model_set_config(m, again);
      else
        pts_model_fail(m, &cerr); /* the file changed under us: this version fails */
    }
  }
  for (size_t i = 0; st == PTS_OK && i < n_missing; i++) {
    struct pts_model *m = pts_model_new(e->name, missing[i]);
    if (!m) {
      st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", e->name);
      break;
    }
    struct pts_error miss;
    pts_error_set(&miss, PTS_INVALID_ARG,
                  "version %lld is specified for model '%s', but the version directory is not "
                  "present",
                  (long long)missing[i], e->name);
    pts_model_absent(m, &miss);
    p->missing[p->n_missing++] = m;
  }
out:
  pts_model_config_free(cfg);
  pts_free(disk);
  pts_free(sel);
  pts_free(missing);
  return st;
}

/* Shows the new versions that have no READY record as LOADING in the table
 * (the others load in the background, behind the version that serves). */
static enum pts_status publish_loading(struct pts_repository *r, struct entry *e, struct plan *p,
                                       struct pts_error *err) {
  enum pts_status st = PTS_OK;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < p->n_created && st == PTS_OK; i++) {
    struct pts_model *m = p->created[i];
    long at = rec_find(e, pts_model_version(m));
    p->background[i] = at >= 0 && pts_model_state(e->recs[at]) == PTS_MODEL_READY;
    if (p->background[i]) continue;
    bool nomem;
    struct pts_model *old = rec_put(e, m, &nomem);
    if (nomem) st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", e->name);
    displaced(p, old);
  }
  pthread_mutex_unlock(&r->mu);
  return st;
}

/* Every version loaded: swap them in. They become READY in the same
 * critical section in which the versions they replace leave the routing
 * table, so the model never goes without a READY version. */
static void publish_success(struct pts_repository *r, struct entry *e, struct plan *p) {
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < p->n_created; i++) {
    struct pts_model *m = p->created[i];
    bool nomem;
    struct pts_model *old = rec_put(e, m, &nomem);
    if (nomem) { /* only for a record that was never published: keep it out */
      doom(p, m, 0);
      continue;
    }
    pts_model_set_state(m, PTS_MODEL_READY);
    if (old) pts_model_set_state(old, PTS_MODEL_UNLOADING);
    displaced(p, old);
  }
  /* READY versions the policy no longer selects are unloaded. */
  for (size_t i = 0; i < e->n_recs; i++) {
    struct pts_model *m = e->recs[i];
    bool ours = false;
    for (size_t k = 0; k < p->n_created; k++) ours = ours || p->created[k] == m;
    if (ours || pts_model_state(m) != PTS_MODEL_READY) continue;
    pts_model_set_state(m, PTS_MODEL_UNLOADING);
    doom(p, m, 0);
  }
  for (size_t i = 0; i < p->n_missing; i++) {
    bool nomem;
    displaced(p, rec_put(e, p->missing[i], &nomem));
  }
  /* The record of a whole-model failure (version -1, fail_whole) said why
   * nothing served; now something does. */
  long stale = rec_find(e, -1);
  if (stale >= 0) {
    struct pts_model *old = e->recs[stale];
    memmove(&e->recs[stale], &e->recs[stale + 1],
            (e->n_recs - (size_t)stale - 1) * sizeof *e->recs);
    e->n_recs--;
    displaced(p, old);
  }
  set_text(&e->failure, NULL);
  pthread_mutex_unlock(&r->mu);
  for (size_t i = 0; i < p->n_created; i++)
    PTS_LOG_INFO("successfully loaded '%s' version %lld", e->name,
                 (long long)pts_model_version(p->created[i]));
}

/* A version failed: the new versions are unloaded, what served still
 * serves, and the new records that were visible say what happened. */
static void publish_failure(struct pts_repository *r, struct entry *e, struct plan *p,
                            const struct pts_error *answer) {
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < p->n_created; i++) {
    struct pts_model *m = p->created[i];
    if (pts_model_loaded(m)) doom(p, m, 0);
  }
  for (size_t i = 0; i < p->n_missing; i++) {
    long at = rec_find(e, pts_model_version(p->missing[i]));
    if (at >= 0 && pts_model_state(e->recs[at]) == PTS_MODEL_READY) continue;
    bool nomem;
    displaced(p, rec_put(e, p->missing[i], &nomem));
  }
  if (has_ready(e)) {
    char msg[PTS_ERROR_MSG_MAX + 128];
    snprintf(msg, sizeof msg,
             "the last load failed, the previously loaded versions still serve: %s",
             answer->msg);
    set_text(&e->failure, msg);
  } else {
    set_text(&e->failure, NULL);
  }
  pthread_mutex_unlock(&r->mu);
}

static enum pts_status load_locked(struct pts_repository *r, struct entry *e,
                                   const struct pts_load_params *params, struct pts_error *err) {
  struct source src = {.name = e->name, .params = params};
  char *dup = NULL;
  pthread_mutex_lock(&r->mu);
  e->queued = false;
  if (e->dir) src.dir_copy = pts_strdup(e->dir);
  if (e->dup) dup = pts_strdup(e->dup);
  bool on_disk = e->on_disk, lost = (e->dir && !src.dir_copy) || (e->dup && !dup);
  pthread_mutex_unlock(&r->mu);
  struct pts_error why;
  pts_error_clear(&why);
  enum pts_status st = PTS_OK;
  if (lost) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", e->name);
  } else if (params && params->n_files) {
    st = pts_override_dir_create(e->name, params->files, params->n_files, &src.override, err);
    if (st == PTS_OK) src.dir = pts_override_dir_path(src.override);
  } else if (dup) {
    pts_error_set(&why, PTS_INVALID_ARG, "%s", dup);
    pthread_mutex_lock(&r->mu);
    e->fp = 1; /* nothing to compare until it is unique again */
    e->have_fp = true;
    pthread_mutex_unlock(&r->mu);
    st = fail_whole(r, e, -1, &why, true, err);
  } else if (!on_disk || !src.dir_copy) {
    st = no_such_model(e->name, err);
  } else {
    src.dir = src.dir_copy;
    /* Before the files are read: a change made during the load shows at
     * the next poll. Kept whether the load succeeds or not, so a model
     * whose files stay broken is not retried at every poll. */
    uint64_t fp = pts_scan_fingerprint(src.dir);
    pthread_mutex_lock(&r->mu);
    e->fp = fp;
    e->have_fp = true;
    pthread_mutex_unlock(&r->mu);
  }
  pts_free(dup);
  if (st != PTS_OK || !src.dir) {
    pts_free(src.dir_copy);
    pts_override_dir_release(src.override);
    return st;
  }

  struct plan p;
  memset(&p, 0, sizeof p);
  st = build_versions(r, e, &src, &p, &why, err);
  if (st == PTS_OK) st = publish_loading(r, e, &p, err);
  struct pts_model *failed = NULL;
  for (size_t i = 0; st == PTS_OK && i < p.n_created; i++) {
    struct pts_model *m = p.created[i];
    struct pts_error verr;
    pts_error_clear(&verr);
    if (failed) {
      pts_error_set(&verr, PTS_INVALID_ARG, "not loaded: version %lld of the same load failed",
                    (long long)pts_model_version(failed));
      pts_model_fail(m, &verr);
    } else if (pts_model_state(m) == PTS_MODEL_UNAVAILABLE) {
      failed = m; /* its config could not be read again */
    } else if (start_version(r, m, src.dir, src.override, &verr) != PTS_OK) {
      if (verr.code == PTS_OK) verr.code = PTS_INTERNAL;
      pts_model_fail(m, &verr);
      failed = m;
    }
  }
  if (st == PTS_OK && failed) {
    /* The versions that did load are not served either (Triton: a load
     * succeeds for all its versions or none). */
    for (size_t i = 0; i < p.n_created; i++) {
      struct pts_model *m = p.created[i];
      if (m == failed || pts_model_failed(m)) continue;
      pts_error_set(&why, PTS_INVALID_ARG, "unloaded: version %lld of the same load failed",
                    (long long)pts_model_version(failed));
      pts_model_fail(m, &why);
    }
    st = load_failed(e->name, failed, err);
    publish_failure(r, e, &p, err);
  } else if (st == PTS_OK) {
    publish_success(r, e, &p);
  } else if (p.created) {
    /* Out of memory half-way: whatever started is unloaded. */
    for (size_t i = 0; i < p.n_created; i++)
      if (pts_model_loaded(p.created[i])) doom(&p, p.created[i], 0);
  }
  plan_finish(r, e, &p);
  pts_free(src.dir_copy);
  pts_override_dir_release(src.override); /* the versions keep their own references */
  return st;
}

enum pts_status pts_repository_load(struct pts_repository *r, const char *name,
                                    const struct pts_load_params *params, struct pts_error *err) {
  struct entry *e = NULL;
  bool files = params && params->n_files > 0;
  enum pts_status st = probe_one(r, name, files, &e, err);
  if (st != PTS_OK) return st;
  if (!e)
    return no_such_model(name, err);
  pthread_mutex_lock(&e->op);
  st = load_locked(r, e, params, err);
  pthread_mutex_unlock(&e->op);
  return st;
}

void pts_repository_set_ensemble(struct pts_repository *r, const struct pts_backend *backend,
                                 void *host) {
  r->ensemble.backend = backend;
  r->ensemble.host = host;
}

enum pts_status pts_repository_ensure_loaded(struct pts_repository *r, const char *name,
                                             struct pts_error *err) {
  struct entry *e = NULL;
  enum pts_status st = probe_one(r, name, false, &e, err);
  if (st != PTS_OK) return st;
  if (e) {
    pthread_mutex_lock(&e->op);
    pthread_mutex_lock(&r->mu);
    bool ready = has_ready(e);
    pthread_mutex_unlock(&r->mu);
    st = ready ? PTS_OK : load_locked(r, e, NULL, err);
    pthread_mutex_unlock(&e->op);
    return st;
  }
  /* Not on disk: it may still serve (loaded with file overrides). */
  struct pts_model *m = NULL;
  if (pts_repository_get(r, name, -1, false, &m, NULL) == PTS_OK) {
    pts_model_release(m);
    return PTS_OK;
  }
  return no_such_model(name, err);
}

enum pts_status pts_repository_read_config(struct pts_repository *r, const char *name,
                                           const struct pts_load_params *params,
                                           Inference__ModelConfig **out, struct pts_error *err) {
  *out = NULL;
  struct entry *e = NULL;
  enum pts_status st = probe_one(r, name, false, &e, err);
  if (st != PTS_OK) return st;
  char *dir = NULL;
  if (e) {
    pthread_mutex_lock(&r->mu);
    dir = e->dir ? pts_strdup(e->dir) : NULL;
    bool lost = e->dir && !dir;
    pthread_mutex_unlock(&r->mu);
    if (lost) return pts_error_set(err, PTS_NOMEM, "out of memory reading model '%s'", name);
  }
  struct source src = {.name = name, .dir = dir, .params = params};
  if (!(params && params->config) && !dir)
    st = pts_error_set(err, PTS_NOT_FOUND, "no model repository holds a model named '%s'", name);
  else
    st = read_config(&src, out, err);
  pts_free(dir);
  return st;
}

/* ------------------------------------------------------------ unloading */

enum pts_status pts_repository_unload(struct pts_repository *r, const char *name,
                                      struct pts_error *err) {
  struct entry *e = NULL;
  enum pts_status st = probe_one(r, name, false, &e, err);
  if (st != PTS_OK) return st;
  if (!e) {
    pthread_mutex_lock(&r->mu);
    e = find_locked(r, name);
    pthread_mutex_unlock(&r->mu);
  }
  if (!e)
    return pts_error_set(err, PTS_NOT_FOUND,
                         "failed to unload '%s': no model named '%s' is known", name, name);
  pthread_mutex_lock(&e->op);
  pthread_mutex_lock(&r->mu);
  e->queued = false;
  e->have_fp = false; /* in poll mode, a model that comes back is loaded again */
  size_t n = 0;
  struct pts_model **going = pts_calloc(e->n_recs + 1, sizeof *going);
  if (!going) {
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_unlock(&e->op);
    return pts_error_set(err, PTS_NOMEM, "out of memory unloading '%s'", name);
  }
  for (size_t i = 0; i < e->n_recs; i++) {
    struct pts_model *m = e->recs[i];
    if (pts_model_state(m) == PTS_MODEL_READY) {
      /* Out of the routing table from here: new requests get a 4xx. */
      pts_model_set_state(m, PTS_MODEL_UNLOADING);
      going[n++] = m;
    } else if (pts_model_failed(m)) {
      /* Asked away: a failure no longer counts against readiness. */
      pts_model_mark_unloaded(m, "unloaded");
    }
  }
  set_text(&e->failure, NULL);
  pthread_mutex_unlock(&r->mu);
  /* The records stay in the table (as UNAVAILABLE "unloaded"); only this
   * entry's op holder could remove them, and that is us. */
  for (size_t i = 0; i < n; i++) pts_model_unload(going[i], 1);
  pts_free(going);
  pthread_mutex_unlock(&e->op);
  return PTS_OK;
}

/* ---------------------------------------------------------------- poll */

void pts_repository_actions_free(struct pts_repository_action *a, size_t n) {
  for (size_t i = 0; a && i < n; i++) pts_free(a[i].name);
  pts_free(a);
}

enum pts_status pts_repository_poll(struct pts_repository *r,
                                    struct pts_repository_action **actions, size_t *n,
                                    struct pts_error *err) {
  *actions = NULL;
  *n = 0;
  enum pts_status st = pts_repository_rescan(r, err);
  if (st != PTS_OK) return st;
  /* What to look at, copied out so the files are read without the lock. */
  struct probe {
    struct entry *e;
    char *dir;
    bool dup;
    uint64_t fp;
  } *probes = NULL;
  size_t np = 0;
  pthread_mutex_lock(&r->mu);
  probes = pts_calloc(r->n + 1, sizeof *probes);
  for (size_t i = 0; probes && i < r->n; i++) {
    struct entry *e = r->entries[i];
    probes[np] = (struct probe){.e = e, .dup = e->dup != NULL};
    if (e->dir && !(probes[np].dir = pts_strdup(e->dir))) continue;
    np++;
  }
  pthread_mutex_unlock(&r->mu);
  if (!probes) return pts_error_set(err, PTS_NOMEM, "out of memory polling the repositories");
  for (size_t i = 0; i < np; i++)
    probes[i].fp = probes[i].dup ? 1 : probes[i].dir ? pts_scan_fingerprint(probes[i].dir) : 0;
  struct pts_repository_action *out = pts_calloc(np + 1, sizeof *out);
  size_t k = 0;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; out && i < np; i++) {
    struct entry *e = probes[i].e;
    if (e->queued) continue;
    bool live = false;
    for (size_t v = 0; v < e->n_recs; v++) live = live || is_live(e->recs[v]);
    enum pts_repository_action_kind kind;
    if (e->on_disk && e->dup && live) {
      /* Which copy is the model is unknown: what serves goes (Triton's
       * poll treats the name as gone, then loads it again once unique). */
      kind = PTS_REPOSITORY_UNLOAD;
    } else if (e->on_disk && (e->dup || probes[i].dir)) {
      if (e->have_fp && e->fp == probes[i].fp) continue;
      kind = PTS_REPOSITORY_LOAD;
    } else if (!e->on_disk && live) {
      kind = PTS_REPOSITORY_UNLOAD;
    } else {
      continue;
    }
    if (!(out[k].name = pts_strdup(e->name))) break;
    out[k++].kind = kind;
    e->queued = true;
  }
  pthread_mutex_unlock(&r->mu);
  for (size_t i = 0; i < np; i++) pts_free(probes[i].dir);
  pts_free(probes);
  if (!out) return pts_error_set(err, PTS_NOMEM, "out of memory polling the repositories");
  *actions = out;
  *n = k;
  return PTS_OK;
}

/* -------------------------------------------------------------- lookups */

/* " (version 3 is UNAVAILABLE: unloaded)": what a client asking for a
 * model that does not serve needs to know. r->mu held. */
static void describe_state(const struct pts_model *m, char *buf, size_t size) {
  char reason[PTS_ERROR_MSG_MAX];
  pts_model_reason(m, reason, sizeof reason);
  enum pts_model_state s = pts_model_state(m);
  /* The reason is cut to leave room for the rest of the message. */
  if (pts_model_version(m) >= 0)
    snprintf(buf, size, " (version %lld is %s%s%.300s)", (long long)pts_model_version(m),
             pts_model_state_name(s), reason[0] ? ": " : "", reason);
  else
    snprintf(buf, size, " (%s%s%.300s)", pts_model_state_name(s), reason[0] ? ": " : "", reason);
}

/* The lookups' entry of `name`: one with a record, or NULL with the
 * "unknown model" error. Under r->mu. */
static const struct entry *known_locked(const struct pts_repository *r, const char *name,
                                        struct pts_error *err) {
  const struct entry *e = find_locked(r, name);
  if (e && e->n_recs > 0) return e;
  pts_error_set(err, PTS_NOT_FOUND, "Request for unknown model: '%s' is not found%s", name,
                e && e->on_disk ? " (it is in the model repository but not loaded)" : "");
  return NULL;
}

/* The record of an explicit version of e, or -1 with the "unknown
 * version" error. Under r->mu. */
static long version_locked(const struct entry *e, const char *name, int64_t version,
                           struct pts_error *err) {
  long at = rec_find(e, version);
  /* Only the record of a whole-model failure (version -1): no version of it
   * was ever made, so the model itself is what is not there (Triton's
   * words for a model its poll left out). */
  if (at < 0 && e->n_recs == 1 && pts_model_version(e->recs[0]) < 0)
    pts_error_set(err, PTS_NOT_FOUND,
                  "Request for unknown model: '%s' is not found (asked for version %lld; no "
                  "version of it is loaded)",
                  name, (long long)version);
  else if (at < 0)
    pts_error_set(err, PTS_NOT_FOUND, "Request for unknown model: '%s' version %lld is not found",
                  name, (long long)version);
  return at;
}

enum pts_status pts_repository_get(struct pts_repository *r, const char *name, int64_t version,
                                   bool any_state, struct pts_model **out,
                                   struct pts_error *err) {
  *out = NULL;
  char state[PTS_ERROR_MSG_MAX];
  enum pts_status st = PTS_OK;
  pthread_mutex_lock(&r->mu);
  const struct entry *e = known_locked(r, name, err);
  struct pts_model *m = NULL;
  long at;
  if (!e) {
    st = PTS_NOT_FOUND;
  } else if (version < 0) {
    for (size_t v = e->n_recs; v-- > 0 && !m;)
      if (pts_model_state(e->recs[v]) == PTS_MODEL_READY) m = e->recs[v];
    if (!m && any_state) m = e->recs[e->n_recs - 1];
    if (!m) {
      describe_state(e->recs[e->n_recs - 1], state, sizeof state);
      st = pts_error_set(err, PTS_NOT_FOUND,
                         "Request for unknown model: '%s' has no available versions%s", name,
                         state);
    }
  } else if ((at = version_locked(e, name, version, err)) < 0) {
    st = PTS_NOT_FOUND;
  } else if (!any_state && pts_model_state(e->recs[at]) != PTS_MODEL_READY) {
    /* Triton answers UNAVAILABLE (503) here; a version that is loading,
     * unloading or unloaded is the client's to avoid, so ptserve answers
     * a 4xx that names the state instead. */
    describe_state(e->recs[at], state, sizeof state);
    st = pts_error_set(err, PTS_NOT_FOUND,
                       "Request for unknown model: '%s' version %lld is not at ready state%s",
                       name, (long long)version, state);
  } else {
    m = e->recs[at];
  }
  if (m) *out = pts_model_retain(m);
  pthread_mutex_unlock(&r->mu);
  return st;
}

enum pts_status pts_repository_ready(struct pts_repository *r, const char *name, int64_t version,
                                     bool *ready, struct pts_error *err) {
  *ready = false;
  enum pts_status st = PTS_OK;
  pthread_mutex_lock(&r->mu);
  const struct entry *e = known_locked(r, name, err);
  long at;
  if (!e) {
    st = PTS_NOT_FOUND;
  } else if (version < 0) {
    for (size_t v = 0; v < e->n_recs && !*ready; v++)
      *ready = pts_model_state(e->recs[v]) == PTS_MODEL_READY;
  } else if ((at = version_locked(e, name, version, err)) < 0) {
    st = PTS_NOT_FOUND;
  } else {
    *ready = pts_model_state(e->recs[at]) == PTS_MODEL_READY;
  }
  pthread_mutex_unlock(&r->mu);
  return st;
}

enum pts_status pts_repository_ready_versions(struct pts_repository *r, const char *name,
                                              int64_t **versions, size_t *n,
                                              struct pts_error *err) {
  *versions = NULL;
  *n = 0;
  pthread_mutex_lock(&r->mu);
  const struct entry *e = find_locked(r, name);
  if (!e || e->n_recs == 0) {
    pthread_mutex_unlock(&r->mu);
    return pts_error_set(err, PTS_NOT_FOUND, "Request for unknown model: '%s' is not found", name);
  }
  int64_t *out = pts_calloc(e->n_recs, sizeof *out);
  size_t k = 0;
  for (size_t v = 0; out && v < e->n_recs; v++)
    if (pts_model_state(e->recs[v]) == PTS_MODEL_READY) out[k++] = pts_model_version(e->recs[v]);
  pthread_mutex_unlock(&r->mu);
  if (!out) return pts_error_set(err, PTS_NOMEM, "out of memory listing versions of '%s'", name);
  *versions = out;
  *n = k;
  return PTS_OK;
}

enum pts_status pts_repository_snapshot(struct pts_repository *r, const char *name,
                                        bool ready_only, struct pts_model ***models, size_t *n,
                                        struct pts_error *err) {
  *models = NULL;
  *n = 0;
  pthread_mutex_lock(&r->mu);
  size_t first = 0, last = r->n;
  if (name) {
    bool found;
    first = lower_bound(r, name, &found);
    if (!found) {
      pthread_mutex_unlock(&r->mu);
      return pts_error_set(err, PTS_NOT_FOUND, "Request for unknown model: '%s' is not found",
                           name);
    }
    last = first + 1;
  }
  size_t total = 0;
  for (size_t i = first; i < last; i++) total += r->entries[i]->n_recs;
  struct pts_model **out = pts_calloc(total + 1, sizeof *out);
  size_t k = 0;
  for (size_t i = first; out && i < last; i++) {
    const struct entry *e = r->entries[i];
    for (size_t v = 0; v < e->n_recs; v++)
      if (!ready_only || pts_model_state(e->recs[v]) == PTS_MODEL_READY)
        out[k++] = pts_model_retain(e->recs[v]);
  }
  pthread_mutex_unlock(&r->mu);
  if (!out) return pts_error_set(err, PTS_NOMEM, "out of memory listing the models");
  *models = out;
  *n = k;
  return PTS_OK;
}

void pts_repository_snapshot_free(struct pts_model **models, size_t n) {
  for (size_t i = 0; models && i < n; i++) pts_model_release(models[i]);
  pts_free(models);
}

enum pts_status pts_repository_index(struct pts_repository *r, bool ready_only,
                                     struct pts_index_entry **entries, size_t *n,
                                     struct pts_error *err) {
  *entries = NULL;
  *n = 0;
  pthread_mutex_lock(&r->mu);
  size_t total = 0;
  for (size_t i = 0; i < r->n; i++) total += r->entries[i]->n_recs + 1;
  struct pts_index_entry *out = pts_calloc(total + 1, sizeof *out);
  size_t k = 0;
  bool nomem = !out;
  char reason[PTS_ERROR_MSG_MAX + 128];
  for (size_t i = 0; !nomem && i < r->n; i++) {
    const struct entry *e = r->entries[i];
    /* A model the repositories no longer hold is listed while a version of
     * it serves (or failed and was not unloaded); Triton lists it never. */
    bool shown = e->on_disk;
    for (size_t v = 0; v < e->n_recs && !shown; v++)
      shown = is_live(e->recs[v]) || pts_model_failed(e->recs[v]);
    if (!shown) continue;
    if (e->n_recs == 0) {
      if (ready_only) continue;
      out[k].name = pts_strdup(e->name);
      out[k].reason = pts_strdup("");
      out[k].version = -1;
      out[k].state = PTS_MODEL_UNKNOWN;
      nomem = !out[k].name || !out[k].reason;
      k++;
      continue;
    }
    for (size_t v = 0; v < e->n_recs && !nomem; v++) {
      const struct pts_model *m = e->recs[v];
      enum pts_model_state state = pts_model_state(m);
      if (ready_only && state != PTS_MODEL_READY) continue;
      if (state == PTS_MODEL_READY)
        snprintf(reason, sizeof reason, "%s", e->failure ? e->failure : "");
      else
        pts_model_reason(m, reason, sizeof reason);
      out[k].name = pts_strdup(e->name);
      out[k].reason = pts_strdup(reason);
      out[k].version = pts_model_version(m);
      out[k].state = state;
      nomem = !out[k].name || !out[k].reason;
      k++;
    }
  }
  pthread_mutex_unlock(&r->mu);
  if (nomem) {
    for (size_t i = 0; out && i < k; i++) {
      pts_free(out[i].name);
      pts_free(out[i].reason);
    }
    pts_free(out);
    return pts_error_set(err, PTS_NOMEM, "out of memory building the repository index");
  }
  *entries = out;
  *n = k;
  return PTS_OK;
}

bool pts_repository_all_ready(struct pts_repository *r) {
  bool ready = true;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->n && ready; i++) {
    const struct entry *e = r->entries[i];
    for (size_t v = 0; v < e->n_recs && ready; v++) {
      enum pts_model_state s = pts_model_state(e->recs[v]);
      if (s == PTS_MODEL_LOADING || (s == PTS_MODEL_UNAVAILABLE && pts_model_failed(e->recs[v])))
        ready = false;
    }
  }
  pthread_mutex_unlock(&r->mu);
  return ready;
}
