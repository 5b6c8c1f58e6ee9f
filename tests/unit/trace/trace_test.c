/* Unit tests for src/trace: --trace-config parsing, settings (global, per
 * model, clear), sampling (rate, count), the trace files and the operator
 * profile files. Expected settings follow Triton's own trace endpoint tests
 * (qa/L0_trace) and documented defaults; file contents are parsed back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "scheduler/request.h"
#include "trace/profile.h"
#include "trace/trace.h"

static char dir[256];

static int make_dir(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/pts_trace_test_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void start(const char *const *config, size_t n) {
  struct pts_trace_options o = {.config = config, .n_config = n, .profile_dir = dir};
  struct pts_error err;
  assert_int_equal(pts_trace_init(&o, &err), PTS_OK);
}

static const char *value(const struct pts_trace_settings *s, const char *key, size_t i) {
  for (size_t k = 0; k < s->n; k++)
    if (strcmp(s->kv[k].key, key) == 0) return i < s->kv[k].n_values ? s->kv[k].values[i] : NULL;
  return NULL;
}

static size_t n_values(const struct pts_trace_settings *s, const char *key) {
  for (size_t k = 0; k < s->n; k++)
    if (strcmp(s->kv[k].key, key) == 0) return s->kv[k].n_values;
  return 0;
}

static enum pts_status set1(const char *model, const char *key, const char *v,
                            struct pts_error *err) {
  const char *vals[1] = {v};
  struct pts_trace_update u = {.key = key, .values = vals, .n_values = v ? 1 : 0, .clear = !v};
  return pts_trace_update(model, &u, 1, err);
}

/* ------------------------------------------------------------------ */

static void config_forms(void **state) {
  (void)state;
  struct pts_error err;
  const char *good[] = {
      "triton,file=/tmp/t.json", "level=TIMESTAMPS",       "level=tensors", "rate=5", "count=-1",
      "log-frequency=2",         "triton,log_frequency=3", "mode=triton"};
  assert_int_equal(pts_trace_check_config(good, 8, &err), PTS_OK);
  const char *bad[] = {
      "opentelemetry,url=x", "level=FOO", "rate=0", "count=-2", "foo=1", "file", "rate=x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(pts_trace_check_config(&bad[i], 1, &err), PTS_INVALID_ARG);
    assert_non_null(strstr(err.msg, bad[i])); /* the message quotes the flag value */
  }
}

/* Triton's defaults (trace.md): level OFF, rate 1000, count -1, log
 * frequency 0, mode triton. */
static void defaults(void **state) {
  (void)state;
  start(NULL, 0);
  struct pts_trace_settings s;
  pts_trace_get(NULL, &s);
  assert_string_equal(value(&s, "trace_file", 0), "");
  assert_string_equal(value(&s, "trace_level", 0), "OFF");
  assert_string_equal(value(&s, "trace_rate", 0), "1000");
  assert_string_equal(value(&s, "trace_count", 0), "-1");
  assert_string_equal(value(&s, "log_frequency", 0), "0");
  assert_string_equal(value(&s, "trace_mode", 0), "triton");
  assert_null(value(&s, "profile_executions", 0)); /* per model only */
  pts_trace_get("m", &s);
  assert_string_equal(value(&s, "profile_executions", 0), "0");
  /* Nothing is sampled while the level is OFF. */
  assert_null(pts_trace_sample("m"));
  pts_trace_shutdown();
}

/* The sequence of Triton's qa/L0_trace test_http_clear_settings, with its
 * start-up settings (file, TIMESTAMPS, rate 1). */
