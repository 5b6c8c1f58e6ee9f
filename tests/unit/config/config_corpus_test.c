/* tests/unit/config/config_corpus_test.c — real-world-style config.pbtxt
 * files (corpus/good: the seed documents' configs, protocol-facts §3.4's
 * representative config, and every syntax variant it lists) checked field
 * by field, and broken files (corpus/bad) each checked for the line:col and
 * phrase of its error. Expected values are read off the files by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config_test_util.h"

static Inference__ModelConfig *load_good(const char *file) {
  char rel[256];
  snprintf(rel, sizeof rel, "tests/unit/config/corpus/good/%s", file);
  size_t len = 0;
  char *text = test_read_file(rel, &len);
  assert_non_null(text);
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  pts_error_clear(&err);
  enum pts_status s = pts_model_config_parse(text, len, file, &cfg, &err);
  free(text);
  if (s != PTS_OK) fail_msg("%s: %s", file, err.msg);
  assert_non_null(cfg);
  return cfg;
}

static void complete_ok(Inference__ModelConfig *cfg, const char *name) {
  struct pts_error err;
  pts_error_clear(&err);
  if (pts_model_config_complete(cfg, NULL, name, &err) != PTS_OK) fail_msg("%s", err.msg);
}

static void assert_dims(const int64_t *dims, size_t n, const int64_t *want, size_t n_want) {
  assert_int_equal(n, n_want);
  for (size_t i = 0; i < n; i++) assert_int_equal(dims[i], want[i]);
}
#define ASSERT_DIMS(d, n, ...)                                    \
  do {                                                            \
    const int64_t want_[] = {__VA_ARGS__};                        \
    assert_dims((d), (n), want_, sizeof want_ / sizeof want_[0]); \
  } while (0)

static void seed_mps_basic(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("seed_mps_basic.pbtxt");
  assert_string_equal(cfg->name, "my_pytorch_model");
  assert_string_equal(cfg->backend, "pytorch");
  assert_int_equal(cfg->max_batch_size, 8);
  assert_int_equal(cfg->n_instance_group, 1);
  assert_int_equal(cfg->instance_group[0]->count, 1);
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  complete_ok(cfg, "my_pytorch_model");
  assert_string_equal(cfg->platform, "pytorch_libtorch");
  assert_string_equal(cfg->instance_group[0]->name, "my_pytorch_model_0");
  pts_model_config_free(cfg);
}

static void seed_mps_explicit(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("seed_mps_explicit.pbtxt");
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  assert_non_null(cfg->optimization);
  const Inference__ModelOptimizationPolicy__ExecutionAccelerators *ea =
      cfg->optimization->execution_accelerators;
  assert_non_null(ea);
  assert_int_equal(ea->n_gpu_execution_accelerator, 1);
  assert_string_equal(ea->gpu_execution_accelerator[0]->name, "mps");
  assert_int_equal(ea->gpu_execution_accelerator[0]->n_parameters, 0);
  assert_int_equal(ea->n_cpu_execution_accelerator, 0);
  complete_ok(cfg, "my_pytorch_model");
  pts_model_config_free(cfg);
}

static void seed_warmup(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("seed_warmup.pbtxt");
  assert_int_equal(cfg->n_model_warmup, 1);
  const Inference__ModelWarmup *w = cfg->model_warmup[0];
  assert_string_equal(w->name, "warmup");
  assert_int_equal(w->batch_size, 1);
  assert_int_equal(w->n_inputs, 1);
  assert_string_equal(w->inputs[0]->key, "input_name");
  const Inference__ModelWarmup__Input *in = w->inputs[0]->value;
  assert_int_equal(in->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
  ASSERT_DIMS(in->dims, in->n_dims, 3, 224, 224);
  assert_int_equal(in->input_data_type_case,
                   INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_ZERO_DATA);
  assert_true(in->zero_data);
  pts_model_config_free(cfg);
}

static void seed_macos_two_io(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("seed_macos_two_io.pbtxt");
  assert_int_equal(cfg->n_input, 2);
  assert_int_equal(cfg->n_output, 2);
  assert_string_equal(cfg->input[1]->name, "INPUT1");
  assert_string_equal(cfg->output[0]->name, "OUTPUT0");
  assert_int_equal(cfg->output[1]->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
  ASSERT_DIMS(cfg->input[0]->dims, cfg->input[0]->n_dims, 3, 224, 224);
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  assert_string_equal(cfg->optimization->execution_accelerators->gpu_execution_accelerator[0]->name,
                      "mps");
  complete_ok(cfg, "my_pytorch_model");
  pts_model_config_free(cfg);
}

static void representative(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("representative.pbtxt");
  assert_string_equal(cfg->name, "resnet");
  assert_int_equal(cfg->input[0]->format, INFERENCE__MODEL_INPUT__FORMAT__FORMAT_NCHW);
  ASSERT_DIMS(cfg->input[0]->dims, cfg->input[0]->n_dims, 3, -1, -1);
  assert_string_equal(cfg->output[0]->label_filename, "labels.txt");
  assert_int_equal(cfg->scheduling_choice_case,
                   INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING);
  assert_int_equal(cfg->dynamic_batching->n_preferred_batch_size, 2);
  assert_int_equal(cfg->dynamic_batching->preferred_batch_size[1], 8);
  assert_int_equal(cfg->dynamic_batching->max_queue_delay_microseconds, 100);
  assert_int_equal(cfg->instance_group[0]->count, 2);
  assert_int_equal(cfg->instance_group[0]->n_gpus, 1);
  assert_int_equal(cfg->instance_group[0]->gpus[0], 0);
  assert_string_equal(pts_model_config_param(cfg, "INFERENCE_MODE"), "true");
  const Inference__ModelOptimizationPolicy__ExecutionAccelerators__Accelerator *acc =
      cfg->optimization->execution_accelerators->gpu_execution_accelerator[0];
  assert_string_equal(acc->name, "tensorrt");
  assert_string_equal(acc->parameters[0]->key, "precision_mode");
  assert_string_equal(acc->parameters[0]->value, "FP16");
  assert_true(cfg->model_warmup[0]->inputs[0]->value->random_data);
  assert_int_equal(cfg->version_policy->latest->num_versions, 1);
  assert_true(cfg->response_cache->enable);
  assert_non_null(cfg->model_transaction_policy);
  assert_false(cfg->model_transaction_policy->decoupled);
  /* It parses, and its response cache is served (cache/cache.h), but
   * TensorRT is not. */
  struct pts_error err;
  assert_int_equal(pts_model_config_complete(cfg, NULL, "resnet", &err), PTS_INVALID_ARG);
  assert_null(strstr(err.msg, "response_cache"));
  assert_non_null(strstr(err.msg, "tensorrt"));
  pts_model_config_free(cfg);
}

