/* frontend/http/stats_json.c — see stats_json.h. */
#include "frontend/http/stats_json.h"

#include <stdio.h>
#include <string.h>

#include "frontend/http/jsonw.h"

/* `"key":{"count":N,"ns":N}` */
static void duration(struct pts_jsonw *w, const char *key, const struct pts_stat_duration *d) {
  pts_jsonw_key(w, key);
  pts_jsonw_cstr(w, "{\"count\":");
  pts_jsonw_uint(w, d->count);
  pts_jsonw_cstr(w, ",\"ns\":");
  pts_jsonw_uint(w, d->ns);
  pts_jsonw_cstr(w, "}");
}

static void inference_stats(struct pts_jsonw *w, const struct pts_model_stats *st) {
  pts_jsonw_key(w, "inference_stats");
  pts_jsonw_cstr(w, "{");
  duration(w, "success", &st->success);
  pts_jsonw_cstr(w, ",");
  duration(w, "fail", &st->fail);
  pts_jsonw_cstr(w, ",");
  duration(w, "queue", &st->queue);
  pts_jsonw_cstr(w, ",");
  duration(w, "compute_input", &st->compute_input);
  pts_jsonw_cstr(w, ",");
  duration(w, "compute_infer", &st->compute_infer);
  pts_jsonw_cstr(w, ",");
  duration(w, "compute_output", &st->compute_output);
  pts_jsonw_cstr(w, ",");
  duration(w, "cache_hit", &st->cache_hit);
  pts_jsonw_cstr(w, ",");
  duration(w, "cache_miss", &st->cache_miss);
  pts_jsonw_cstr(w, "}");
}

static void batch_stats(struct pts_jsonw *w, const struct pts_model_stats *st) {
  pts_jsonw_key(w, "batch_stats");
  pts_jsonw_cstr(w, "[");
  for (size_t i = 0; i < st->n_batch_stats; i++) {
    const struct pts_batch_stat *b = &st->batch_stats[i];
    if (i) pts_jsonw_cstr(w, ",");
    pts_jsonw_cstr(w, "{");
    pts_jsonw_key(w, "batch_size");
    pts_jsonw_uint(w, b->batch_size);
    pts_jsonw_cstr(w, ",");
    duration(w, "compute_input", &b->compute_input);
    pts_jsonw_cstr(w, ",");
    duration(w, "compute_infer", &b->compute_infer);
    pts_jsonw_cstr(w, ",");
    duration(w, "compute_output", &b->compute_output);
    pts_jsonw_cstr(w, "}");
  }
  pts_jsonw_cstr(w, "]");
}

static void model(struct pts_jsonw *w, const struct pts_model_stats *st) {
  char version[24];
  snprintf(version, sizeof version, "%lld", (long long)st->version);
  pts_jsonw_cstr(w, "{");
  pts_jsonw_key(w, "name");
  pts_jsonw_str(w, st->name ? st->name : "", st->name ? strlen(st->name) : 0);
  pts_jsonw_cstr(w, ",");
  pts_jsonw_key(w, "version");
  pts_jsonw_str(w, version, strlen(version));
  pts_jsonw_cstr(w, ",");
  pts_jsonw_key(w, "last_inference");
  pts_jsonw_uint(w, st->last_inference_ms);
  pts_jsonw_cstr(w, ",");
  pts_jsonw_key(w, "inference_count");
  pts_jsonw_uint(w, st->inference_count);
  pts_jsonw_cstr(w, ",");
  pts_jsonw_key(w, "execution_count");
  pts_jsonw_uint(w, st->execution_count);
  pts_jsonw_cstr(w, ",");
  inference_stats(w, st);
  pts_jsonw_cstr(w, ",\"response_stats\":{},");
  batch_stats(w, st);
  pts_jsonw_cstr(w, ",\"memory_usage\":[]}");
}

char *pts_v2_stats_json(const struct pts_model_stats *stats, size_t n, size_t *len) {
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  pts_jsonw_cstr(&w, "{\"model_stats\":[");
  for (size_t i = 0; i < n; i++) {
    if (i) pts_jsonw_cstr(&w, ",");
    model(&w, &stats[i]);
  }
  pts_jsonw_cstr(&w, "]}");
  return pts_jsonw_take(&w, len);
}