static void model_and_global_clear(void **state) {
  (void)state;
  char file[300];
  snprintf(file, sizeof file, "file=%s/global_unittest.log", dir);
  const char *cfg[] = {file, "level=TIMESTAMPS", "rate=1"};
  start(cfg, 3);
  struct pts_error err;
  const char *rate12[] = {"12"}, *freq34[] = {"34"};
  struct pts_trace_update mu[] = {{.key = "trace_rate", .values = rate12, .n_values = 1},
                                  {.key = "log_frequency", .values = freq34, .n_values = 1}};
  assert_int_equal(pts_trace_update("simple", mu, 2, &err), PTS_OK);
  const char *r56[] = {"56"}, *c78[] = {"78"}, *off[] = {"OFF"};
  struct pts_trace_update gu[] = {{.key = "trace_rate", .values = r56, .n_values = 1},
                                  {.key = "trace_count", .values = c78, .n_values = 1},
                                  {.key = "trace_level", .values = off, .n_values = 1}};
  assert_int_equal(pts_trace_update(NULL, gu, 3, &err), PTS_OK);

  struct pts_trace_update gclear[] = {{.key = "trace_rate", .clear = true},
                                      {.key = "trace_count", .clear = true}};
  assert_int_equal(pts_trace_update(NULL, gclear, 2, &err), PTS_OK);
  struct pts_trace_settings s;
  pts_trace_get(NULL, &s);
  assert_string_equal(value(&s, "trace_level", 0), "OFF");
  assert_string_equal(value(&s, "trace_rate", 0), "1");
  assert_string_equal(value(&s, "trace_count", 0), "-1");
  assert_string_equal(value(&s, "log_frequency", 0), "0");
  pts_trace_get("simple", &s);
  assert_string_equal(value(&s, "trace_level", 0), "OFF");
  assert_string_equal(value(&s, "trace_rate", 0), "12");
  assert_string_equal(value(&s, "trace_count", 0), "-1");
  assert_string_equal(value(&s, "log_frequency", 0), "34");

  struct pts_trace_update mclear[] = {{.key = "trace_rate", .clear = true},
                                      {.key = "trace_level", .clear = true}};
  assert_int_equal(pts_trace_update("simple", mclear, 2, &err), PTS_OK);
  pts_trace_get("simple", &s);
  assert_string_equal(value(&s, "trace_level", 0), "OFF");
  assert_string_equal(value(&s, "trace_rate", 0), "1");
  assert_string_equal(value(&s, "log_frequency", 0), "34");

  /* Two levels, and the refusals. */
  const char *both[] = {"TIMESTAMPS", "TENSORS"};
  struct pts_trace_update lv = {.key = "trace_level", .values = both, .n_values = 2};
  assert_int_equal(pts_trace_update(NULL, &lv, 1, &err), PTS_OK);
  pts_trace_get(NULL, &s);
  assert_int_equal(n_values(&s, "trace_level"), 2);
  assert_string_equal(value(&s, "trace_level", 1), "TENSORS");
  assert_int_equal(set1("simple", "trace_file", "model.log", &err), PTS_UNSUPPORTED);
  assert_string_equal(err.msg, "trace file location can not be updated through network protocol");
  assert_int_equal(set1(NULL, "trace_rate", "0", &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "trace_rate"));
  assert_int_equal(set1(NULL, "bogus", "1", &err), PTS_INVALID_ARG);
  assert_int_equal(set1(NULL, "profile_executions", "3", &err), PTS_INVALID_ARG);
  /* A refused update changes nothing, even its valid keys. */
  const char *r7[] = {"7"}, *x[] = {"x"};
  struct pts_trace_update mixed[] = {{.key = "trace_rate", .values = r7, .n_values = 1},
                                     {.key = "trace_count", .values = x, .n_values = 1}};
  assert_int_equal(pts_trace_update(NULL, mixed, 2, &err), PTS_INVALID_ARG);
  pts_trace_get(NULL, &s);
  assert_string_equal(value(&s, "trace_rate", 0), "1");
  pts_trace_shutdown();
}

/* rate N traces the N-th, 2N-th, ... request; count stops after that many. */
static void sampling(void **state) {
  (void)state;
  char file[300];
  snprintf(file, sizeof file, "file=%s/s.json", dir);
  const char *cfg[] = {file, "level=TIMESTAMPS", "rate=3"};
  start(cfg, 3);
  int picked[10] = {0};
  for (int i = 1; i <= 9; i++) {
    struct pts_trace *t = pts_trace_sample("m");
    picked[i] = t != NULL;
    pts_trace_end(t);
  }
  for (int i = 1; i <= 9; i++) assert_int_equal(picked[i], i % 3 == 0);
  struct pts_error err;
  assert_int_equal(set1("m", "trace_rate", "1", &err), PTS_OK);
  assert_int_equal(set1("m", "trace_count", "2", &err), PTS_OK);
  int n = 0;
  for (int i = 0; i < 5; i++) {
    struct pts_trace *t = pts_trace_sample("m");
    n += t != NULL;
    pts_trace_end(t);
  }
  assert_int_equal(n, 2);
  struct pts_trace_settings s;
  pts_trace_get("m", &s);
  assert_string_equal(value(&s, "trace_count", 0), "0");
  /* Another model still samples under the global settings. */
  struct pts_trace *t = pts_trace_sample("other");
  (void)t;
  pts_trace_end(t);
  pts_trace_shutdown();
}

