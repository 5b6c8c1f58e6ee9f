/* scheduler/stats.c — see stats.h. */
#include "scheduler/stats.h"

#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/metrics_config.h"
#include "scheduler/request.h"

const char *pts_fail_reason_name(enum pts_fail_reason r) {
  switch (r) {
    case PTS_FAIL_REJECTED:
      return "REJECTED";
    case PTS_FAIL_CANCELED:
      return "CANCELED";
    case PTS_FAIL_BACKEND:
      return "BACKEND";
    default:
      return "OTHER";
  }
}

void pts_model_stats_clear(struct pts_model_stats *st) {
  if (!st) return;
  pts_free(st->name);
  pts_free(st->batch_stats);
  memset(st, 0, sizeof *st);
}

uint64_t pts_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void pts_stats_init(struct pts_stats *s) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
}

void pts_stats_destroy(struct pts_stats *s) {
  pts_free(s->v.batch_stats);
  for (int i = 0; i < PTS_SUMMARY_COUNT; i++) pts_quantiles_free(s->estimators[i]);
  pthread_mutex_destroy(&s->lock);
  memset(s, 0, sizeof *s);
}

enum pts_status pts_stats_enable_summaries(struct pts_stats *s, bool caches,
                                           struct pts_error *err) {
  const struct pts_metrics_config *c = pts_metrics_config_get();
  if (!c->summary_latencies) return PTS_OK;
  uint64_t now = pts_now_ns();
  for (int i = 0; i < PTS_SUMMARY_COUNT; i++) {
    /* Triton leaves the request summary out of a caching model (a hit's
     * duration would mislead it) and has the cache ones only there. */
    bool cache_kind = i == PTS_SUMMARY_CACHE_HIT || i == PTS_SUMMARY_CACHE_MISS;
    if (caches ? i == PTS_SUMMARY_REQUEST : cache_kind) continue;
    s->estimators[i] = pts_quantiles_new(c->quantiles, c->n_quantiles, now);
    if (!s->estimators[i])
      return pts_error_set(err, PTS_NOMEM, "out of memory making the latency summaries");
    s->v.summaries[i].on = true;
  }
  return PTS_OK;
}

/* Called with the lock held. */
static void observe_locked(struct pts_stats *s, enum pts_summary which, uint64_t ns,
                           uint64_t now) {
  double us = (double)(ns / 1000u);
  s->v.summaries[which].count++;
  s->v.summaries[which].sum += us;
  pts_quantiles_observe(s->estimators[which], us, now);
}

void pts_stats_observe(struct pts_stats *s, enum pts_summary which, uint64_t ns) {
  if (!s->estimators[which]) return;
  uint64_t now = pts_now_ns();
  pthread_mutex_lock(&s->lock);
  observe_locked(s, which, ns, now);
  pthread_mutex_unlock(&s->lock);
}

static void add(struct pts_stat_duration *d, uint64_t count, uint64_t ns) {
  d->count += count;
  d->ns += ns;
}

static uint64_t span(uint64_t from, uint64_t to) { return to > from ? to - from : 0; }

/* The entry for `size`, kept sorted; NULL when it can not be added (the
 * batch then goes uncounted there, which is better than failing a request
 * over statistics). Called with the lock held. */
static struct pts_batch_stat *batch_entry(struct pts_stats *s, uint64_t size) {
  struct pts_model_stats *v = &s->v;
  size_t i = 0;
  while (i < v->n_batch_stats && v->batch_stats[i].batch_size < size) i++;
  if (i < v->n_batch_stats && v->batch_stats[i].batch_size == size) return &v->batch_stats[i];
  if (v->n_batch_stats == s->batch_cap) {
    size_t cap = s->batch_cap ? s->batch_cap * 2 : 8;
    struct pts_batch_stat *grown = pts_realloc(v->batch_stats, cap * sizeof *grown);
    if (!grown) return NULL;
    v->batch_stats = grown;
    s->batch_cap = cap;
  }
  memmove(&v->batch_stats[i + 1], &v->batch_stats[i],
          (v->n_batch_stats - i) * sizeof v->batch_stats[0]);
  memset(&v->batch_stats[i], 0, sizeof v->batch_stats[i]);
  v->batch_stats[i].batch_size = size;
  v->n_batch_stats++;
  return &v->batch_stats[i];
}

