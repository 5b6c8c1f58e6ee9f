/* server/stats.c — pts_server_model_stats: the statistics of the READY model
 * versions, for the statistics extension and the metrics endpoint. Each
 * version's counters live in its scheduler; this file only picks versions
 * (from a snapshot of the routing table, so a version that is unloaded
 * meanwhile stays readable) and collects their snapshots. */
#include <string.h>

#include "core/alloc.h"
#include "server/server_impl.h"

enum pts_status pts_server_model_stats(struct pts_server *s, const char *name, int64_t version,
                                       struct pts_model_stats **out, size_t *n,
                                       struct pts_error *err) {
  *out = NULL;
  *n = 0;
  struct pts_model **models = NULL;
  size_t nm = 0;
  struct pts_error ignored;
  if (pts_repository_snapshot(s->repo, name, true, &models, &nm, &ignored) != PTS_OK ||
      (name && nm == 0)) {
    pts_repository_snapshot_free(models, nm);
    return pts_error_set(err, PTS_INVALID_ARG, "requested model '%s' is not available",
                         name ? name : "");
  }
  size_t want = 0;
  for (size_t i = 0; i < nm; i++)
    want += pts_model_scheduler(models[i]) &&
            (version < 0 || pts_model_version(models[i]) == version);
  if (name && version >= 0 && want == 0) {
    pts_repository_snapshot_free(models, nm);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "requested model version %lld is not available for model '%s'",
                         (long long)version, name);
  }
  struct pts_model_stats *all = pts_calloc(want + 1, sizeof *all);
  enum pts_status st =
      all ? PTS_OK : pts_error_set(err, PTS_NOMEM, "out of memory collecting statistics");
  size_t k = 0;
  for (size_t i = 0; st == PTS_OK && i < nm; i++) {
    struct pts_model *m = models[i];
    struct pts_scheduler *sched = pts_model_scheduler(m);
    if (!sched || (version >= 0 && pts_model_version(m) != version)) continue;
    st = pts_scheduler_stats(sched, &all[k], err);
    if (st == PTS_OK && !(all[k].name = pts_strdup(pts_model_name(m)))) {
      pts_model_stats_clear(&all[k]);
      st = pts_error_set(err, PTS_NOMEM, "out of memory collecting statistics");
    }
    if (st == PTS_OK) k++;
  }
  pts_repository_snapshot_free(models, nm);
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
