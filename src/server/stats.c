/* server/stats.c — pts_server_model_stats: the statistics of the READY model
 * versions, for the statistics extension and the metrics endpoint. Each
 * version's counters live in its scheduler; this file only picks versions
 * and collects snapshots. */
#include <string.h>

#include "core/alloc.h"
#include "server/server_impl.h"

static bool is_ready(const struct pts_model *m) {
  return pts_model_state(m) == PTS_MODEL_READY && pts_model_scheduler(m) != NULL;
}

/* Whether version `v` of rm is wanted (v < 0: every READY one). */
static bool wanted(const struct pts_model *m, int64_t version) {
  return is_ready(m) && (version < 0 || pts_model_version(m) == version);
}

static size_t count_wanted(const struct pts_repository_model *rm, int64_t version) {
  size_t n = 0;
  for (size_t v = 0; v < rm->n_versions; v++) n += wanted(rm->versions[v], version);
  return n;
}

static enum pts_status snapshot(struct pts_model *m, struct pts_model_stats *out,
                                struct pts_error *err) {
  pts_model_retain(m);
  enum pts_status st = pts_scheduler_stats(pts_model_scheduler(m), out, err);
  if (st == PTS_OK && !(out->name = pts_strdup(pts_model_name(m)))) {
    pts_model_stats_clear(out);
    st = pts_error_set(err, PTS_NOMEM, "out of memory collecting statistics");
  }
  pts_model_release(m);
  return st;
}

/* Appends the wanted versions of rm to out[*k..]. */
static enum pts_status collect(const struct pts_repository_model *rm, int64_t version,
                               struct pts_model_stats *out, size_t *k, struct pts_error *err) {
  for (size_t v = 0; v < rm->n_versions; v++) {
    if (!wanted(rm->versions[v], version)) continue;
    enum pts_status st = snapshot(rm->versions[v], &out[*k], err);
    if (st != PTS_OK) return st;
    (*k)++;
  }
  return PTS_OK;
}

static enum pts_status check_named(const struct pts_repository_model *rm, const char *name,
                                   int64_t version, struct pts_error *err) {
  if (!rm || count_wanted(rm, -1) == 0)
    return pts_error_set(err, PTS_INVALID_ARG, "requested model '%s' is not available", name);
  if (count_wanted(rm, version) == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "requested model version %lld is not available for model '%s'",
                         (long long)version, name);
  return PTS_OK;
}

enum pts_status pts_server_model_stats(struct pts_server *s, const char *name, int64_t version,
                                       struct pts_model_stats **out, size_t *n,
                                       struct pts_error *err) {
  *out = NULL;
  *n = 0;
  const struct pts_repository_model *one = NULL;
  size_t total = 0;
  if (name) {
    one = pts_repository_find(s->repo, name);
    enum pts_status st = check_named(one, name, version, err);
    if (st != PTS_OK) return st;
    total = count_wanted(one, version);
  } else {
    for (size_t i = 0; i < pts_repository_count(s->repo); i++)
      total += count_wanted(pts_repository_at(s->repo, i), -1);
  }
  struct pts_model_stats *all = pts_calloc(total ? total : 1, sizeof *all);
  if (!all) return pts_error_set(err, PTS_NOMEM, "out of memory collecting statistics");
  size_t k = 0;
  enum pts_status st = PTS_OK;
  if (one) st = collect(one, version, all, &k, err);
  for (size_t i = 0; !one && st == PTS_OK && i < pts_repository_count(s->repo); i++)
    st = collect(pts_repository_at(s->repo, i), -1, all, &k, err);
  if (st != PTS_OK) {
    pts_server_model_stats_free(all, k);
    return st;
  }
  *out = all;
  *n = k;
  return PTS_OK;
}

void pts_server_model_stats_free(struct pts_model_stats *st, size_t n) {
  for (size_t i = 0; st && i < n; i++) pts_model_stats_clear(&st[i]);
  pts_free(st);
}