static void license_header(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("license_header.pbtxt");
  assert_string_equal(cfg->name, "");
  assert_string_equal(cfg->platform, "pytorch_libtorch");
  assert_int_equal(cfg->max_batch_size, 0);
  assert_int_equal(cfg->n_input, 1);
  assert_string_equal(cfg->input[0]->name, "x");
  assert_int_equal(cfg->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_INT64);
  ASSERT_DIMS(cfg->input[0]->dims, cfg->input[0]->n_dims, -1);
  complete_ok(cfg, "lic");
  assert_string_equal(cfg->name, "lic");
  assert_string_equal(cfg->backend, "pytorch");
  pts_model_config_free(cfg);
}

static void list_vs_repeated(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("list_vs_repeated.pbtxt");
  assert_int_equal(cfg->n_input, 4);
  const char *names[] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; i++) assert_string_equal(cfg->input[i]->name, names[i]);
  ASSERT_DIMS(cfg->input[0]->dims, cfg->input[0]->n_dims, 16);
  ASSERT_DIMS(cfg->input[1]->dims, cfg->input[1]->n_dims, 2, 8);
  ASSERT_DIMS(cfg->input[2]->dims, cfg->input[2]->n_dims, 4);
  ASSERT_DIMS(cfg->input[3]->dims, cfg->input[3]->n_dims, 1, 2, 3);
  assert_int_equal(cfg->dynamic_batching->n_preferred_batch_size, 2);
  assert_int_equal(cfg->dynamic_batching->preferred_batch_size[0], 2);
  assert_int_equal(cfg->dynamic_batching->preferred_batch_size[1], 4);
  assert_int_equal(cfg->n_instance_group, 1);
  assert_int_equal(cfg->instance_group[0]->count, 3);
  complete_ok(cfg, "mixed");
  pts_model_config_free(cfg);
}

