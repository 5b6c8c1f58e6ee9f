/* ptperf/lib/stats.h — the server's side of a measurement window.
 *
 * ptperf reads the statistics extension (§1.11) before and after each
 * window, as perf_analyzer does, and turns the difference of the cumulative
 * counters into average times per request: queue, compute input, compute
 * infer, compute output, and the whole request as the server saw it. A
 * server without the endpoint (404) simply gives no breakdown.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTPERF_STATS_H
#define PTPERF_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

struct ptperf_duration {
  uint64_t count, ns;
};

/* Cumulative counters of one model, summed over the versions listed. */
struct ptperf_stats {
  uint64_t inference_count, execution_count;
  struct ptperf_duration success, fail, queue, compute_input, compute_infer, compute_output;
};

/* Average microseconds per request between two snapshots. */
struct ptperf_breakdown {
  bool valid;        /* false when no request succeeded in between */
  uint64_t requests; /* successful requests (success.count delta) */
  double request_us; /* success: receipt to response, as the server measures */
  double queue_us, compute_input_us, compute_infer_us, compute_output_us;
  double avg_batch; /* inference_count / execution_count: batch elements per run */
};

/* Reads `{"model_stats":[...]}` and sums the entries named `model`
 * (normally one per version). INVALID_ARG when the document is not
 * statistics or the model is not in it. */
enum pts_status ptperf_stats_parse(const char *json, const char *model, struct ptperf_stats *out,
                                   struct pts_error *err);

/* after - before, as averages. Counters that went backwards (the model was
 * reloaded) give an invalid breakdown rather than nonsense. */
void ptperf_stats_delta(const struct ptperf_stats *before, const struct ptperf_stats *after,
                        struct ptperf_breakdown *out);

#endif
