/* core/metrics_config.h — tritonserver's --metrics-config=<setting>=<value>
 * (r25.07, core/src/metric_model_reporter.cc), which picks the kinds of the
 * per-model latency metrics:
 *
 *   counter_latencies=true|false    the nv_inference_*_duration_us counters
 *                                   (and the per-model nv_cache_* counters);
 *                                   default true
 *   summary_latencies=true|false    the nv_inference_*_summary_us summaries
 *                                   (core/quantiles.h); default false
 *   summary_quantiles=<q>:<e>,...   the summaries' quantiles and their
 *                                   allowed errors; default
 *                                   0.5:0.05,0.9:0.01,0.95:0.001,0.99:0.001,0.999:0.001
 *   histogram_latencies=true|false  nv_inference_first_response_histogram_ms,
 *                                   which Triton keeps for decoupled models
 *                                   only; ptserve serves none, so it adds no
 *                                   family; default false
 *
 * tritonserver ignores a setting it does not know and a value other than
 * "true" (or "false" for counter_latencies); ptserve refuses both, naming
 * the setting, so a typo can not silently leave a dashboard empty.
 *
 * Threading: pts_metrics_config_add runs at start-up, before any model
 * loads; everything else reads the settings without a lock.
 */
#ifndef PTS_CORE_METRICS_CONFIG_H
#define PTS_CORE_METRICS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/quantiles.h"
#include "core/status.h"

struct pts_metrics_config {
  bool counter_latencies;
  bool summary_latencies;
  bool histogram_latencies;
  size_t n_quantiles;
  struct pts_quantile_target quantiles[PTS_QUANTILES_MAX];
};

/* One --metrics-config value, "<setting>=<value>"; a later value of a
 * setting replaces an earlier one. INVALID_ARG naming the setting (or
 * tritonserver's "--metrics-config option format is <setting>=<value>. Got
 * ..." for a value without one) when it is malformed or unknown; the
 * settings are then unchanged. */
enum pts_status pts_metrics_config_add(const char *spec, struct pts_error *err);

/* The settings in force (borrowed, process lifetime). */
const struct pts_metrics_config *pts_metrics_config_get(void);

/* Back to tritonserver's defaults (tests). */
void pts_metrics_config_reset(void);

#endif
