/* tests/unit/config/pbtxt_test.c — the text-format parser on its own: every
 * scalar type with its range limits, number spellings, bools, enums by name
 * and number, strings and escapes, lists, maps, oneofs, duplicate and
 * unknown fields, unterminated input, nesting and allocation failures.
 * Expected values are worked out by hand from protocol-facts §3.4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "config/pbtxt.h"
#include "config_test_util.h"
#include "core/alloc.h"

static Inference__ModelConfig *ok(const char *text) {
  struct pts_error err;
  Inference__ModelConfig *cfg = test_parse(text, &err);
  if (!cfg) fail_msg("unexpected error for [%s]: %s", text, err.msg);
  return cfg;
}

/* Parsing must fail with INVALID_ARG, at line:col, with `phrase`. */
static void bad(const char *text, int line, int col, const char *phrase) {
  struct pts_error err;
  Inference__ModelConfig *cfg = test_parse(text, &err);
  if (cfg) {
    pts_model_config_free(cfg);
    fail_msg("[%s] parsed, expected an error with '%s'", text, phrase);
  }
  char prefix[64];
  snprintf(prefix, sizeof prefix, "config.pbtxt:%d:%d: ", line, col);
  assert_int_equal(err.code, PTS_INVALID_ARG);
  if (strncmp(err.msg, prefix, strlen(prefix)) != 0 || !strstr(err.msg, phrase))
    fail_msg("[%s]: want \"%s...%s\", got \"%s\"", text, prefix, phrase, err.msg);
}

static void int32_range(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = ok("max_batch_size: 2147483647");
  assert_int_equal(cfg->max_batch_size, INT32_MAX);
  pts_model_config_free(cfg);
  cfg = ok("max_batch_size: -2147483648");
  assert_int_equal(cfg->max_batch_size, INT32_MIN);
  pts_model_config_free(cfg);
  cfg = ok("max_batch_size: 0x7fffffff");
  assert_int_equal(cfg->max_batch_size, INT32_MAX);
  pts_model_config_free(cfg);
  cfg = ok("max_batch_size: 017"); /* octal */
  assert_int_equal(cfg->max_batch_size, 15);
  pts_model_config_free(cfg);
  cfg = ok("max_batch_size: -0x10");
  assert_int_equal(cfg->max_batch_size, -16);
  pts_model_config_free(cfg);
  bad("max_batch_size: 2147483648", 1, 17, "out of range for int32 field 'max_batch_size'");
  bad("max_batch_size: -2147483649", 1, 17, "value -2147483649 is out of range");
  bad("max_batch_size: 0x80000000", 1, 17, "out of range");
  bad("max_batch_size: 09", 1, 18, "invalid digit '9' in octal number");
  bad("max_batch_size: 0x", 1, 17, "'0x' must be followed by hex digits");
  bad("max_batch_size: true", 1, 17, "expected an integer for field 'max_batch_size'");
  bad("max_batch_size: \"8\"", 1, 17, "expected an integer");
  bad("max_batch_size: - 8x", 1, 20, "need space between number and 'x'");
}

static void uint32_range(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = ok("version_policy { latest { num_versions: 4294967295 } }");
  assert_int_equal(cfg->version_policy->latest->num_versions, UINT32_MAX);
  pts_model_config_free(cfg);
  bad("version_policy { latest { num_versions: 4294967296 } }", 1, 41,
      "out of range for uint32 field 'num_versions'");
  bad("version_policy { latest { num_versions: -1 } }", 1, 41,
      "value -1 is out of range for uint32");
}

static void int64_range(void **state) {
  (void)state;
  Inference__ModelConfig *cfg =
      ok("input { dims: [ 9223372036854775807, -9223372036854775808, -1 ] }");
  assert_int_equal(cfg->input[0]->n_dims, 3);
  assert_true(cfg->input[0]->dims[0] == INT64_MAX);
  assert_true(cfg->input[0]->dims[1] == INT64_MIN);
  assert_true(cfg->input[0]->dims[2] == -1);
  pts_model_config_free(cfg);
  bad("input { dims: 9223372036854775808 }", 1, 15, "out of range for int64 field 'dims'");
  bad("input { dims: -9223372036854775809 }", 1, 15, "out of range for int64");
  bad("input { dims: 99999999999999999999999 }", 1, 15, "out of range");
}

