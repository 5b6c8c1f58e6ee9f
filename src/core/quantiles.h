/* core/quantiles.h — streaming quantiles over a sliding time window, as the
 * Prometheus summaries of tritonserver compute them (prometheus-cpp's
 * TimeWindowQuantiles over CKMSQuantiles: Cormode, Korn, Muthukrishnan and
 * Srivastava, "Effective computation of biased quantiles over data
 * streams", ICDE 2005).
 *
 * Each targeted quantile q has an allowed error e: the answer for q is a
 * value whose rank is within about e * n of q * n, and the estimator keeps
 * far fewer values than it is shown. The window: `age_buckets` estimators
 * each see every value; every max_age / age_buckets the oldest is cleared
 * and becomes the newest, and a query reads the oldest still standing, so
 * an answer covers between (age_buckets - 1) / age_buckets of max_age and
 * max_age of the most recent values. tritonserver uses prometheus-cpp's
 * defaults, a 60 s window in 5 buckets (PTS_QUANTILES_MAX_AGE_NS,
 * PTS_QUANTILES_AGE_BUCKETS).
 *
 * Threading: none inside; the owner serialises calls (scheduler/stats.c
 * holds its statistics lock). Times are the caller's (pts_now_ns clock), so
 * tests can move the clock.
 */
#ifndef PTS_CORE_QUANTILES_H
#define PTS_CORE_QUANTILES_H

#include <stddef.h>
#include <stdint.h>

#define PTS_QUANTILES_MAX 16 /* targeted quantiles one estimator follows */
#define PTS_QUANTILES_MAX_AGE_NS (60ull * 1000000000ull)
#define PTS_QUANTILES_AGE_BUCKETS 5

/* One targeted quantile: 0 < quantile < 1, 0 < error < 1. */
struct pts_quantile_target {
  double quantile, error;
};

struct pts_quantiles;

/* A new estimator for `n` targets (copied; 1 <= n <= PTS_QUANTILES_MAX),
 * its window starting at `now_ns`. Caller frees with pts_quantiles_free;
 * NULL on OOM. */
struct pts_quantiles *pts_quantiles_new(const struct pts_quantile_target *targets, size_t n,
                                        uint64_t now_ns);
void pts_quantiles_free(struct pts_quantiles *q); /* NULL-safe */

/* Adds one value seen at `now_ns`. A value that can not be stored (OOM) is
 * dropped: a statistic is never worth failing a request over. */
void pts_quantiles_observe(struct pts_quantiles *q, double value, uint64_t now_ns);

/* The estimate of each target, in the order given to pts_quantiles_new,
 * into out[0..n-1]; NaN when the window holds no value (Prometheus' "no
 * data", which prometheus-cpp writes as Nan). */
void pts_quantiles_get(struct pts_quantiles *q, uint64_t now_ns, double *out);

#endif
