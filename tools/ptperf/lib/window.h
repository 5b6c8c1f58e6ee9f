/* ptperf/lib/window.h — the client's side of a measurement window.
 *
 * A window is a stretch of time under constant load; what completed in it
 * gives throughput and latency percentiles. Windows repeat until the last
 * few agree (perf_analyzer's stability rule), and the reported result is
 * those windows taken together.
 *
 * Threading: pure functions over caller-owned memory; thread-safe.
 */
#ifndef PTPERF_WINDOW_H
#define PTPERF_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Latency summary of some completed requests. */
struct ptperf_latency {
  size_t count;
  double avg_us, p50_us, p90_us, p95_us, p99_us;
};

/* Nearest-rank percentile (the smallest value with at least p% of the
 * values <= it) of sorted[0..n); 0 when n == 0. p in (0, 100]. */
uint64_t ptperf_percentile(const uint64_t *sorted, size_t n, double p);

/* Sorts lat_ns[0..n) in place and summarises it. */
void ptperf_latency_summarize(uint64_t *lat_ns, size_t n, struct ptperf_latency *out);

/* Whether each of the last `k` values is within pct% of their mean (true
 * only when there are at least k values and the mean is not zero). */
bool ptperf_stable(const double *values, size_t n, size_t k, double pct);

#endif
