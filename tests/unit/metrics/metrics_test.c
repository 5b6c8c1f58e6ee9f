/* tests/unit/metrics/metrics_test.c — the Prometheus text and the /proc
 * parsers. Expected lines are written out by hand from tritonserver's metric
 * names and labels (triton-anchor §2.13) and the exposition format; /proc
 * samples are literal text in the kernel's format, worked by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/metrics_config.h"
#include "metrics/metrics.h"

static void render_families_and_labels(void **state) {
  (void)state;
  struct pts_model_stats st = {0};
  st.name = "my \"m\"";
  st.version = 3;
  st.success = (struct pts_stat_duration){5, 12345678};
  st.queue = (struct pts_stat_duration){5, 2000};
  st.compute_input = (struct pts_stat_duration){5, 1999};
  st.compute_infer = (struct pts_stat_duration){5, 70000};
  st.compute_output = (struct pts_stat_duration){5, 1000};
  st.inference_count = 9;
  st.execution_count = 2;
  st.fail_by_reason[PTS_FAIL_REJECTED] = 4;
  st.pending = 7;
  struct pts_host_metrics host = {.valid = true, .cpu_utilization = 0.25,
                                  .mem_total_bytes = 1000, .mem_used_bytes = 400};
  size_t len = 0;
  char *text = pts_metrics_render(&st, 1, &host, NULL, NULL, &len);
  assert_non_null(text);
  assert_int_equal(strlen(text), len);
  const char *want[] = {
      "# TYPE nv_inference_request_success counter\n"
      "nv_inference_request_success{model=\"my \\\"m\\\"\",version=\"3\"} 5\n",
      "nv_inference_request_failure{model=\"my \\\"m\\\"\",reason=\"REJECTED\",version=\"3\"} 4\n",
      "nv_inference_request_failure{model=\"my \\\"m\\\"\",reason=\"OTHER\",version=\"3\"} 0\n",
      "nv_inference_count{model=\"my \\\"m\\\"\",version=\"3\"} 9\n",
      "nv_inference_exec_count{model=\"my \\\"m\\\"\",version=\"3\"} 2\n",
      /* microseconds, truncated */
      "nv_inference_request_duration_us{model=\"my \\\"m\\\"\",version=\"3\"} 12345\n",
      "nv_inference_queue_duration_us{model=\"my \\\"m\\\"\",version=\"3\"} 2\n",
      "nv_inference_compute_input_duration_us{model=\"my \\\"m\\\"\",version=\"3\"} 1\n",
      "nv_inference_compute_infer_duration_us{model=\"my \\\"m\\\"\",version=\"3\"} 70\n",
      "nv_inference_compute_output_duration_us{model=\"my \\\"m\\\"\",version=\"3\"} 1\n",
      "# TYPE nv_inference_pending_request_count gauge\n"
      "nv_inference_pending_request_count{model=\"my \\\"m\\\"\",version=\"3\"} 7\n",
      "# TYPE nv_cpu_utilization gauge\nnv_cpu_utilization 0.250000\n",
      "nv_cpu_memory_total_bytes 1000\n",
      "nv_cpu_memory_used_bytes 400\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(text, want[i])) fail_msg("missing:\n%s\nin:\n%s", want[i], text);
  pts_free(text);

  /* No models, no host gauges: the families' headers only. */
  text = pts_metrics_render(NULL, 0, NULL, NULL, NULL, &len);
  assert_non_null(text);
  assert_non_null(strstr(text, "# HELP nv_inference_count "));
  assert_null(strstr(text, "nv_cpu"));
  assert_null(strstr(text, "{"));
  pts_free(text);
}

/* GPU gauges (metrics/nvml.h samples): tritonserver's names, the gpu_uuid
 * label, a value NVML did not give left out; the copy counter. */
