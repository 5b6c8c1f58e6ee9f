/* scheduler/stats.h — per model version statistics, in Triton's terms.
 *
 * Each scheduler keeps one `struct pts_stats`: the cumulative counters that
 * the statistics extension (protocol-facts §1.11) and the Prometheus metrics
 * (nv_inference_*) are rendered from. Semantics follow Triton:
 *  - success/fail: one count per request, ns = request duration (receive to
 *    response); queue and compute_*: successful requests only, each request
 *    of a batch is charged the whole batch's compute times;
 *  - inference_count: batch elements of successful requests (a request of
 *    batch 8 adds 8; a model without batching adds 1 per request);
 *    execution_count: successful backend executions;
 *  - batch_stats: per executed batch size, one count per execution;
 *  - failures also keep Triton's metric reason (REJECTED, CANCELED, BACKEND,
 *    OTHER);
 *  - with the response cache (cache/cache.h): a hit is a success with its
 *    queue time (enqueue to lookup) and cache_hit (count, the lookup's
 *    time) but no compute and no inference_count; a miss that succeeds
 *    counts cache_miss (count, the lookup's and the insertion's time) on
 *    top of its execution.
 *  - with --metrics-config summary_latencies=true (core/metrics_config.h),
 *    each request's durations in µs also go into Triton's summaries
 *    (core/quantiles.h): request (left out when the model caches, as
 *    Triton does), queue and compute_* for each successful request, and
 *    cache_hit, cache_miss when the model caches.
 *
 * Threading: every function is thread-safe (one mutex per pts_stats); a
 * snapshot is a plain copy owned by its caller.
 */
#ifndef PTS_SCHEDULER_STATS_H
#define PTS_SCHEDULER_STATS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/quantiles.h"
#include "core/status.h"

struct pts_stat_duration {
  uint64_t count;
  uint64_t ns;
};

struct pts_batch_stat {
  uint64_t batch_size;
  struct pts_stat_duration compute_input, compute_infer, compute_output;
};

/* Triton's `reason` label of nv_inference_request_failure. */
enum pts_fail_reason {
  PTS_FAIL_REJECTED, /* queue full, queue timeout */
  PTS_FAIL_CANCELED,
  PTS_FAIL_BACKEND, /* the backend (or the checks of its outputs) failed */
  PTS_FAIL_OTHER,   /* everything else, e.g. a request that failed validation */
  PTS_FAIL_REASON_COUNT
};
/* "REJECTED", "CANCELED", "BACKEND", "OTHER". */
const char *pts_fail_reason_name(enum pts_fail_reason r);

/* Triton's per-model summaries, in its order: nv_inference_request_summary_us,
 * ..._queue_, ..._compute_input_, ..._compute_infer_, ..._compute_output_,
 * nv_cache_hit_summary_per_model, nv_cache_miss_summary_per_model. */
enum pts_summary {
  PTS_SUMMARY_REQUEST,
  PTS_SUMMARY_QUEUE,
  PTS_SUMMARY_COMPUTE_INPUT,
  PTS_SUMMARY_COMPUTE_INFER,
  PTS_SUMMARY_COMPUTE_OUTPUT,
  PTS_SUMMARY_CACHE_HIT,
  PTS_SUMMARY_CACHE_MISS,
  PTS_SUMMARY_COUNT
};

/* One summary at one moment: every value ever observed counts in `count`
 * and `sum`; `values` estimate the settings' quantiles (in their order) over
 * the recent window, NaN when it holds none. */
struct pts_summary_stat {
  bool on; /* false: the model has no such summary */
  uint64_t count;
  double sum; /* µs */
  double values[PTS_QUANTILES_MAX];
};

/* One model version's statistics at one moment. */
struct pts_model_stats {
  char *name; /* owned (pts_free) */
  int64_t version;
  uint64_t last_inference_ms; /* ms since the epoch; 0 before the first */
  uint64_t inference_count;
  uint64_t execution_count;
  struct pts_stat_duration success, fail, queue, compute_input, compute_infer, compute_output,
      cache_hit, cache_miss;
  uint64_t fail_by_reason[PTS_FAIL_REASON_COUNT];
  uint64_t pending; /* requests queued now, not yet executing */
  struct pts_summary_stat summaries[PTS_SUMMARY_COUNT];
  size_t n_batch_stats;
  struct pts_batch_stat *batch_stats; /* owned array, ascending batch_size */
};

/* Frees what a snapshot owns (name, batch_stats) and zeroes it. NULL-safe. */
void pts_model_stats_clear(struct pts_model_stats *st);

/* The accumulator. */
struct pts_stats {
  pthread_mutex_t lock;
  struct pts_model_stats v; /* name unused; batch_stats grows on demand */
  size_t batch_cap;
  /* owned; NULL where the summary is off. Set by pts_stats_enable_summaries
   * before any request, read without the lock after. */
  struct pts_quantiles *estimators[PTS_SUMMARY_COUNT];
};

void pts_stats_init(struct pts_stats *s);
void pts_stats_destroy(struct pts_stats *s);

/* Starts the summaries the --metrics-config settings ask for (none unless
 * summary_latencies=true), before the model takes requests; `caches`: the
 * model answers from the response cache. PTS_NOMEM when one can not be
 * made. */
enum pts_status pts_stats_enable_summaries(struct pts_stats *s, bool caches,
                                           struct pts_error *err);

/* One successful request's value for summary `which` (ns; observed in
 * whole µs, as Triton). Nothing when that summary is off. */
void pts_stats_observe(struct pts_stats *s, enum pts_summary which, uint64_t ns);

/* The timestamps of one executed batch (pts_now_ns clock). */
struct pts_batch_times {
  uint64_t start_ns;      /* taken from the queue */
  uint64_t input_end_ns;  /* inputs gathered */
  uint64_t infer_end_ns;  /* backend returned */
  uint64_t output_end_ns; /* outputs split into responses */
};

/* A batch of `n_requests` requests, `batch_size` elements in all, ran
 * successfully. `queue_ns` is the sum of the requests' queue times. */
void pts_stats_batch_done(struct pts_stats *s, int64_t batch_size, size_t n_requests,
                          uint64_t queue_ns, const struct pts_batch_times *t);
/* A request was answered from the response cache: `queue_ns` from
 * enqueue to the lookup, `lookup_ns` the lookup and the response made from
 * it. Its success is counted by pts_stats_request_success, as any. */
void pts_stats_cache_hit(struct pts_stats *s, uint64_t queue_ns, uint64_t lookup_ns);
/* A request missed the cache and then succeeded: `ns` is its lookup and
 * the insertion of its answer. */
void pts_stats_cache_miss(struct pts_stats *s, uint64_t ns);
/* One request was answered successfully after `duration_ns`. */
void pts_stats_request_success(struct pts_stats *s, uint64_t duration_ns);
/* One request failed after `duration_ns`. */
void pts_stats_request_failure(struct pts_stats *s, enum pts_fail_reason why, uint64_t duration_ns);

/* Copies the counters into `out` (name and version left to the caller);
 * `pending` is filled by the caller too. PTS_NOMEM when the batch array can
 * not be copied. */
enum pts_status pts_stats_snapshot(struct pts_stats *s, struct pts_model_stats *out,
                                   struct pts_error *err);

/* Wall-clock milliseconds since the epoch (for last_inference). */
uint64_t pts_wall_ms(void);

#endif
