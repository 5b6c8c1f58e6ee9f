/* core/quantiles.c — see quantiles.h. The CKMS steps follow prometheus-cpp
 * (core/src/detail/ckms_quantiles.cc) step for step, so that a summary
 * answers what tritonserver's would for the same values, quirks included
 * (the allowed error is scaled by the number of stored samples). */
#include "core/quantiles.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

#define BUFFER_SIZE 500 /* values batched before they are merged, as prometheus-cpp */

struct item {
  double value;
  int64_t g;     /* rank of this sample minus the rank of the one before */
  int64_t delta; /* how uncertain that rank is */
};

struct ckms {
  struct item *sample; /* owned, sorted by value */
  size_t n_sample, cap;
  uint64_t count;
  double buffer[BUFFER_SIZE];
  size_t n_buffer;
};

struct pts_quantiles {
  struct pts_quantile_target targets[PTS_QUANTILES_MAX];
  double u[PTS_QUANTILES_MAX], v[PTS_QUANTILES_MAX]; /* the error's slopes below and above q */
  size_t n_targets;
  struct ckms buckets[PTS_QUANTILES_AGE_BUCKETS];
  size_t current;
  uint64_t last_rotation_ns;
};

static double allowable_error(const struct pts_quantiles *q, const struct ckms *c, double rank) {
  double size = (double)c->n_sample;
  double min_error = size + 1;
  for (size_t i = 0; i < q->n_targets; i++) {
    double e = rank <= q->targets[i].quantile * size ? q->u[i] * (size - rank) : q->v[i] * rank;
    if (e < min_error) min_error = e;
  }
  return min_error;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static bool insert_at(struct ckms *c, size_t at, struct item it) {
  if (c->n_sample == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 64;
    struct item *grown = pts_realloc(c->sample, cap * sizeof *grown);
    if (!grown) return false;
    c->sample = grown;
    c->cap = cap;
  }
  memmove(&c->sample[at + 1], &c->sample[at], (c->n_sample - at) * sizeof *c->sample);
  c->sample[at] = it;
  c->n_sample++;
  return true;
}

static void erase_at(struct ckms *c, size_t at) {
  memmove(&c->sample[at], &c->sample[at + 1], (c->n_sample - at - 1) * sizeof *c->sample);
  c->n_sample--;
}

static void insert_batch(const struct pts_quantiles *q, struct ckms *c) {
  if (c->n_buffer == 0) return;
  qsort(c->buffer, c->n_buffer, sizeof c->buffer[0], cmp_double);
  size_t start = 0;
  if (c->n_sample == 0) {
    if (!insert_at(c, 0, (struct item){c->buffer[0], 1, 0})) goto out;
    start = 1;
    c->count++;
  }
  size_t idx = 0, item = idx++;
  for (size_t i = start; i < c->n_buffer; i++) {
    double v = c->buffer[i];
    while (idx < c->n_sample && c->sample[item].value < v) item = idx++;
    if (c->sample[item].value > v) --idx;
    int64_t delta = 0;
    if (!(idx == 1 || idx + 1 == c->n_sample))
      delta = (int64_t)floor(allowable_error(q, c, (double)(idx + 1))) + 1;
    if (!insert_at(c, idx, (struct item){v, 1, delta})) break;
    c->count++;
    item = idx++;
  }
out:
  c->n_buffer = 0;
}

static void compress(const struct pts_quantiles *q, struct ckms *c) {
  if (c->n_sample < 2) return;
  size_t idx = 0, prev, next = idx++;
  while (idx < c->n_sample) {
    prev = next;
    next = idx++;
    if ((double)(c->sample[prev].g + c->sample[next].g + c->sample[next].delta) <=
        allowable_error(q, c, (double)(idx - 1))) {
      c->sample[next].g += c->sample[prev].g;
      /* The cursors are not moved back, so the next pair skips one
       * sample: prometheus-cpp's walk, kept for the same answers. */
      erase_at(c, prev);
    }
  }
}

static double ckms_get(const struct pts_quantiles *q, struct ckms *c, double quantile) {
  insert_batch(q, c);
  compress(q, c);
  if (c->n_sample == 0) return NAN;
  int64_t rank_min = 0;
  int64_t desired = (int64_t)(quantile * (double)c->count);
  double bound = (double)desired + allowable_error(q, c, (double)desired) / 2;
  for (size_t i = 1; i < c->n_sample; i++) {
    const struct item *prev = &c->sample[i - 1], *cur = &c->sample[i];
    rank_min += prev->g;
    if ((double)(rank_min + cur->g + cur->delta) > bound) return prev->value;
  }
  return c->sample[c->n_sample - 1].value;
}

static void ckms_observe(const struct pts_quantiles *q, struct ckms *c, double value) {
  c->buffer[c->n_buffer++] = value;
  if (c->n_buffer == BUFFER_SIZE) {
    insert_batch(q, c);
    compress(q, c);
  }
}

static void ckms_reset(struct ckms *c) {
  c->count = 0;
  c->n_sample = 0;
  c->n_buffer = 0;
}

struct pts_quantiles *pts_quantiles_new(const struct pts_quantile_target *targets, size_t n,
                                        uint64_t now_ns) {
  if (n == 0 || n > PTS_QUANTILES_MAX) return NULL;
  struct pts_quantiles *q = pts_calloc(1, sizeof *q);
  if (!q) return NULL;
  for (size_t i = 0; i < n; i++) {
    q->targets[i] = targets[i];
    q->u[i] = 2.0 * targets[i].error / (1.0 - targets[i].quantile);
    q->v[i] = 2.0 * targets[i].error / targets[i].quantile;
  }
  q->n_targets = n;
  q->last_rotation_ns = now_ns;
  return q;
}

void pts_quantiles_free(struct pts_quantiles *q) {
  if (!q) return;
  for (size_t b = 0; b < PTS_QUANTILES_AGE_BUCKETS; b++) pts_free(q->buckets[b].sample);
  pts_free(q);
}

/* Clears the oldest bucket once per elapsed interval; the one current now
 * has seen every value of the last (age_buckets - 1 .. age_buckets)
 * intervals. */
static struct ckms *rotate(struct pts_quantiles *q, uint64_t now_ns) {
  const uint64_t interval = PTS_QUANTILES_MAX_AGE_NS / PTS_QUANTILES_AGE_BUCKETS;
  uint64_t delta = now_ns > q->last_rotation_ns ? now_ns - q->last_rotation_ns : 0;
  /* A long idle spell clears every bucket once; more turns change nothing. */
  if (delta > interval * (PTS_QUANTILES_AGE_BUCKETS + 1)) {
    uint64_t skip = delta / interval - PTS_QUANTILES_AGE_BUCKETS;
    q->last_rotation_ns += skip * interval;
    delta -= skip * interval;
  }
  while (delta > interval) {
    ckms_reset(&q->buckets[q->current]);
    q->current = (q->current + 1) % PTS_QUANTILES_AGE_BUCKETS;
    delta -= interval;
    q->last_rotation_ns += interval;
  }
  return &q->buckets[q->current];
}

void pts_quantiles_observe(struct pts_quantiles *q, double value, uint64_t now_ns) {
  rotate(q, now_ns);
  for (size_t b = 0; b < PTS_QUANTILES_AGE_BUCKETS; b++) ckms_observe(q, &q->buckets[b], value);
}

void pts_quantiles_get(struct pts_quantiles *q, uint64_t now_ns, double *out) {
  struct ckms *c = rotate(q, now_ns);
  for (size_t i = 0; i < q->n_targets; i++) out[i] = ckms_get(q, c, q->targets[i].quantile);
}
