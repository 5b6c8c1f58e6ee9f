/* ptperf/lib/stats.c — statistics documents and their deltas. */
#include "ptperf/lib/stats.h"

#include <jansson.h>
#include <string.h>

static bool read_count(json_t *obj, const char *key, uint64_t *acc) {
  json_t *v = json_object_get(obj, key);
  if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
  *acc += (uint64_t)json_integer_value(v);
  return true;
}

static bool read_duration(json_t *inference_stats, const char *key, struct ptperf_duration *acc) {
  json_t *d = json_object_get(inference_stats, key);
  return json_is_object(d) && read_count(d, "count", &acc->count) && read_count(d, "ns", &acc->ns);
}

static enum pts_status add_entry(json_t *e, size_t idx, struct ptperf_stats *s,
                                 struct pts_error *err) {
  json_t *is = json_object_get(e, "inference_stats");
  static const char *const keys[] = {"success",       "fail",          "queue",
                                     "compute_input", "compute_infer", "compute_output"};
  struct ptperf_duration *slots[] = {&s->success,       &s->fail,          &s->queue,
                                     &s->compute_input, &s->compute_infer, &s->compute_output};
  if (!read_count(e, "inference_count", &s->inference_count) ||
      !read_count(e, "execution_count", &s->execution_count))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "statistics: model_stats[%zu] lacks a numeric inference_count or "
                         "execution_count",
                         idx);
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
    if (!read_duration(is, keys[k], slots[k]))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "statistics: model_stats[%zu].inference_stats.%s lacks a numeric "
                           "count or ns",
                           idx, keys[k]);
  return PTS_OK;
}

enum pts_status ptperf_stats_parse(const char *json, const char *model, struct ptperf_stats *out,
                                   struct pts_error *err) {
  memset(out, 0, sizeof *out);
  json_error_t jerr;
  json_t *root = json_loads(json, 0, &jerr);
  if (!root)
    return pts_error_set(err, PTS_INVALID_ARG, "statistics are not JSON (%d:%d): %s", jerr.line,
                         jerr.column, jerr.text);
  enum pts_status st = PTS_OK;
  json_t *list = json_object_get(root, "model_stats");
  size_t found = 0;
  if (!json_is_array(list)) {
    st = pts_error_set(err, PTS_INVALID_ARG, "statistics lack a \"model_stats\" array");
    goto out;
  }
  for (size_t i = 0; i < json_array_size(list) && st == PTS_OK; i++) {
    json_t *e = json_array_get(list, i);
    const char *name = json_string_value(json_object_get(e, "name"));
    if (!name || strcmp(name, model) != 0) continue;
    found++;
    st = add_entry(e, i, out, err);
  }
  if (st == PTS_OK && found == 0)
    st = pts_error_set(err, PTS_INVALID_ARG, "statistics have no entry for model '%s'", model);
out:
  json_decref(root);
  return st;
}

static double average_us(struct ptperf_duration b, struct ptperf_duration a) {
  uint64_t n = a.count - b.count;
  return n ? (double)(a.ns - b.ns) / (double)n / 1000.0 : 0.0;
}

static bool went_back(struct ptperf_duration b, struct ptperf_duration a) {
  return a.count < b.count || a.ns < b.ns;
}

void ptperf_stats_delta(const struct ptperf_stats *before, const struct ptperf_stats *after,
                        struct ptperf_breakdown *out) {
  memset(out, 0, sizeof *out);
  const struct ptperf_stats *b = before, *a = after;
  if (went_back(b->success, a->success) || went_back(b->queue, a->queue) ||
      went_back(b->compute_input, a->compute_input) ||
      went_back(b->compute_infer, a->compute_infer) ||
      went_back(b->compute_output, a->compute_output) || a->inference_count < b->inference_count ||
      a->execution_count < b->execution_count)
    return;
  out->requests = a->success.count - b->success.count;
  if (out->requests == 0) return;
  out->valid = true;
  out->request_us = average_us(b->success, a->success);
  out->queue_us = average_us(b->queue, a->queue);
  out->compute_input_us = average_us(b->compute_input, a->compute_input);
  out->compute_infer_us = average_us(b->compute_infer, a->compute_infer);
  out->compute_output_us = average_us(b->compute_output, a->compute_output);
  uint64_t execs = a->execution_count - b->execution_count;
  out->avg_batch = execs ? (double)(a->inference_count - b->inference_count) / (double)execs : 0;
}