static void uint64_range(void **state) {
  (void)state;
  Inference__ModelConfig *cfg =
      ok("dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }");
  assert_true(cfg->dynamic_batching->max_queue_delay_microseconds == UINT64_MAX);
  pts_model_config_free(cfg);
  cfg = ok("dynamic_batching { priority_levels: 0xFFFFFFFFFFFFFFFF default_priority_level: -0 }");
  assert_true(cfg->dynamic_batching->priority_levels == UINT64_MAX);
  assert_true(cfg->dynamic_batching->default_priority_level == 0);
  pts_model_config_free(cfg);
  bad("dynamic_batching { priority_levels: 18446744073709551616 }", 1, 37,
      "out of range for uint64");
  bad("dynamic_batching { priority_levels: -1 }", 1, 37, "value -1 is out of range for uint64");
  bad("dynamic_batching { priority_levels: 0x10000000000000000 }", 1, 37, "out of range");
}

static void floats_and_doubles(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = ok(
      "sequence_batching { control_input { control { "
      "fp32_false_true: [ 0, 1.5f, -inf, nan, 1e3, .5, 2F, -Infinity, 1e39, 0x10, 2.5e-1 ] } } }");
  const Inference__ModelSequenceBatching__Control *c =
      cfg->sequence_batching->control_input[0]->control[0];
  assert_int_equal(c->n_fp32_false_true, 11);
  const float *v = c->fp32_false_true;
  assert_true(v[0] == 0.0f);
  assert_true(v[1] == 1.5f);
  assert_true(isinf(v[2]) && v[2] < 0);
  assert_true(isnan(v[3]));
  assert_true(v[4] == 1000.0f);
  assert_true(v[5] == 0.5f);
  assert_true(v[6] == 2.0f);
  assert_true(isinf(v[7]) && v[7] < 0);
  assert_true(isinf(v[8]) && v[8] > 0); /* beyond FLT_MAX */
  assert_true(v[9] == 16.0f);
  assert_true(v[10] == 0.25f);
  pts_model_config_free(cfg);

  cfg =
      ok("model_metrics { metric_control { histogram_options { buckets: [ 1, 2.5, 1e-3, INF, "
         "-1.5e2, 1e300 ] } } }");
  const Inference__ModelMetrics__MetricControl *mc = cfg->model_metrics->metric_control[0];
  assert_int_equal(mc->metric_options_case,
                   INFERENCE__MODEL_METRICS__METRIC_CONTROL__METRIC_OPTIONS_HISTOGRAM_OPTIONS);
  const double *b = mc->histogram_options->buckets;
  assert_int_equal(mc->histogram_options->n_buckets, 6);
  assert_true(b[0] == 1.0 && b[1] == 2.5 && b[2] == 1e-3 && isinf(b[3]) && b[4] == -150.0 &&
              b[5] == 1e300);
  pts_model_config_free(cfg);

  bad("model_metrics { metric_control { histogram_options { buckets: [ abc ] } } }", 1, 65,
      "expected a number for field 'buckets'");
  bad("model_metrics { metric_control { histogram_options { buckets: 1e } } }", 1, 63,
      "exponent without digits");
  bad("model_metrics { metric_control { histogram_options { buckets: 1.5.2 } } }", 1, 66,
      "need space between number and '.'");
}

static void bools(void **state) {
  (void)state;
  static const struct {
    const char *spelling;
    bool value;
  } cases[] = {{"true", true},   {"True", true},   {"t", true},  {"1", true},
               {"false", false}, {"False", false}, {"f", false}, {"0", false}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[128];
    snprintf(text, sizeof text, "response_cache { enable: %s }", cases[i].spelling);
    Inference__ModelConfig *cfg = ok(text);
    assert_int_equal(cfg->response_cache->enable, cases[i].value);
    pts_model_config_free(cfg);
  }
  bad("response_cache { enable: TRUE }", 1, 26, "expected true or false for field 'enable'");
  bad("response_cache { enable: 2 }", 1, 26, "expected true or false");
  bad("response_cache { enable: yes }", 1, 26, "got 'yes'");
}