void pts_stats_batch_done(struct pts_stats *s, int64_t batch_size, size_t n_requests,
                          uint64_t queue_ns, const struct pts_batch_times *t) {
  uint64_t in = span(t->start_ns, t->input_end_ns);
  uint64_t infer = span(t->input_end_ns, t->infer_end_ns);
  uint64_t out = span(t->infer_end_ns, t->output_end_ns);
  uint64_t n = n_requests;
  uint64_t size = batch_size > 0 ? (uint64_t)batch_size : 1;
  pthread_mutex_lock(&s->lock);
  struct pts_model_stats *v = &s->v;
  v->execution_count++;
  v->inference_count += size;
  add(&v->queue, n, queue_ns);
  /* Every request of the batch waited for the whole batch. */
  add(&v->compute_input, n, in * n);
  add(&v->compute_infer, n, infer * n);
  add(&v->compute_output, n, out * n);
  if (s->estimators[PTS_SUMMARY_COMPUTE_INFER]) {
    uint64_t now = pts_now_ns();
    for (uint64_t i = 0; i < n; i++) {
      observe_locked(s, PTS_SUMMARY_COMPUTE_INPUT, in, now);
      observe_locked(s, PTS_SUMMARY_COMPUTE_INFER, infer, now);
      observe_locked(s, PTS_SUMMARY_COMPUTE_OUTPUT, out, now);
    }
  }
  struct pts_batch_stat *b = batch_entry(s, size);
  if (b) {
    add(&b->compute_input, 1, in);
    add(&b->compute_infer, 1, infer);
    add(&b->compute_output, 1, out);
  }
  pthread_mutex_unlock(&s->lock);
}

void pts_stats_cache_hit(struct pts_stats *s, uint64_t queue_ns, uint64_t lookup_ns) {
  pthread_mutex_lock(&s->lock);
  add(&s->v.queue, 1, queue_ns);
  add(&s->v.cache_hit, 1, lookup_ns);
  if (s->estimators[PTS_SUMMARY_CACHE_HIT]) {
    uint64_t now = pts_now_ns();
    observe_locked(s, PTS_SUMMARY_QUEUE, queue_ns, now);
    observe_locked(s, PTS_SUMMARY_CACHE_HIT, lookup_ns, now);
  }
  pthread_mutex_unlock(&s->lock);
}

void pts_stats_cache_miss(struct pts_stats *s, uint64_t ns) {
  pthread_mutex_lock(&s->lock);
  add(&s->v.cache_miss, 1, ns);
  if (s->estimators[PTS_SUMMARY_CACHE_MISS])
    observe_locked(s, PTS_SUMMARY_CACHE_MISS, ns, pts_now_ns());
  pthread_mutex_unlock(&s->lock);
}

void pts_stats_request_success(struct pts_stats *s, uint64_t duration_ns) {
  uint64_t now_ms = pts_wall_ms();
  pthread_mutex_lock(&s->lock);
  add(&s->v.success, 1, duration_ns);
  if (now_ms > s->v.last_inference_ms) s->v.last_inference_ms = now_ms;
  if (s->estimators[PTS_SUMMARY_REQUEST])
    observe_locked(s, PTS_SUMMARY_REQUEST, duration_ns, pts_now_ns());
  pthread_mutex_unlock(&s->lock);
}

void pts_stats_request_failure(struct pts_stats *s, enum pts_fail_reason why,
                               uint64_t duration_ns) {
  if ((unsigned)why >= PTS_FAIL_REASON_COUNT) why = PTS_FAIL_OTHER;
  uint64_t now_ms = pts_wall_ms();
  pthread_mutex_lock(&s->lock);
  add(&s->v.fail, 1, duration_ns);
  s->v.fail_by_reason[why]++;
  if (now_ms > s->v.last_inference_ms) s->v.last_inference_ms = now_ms;
  pthread_mutex_unlock(&s->lock);
}

enum pts_status pts_stats_snapshot(struct pts_stats *s, struct pts_model_stats *out,
                                   struct pts_error *err) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&s->lock);
  size_t n = s->v.n_batch_stats;
  struct pts_batch_stat *copy = n ? pts_malloc(n * sizeof *copy) : NULL;
  if (n && !copy) {
    pthread_mutex_unlock(&s->lock);
    return pts_error_set(err, PTS_NOMEM, "out of memory copying the statistics");
  }
  *out = s->v;
  if (n) memcpy(copy, s->v.batch_stats, n * sizeof *copy);
  uint64_t now = pts_now_ns();
  for (int i = 0; i < PTS_SUMMARY_COUNT; i++)
    if (s->estimators[i]) pts_quantiles_get(s->estimators[i], now, out->summaries[i].values);
  pthread_mutex_unlock(&s->lock);
  out->name = NULL;
  out->batch_stats = copy;
  return PTS_OK;
}
