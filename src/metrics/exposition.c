/* metrics/exposition.c — the Prometheus text (pts_metrics_render) and the
 * /proc parsers; pure functions, unit-tested without a socket. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/metrics_config.h"
#include "metrics/metrics.h"

struct text {
  char *s;
  size_t len, cap;
  bool failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...) {
  if (t->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = true;
      return;
    }
    if (t->s && t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = (t->cap ? t->cap * 2 : 4096) + (size_t)n;
    char *grown = pts_realloc(t->s, cap);
    if (!grown) {
      t->failed = true;
      return;
    }
    t->s = grown;
    t->cap = cap;
  }
}

/* A label value with the exposition format's escapes (\\, \", \n). */
static void put_label(struct text *t, const char *v) {
  for (const char *p = v; *p; p++) {
    if (*p == '\\')
      put(t, "\\\\");
    else if (*p == '"')
      put(t, "\\\"");
    else if (*p == '\n')
      put(t, "\\n");
    else
      put(t, "%c", *p);
  }
}

static void family(struct text *t, const char *name, const char *type, const char *help) {
  put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{model="m",[reason="r",]version="v"} value */
static void sample(struct text *t, const char *name, const struct pts_model_stats *st,
                   const char *reason, uint64_t value) {
  put(t, "%s{model=\"", name);
  put_label(t, st->name ? st->name : "");
  if (reason) put(t, "\",reason=\"%s", reason);
  put(t, "\",version=\"%lld\"} %" PRIu64 "\n", (long long)st->version, value);
}

enum field {
  F_SUCCESS,
  F_INFER_COUNT,
  F_EXEC_COUNT,
  F_REQUEST_US,
  F_QUEUE_US,
  F_INPUT_US,
  F_INFER_US,
  F_OUTPUT_US,
  F_PENDING,
};

static uint64_t value_of(const struct pts_model_stats *st, enum field f) {
  switch (f) {
    case F_SUCCESS:
      return st->success.count;
    case F_INFER_COUNT:
      return st->inference_count;
    case F_EXEC_COUNT:
      return st->execution_count;
    case F_REQUEST_US:
      return st->success.ns / 1000u;
    case F_QUEUE_US:
      return st->queue.ns / 1000u;
    case F_INPUT_US:
      return st->compute_input.ns / 1000u;
    case F_INFER_US:
      return st->compute_infer.ns / 1000u;
    case F_OUTPUT_US:
      return st->compute_output.ns / 1000u;
    default:
      return st->pending;
  }
}

static const struct {
  const char *name, *type, *help;
  enum field field;
  bool latency; /* one of the counters --metrics-config counter_latencies=false leaves out */
} FAMILIES[] = {
    {"nv_inference_request_success", "counter",
     "Number of successful inference requests, all batch sizes", F_SUCCESS, false},
    {"nv_inference_count", "counter",
     "Number of inferences performed (does not include cached requests)", F_INFER_COUNT, false},
    {"nv_inference_exec_count", "counter",
     "Number of model executions performed (does not include cached requests)", F_EXEC_COUNT,
     false},
    {"nv_inference_request_duration_us", "counter",
     "Cumulative inference request duration in microseconds (includes cached requests)",
     F_REQUEST_US, true},
    {"nv_inference_queue_duration_us", "counter",
     "Cumulative inference queuing duration in microseconds (includes cached requests)",
     F_QUEUE_US, true},
    {"nv_inference_compute_input_duration_us", "counter",
     "Cumulative compute input duration in microseconds (does not include cached requests)",
     F_INPUT_US, true},
    {"nv_inference_compute_infer_duration_us", "counter",
     "Cumulative compute inference duration in microseconds (does not include cached requests)",
     F_INFER_US, true},
    {"nv_inference_compute_output_duration_us", "counter",
     "Cumulative inference compute output duration in microseconds (does not include cached "
     "requests)",
     F_OUTPUT_US, true},
    {"nv_inference_pending_request_count", "gauge",
     "Instantaneous number of pending requests awaiting execution per-model.", F_PENDING, false},
};

static void failures(struct text *t, const struct pts_model_stats *stats, size_t n) {
  family(t, "nv_inference_request_failure", "counter",
         "Number of failed inference requests, all batch sizes");
  for (size_t i = 0; i < n; i++)
    for (int r = 0; r < PTS_FAIL_REASON_COUNT; r++)
      sample(t, "nv_inference_request_failure", &stats[i],
             pts_fail_reason_name((enum pts_fail_reason)r), stats[i].fail_by_reason[r]);
}

static void host_gauges(struct text *t, const struct pts_host_metrics *h) {
  family(t, "nv_cpu_utilization", "gauge", "CPU utilization rate [0.0 - 1.0]");
  put(t, "nv_cpu_utilization %.6f\n", h->cpu_utilization);
  family(t, "nv_cpu_memory_total_bytes", "gauge", "CPU total memory (RAM), in bytes");
  put(t, "nv_cpu_memory_total_bytes %" PRIu64 "\n", h->mem_total_bytes);
  family(t, "nv_cpu_memory_used_bytes", "gauge", "CPU used memory (RAM), in bytes");
  put(t, "nv_cpu_memory_used_bytes %" PRIu64 "\n", h->mem_used_bytes);
}

/* The GPU families, in tritonserver's order, with its help texts
 * (triton-anchor §2.13). */
enum gpu_value { GPU_UTIL, GPU_MEM_TOTAL, GPU_MEM_USED, GPU_POWER, GPU_POWER_LIMIT, GPU_ENERGY };
static const struct {
  const char *name, *help;
} GPU_FAMILIES[] = {
    [GPU_UTIL] = {"nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)"},
    [GPU_MEM_TOTAL] = {"nv_gpu_memory_total_bytes", "GPU total memory, in bytes"},
    [GPU_MEM_USED] = {"nv_gpu_memory_used_bytes", "GPU used memory, in bytes"},
    [GPU_POWER] = {"nv_gpu_power_usage", "GPU power usage in watts"},
    [GPU_POWER_LIMIT] = {"nv_gpu_power_limit", "GPU power management limit in watts"},
    [GPU_ENERGY] = {"nv_energy_consumption",
                    "GPU energy consumption in joules since the Triton Server started"},
};

/* Value v of one GPU as exposition text; false when NVML did not give it. */
static bool gpu_value(const struct pts_gpu_sample *g, enum gpu_value v, char *out, size_t size) {
  switch (v) {
    case GPU_UTIL:
      return g->has_utilization && snprintf(out, size, "%.6f", g->utilization) > 0;
    case GPU_MEM_TOTAL:
      return g->has_memory && snprintf(out, size, "%" PRIu64, g->memory_total_bytes) > 0;
    case GPU_MEM_USED:
      return g->has_memory && snprintf(out, size, "%" PRIu64, g->memory_used_bytes) > 0;
    case GPU_POWER:
      return g->has_power && snprintf(out, size, "%.3f", g->power_watts) > 0;
    case GPU_POWER_LIMIT:
      return g->has_power_limit && snprintf(out, size, "%.3f", g->power_limit_watts) > 0;
    case GPU_ENERGY:
      return g->has_energy && snprintf(out, size, "%.3f", g->energy_joules) > 0;
  }
  return false;
}

/* Each family that some GPU has a value for, one sample per such GPU. */
static void gpu_gauges(struct text *t, const struct pts_gpu_sample *g, size_t n) {
  for (size_t v = 0; v < sizeof GPU_FAMILIES / sizeof GPU_FAMILIES[0]; v++) {
    bool header = false;
    for (size_t i = 0; i < n; i++) {
      char value[64];
      if (!gpu_value(&g[i], (enum gpu_value)v, value, sizeof value)) continue;
      if (!header) family(t, GPU_FAMILIES[v].name, "gauge", GPU_FAMILIES[v].help);
      header = true;
      put(t, "%s{gpu_uuid=\"", GPU_FAMILIES[v].name);
      put_label(t, g[i].uuid);
      put(t, "\"} %s\n", value);
    }
  }
}

/* A family of one sample without labels. */
static void single(struct text *t, const char *name, const char *type, const char *help,
                   uint64_t value) {
  family(t, name, type, help);
  put(t, "%s %" PRIu64 "\n", name, value);
}

/* ptserve's own families: not Triton's, so named ptserve_*, with the
 * _total suffix Prometheus expects of counters. */
static void overload_families(struct text *t, const struct pts_overload_stats *o) {
  single(t, "ptserve_http_connections", "gauge", "Open HTTP connections",
         o->counters[PTS_OVERLOAD_HTTP_CONNECTIONS]);
  single(t, "ptserve_http_connections_refused_total", "counter",
         "HTTP connections answered 503 because --http-max-connections were open",
         o->counters[PTS_OVERLOAD_HTTP_CONN_REFUSED]);
  single(t, "ptserve_grpc_connections", "gauge", "Open gRPC connections",
         o->counters[PTS_OVERLOAD_GRPC_CONNECTIONS]);
  single(t, "ptserve_grpc_connections_refused_total", "counter",
         "gRPC connections closed at once because --grpc-max-connections were open",
         o->counters[PTS_OVERLOAD_GRPC_CONN_REFUSED]);
  /* RFC 9113 section 7's names, as nghttp2 and gRPC's logs spell them */
  static const char *const H2_CODES[] = {
      "NO_ERROR",       "PROTOCOL_ERROR", "INTERNAL_ERROR",      "FLOW_CONTROL_ERROR",
      "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR",   "REFUSED_STREAM",
      "CANCEL",         "COMPRESSION_ERROR", "CONNECT_ERROR",    "ENHANCE_YOUR_CALM",
      "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED", "OTHER"};
  family(t, "ptserve_grpc_goaway_total", "counter",
         "GOAWAY frames the gRPC transport sent, by HTTP/2 error code");
  for (int c = 0; c <= 14; c++)
    put(t, "ptserve_grpc_goaway_total{code=\"%s\"} %" PRIu64 "\n", H2_CODES[c],
        o->counters[PTS_OVERLOAD_GRPC_GOAWAY_FIRST + c]);
  single(t, "ptserve_grpc_connections_failed_total", "counter",
         "gRPC connections closed without a GOAWAY because their HTTP/2 session failed on the "
         "server's side",
         o->counters[PTS_OVERLOAD_GRPC_CONN_FAILED]);
  single(t, "ptserve_accept_pauses_total", "counter",
         "Times accept() failed (descriptors exhausted) and a listener paused",
         o->counters[PTS_OVERLOAD_ACCEPT_PAUSES]);
  single(t, "ptserve_request_memory_bytes", "gauge",
         "Request bytes held: bodies being read, decoded tensors, queued requests", o->held);
  single(t, "ptserve_request_memory_budget_bytes", "gauge",
         "The request memory budget (--request-memory-budget)", o->budget);
  family(t, "ptserve_request_memory_refused_total", "counter",
         "Requests refused because the request memory budget was exhausted");
  put(t, "ptserve_request_memory_refused_total{protocol=\"grpc\"} %" PRIu64 "\n",
      o->counters[PTS_OVERLOAD_GRPC_MEMORY_REFUSED]);
  put(t, "ptserve_request_memory_refused_total{protocol=\"http\"} %" PRIu64 "\n",
      o->counters[PTS_OVERLOAD_HTTP_MEMORY_REFUSED]);
}

/* The response cache's families, when the server has one: Triton's four
 * per model (counts, and durations in µs), then ptserve's of the cache
 * itself. */
static void cache_families(struct text *t, const struct pts_model_stats *stats, size_t n,
                           const struct pts_cache_stats *c) {
  static const struct {
    const char *name, *help;
    bool hits, us;
  } PER_MODEL[] = {
      {"nv_cache_num_hits_per_model", "Number of cache hits per model", true, false},
      {"nv_cache_hit_duration_per_model",
       "Total cache hit duration per model, in microseconds", true, true},
      {"nv_cache_num_misses_per_model", "Number of cache misses per model", false, false},
      {"nv_cache_miss_duration_per_model",
       "Total cache miss (insert+lookup) duration per model, in microseconds", false, true},
  };
  /* Triton makes these with the latency counters (metric_model_reporter.cc) */
  bool per_model = pts_metrics_config_get()->counter_latencies;
  for (size_t f = 0; per_model && f < sizeof PER_MODEL / sizeof PER_MODEL[0]; f++) {
    family(t, PER_MODEL[f].name, "counter", PER_MODEL[f].help);
    for (size_t i = 0; i < n; i++) {
      const struct pts_stat_duration *d = PER_MODEL[f].hits ? &stats[i].cache_hit
                                                            : &stats[i].cache_miss;
      sample(t, PER_MODEL[f].name, &stats[i], NULL, PER_MODEL[f].us ? d->ns / 1000u : d->count);
    }
  }
  single(t, "ptserve_response_cache_bytes", "gauge",
         "Bytes the response cache holds: keys, answers and bookkeeping", c->bytes);
  single(t, "ptserve_response_cache_capacity_bytes", "gauge",
         "Bytes the response cache may hold (--cache-config local,size=)", c->capacity);
  single(t, "ptserve_response_cache_entries", "gauge", "Answers the response cache holds",
         c->entries);
  single(t, "ptserve_response_cache_evictions_total", "counter",
         "Answers dropped from the response cache to make room", c->evictions);
}

/* A sample value as prometheus-cpp writes one: 16 significant digits, and
 * Nan, +Inf, -Inf. */
static void put_double(struct text *t, double v) {
  if (isnan(v))
    put(t, "Nan");
  else if (isinf(v))
    put(t, "%s", v < 0 ? "-Inf" : "+Inf");
  else
    put(t, "%.16g", v);
}

/* The summaries of --metrics-config summary_latencies=true, with Triton's
 * names and help texts (core/src/metrics.cc); a family no model has is left
 * out, as prometheus-cpp leaves out an empty one. */
static void summary_families(struct text *t, const struct pts_model_stats *stats, size_t n) {
  static const struct {
    const char *name, *help;
  } SUMMARIES[PTS_SUMMARY_COUNT] = {
      [PTS_SUMMARY_REQUEST] = {"nv_inference_request_summary_us",
                               "Summary of inference request duration in microseconds "
                               "(includes cached requests)"},
      [PTS_SUMMARY_QUEUE] = {"nv_inference_queue_summary_us",
                             "Summary of inference queuing duration in microseconds "
                             "(includes cached requests)"},
      [PTS_SUMMARY_COMPUTE_INPUT] = {"nv_inference_compute_input_summary_us",
                                     "Cumulative compute input duration in microseconds "
                                     "(does not include cached requests)"},
      [PTS_SUMMARY_COMPUTE_INFER] = {"nv_inference_compute_infer_summary_us",
                                     "Cumulative compute inference duration in microseconds "
                                     "(does not include cached requests)"},
      [PTS_SUMMARY_COMPUTE_OUTPUT] = {"nv_inference_compute_output_summary_us",
                                      "Cumulative inference compute output duration in "
                                      "microseconds (does not include cached requests)"},
      [PTS_SUMMARY_CACHE_HIT] = {"nv_cache_hit_summary_per_model",
                                 "Summary of cache hit counts/durations per model, in "
                                 "microseconds."},
      [PTS_SUMMARY_CACHE_MISS] = {"nv_cache_miss_summary_per_model",
                                  "Summary of cache miss counts/durations per model, in "
                                  "microseconds."},
  };
  const struct pts_metrics_config *c = pts_metrics_config_get();
  for (int k = 0; k < PTS_SUMMARY_COUNT; k++) {
    const char *name = SUMMARIES[k].name;
    bool header = false;
    for (size_t i = 0; i < n; i++) {
      const struct pts_summary_stat *sm = &stats[i].summaries[k];
      if (!sm->on) continue;
      if (!header) family(t, name, "summary", SUMMARIES[k].help);
      header = true;
      put(t, "%s_count{model=\"", name);
      put_label(t, stats[i].name ? stats[i].name : "");
      put(t, "\",version=\"%lld\"} %" PRIu64 "\n", (long long)stats[i].version, sm->count);
      put(t, "%s_sum{model=\"", name);
      put_label(t, stats[i].name ? stats[i].name : "");
      put(t, "\",version=\"%lld\"} ", (long long)stats[i].version);
      put_double(t, sm->sum);
      put(t, "\n");
      for (size_t q = 0; q < c->n_quantiles; q++) {
        put(t, "%s{model=\"", name);
        put_label(t, stats[i].name ? stats[i].name : "");
        put(t, "\",version=\"%lld\",quantile=\"", (long long)stats[i].version);
        put_double(t, c->quantiles[q].quantile);
        put(t, "\"} ");
        put_double(t, sm->values[q]);
        put(t, "\n");
      }
    }
  }
}

char *pts_metrics_render(const struct pts_model_stats *stats, size_t n,
                         const struct pts_host_metrics *host,
                         const struct pts_overload_stats *overload,
                         const struct pts_cache_stats *cache, size_t *len) {
  struct text t = {0};
  put(&t, "%s", "");
  bool latency_counters = pts_metrics_config_get()->counter_latencies;
  for (size_t f = 0; f < sizeof FAMILIES / sizeof FAMILIES[0]; f++) {
    /* Triton lists the failure counter right after the success counter. */
    if (f == 1) failures(&t, stats, n);
    if (FAMILIES[f].latency && !latency_counters) continue;
    family(&t, FAMILIES[f].name, FAMILIES[f].type, FAMILIES[f].help);
    for (size_t i = 0; i < n; i++)
      sample(&t, FAMILIES[f].name, &stats[i], NULL, value_of(&stats[i], FAMILIES[f].field));
  }
  if (cache) cache_families(&t, stats, n, cache);
  if (stats) summary_families(&t, stats, n);
  if (host && host->valid) host_gauges(&t, host);
  if (host && host->gpus) gpu_gauges(&t, host->gpus, host->n_gpus);
  if (overload) overload_families(&t, overload);
  if (host) {
    family(&t, "ptserve_host_copy_bytes_total", "counter",
           "Tensor bytes the server copied with the CPU (batch gathers, pinned staging, "
           "shared-memory reads and writes)");
    put(&t, "ptserve_host_copy_bytes_total %" PRIu64 "\n", host->host_copy_bytes);
  }
  if (t.failed) {
    pts_free(t.s);
    return NULL;
  }
  *len = t.len;
  return t.s;
}

bool pts_metrics_parse_cpu(const char *proc_stat, struct pts_cpu_times *out) {
  if (strncmp(proc_stat, "cpu ", 4) != 0) return false;
  const char *p = proc_stat + 4;
  uint64_t v[10] = {0};
  int n = 0;
  while (n < 10) {
    char *end;
    unsigned long long x = strtoull(p, &end, 10);
    if (end == p) break;
    v[n++] = x;
    p = end;
    if (*p == '\n') break;
  }
  if (n < 4) return false;
  /* user nice system idle iowait irq softirq steal [guest guest_nice]; guest
   * time is already inside user and nice. */
  uint64_t total = 0;
  for (int i = 0; i < n && i < 8; i++) total += v[i];
  out->total = total;
  out->busy = total - v[3] - v[4];
  return true;
}

double pts_metrics_cpu_share(const struct pts_cpu_times *before,
                             const struct pts_cpu_times *after) {
  if (after->total <= before->total || after->busy < before->busy) return 0.0;
  double share = (double)(after->busy - before->busy) / (double)(after->total - before->total);
  return share > 1.0 ? 1.0 : share;
}

/* The kB value of "<key>:   123 kB" in meminfo text. */
static bool meminfo_kb(const char *text, const char *key, uint64_t *kb) {
  size_t klen = strlen(key);
  for (const char *line = text; line && *line;
       line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      char *end;
      *kb = strtoull(line + klen + 1, &end, 10);
      return end != line + klen + 1;
    }
  }
  return false;
}

bool pts_metrics_parse_meminfo(const char *meminfo, uint64_t *total, uint64_t *used) {
  uint64_t t_kb, avail_kb;
  if (!meminfo_kb(meminfo, "MemTotal", &t_kb) || !meminfo_kb(meminfo, "MemAvailable", &avail_kb))
    return false;
  *total = t_kb * 1024u;
  *used = (t_kb > avail_kb ? t_kb - avail_kb : 0) * 1024u;
  return true;
}