static void enums(void **state) {
  (void)state;
  Inference__ModelConfig *cfg =
      ok("input { data_type: TYPE_FP32 format: 2 } input { data_type: 13 }\n"
         "instance_group { kind: KIND_MODEL } instance_group { kind: 1 }");
  assert_int_equal(cfg->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
  assert_int_equal(cfg->input[0]->format, INFERENCE__MODEL_INPUT__FORMAT__FORMAT_NCHW);
  assert_int_equal(cfg->input[1]->data_type, INFERENCE__DATA_TYPE__TYPE_STRING);
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_MODEL);
  assert_int_equal(cfg->instance_group[1]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  pts_model_config_free(cfg);
  bad("input { data_type: 15 }", 1, 20,
      "unknown number 15 for enum field 'data_type' (inference.DataType)");
  bad("input { data_type: -1 }", 1, 20, "unknown number -1 for enum field 'data_type'");
  bad("input { data_type: type_fp32 }", 1, 20, "unknown value 'type_fp32'");
  bad("input { data_type: \"TYPE_FP32\" }", 1, 20,
      "expected an enum name or number for field 'data_type'");
  /* An enum value name of another enum is not accepted. */
  bad("input { format: KIND_GPU }", 1, 17, "unknown value 'KIND_GPU' for enum field 'format'");
}

static void strings(void **state) {
  (void)state;
  Inference__ModelConfig *cfg =
      ok("name: 'a\\x4' \"\\x4a\\7\" platform: \"\" backend: \"\\u00E9\"");
  assert_string_equal(cfg->name, "a\x04J\x07");
  assert_string_equal(cfg->platform, "");
  assert_string_equal(cfg->backend, "\xc3\xa9");
  pts_model_config_free(cfg);
  bad("name: \"abc", 1, 7, "unterminated string");
  bad("name: 'abc\"", 1, 7, "missing closing '");
  bad("name: \"a\\\"", 1, 7, "unterminated string");
  bad("name: \"ab\ncd\"", 1, 7, "unterminated string");
  bad("name: \"a\\u12\"", 1, 9, "\\u escape needs 4 hex digits");
  bad("name: \"\\ud800x\"", 1, 8, "unpaired UTF-16 surrogate");
  bad("name: \"\\U00110000\"", 1, 8, "invalid Unicode code point");
  bad("name: \"\\xff\"", 1, 7, "not valid UTF-8");
  bad("name: \"\\x\"", 1, 8, "\\x escape without hex digits");
  bad("name: abc", 1, 7, "expected a string for field 'name'");
}

static void lists_and_repetition(void **state) {
  (void)state;
  Inference__ModelConfig *cfg =
      ok("input { dims: 1 dims: [] dims: [ 2 ] dims: [ 3, 4 ] }\n"
         "output [] output [ { name: 'a' }, { name: 'b' } ] output { name: 'c' } output: [ { name: "
         "'d' } ]\n"
         "instance_group { gpus: 0 gpus: [ 1, 2 ] }");
  assert_int_equal(cfg->input[0]->n_dims, 4);
  for (int i = 0; i < 4; i++) assert_int_equal(cfg->input[0]->dims[i], i + 1);
  assert_int_equal(cfg->n_output, 4);
  assert_string_equal(cfg->output[3]->name, "d");
  assert_int_equal(cfg->instance_group[0]->n_gpus, 3);
  assert_int_equal(cfg->instance_group[0]->gpus[2], 2);
  pts_model_config_free(cfg);
  /* A trailing comma is not part of the list syntax. */
  bad("instance_group { gpus: [ 1, ] }", 1, 29, "expected an integer for field 'gpus'");
  bad("input { dims [ 1 ] }", 1, 14, "expected ':' after field 'dims'");
  bad("input [ name: 'x' ]", 1, 9, "expected '{' or '<' for field 'input'");
  bad("input { dims: [ 1", 1, 18, "expected ',' or ']' in the list of field 'dims'");
}

static void duplicates_follow_presence(void **state) {
  (void)state;
  /* protobuf C++ only objects when the first value was not the default. */
  Inference__ModelConfig *cfg = ok("max_batch_size: 0 max_batch_size: 8 name: \"\" name: \"b\"");
  assert_int_equal(cfg->max_batch_size, 8);
  assert_string_equal(cfg->name, "b");
  pts_model_config_free(cfg);
  bad("max_batch_size: 8 max_batch_size: 8", 1, 19, "non-repeated field 'max_batch_size'");
  bad("optimization { } optimization { }", 1, 18,
      "non-repeated field 'optimization' in inference.ModelConfig");
  bad("dynamic_batching { } dynamic_batching { }", 1, 22, "non-repeated field 'dynamic_batching'");
  bad("model_warmup { inputs { key: 'a' value { zero_data: false zero_data: true } } }", 1, 59,
      "non-repeated field 'zero_data' in inference.ModelWarmup.Input");
}

static void oneofs(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = ok("version_policy { specific { versions: [ 2, 5 ] } }");
  assert_int_equal(cfg->version_policy->policy_choice_case,
                   INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC);
  assert_int_equal(cfg->version_policy->specific->versions[1], 5);
  pts_model_config_free(cfg);
  bad("version_policy { latest { } all { } }", 1, 29, "field 'all' conflicts with field 'latest'");
  bad("ensemble_scheduling { } dynamic_batching { }", 1, 25,
      "field 'dynamic_batching' conflicts with field 'ensemble_scheduling'");
}

static void maps(void **state) {
  (void)state;
  Inference__ModelConfig *cfg =
      ok("dynamic_batching { priority_queue_policy { key: 2 value { max_queue_size: 1 } }\n"
         "  priority_queue_policy [ { key: 5 }, { key: 2 value { max_queue_size: 9 } } ] }\n"
         "parameters { key: 'a' value { string_value: 'x' } } parameters { key: 'a' }");
  const Inference__ModelDynamicBatching *db = cfg->dynamic_batching;
  assert_int_equal(db->n_priority_queue_policy, 2);
  assert_int_equal(db->priority_queue_policy[0]->key, 2);
  assert_int_equal(db->priority_queue_policy[0]->value->max_queue_size, 9); /* the last wins */
  assert_int_equal(db->priority_queue_policy[1]->key, 5);
  assert_non_null(db->priority_queue_policy[1]->value); /* a missing value is an empty message */
  assert_int_equal(cfg->n_parameters, 1);
  assert_string_equal(pts_model_config_param(cfg, "a"), "");
  pts_model_config_free(cfg);
  bad("parameters { key: 'a' value: 'x' }", 1, 30, "expected '{' or '<' for field 'value'");
  bad("parameters { kee: 'a' }", 1, 14,
      "unknown field 'kee' in inference.ModelConfig.ParametersEntry");
}

static void structure_errors(void **state) {
  (void)state;
  bad("input { name: 'x'", 1, 18, "'{' opened at 1:7 for field 'input' is not closed with '}'");
  bad("input < name: 'x' }", 1, 19, "got '}'");
  bad("input { reshape < shape: 1 } }", 1, 28, "got '}'");
  bad("name: 'a' ]", 1, 11, "expected a field name of inference.ModelConfig, got ']'");
  bad("42", 1, 1, "expected a field name");
  bad("name: 'a' @", 1, 11, "unexpected character '@'");
  bad("name: 'a'\n\t\x01", 2, 2, "unexpected byte 0x01");
  bad("name:", 1, 6, "got end of input");
  bad("input { Name: 'x' }", 1, 9, "unknown field 'Name' in inference.ModelInput");
}

static void empty_and_comments_only(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = ok("");
  assert_string_equal(cfg->name, "");
  assert_int_equal(cfg->n_input, 0);
  assert_null(cfg->version_policy);
  pts_model_config_free(cfg);
  cfg = ok("# only a comment\n\n   # another\n");
  assert_int_equal(cfg->max_batch_size, 0);
  pts_model_config_free(cfg);
}

/* The parser knows no ModelConfig: it fills whatever message it is given. */
static void any_message_type(void **state) {
  (void)state;
  ProtobufCMessage *msg;
  struct pts_error err;
  const char *text = "name: 'IN' data_type: TYPE_INT8 dims: [ 2 ]";
  assert_int_equal(
      pts_pbtxt_parse(&inference__model_input__descriptor, text, strlen(text), "in", &msg, &err),
      PTS_OK);
  Inference__ModelInput *in = (Inference__ModelInput *)msg;
  assert_string_equal(in->name, "IN");
  assert_int_equal(in->data_type, INFERENCE__DATA_TYPE__TYPE_INT8);
  protobuf_c_message_free_unpacked(msg, NULL);
  text = "dims: 1 max_batch_size: 1";
  assert_int_equal(
      pts_pbtxt_parse(&inference__model_input__descriptor, text, strlen(text), "in", &msg, &err),
      PTS_INVALID_ARG);
  assert_null(msg);
  assert_string_equal(err.msg, "in:1:9: unknown field 'max_batch_size' in inference.ModelInput");
}

/* The deepest path of the schema (seven levels, maps included). */
static void deep_nesting(void **state) {
  (void)state;
  Inference__ModelConfig *cfg =
      ok("optimization { cuda { graph_spec { batch_size: 2 graph_lower_bound { batch_size: 1 "
         "input { key: 'x' value { dim: [ 4, 5 ] } } } } } }");
  const Inference__ModelOptimizationPolicy__Cuda__GraphSpec *gs =
      cfg->optimization->cuda->graph_spec[0];
  assert_int_equal(gs->batch_size, 2);
  assert_int_equal(gs->graph_lower_bound->batch_size, 1);
  assert_string_equal(gs->graph_lower_bound->input[0]->key, "x");
  assert_int_equal(gs->graph_lower_bound->input[0]->value->n_dim, 2);
  assert_int_equal(gs->graph_lower_bound->input[0]->value->dim[1], 5);
  pts_model_config_free(cfg);
}

static void allocation_failures(void **state) {
  (void)state;
  const char *text =
      "name: 'm' backend: 'pytorch' max_batch_size: 4\n"
      "input [ { name: 'a' data_type: TYPE_FP32 dims: [ 3, -1 ] reshape { shape: [ 3, -1 ] } } ]\n"
      "output { name: 'b' data_type: TYPE_FP32 dims: 1 }\n"
      "parameters { key: 'k' value { string_value: 'v' } } parameters { key: 'k' }\n"
      "dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { "
      "key: 1 } }\n"
      "model_warmup { name: 'w' batch_size: 1 inputs { key: 'a' value { data_type: TYPE_FP32 dims: "
      "[3, 4] "
      "zero_data: true } } }\n";
  /* Fail the Nth allocation for every N until parsing succeeds: each error
   * path must report NOMEM cleanly (LeakSanitizer checks nothing leaks). */
  bool succeeded = false;
  for (long n = 0; n < 10000 && !succeeded; n++) {
    struct pts_error err;
    Inference__ModelConfig *cfg = NULL;
    pts_alloc_fail_after(n);
    enum pts_status s = pts_model_config_parse(text, strlen(text), "config.pbtxt", &cfg, &err);
    if (s == PTS_OK) s = pts_model_config_complete(cfg, NULL, "m", &err);
    pts_alloc_fail_after(-1);
    if (s == PTS_OK) {
      succeeded = true;
      char *json = pts_model_config_to_json(cfg);
      assert_non_null(json);
      pts_free(json);
    } else {
      assert_int_equal(s, PTS_NOMEM);
    }
    pts_model_config_free(cfg);
  }
  assert_true(succeeded);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(int32_range),
      cmocka_unit_test(uint32_range),
      cmocka_unit_test(int64_range),
      cmocka_unit_test(uint64_range),
      cmocka_unit_test(floats_and_doubles),
      cmocka_unit_test(bools),
      cmocka_unit_test(enums),
      cmocka_unit_test(strings),
      cmocka_unit_test(lists_and_repetition),
      cmocka_unit_test(duplicates_follow_presence),
      cmocka_unit_test(oneofs),
      cmocka_unit_test(maps),
      cmocka_unit_test(structure_errors),
      cmocka_unit_test(empty_and_comments_only),
      cmocka_unit_test(any_message_type),
      cmocka_unit_test(deep_nesting),
      cmocka_unit_test(allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