static void render_gpus(void **state) {
  (void)state;
  struct pts_gpu_sample g[2];
  memset(g, 0, sizeof g);
  strcpy(g[0].uuid, "GPU-aaaa");
  g[0].has_utilization = true;
  g[0].utilization = 0.5;
  g[0].has_memory = true;
  g[0].memory_total_bytes = 85899345920u;
  g[0].memory_used_bytes = 1048576;
  g[0].has_power = true;
  g[0].power_watts = 71.25;
  strcpy(g[1].uuid, "GPU-b\"b");
  g[1].has_utilization = true;
  g[1].utilization = 1.0;
  struct pts_host_metrics host = {.gpus = g, .n_gpus = 2, .host_copy_bytes = 4096};
  size_t len = 0;
  char *text = pts_metrics_render(NULL, 0, &host, NULL, NULL, &len);
  assert_non_null(text);
  const char *want[] = {
      "# TYPE nv_gpu_utilization gauge\n"
      "nv_gpu_utilization{gpu_uuid=\"GPU-aaaa\"} 0.500000\n"
      "nv_gpu_utilization{gpu_uuid=\"GPU-b\\\"b\"} 1.000000\n",
      "# TYPE nv_gpu_memory_total_bytes gauge\n"
      "nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-aaaa\"} 85899345920\n# HELP",
      "# TYPE nv_gpu_memory_used_bytes gauge\n"
      "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-aaaa\"} 1048576\n# HELP",
      "# TYPE nv_gpu_power_usage gauge\nnv_gpu_power_usage{gpu_uuid=\"GPU-aaaa\"} 71.250\n",
      "# TYPE ptserve_host_copy_bytes_total counter\nptserve_host_copy_bytes_total 4096\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(text, want[i])) fail_msg("missing:\n%s\nin:\n%s", want[i], text);
  /* No GPU gave a power limit or energy: no such family; CPU invalid: no nv_cpu_*. */
  assert_null(strstr(text, "nv_gpu_power_limit"));
  assert_null(strstr(text, "nv_energy_consumption"));
  assert_null(strstr(text, "nv_cpu_"));
  pts_free(text);
}

/* ptserve's overload families (core/overload.h): names, types, labels. */
static void render_overload(void **state) {
  (void)state;
  struct pts_overload_stats o;
  memset(&o, 0, sizeof o);
  o.budget = 8000000;
  o.held = 4096;
  o.counters[PTS_OVERLOAD_HTTP_CONNECTIONS] = 12;
  o.counters[PTS_OVERLOAD_HTTP_CONN_REFUSED] = 3;
  o.counters[PTS_OVERLOAD_GRPC_CONNECTIONS] = 2;
  o.counters[PTS_OVERLOAD_GRPC_CONN_REFUSED] = 1;
  o.counters[PTS_OVERLOAD_ACCEPT_PAUSES] = 5;
  o.counters[PTS_OVERLOAD_HTTP_MEMORY_REFUSED] = 7;
  o.counters[PTS_OVERLOAD_GRPC_MEMORY_REFUSED] = 4;
  o.counters[PTS_OVERLOAD_GRPC_GOAWAY_FIRST + 0] = 6;  /* NO_ERROR */
  o.counters[PTS_OVERLOAD_GRPC_GOAWAY_FIRST + 2] = 9;  /* INTERNAL_ERROR */
  o.counters[PTS_OVERLOAD_GRPC_GOAWAY_FIRST + 11] = 8; /* ENHANCE_YOUR_CALM */
  o.counters[PTS_OVERLOAD_GRPC_GOAWAY_OTHER] = 1;
  o.counters[PTS_OVERLOAD_GRPC_CONN_FAILED] = 2;
  size_t len = 0;
  char *text = pts_metrics_render(NULL, 0, NULL, &o, NULL, &len);
  assert_non_null(text);
  const char *want[] = {
      "# TYPE ptserve_http_connections gauge\nptserve_http_connections 12\n",
      "# TYPE ptserve_http_connections_refused_total counter\n"
      "ptserve_http_connections_refused_total 3\n",
      "# TYPE ptserve_grpc_connections gauge\nptserve_grpc_connections 2\n",
      "# TYPE ptserve_grpc_connections_refused_total counter\n"
      "ptserve_grpc_connections_refused_total 1\n",
      "# TYPE ptserve_accept_pauses_total counter\nptserve_accept_pauses_total 5\n",
      "# TYPE ptserve_request_memory_bytes gauge\nptserve_request_memory_bytes 4096\n",
      "# TYPE ptserve_request_memory_budget_bytes gauge\n"
      "ptserve_request_memory_budget_bytes 8000000\n",
      "# TYPE ptserve_request_memory_refused_total counter\n"
      "ptserve_request_memory_refused_total{protocol=\"grpc\"} 4\n"
      "ptserve_request_memory_refused_total{protocol=\"http\"} 7\n",
      /* every HTTP/2 error code by RFC 9113's name, in code order */
      "# TYPE ptserve_grpc_goaway_total counter\n"
      "ptserve_grpc_goaway_total{code=\"NO_ERROR\"} 6\n"
      "ptserve_grpc_goaway_total{code=\"PROTOCOL_ERROR\"} 0\n"
      "ptserve_grpc_goaway_total{code=\"INTERNAL_ERROR\"} 9\n",
      "ptserve_grpc_goaway_total{code=\"CONNECT_ERROR\"} 0\n"
      "ptserve_grpc_goaway_total{code=\"ENHANCE_YOUR_CALM\"} 8\n"
      "ptserve_grpc_goaway_total{code=\"INADEQUATE_SECURITY\"} 0\n"
      "ptserve_grpc_goaway_total{code=\"HTTP_1_1_REQUIRED\"} 0\n"
      "ptserve_grpc_goaway_total{code=\"OTHER\"} 1\n",
      "# TYPE ptserve_grpc_connections_failed_total counter\n"
      "ptserve_grpc_connections_failed_total 2\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(text, want[i])) fail_msg("missing:\n%s\nin:\n%s", want[i], text);
  pts_free(text);
}

static void proc_parsers(void **state) {
  (void)state;
  struct pts_cpu_times a, b;
  /* user nice system idle iowait irq softirq steal guest guest_nice */
  assert_true(pts_metrics_parse_cpu("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n", &a));
  assert_int_equal(a.total, 1000);
  assert_int_equal(a.busy, 150);
  assert_true(pts_metrics_parse_cpu("cpu  400 0 50 1400 150 0 0 0 10 0\n", &b));
  /* +300 busy out of +1000 total */
  assert_true(pts_metrics_cpu_share(&a, &b) > 0.2999 && pts_metrics_cpu_share(&a, &b) < 0.3001);
  assert_true(pts_metrics_cpu_share(&b, &b) == 0.0);
  assert_false(pts_metrics_parse_cpu("intr 1 2 3\n", &a));

  uint64_t total = 0, used = 0;
  assert_true(pts_metrics_parse_meminfo(
      "MemTotal:       16000 kB\nMemFree:  1000 kB\nMemAvailable:    6000 kB\n", &total, &used));
  assert_int_equal(total, 16000u * 1024);
  assert_int_equal(used, 10000u * 1024);
  assert_false(pts_metrics_parse_meminfo("MemTotal: 5 kB\n", &total, &used));
}

/* With a response cache, Triton's four per-model families (durations in
 * µs, truncated) and ptserve's gauges of the cache; without, none of them. */
static void render_cache(void **state) {
  (void)state;
  struct pts_model_stats st = {0};
  st.name = "m";
  st.version = 1;
  st.cache_hit = (struct pts_stat_duration){3, 4999};
  st.cache_miss = (struct pts_stat_duration){2, 12000};
  struct pts_cache_stats c = {.capacity = 4096, .bytes = 2100, .entries = 2, .evictions = 5};
  size_t len = 0;
  char *text = pts_metrics_render(&st, 1, NULL, NULL, &c, &len);
  assert_non_null(text);
  const char *want[] = {
      "# TYPE nv_cache_num_hits_per_model counter\n"
      "nv_cache_num_hits_per_model{model=\"m\",version=\"1\"} 3\n",
      "nv_cache_hit_duration_per_model{model=\"m\",version=\"1\"} 4\n",
      "nv_cache_num_misses_per_model{model=\"m\",version=\"1\"} 2\n",
      "nv_cache_miss_duration_per_model{model=\"m\",version=\"1\"} 12\n",
      "# TYPE ptserve_response_cache_bytes gauge\nptserve_response_cache_bytes 2100\n",
      "ptserve_response_cache_capacity_bytes 4096\n",
      "ptserve_response_cache_entries 2\n",
      "# TYPE ptserve_response_cache_evictions_total counter\n"
      "ptserve_response_cache_evictions_total 5\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(text, want[i])) fail_msg("missing:\n%s\nin:\n%s", want[i], text);
  pts_free(text);
  text = pts_metrics_render(&st, 1, NULL, NULL, NULL, &len);
  assert_null(strstr(text, "nv_cache_"));
  assert_null(strstr(text, "ptserve_response_cache"));
  pts_free(text);
}

/* --metrics-config: the summaries as prometheus-cpp writes them (_count,
 * _sum, then one sample per quantile, NaN as Nan), and no latency counters
 * with counter_latencies=false; the other counters stay. */
static void render_summaries(void **state) {
  (void)state;
  struct pts_error err;
  pts_metrics_config_reset();
  assert_int_equal(pts_metrics_config_add("counter_latencies=false", &err), PTS_OK);
  assert_int_equal(pts_metrics_config_add("summary_quantiles=0.5:0.05,0.9:0.01", &err), PTS_OK);
  struct pts_model_stats st = {0};
  st.name = "m";
  st.version = 1;
  st.success = (struct pts_stat_duration){3, 3000000};
  st.summaries[PTS_SUMMARY_QUEUE] = (struct pts_summary_stat){
      .on = true, .count = 3, .sum = 61, .values = {20, 40}};
  st.summaries[PTS_SUMMARY_COMPUTE_INFER] = (struct pts_summary_stat){
      .on = true, .count = 0, .sum = 0, .values = {NAN, NAN}};
  size_t len = 0;
  char *text = pts_metrics_render(&st, 1, NULL, NULL, NULL, &len);
  assert_non_null(text);
  const char *want =
      "# HELP nv_inference_queue_summary_us Summary of inference queuing duration in "
      "microseconds (includes cached requests)\n"
      "# TYPE nv_inference_queue_summary_us summary\n"
      "nv_inference_queue_summary_us_count{model=\"m\",version=\"1\"} 3\n"
      "nv_inference_queue_summary_us_sum{model=\"m\",version=\"1\"} 61\n"
      "nv_inference_queue_summary_us{model=\"m\",version=\"1\",quantile=\"0.5\"} 20\n"
      "nv_inference_queue_summary_us{model=\"m\",version=\"1\",quantile=\"0.9\"} 40\n";
  if (!strstr(text, want)) fail_msg("missing:\n%s\nin:\n%s", want, text);
  want = "nv_inference_compute_infer_summary_us{model=\"m\",version=\"1\",quantile=\"0.9\"} "
         "Nan\n";
  if (!strstr(text, want)) fail_msg("missing:\n%s\nin:\n%s", want, text);
  assert_non_null(strstr(text, "nv_inference_request_success{model=\"m\",version=\"1\"} 3\n"));
  assert_null(strstr(text, "_duration_us"));
  assert_null(strstr(text, "nv_inference_request_summary_us")); /* off for this model */
  pts_free(text);
  pts_metrics_config_reset();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(render_families_and_labels),
      cmocka_unit_test(render_overload),
      cmocka_unit_test(render_cache),
      cmocka_unit_test(render_summaries),
      cmocka_unit_test(render_gpus),
      cmocka_unit_test(proc_parsers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
