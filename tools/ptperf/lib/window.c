/* ptperf/lib/window.c — percentiles and the stability rule. */
#include "ptperf/lib/window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t ptperf_percentile(const uint64_t *sorted, size_t n, double p) {
  if (n == 0) return 0;
  double rank = ceil(p * (double)n / 100.0); /* p*n first: exact for integer p */
  size_t i = rank < 1 ? 0 : (size_t)rank - 1;
  return sorted[i < n ? i : n - 1];
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

void ptperf_latency_summarize(uint64_t *lat_ns, size_t n, struct ptperf_latency *out) {
  memset(out, 0, sizeof *out);
  out->count = n;
  if (n == 0) return;
  qsort(lat_ns, n, sizeof lat_ns[0], cmp_u64);
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += (double)lat_ns[i];
  out->avg_us = sum / (double)n / 1000.0;
  out->p50_us = (double)ptperf_percentile(lat_ns, n, 50) / 1000.0;
  out->p90_us = (double)ptperf_percentile(lat_ns, n, 90) / 1000.0;
  out->p95_us = (double)ptperf_percentile(lat_ns, n, 95) / 1000.0;
  out->p99_us = (double)ptperf_percentile(lat_ns, n, 99) / 1000.0;
}

bool ptperf_stable(const double *values, size_t n, size_t k, double pct) {
  if (k == 0 || n < k) return false;
  const double *last = values + (n - k);
  double mean = 0;
  for (size_t i = 0; i < k; i++) mean += last[i];
  mean /= (double)k;
  if (mean == 0) return false;
  for (size_t i = 0; i < k; i++)
    if (fabs(last[i] - mean) > mean * pct / 100.0) return false;
  return true;
}