static void maps_all_spellings(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("maps_all_spellings.pbtxt");
  /* DUP appears twice: one entry, the last value. */
  assert_int_equal(cfg->n_parameters, 6);
  assert_string_equal(pts_model_config_param(cfg, "INFERENCE_MODE"), "false");
  assert_string_equal(pts_model_config_param(cfg, "INTRA_OP_THREAD_COUNT"), "4");
  assert_string_equal(pts_model_config_param(cfg, "INTER_OP_THREAD_COUNT"), "2");
  assert_string_equal(pts_model_config_param(cfg, "DISABLE_OPTIMIZED_EXECUTION"), "true");
  assert_string_equal(pts_model_config_param(cfg, "DUP"), "second");
  assert_string_equal(pts_model_config_param(cfg, "NOVALUE"), "");
  assert_null(pts_model_config_param(cfg, "ABSENT"));
  assert_int_equal(cfg->n_metric_tags, 2);
  assert_string_equal(cfg->metric_tags[1]->key, "tier");
  assert_string_equal(cfg->metric_tags[1]->value, "gold");
  const Inference__ModelDynamicBatching *db = cfg->dynamic_batching;
  assert_int_equal(db->priority_levels, 3);
  assert_int_equal(db->n_priority_queue_policy, 2);
  assert_int_equal(db->priority_queue_policy[0]->key, 1);
  assert_int_equal(db->priority_queue_policy[0]->value->timeout_action,
                   INFERENCE__MODEL_QUEUE_POLICY__TIMEOUT_ACTION__DELAY);
  assert_int_equal(db->priority_queue_policy[0]->value->default_timeout_microseconds, 1000);
  assert_int_equal(db->priority_queue_policy[1]->key, 3);
  assert_int_equal(db->priority_queue_policy[1]->value->max_queue_size, 7);
  const Inference__ModelOptimizationPolicy__ExecutionAccelerators__Accelerator *acc =
      cfg->optimization->execution_accelerators->gpu_execution_accelerator[0];
  assert_string_equal(acc->parameters[0]->key, "k");
  assert_string_equal(acc->parameters[0]->value, "v");
  complete_ok(cfg, "maps");
  pts_model_config_free(cfg);
}

static const char *tag(const Inference__ModelConfig *cfg, const char *key) {
  for (size_t i = 0; i < cfg->n_metric_tags; i++)
    if (strcmp(cfg->metric_tags[i]->key, key) == 0) return cfg->metric_tags[i]->value;
  return NULL;
}