static json_t *load(const char *path) {
  json_error_t je;
  json_t *j = json_load_file(path, 0, &je);
  if (!j) fail_msg("%s: %s (line %d)", path, je.text, je.line);
  return j;
}

/* log_frequency 2: traces 1-2 in <file>.0, the 3rd in <file>.1 at shutdown;
 * each file valid JSON with a header object and timestamps in order. */
static void files(void **state) {
  (void)state;
  char file[300], path[400];
  snprintf(file, sizeof file, "file=%s/t.json", dir);
  const char *cfg[] = {file, "level=TIMESTAMPS", "level=TENSORS", "rate=1", "log-frequency=2"};
  start(cfg, 5);
  float data[2] = {1.5f, -2.0f};
  struct pts_tensor in = {.name = "INPUT0", .dtype = PTS_DTYPE_FP32, .data = data, .byte_size = 8};
  in.shape.ndim = 2;
  in.shape.dims[0] = 1;
  in.shape.dims[1] = 2;
  int8_t small[3] = {-128, 5, 127};
  struct pts_tensor ints = {.name = "OUT", .dtype = PTS_DTYPE_INT8, .data = small, .byte_size = 3};
  ints.shape.ndim = 1;
  ints.shape.dims[0] = 3;
  for (int i = 0; i < 3; i++) {
    struct pts_trace *t = pts_trace_sample("m");
    assert_non_null(t);
    pts_trace_set_model(t, "m", 1);
    pts_trace_set_request_id(t, "req");
    uint64_t base = 1000000u * (uint64_t)(i + 1);
    for (int p = PTS_TRACE_REQUEST_START; p <= PTS_TRACE_REQUEST_END; p++)
      pts_trace_record(t, (enum pts_trace_point)p, base + 10u * (uint64_t)p);
    pts_trace_tensor(t, "TENSOR_QUEUE_INPUT", &in);
    if (i == 2) pts_trace_tensor(t, "TENSOR_BACKEND_OUTPUT", &ints);
    pts_trace_end(t);
  }
  pts_trace_shutdown();
  snprintf(path, sizeof path, "%s/t.json.0", dir);
  json_t *a = load(path);
  assert_true(json_is_array(a));
  size_t headers = 0, stamps = 0, tensors = 0, i;
  json_t *o;
  json_array_foreach(a, i, o) {
    if (json_object_get(o, "model_name")) {
      headers++;
      assert_string_equal(json_string_value(json_object_get(o, "model_name")), "m");
      assert_int_equal(json_integer_value(json_object_get(o, "model_version")), 1);
      assert_string_equal(json_string_value(json_object_get(o, "request_id")), "req");
    }
    json_t *ts = json_object_get(o, "timestamps");
    if (ts) {
      stamps++;
      assert_int_equal(json_array_size(ts), PTS_TRACE_REQUEST_END - PTS_TRACE_REQUEST_START + 1);
      json_int_t prev = 0;
      size_t k;
      json_t *e;
      json_array_foreach(ts, k, e) {
        json_int_t ns = json_integer_value(json_object_get(e, "ns"));
        assert_true(ns >= prev);
        prev = ns;
      }
      assert_string_equal(json_string_value(json_object_get(json_array_get(ts, 0), "name")),
                          "REQUEST_START");
    }
    json_t *tensor = json_object_get(o, "tensor");
    if (tensor) {
      tensors++;
      assert_string_equal(json_string_value(json_object_get(o, "activity")), "TENSOR_QUEUE_INPUT");
      assert_string_equal(json_string_value(json_object_get(tensor, "data")), "1.5,-2");
      assert_string_equal(json_string_value(json_object_get(tensor, "shape")), "1,2");
      assert_string_equal(json_string_value(json_object_get(tensor, "dtype")), "FP32");
    }
  }
  assert_int_equal(headers, 2);
  assert_int_equal(stamps, 2);
  assert_int_equal(tensors, 2);
  json_decref(a);
  snprintf(path, sizeof path, "%s/t.json.1", dir);
  a = load(path);
  assert_int_equal(json_array_size(a), 4); /* header, timestamps, two tensors */
  json_t *last = json_object_get(json_array_get(a, 3), "tensor");
  assert_string_equal(json_string_value(json_object_get(last, "data")), "-128,5,127");
  assert_string_equal(json_string_value(json_object_get(last, "dtype")), "INT8");
  json_decref(a);
  /* The Chrome trace: slices with ph X; "queue" lasts COMPUTE_START -
   * QUEUE_START = 10 ns = 0.010 us for the stamps above. */
  snprintf(path, sizeof path, "%s/t.json.0.chrome.json", dir);
  json_t *c = load(path);
  json_t *ev = json_object_get(c, "traceEvents");
  assert_true(json_is_array(ev));
  bool queue = false;
  json_array_foreach(ev, i, o) {
    const char *name = json_string_value(json_object_get(o, "name"));
    if (strcmp(name, "queue") == 0) {
      queue = true;
      assert_string_equal(json_string_value(json_object_get(o, "ph")), "X");
      assert_true(json_real_value(json_object_get(o, "dur")) > 0.0099 &&
                  json_real_value(json_object_get(o, "dur")) < 0.0101);
    }
  }
  assert_true(queue);
  json_decref(c);
}

