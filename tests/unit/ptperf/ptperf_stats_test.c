/* tests/unit/ptperf/ptperf_stats_test.c — statistics documents (protocol-facts
 * §1.11) and the per-request averages of their deltas; the stability rule
 * and nearest-rank percentiles; the CSV row. Numbers are computed by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptperf/lib/report.h"
#include "ptperf/lib/stats.h"
#include "ptperf/lib/window.h"

#define D(c, n) "{\"count\":" #c ",\"ns\":" #n "}"

/* One entry of §1.11, with every inference_stats member perf_analyzer needs. */
/* clang-format off */
#define ENTRY(name, ver, ic, ec, succ, q, ci, cf, co)                        \
  "{\"name\":\"" name "\",\"version\":\"" ver "\",\"last_inference\":0,"      \
  "\"inference_count\":" #ic ",\"execution_count\":" #ec ","                 \
  "\"inference_stats\":{"                                                     \
  "\"success\":" succ ",\"fail\":" D(0, 0) ",\"queue\":" q ","                \
  "\"compute_input\":" ci ",\"compute_infer\":" cf ",\"compute_output\":" co \
  ",\"cache_hit\":" D(0, 0) ",\"cache_miss\":" D(0, 0) "},"                   \
  "\"batch_stats\":[]}"
/* clang-format on */

static void parse_sums_versions_of_the_model(void **state) {
  (void)state;
  /* clang-format off */
  const char *doc = "{\"model_stats\":["
      ENTRY("m", "1", 10, 4, D(10, 1000), D(10, 100), D(4, 40), D(4, 400), D(4, 80)) ","
      ENTRY("other", "1", 99, 99, D(99, 9), D(99, 9), D(99, 9), D(99, 9), D(99, 9)) ","
      ENTRY("m", "2", 5, 5, D(5, 500), D(5, 50), D(5, 5), D(5, 50), D(5, 5)) "]}";
  /* clang-format on */
  struct ptperf_stats s;
  struct pts_error err;
  assert_int_equal(ptperf_stats_parse(doc, "m", &s, &err), PTS_OK);
  assert_int_equal(s.inference_count, 15);
  assert_int_equal(s.execution_count, 9);
  assert_int_equal(s.success.count, 15);
  assert_int_equal(s.success.ns, 1500);
  assert_int_equal(s.queue.ns, 150);
  assert_int_equal(s.compute_input.count, 9);
  assert_int_equal(s.compute_infer.ns, 450);
  assert_int_equal(s.compute_output.ns, 85);
}

static void parse_errors_name_what_is_missing(void **state) {
  (void)state;
  struct ptperf_stats s;
  struct pts_error err;
  assert_int_equal(ptperf_stats_parse("{\"error\":\"Not Found\"}", "m", &s, &err), PTS_INVALID_ARG);
  assert_int_equal(ptperf_stats_parse("{\"model_stats\":[]}", "m", &s, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "'m'"));
  const char *no_queue =
      "{\"model_stats\":[{\"name\":\"m\",\"inference_count\":1,\"execution_count\":1,"
      "\"inference_stats\":{\"success\":" D(1, 1) "}}]}";
  assert_int_equal(ptperf_stats_parse(no_queue, "m", &s, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "inference_stats.fail"));
  assert_int_equal(ptperf_stats_parse("not json", "m", &s, &err), PTS_INVALID_ARG);
}

static void delta_gives_per_request_averages(void **state) {
  (void)state;
  struct ptperf_stats a = {.inference_count = 100,
                           .execution_count = 50,
                           .success = {100, 1000000},
                           .queue = {100, 200000},
                           .compute_input = {100, 50000},
                           .compute_infer = {100, 400000},
                           .compute_output = {100, 30000}};
  struct ptperf_stats b = a;
  /* 40 more requests in 10 executions: 4000 ns each on the whole ... */
  b.inference_count += 40;
  b.execution_count += 10;
  b.success = (struct ptperf_duration){140, 1000000 + 40 * 4000};
  b.queue = (struct ptperf_duration){140, 200000 + 40 * 1500};
  b.compute_input = (struct ptperf_duration){140, 50000 + 40 * 250};
  b.compute_infer = (struct ptperf_duration){140, 400000 + 40 * 2000};
  b.compute_output = (struct ptperf_duration){140, 30000 + 40 * 125};
  struct ptperf_breakdown d;
  ptperf_stats_delta(&a, &b, &d);
  assert_true(d.valid);
  assert_int_equal(d.requests, 40);
  assert_true(d.request_us == 4.0);
  assert_true(d.queue_us == 1.5);
  assert_true(d.compute_input_us == 0.25);
  assert_true(d.compute_infer_us == 2.0);
  assert_true(d.compute_output_us == 0.125);
  assert_true(d.avg_batch == 4.0);
  /* Nothing happened: no breakdown. Counters went back (reload): none. */
  ptperf_stats_delta(&a, &a, &d);
  assert_false(d.valid);
  ptperf_stats_delta(&b, &a, &d);
  assert_false(d.valid);
}

