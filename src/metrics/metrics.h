/* metrics/metrics.h — Prometheus metrics with tritonserver's names.
 *
 * `GET /metrics` on its own listener (--metrics-address, --metrics-port
 * 8002) answers in the Prometheus text format (version 0.0.4) with Triton's
 * metric families and labels (`model`, `version`; `reason` on failures):
 * nv_inference_request_success, nv_inference_request_failure,
 * nv_inference_count, nv_inference_exec_count, nv_inference_request_duration_us,
 * nv_inference_queue_duration_us, nv_inference_compute_{input,infer,output}_duration_us,
 * nv_inference_pending_request_count, and (unless --allow-cpu-metrics=false)
 * nv_cpu_utilization, nv_cpu_memory_total_bytes, nv_cpu_memory_used_bytes,
 * and (unless --allow-gpu-metrics=false, on hosts where NVML loads:
 * metrics/nvml.h) per GPU, labelled gpu_uuid: nv_gpu_utilization,
 * nv_gpu_memory_total_bytes, nv_gpu_memory_used_bytes, nv_gpu_power_usage,
 * nv_gpu_power_limit, nv_energy_consumption.
 * The per-model values are the statistics extension's counters (stats.h),
 * read at scrape time, so the two endpoints always agree. CPU utilisation is
 * sampled from /proc/stat, the GPUs from NVML, every --metrics-interval-ms (2000). ptserve's own
 * overload families (core/overload.h) follow: ptserve_http_connections,
 * ptserve_http_connections_refused_total, ptserve_grpc_connections,
 * ptserve_grpc_connections_refused_total, ptserve_accept_pauses_total,
 * ptserve_request_memory_bytes, ptserve_request_memory_budget_bytes,
 * ptserve_request_memory_refused_total{protocol}; and
 * ptserve_host_copy_bytes_total (tensor bytes copied by the CPU, core/copy.h).
 * With a response cache (--cache-config, cache/cache.h), Triton's per-model
 * nv_cache_num_hits_per_model, nv_cache_hit_duration_per_model,
 * nv_cache_num_misses_per_model and nv_cache_miss_duration_per_model, and
 * ptserve_response_cache_{bytes,capacity_bytes,entries,evictions_total}.
 * --metrics-config (core/metrics_config.h) drops the latency counters
 * (counter_latencies=false) and adds Triton's nv_inference_*_summary_us and
 * nv_cache_*_summary_per_model (summary_latencies=true), which the models'
 * statistics carry (scheduler/stats.h).
 *
 * Threading: start/stop on the main thread; the listener runs on its own
 * thread. The pure functions are thread-safe.
 */
#ifndef PTS_METRICS_METRICS_H
#define PTS_METRICS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "core/overload.h"
#include "core/status.h"
#include "metrics/nvml.h"
#include "scheduler/stats.h"
#include "server/server.h"

/* The host gauges; `valid` false leaves them out of the text. */
struct pts_host_metrics {
  bool valid;
  double cpu_utilization; /* 0.0 .. 1.0 over the last sampling interval */
  uint64_t mem_total_bytes;
  uint64_t mem_used_bytes; /* MemTotal - MemAvailable */
  /* The nv_gpu_* gauges, one sample per GPU (borrowed; n_gpus 0 = none:
   * no NVML, or --allow-gpu-metrics=false). Rendered whatever `valid` says. */
  const struct pts_gpu_sample *gpus;
  size_t n_gpus;
  /* ptserve_host_copy_bytes_total (core/copy.h), rendered whenever `host`
   * is given. */
  uint64_t host_copy_bytes;
};

/* The exposition text for `stats` (borrowed), `host`, `overload` and the
 * response cache's counters `cache` (each may be NULL: left out; with
 * `cache`, the per-model nv_cache_* families too). New NUL-terminated
 * string (pts_free), length in *len; NULL on OOM. */
char *pts_metrics_render(const struct pts_model_stats *stats, size_t n,
                         const struct pts_host_metrics *host,
                         const struct pts_overload_stats *overload,
                         const struct pts_cache_stats *cache, size_t *len);

/* Cumulative CPU jiffies from the first ("cpu ") line of /proc/stat text. */
struct pts_cpu_times {
  uint64_t busy; /* everything but idle and iowait */
  uint64_t total;
};
bool pts_metrics_parse_cpu(const char *proc_stat, struct pts_cpu_times *out);
/* Busy share between two samples, 0.0 .. 1.0 (0 when no time passed). */
double pts_metrics_cpu_share(const struct pts_cpu_times *before, const struct pts_cpu_times *after);
/* MemTotal and MemTotal - MemAvailable, in bytes, from /proc/meminfo text. */
bool pts_metrics_parse_meminfo(const char *meminfo, uint64_t *total, uint64_t *used);

struct pts_metrics;

/* Binds o->metrics_address:o->metrics_port and starts the listener thread.
 * The server is borrowed and must outlive the service. Failing to bind is an
 * error (tritonserver does not start either). Free with pts_metrics_stop. */
enum pts_status pts_metrics_start(struct pts_server *s, const struct pts_server_options *o,
                                  struct pts_metrics **out, struct pts_error *err);
/* The port actually bound (useful with --metrics-port 0). */
int pts_metrics_port(const struct pts_metrics *m);
/* Stops the listener, joins its thread, frees. NULL-safe. */
void pts_metrics_stop(struct pts_metrics *m);

#endif