/* The profiler's bookkeeping: N tickets, then the table and trace files. */
static void profile_session(void **state) {
  (void)state;
  start(NULL, 0);
  struct pts_error err;
  assert_null(pts_profile_take("mlp", 1, "i0", 4));
  assert_int_equal(pts_profile_arm("mlp", 2, &err), PTS_OK);
  assert_int_equal(pts_profile_pending("mlp"), 2);
  assert_null(pts_profile_take("other", 1, "i0", 1));
  for (int e = 0; e < 2; e++) {
    struct pts_profile_ticket *t = pts_profile_take("mlp", 1, "i0", 4);
    assert_non_null(t);
    struct pts_profile_op ops[] = {
        {.name = "aten::linear",
         .shapes = "[[4, 16], [32, 16], [32]]",
         .dtypes = "[float, float, float]",
         .start_ns = 1000,
         .cpu_ns = 3000},
        {.name = "aten::addmm",
         .shapes = "[[32], [4, 16], [16, 32]]",
         .dtypes = "[float, float, float]",
         .start_ns = 1500,
         .cpu_ns = 2000},
    };
    pts_profile_add(t, ops, 2);
    pts_profile_note(t, "test profiler");
    pts_profile_done(t);
  }
  assert_int_equal(pts_profile_pending("mlp"), 0);
  assert_null(pts_profile_take("mlp", 1, "i0", 4));
  pts_trace_shutdown(); /* drains the writer */
  char path[400];
  snprintf(path, sizeof path, "%s/mlp.profile1.ops.csv", dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[512];
  bool linear = false;
  while (fgets(line, sizeof line, f)) {
    /* 2 calls of 3 us: total 6.000, average 3.000; no device time. */
    if (strncmp(line, "aten::linear,", 13) == 0) {
      linear = true;
      assert_non_null(strstr(line, ",2,6.000,3.000,,"));
    }
  }
  fclose(f);
  assert_true(linear);
  snprintf(path, sizeof path, "%s/mlp.profile1.trace.json", dir);
  json_t *c = load(path);
  assert_true(json_array_size(json_object_get(c, "traceEvents")) >= 4);
  json_decref(c);
  snprintf(path, sizeof path, "%s/mlp.profile1.ops.md", dir);
  assert_int_equal(access(path, R_OK), 0);
}

/* Without init nothing is traced and every call is harmless. */
static void not_running(void **state) {
  (void)state;
  assert_null(pts_trace_sample("m"));
  pts_trace_record(NULL, PTS_TRACE_QUEUE_START, 1);
  pts_trace_end(NULL);
  struct pts_infer_request *r = pts_infer_request_new();
  pts_infer_request_free(r);
  struct pts_error err;
  assert_int_equal(set1(NULL, "trace_rate", "5", &err), PTS_UNAVAILABLE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_forms),
      cmocka_unit_test(defaults),
      cmocka_unit_test_setup_teardown(model_and_global_clear, make_dir, remove_dir),
      cmocka_unit_test_setup_teardown(sampling, make_dir, remove_dir),
      cmocka_unit_test_setup_teardown(files, make_dir, remove_dir),
      cmocka_unit_test_setup_teardown(profile_session, make_dir, remove_dir),
      cmocka_unit_test(not_running),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