static void nearest_rank_percentiles(void **state) {
  (void)state;
  uint64_t v[100];
  for (int i = 0; i < 100; i++) v[i] = (uint64_t)(100 - i) * 1000; /* 100..1 us, unsorted */
  struct ptperf_latency l;
  ptperf_latency_summarize(v, 100, &l);
  assert_int_equal(l.count, 100);
  assert_true(l.p50_us == 50.0);
  assert_true(l.p90_us == 90.0);
  assert_true(l.p95_us == 95.0);
  assert_true(l.p99_us == 99.0);
  assert_true(l.avg_us == 50.5);
  uint64_t three[] = {10, 20, 30};
  assert_int_equal(ptperf_percentile(three, 3, 50), 20); /* ceil(1.5) = 2nd */
  assert_int_equal(ptperf_percentile(three, 3, 99), 30);
  assert_int_equal(ptperf_percentile(three, 3, 33), 10); /* ceil(0.99) = 1st */
  assert_int_equal(ptperf_percentile(three, 0, 50), 0);
}

static void stability_rule(void **state) {
  (void)state;
  double w[] = {500, 1000, 1050, 950};
  assert_true(ptperf_stable(w, 4, 3, 10));   /* mean 1000: all within 10% */
  assert_false(ptperf_stable(w, 4, 3, 4));   /* 1050 is 5% off */
  assert_false(ptperf_stable(w, 3, 3, 10));  /* 500 vs mean 850 */
  assert_false(ptperf_stable(w, 2, 3, 100)); /* not enough windows */
  double zeros[] = {0, 0, 0};
  assert_false(ptperf_stable(zeros, 3, 3, 10));
}

static void csv_row(void **state) {
  (void)state;
  struct ptperf_result r = {
      .model = "a,b",
      .batch_size = 1,
      .concurrency = 4,
      .seconds = 6,
      .infer_per_sec = 1234.5,
      .windows = 3,
      .stable = true,
      .errors = 2,
      .client_cpu_us = 12.5,
      .server_cpu_us = -1,
      .other_cpu_pct = -1,
      .server_faults = -1,
      .lat = {
          .count = 7407, .avg_us = 100, .p50_us = 90, .p90_us = 120, .p95_us = 130, .p99_us = 200}};
  char buf[512];
  FILE *f = fmemopen(buf, sizeof buf, "w");
  ptperf_report_csv_row(f, &r);
  r.server_cpu_us = 0; /* known and zero is not unknown */
  r.protocol = "grpc_stream";
  r.other_cpu_pct = 3.3;
  r.server_faults = 0.25;
  r.server = (struct ptperf_breakdown){.valid = true,
                                       .request_us = 60,
                                       .queue_us = 10,
                                       .compute_input_us = 1,
                                       .compute_infer_us = 40,
                                       .compute_output_us = 2,
                                       .avg_batch = 1};
  ptperf_report_csv_row(f, &r);
  fclose(f);
  assert_string_equal(
      buf,
      "\"a,b\",http,1,4,1234.5,90.0,120.0,130.0,200.0,100.0,7407,2,6.000,3,1,,,,,,,,"
      "12.50,,,\n"
      "\"a,b\",grpc_stream,1,4,1234.5,90.0,120.0,130.0,200.0,100.0,7407,2,6.000,3,1,"
      "10.00,1.00,40.00,2.00,60.00,40.00,1.000,12.50,0.00,3.3,0.25\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parse_sums_versions_of_the_model),
      cmocka_unit_test(parse_errors_name_what_is_missing),
      cmocka_unit_test(delta_gives_per_request_averages),
      cmocka_unit_test(nearest_rank_percentiles),
      cmocka_unit_test(stability_rule),
      cmocka_unit_test(csv_row),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
