/* tests/unit/core/quantiles_test.c — the summaries' quantile estimator and
 * the --metrics-config settings. Expected quantiles come from sorting the
 * same values (the values are a permutation of 1..N, so a value is its own
 * rank); the window's expiry is worked out from prometheus-cpp's rule (a
 * 60 s window in 5 buckets: a value leaves every bucket after 5 turns of
 * 12 s). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/metrics_config.h"
#include "core/quantiles.h"

#define SEC 1000000000ull

static const struct pts_quantile_target DEFAULT_TARGETS[] = {
    {0.5, 0.05}, {0.9, 0.01}, {0.95, 0.001}, {0.99, 0.001}, {0.999, 0.001}};

static void empty_is_nan(void **state) {
  (void)state;
  struct pts_quantiles *q = pts_quantiles_new(DEFAULT_TARGETS, 5, 0);
  assert_non_null(q);
  double out[5];
  pts_quantiles_get(q, 0, out);
  for (int i = 0; i < 5; i++) assert_true(isnan(out[i]));
  pts_quantiles_free(q);
  assert_null(pts_quantiles_new(DEFAULT_TARGETS, 0, 0));
}

/* Each estimate's rank is within the target's error of q * n (with one
 * rank to spare for the rounding of q * n). */
static void ranks_within_the_errors(void **state) {
  (void)state;
  enum { N = 20000 };
  struct pts_quantiles *q = pts_quantiles_new(DEFAULT_TARGETS, 5, 0);
  assert_non_null(q);
  /* i * 7919 mod N (7919 is prime, N is not a multiple): every value of
   * 0..N-1 once, in a scrambled order. */
  for (uint64_t i = 0; i < N; i++) pts_quantiles_observe(q, (double)((i * 7919) % N + 1), SEC);
  double out[5];
  pts_quantiles_get(q, 2 * SEC, out);
  for (int i = 0; i < 5; i++) {
    double want = DEFAULT_TARGETS[i].quantile * N;
    double slack = DEFAULT_TARGETS[i].error * N + 1;
    assert_true(fabs(out[i] - want) <= slack);
  }
  pts_quantiles_free(q);
}

/* A handful of values is kept whole: the estimate is one of them, at the
 * rank that prometheus-cpp's walk picks (the value below the first whose
 * rank bound passes q * n). */
static void few_values(void **state) {
  (void)state;
  const struct pts_quantile_target t[] = {{0.5, 0.05}, {0.9, 0.01}};
  struct pts_quantiles *q = pts_quantiles_new(t, 2, 0);
  assert_non_null(q);
  const double values[] = {70, 10, 100, 40, 20, 90, 60, 30, 80, 50};
  for (int i = 0; i < 10; i++) pts_quantiles_observe(q, values[i], 0);
  double out[2];
  pts_quantiles_get(q, 0, out);
  assert_true(out[0] >= 40 && out[0] <= 60);
  assert_true(out[1] >= 80 && out[1] <= 100);
  pts_quantiles_free(q);
}

static void window_expires(void **state) {
  (void)state;
  struct pts_quantiles *q = pts_quantiles_new(DEFAULT_TARGETS, 5, 0);
  assert_non_null(q);
  pts_quantiles_observe(q, 5, 0);
  double out[5];
  pts_quantiles_get(q, 49 * SEC, out); /* four turns: the fifth bucket still has it */
  assert_true(out[0] == 5);
  pts_quantiles_get(q, 61 * SEC, out); /* five: every bucket was cleared */
  assert_true(isnan(out[0]));
  pts_quantiles_observe(q, 7, 3600 * SEC); /* after an hour's idle */
  pts_quantiles_get(q, 3600 * SEC, out);
  assert_true(out[0] == 7);
  pts_quantiles_free(q);
}

static void config_defaults_and_values(void **state) {
  (void)state;
  struct pts_error err;
  pts_metrics_config_reset();
  const struct pts_metrics_config *c = pts_metrics_config_get();
  assert_true(c->counter_latencies);
  assert_false(c->summary_latencies);
  assert_false(c->histogram_latencies);
  assert_int_equal(c->n_quantiles, 5);
  assert_true(c->quantiles[4].quantile == 0.999 && c->quantiles[4].error == 0.001);
  assert_int_equal(pts_metrics_config_add("summary_latencies=true", &err), PTS_OK);
  assert_int_equal(pts_metrics_config_add("counter_latencies=false", &err), PTS_OK);
  assert_int_equal(pts_metrics_config_add("histogram_latencies=true", &err), PTS_OK);
  assert_int_equal(pts_metrics_config_add("summary_quantiles=0.25:0.01,0.75:0.02", &err), PTS_OK);
  assert_true(c->summary_latencies && !c->counter_latencies && c->histogram_latencies);
  assert_int_equal(c->n_quantiles, 2);
  assert_true(c->quantiles[0].quantile == 0.25 && c->quantiles[1].error == 0.02);
  pts_metrics_config_reset();
}

static void config_refusals_name_the_setting(void **state) {
  (void)state;
  static const struct {
    const char *spec, *says;
  } BAD[] = {
      {"summary_latencies", "--metrics-config option format is <setting>=<value>"},
      {"=true", "--metrics-config option format is <setting>=<value>"},
      {"summary_latencies=", "--metrics-config option format is <setting>=<value>"},
      {"a,summary_latencies=true", "--metrics-config option format is <setting>=<value>"},
      {"counter_latencies=yes", "counter_latencies must be true or false, got 'yes'"},
      {"summary_latencies=True", "summary_latencies must be true or false"},
      {"summary_quantiles=0.5", "summary_quantiles: '0.5' is not <quantile>:<error>"},
      {"summary_quantiles=0.5:0.05,x:1", "summary_quantiles: 'x:1' is not"},
      {"summary_quantiles=1:0.01", "summary_quantiles: '1:0.01' needs a quantile"},
      {"summary_quantiles=0.5:0", "summary_quantiles: '0.5:0' needs"},
      {"summary_max_age=10", "unknown setting 'summary_max_age'"},
      {"summary_age_buckets=3", "unknown setting 'summary_age_buckets'"},
      {"model_namespacing=true", "unknown setting 'model_namespacing'"},
  };
  pts_metrics_config_reset();
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    struct pts_error err;
    assert_int_equal(pts_metrics_config_add(BAD[i].spec, &err), PTS_INVALID_ARG);
    if (!strstr(err.msg, BAD[i].says)) fail_msg("%s: %s", BAD[i].spec, err.msg);
  }
  /* nothing of a refused value sticks */
  assert_false(pts_metrics_config_get()->summary_latencies);
  assert_int_equal(pts_metrics_config_get()->n_quantiles, 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(empty_is_nan),
      cmocka_unit_test(ranks_within_the_errors),
      cmocka_unit_test(few_values),
      cmocka_unit_test(window_expires),
      cmocka_unit_test(config_defaults_and_values),
      cmocka_unit_test(config_refusals_name_the_setting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