static void string_escapes(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("string_escapes.pbtxt");
  assert_string_equal(tag(cfg, "simple"), "tab\there");
  assert_string_equal(tag(cfg, "single"), "it's \"quoted\"");
  assert_string_equal(tag(cfg, "concat"), "abcdef");
  assert_string_equal(tag(cfg, "hex"), "AJ~");
  assert_string_equal(tag(cfg, "octal"), "AB0");
  /* é = C3 A9, € = E2 82 AC, 😀 = F0 9F 98 80 */
  assert_string_equal(tag(cfg, "unicode"), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  assert_string_equal(tag(cfg, "pair"), "\xf0\x9f\x98\x80");
  assert_string_equal(tag(cfg, "misc"), "\\\"?'\n\r");
  assert_string_equal(tag(cfg, "utf8"), "na\xc3\xafve");
  pts_model_config_free(cfg);
}

static void angle_brackets(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("angle_brackets.pbtxt");
  assert_string_equal(cfg->input[0]->name, "IN");
  assert_non_null(cfg->input[0]->reshape);
  ASSERT_DIMS(cfg->input[0]->reshape->shape, cfg->input[0]->reshape->n_shape, 2, 2);
  assert_string_equal(cfg->output[0]->name, "OUT");
  assert_int_equal(cfg->version_policy->policy_choice_case,
                   INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC);
  ASSERT_DIMS(cfg->version_policy->specific->versions, cfg->version_policy->specific->n_versions, 1,
              3);
  complete_ok(cfg, "angles");
  pts_model_config_free(cfg);
}

static void separators(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = load_good("separators.pbtxt");
  assert_string_equal(cfg->name, "seps");
  assert_int_equal(cfg->max_batch_size, 2);
  assert_int_equal(cfg->n_input, 2);
  assert_int_equal(cfg->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_BOOL);
  assert_int_equal(cfg->input[1]->data_type, INFERENCE__DATA_TYPE__TYPE_INT32); /* by number: 8 */
  ASSERT_DIMS(cfg->input[1]->dims, cfg->input[1]->n_dims, 16);                  /* 0x10 */
  ASSERT_DIMS(cfg->output[0]->dims, cfg->output[0]->n_dims, 8);                 /* 010 octal */
  assert_int_equal(cfg->version_policy->policy_choice_case,
                   INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL);
  complete_ok(cfg, "seps");
  pts_model_config_free(cfg);
}

/* ---- broken files ---- */

static const struct {
  const char *file;
  int line, col;
  const char *phrase;
} bad[] = {
    {"unknown_field", 7, 15, "unknown field 'dimz' in inference.ModelInput"},
    {"missing_colon", 2, 16, "expected ':' after field 'max_batch_size'"},
    {"unterminated_block", 6, 1, "'{' opened at 3:3 for field 'input' is not closed"},
    {"unterminated_second", 4, 1, "'{' opened at 3:9 for field 'input' is not closed"},
    {"unterminated_string", 2, 10, "unterminated string"},
    {"duplicate_field", 3, 1,
     "non-repeated field 'name' in inference.ModelConfig is specified multiple times"},
    {"duplicate_message", 1, 40,
     "non-repeated field 'reshape' in inference.ModelInput is specified multiple"},
    {"oneof_conflict", 3, 1, "field 'sequence_batching' conflicts with field 'dynamic_batching'"},
    {"warmup_oneof", 1, 58, "field 'random_data' conflicts with field 'zero_data'"},
    {"bad_enum_name", 1, 32,
     "unknown value 'TYPE_FLOAT32' for enum field 'data_type' (inference.DataType)"},
    {"bad_enum_number", 1, 24, "unknown number 7 for enum field 'kind'"},
    {"int32_overflow", 1, 17, "value 2147483648 is out of range for int32 field 'max_batch_size'"},
    {"uint32_negative", 1, 41, "value -1 is out of range for uint32 field 'num_versions'"},
    {"uint64_overflow", 1, 50, "out of range for uint64 field 'max_queue_delay_microseconds'"},
    {"list_on_singular", 1, 7, "field 'name' in inference.ModelConfig is not repeated"},
    {"number_then_ident", 1, 18, "need space between number and 'x'"},
    {"bad_escape", 1, 9, "invalid escape sequence '\\q'"},
    {"cpp_comment", 1, 12, "unexpected character '/'"},
    {"float_for_int", 2, 17, "expected an integer for field 'max_batch_size'"},
    {"missing_list_comma", 1, 19, "expected ',' or ']' in the list of field 'dims'"},
    {"stray_close", 2, 1, "expected a field name of inference.ModelConfig, got '}'"},
    {"bad_bool", 1, 29, "expected true or false for field 'optional'"},
    {"mismatched_bracket", 1, 19, "expected a field name of inference.ModelInput, got '>'"},
    {"scalar_brace", 1, 16, "expected ':' after field 'max_batch_size'"},
    {"extension_syntax", 1, 1, "extension and Any syntax"},
    {"nul_in_string", 1, 7, "contains a NUL character"},
};

static void bad_corpus(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char rel[256], source[128], prefix[160];
    snprintf(rel, sizeof rel, "tests/unit/config/corpus/bad/%s.pbtxt", bad[i].file);
    snprintf(source, sizeof source, "%s.pbtxt", bad[i].file);
    size_t len = 0;
    char *text = test_read_file(rel, &len);
    if (!text) fail_msg("missing %s", rel);
    Inference__ModelConfig *cfg = (Inference__ModelConfig *)1;
    struct pts_error err;
    pts_error_clear(&err);
    enum pts_status s = pts_model_config_parse(text, len, source, &cfg, &err);
    free(text);
    if (s != PTS_INVALID_ARG) fail_msg("%s: parsed (status %d)", bad[i].file, (int)s);
    assert_null(cfg);
    snprintf(prefix, sizeof prefix, "%s:%d:%d: ", source, bad[i].line, bad[i].col);
    if (strncmp(err.msg, prefix, strlen(prefix)) != 0 || !strstr(err.msg, bad[i].phrase))
      fail_msg("%s: want \"%s...%s\", got \"%s\"", bad[i].file, prefix, bad[i].phrase, err.msg);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_mps_basic),   cmocka_unit_test(seed_mps_explicit),
      cmocka_unit_test(seed_warmup),      cmocka_unit_test(seed_macos_two_io),
      cmocka_unit_test(representative),   cmocka_unit_test(license_header),
      cmocka_unit_test(list_vs_repeated), cmocka_unit_test(maps_all_spellings),
      cmocka_unit_test(string_escapes),   cmocka_unit_test(angle_brackets),
      cmocka_unit_test(separators),       cmocka_unit_test(bad_corpus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
