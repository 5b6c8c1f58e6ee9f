/* tests/unit/config/pbjson_test.c — the /config JSON rendering, compared
 * with JSON written by hand from protocol-facts §1.10: snake_case names,
 * every primitive field printed, enums by name, maps as objects, unset
 * sub-messages and oneof members left out, 64-bit integers as numbers except
 * graph_spec dims and secondary device ids, floats by their shortest form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config/pbjson.h"
#include "config_test_util.h"
#include "core/alloc.h"

static json_t *expect_json(const char *text) {
  json_error_t jerr;
  json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
  if (!j) fail_msg("bad expected JSON at %d:%d: %s", jerr.line, jerr.column, jerr.text);
  return j;
}

static void assert_json_equal(json_t *got, const char *want_text) {
  json_t *want = expect_json(want_text);
  if (!json_equal(got, want)) {
    char *g = json_dumps(got, JSON_SORT_KEYS), *w = json_dumps(want, JSON_SORT_KEYS);
    fprintf(stderr, "got:  %s\nwant: %s\n", g, w);
    free(g);
    free(w);
    json_decref(want);
    fail();
  }
  json_decref(want);
}

static Inference__ModelConfig *parse_ok(const char *text) {
  struct pts_error err;
  Inference__ModelConfig *cfg = test_parse(text, &err);
  if (!cfg) fail_msg("%s", err.msg);
  return cfg;
}

static void completed_config(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = parse_ok(
      "name: \"simple\"\n"
      "backend: \"pytorch\"\n"
      "max_batch_size: 4\n"
      "input [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 16 ] } ]\n"
      "output [ { name: \"OUTPUT__0\" data_type: TYPE_INT64 dims: [ -1 ] reshape { shape: [ -1 ] } "
      "} ]\n"
      "dynamic_batching { }\n"
      "parameters { key: \"INFERENCE_MODE\" value { string_value: \"true\" } }\n");
  struct pts_error err;
  assert_int_equal(pts_model_config_complete(cfg, NULL, "simple", &err), PTS_OK);
  char *text = pts_model_config_to_json(cfg);
  assert_non_null(text);
  json_t *got = expect_json(text);
  pts_free(text);
  assert_json_equal(
      got,
      "{\"name\": \"simple\", \"platform\": \"pytorch_libtorch\", \"backend\": \"pytorch\", "
      "\"runtime\": \"\","
      " \"version_policy\": {\"latest\": {\"num_versions\": 1}},"
      " \"max_batch_size\": 4,"
      " \"input\": [{\"name\": \"INPUT__0\", \"data_type\": \"TYPE_FP32\", \"format\": "
      "\"FORMAT_NONE\","
      "   \"dims\": [16], \"is_shape_tensor\": false, \"allow_ragged_batch\": false, \"optional\": "
      "false,"
      "   \"is_non_linear_format_io\": false}],"
      " \"output\": [{\"name\": \"OUTPUT__0\", \"data_type\": \"TYPE_INT64\", \"dims\": [-1],"
      "   \"reshape\": {\"shape\": [-1]}, \"label_filename\": \"\", \"is_shape_tensor\": false,"
      "   \"is_non_linear_format_io\": false}],"
      " \"batch_input\": [], \"batch_output\": [],"
      " \"optimization\": {\"priority\": \"PRIORITY_DEFAULT\", \"input_pinned_memory\": "
      "{\"enable\": true},"
      "   \"output_pinned_memory\": {\"enable\": true}, \"gather_kernel_buffer_threshold\": 0,"
      "   \"eager_batching\": false},"
      " \"dynamic_batching\": {\"preferred_batch_size\": [4], \"max_queue_delay_microseconds\": 0,"
      "   \"preserve_ordering\": false, \"priority_levels\": 0, \"default_priority_level\": 0,"
      "   \"priority_queue_policy\": {}},"
      " \"instance_group\": [{\"name\": \"simple_0\", \"kind\": \"KIND_AUTO\", \"count\": 1, "
      "\"gpus\": [],"
      "   \"secondary_devices\": [], \"profile\": [], \"passive\": false, \"host_policy\": \"\"}],"
      " \"default_model_filename\": \"model.pt\", \"cc_model_filenames\": {}, \"metric_tags\": {},"
      " \"parameters\": {\"INFERENCE_MODE\": {\"string_value\": \"true\"}}, \"model_warmup\": []}");
  /* Triton prints fields in .proto declaration order, not number order. */
  const char *want_keys[] = {"name",    "platform",       "backend",
                             "runtime", "version_policy", "max_batch_size"};
  void *it = json_object_iter(got);
  for (size_t i = 0; i < 6; i++, it = json_object_iter_next(got, it))
    assert_string_equal(json_object_iter_key(it), want_keys[i]);
  json_decref(got);
  pts_model_config_free(cfg);
}

static json_t *render(const Inference__ModelConfig *cfg) {
  json_t *j = pts_pbjson_render(&cfg->base);
  assert_non_null(j);
  return j;
}

static void int64_numbers_and_strings(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = parse_ok(
      "instance_group { secondary_devices { kind: KIND_NVDLA device_id: 7 } }\n"
      "optimization { cuda { graph_spec { batch_size: 8 input { key: \"x\" value { dim: [ 3, 224 ] "
      "} } } } }\n"
      "dynamic_batching { priority_queue_policy { key: 2 value { default_timeout_microseconds: 100 "
      "} }"
      "  max_queue_delay_microseconds: 5 }\n"
      "version_policy { specific { versions: [ 1, 9000000000 ] } }\n");
  json_t *j = render(cfg);
  assert_json_equal(
      json_object_get(json_array_get(json_object_get(j, "instance_group"), 0), "secondary_devices"),
      "[{\"kind\": \"KIND_NVDLA\", \"device_id\": \"7\"}]");
  assert_json_equal(
      json_object_get(json_object_get(j, "optimization"), "cuda"),
      "{\"graphs\": false, \"busy_wait_events\": false, \"output_copy_stream\": false,"
      " \"graph_spec\": [{\"batch_size\": 8, \"input\": {\"x\": {\"dim\": [\"3\", \"224\"]}}}]}");
  json_t *db = json_object_get(j, "dynamic_batching");
  assert_json_equal(
      json_object_get(db, "priority_queue_policy"),
      "{\"2\": {\"timeout_action\": \"REJECT\", \"default_timeout_microseconds\": 100,"
      " \"allow_timeout_override\": false, \"max_queue_size\": 0}}");
  assert_json_equal(json_object_get(db, "max_queue_delay_microseconds"), "5");
  assert_json_equal(json_object_get(j, "version_policy"),
                    "{\"specific\": {\"versions\": [1, 9000000000]}}");
  json_decref(j);
  pts_model_config_free(cfg);
}

static void floats_oneofs_and_presence(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = parse_ok(
      "sequence_batching { control_input { name: \"c\" control { kind: CONTROL_SEQUENCE_READY"
      "  fp32_false_true: [ 0.1, nan, -inf ] } } }\n"
      "model_metrics { metric_control { metric_identifier { family: \"f\" } } }\n"
      "response_cache { }\n");
  json_t *j = render(cfg);
  /* No strategy given: neither `direct` nor `oldest` appears. */
  assert_json_equal(
      json_object_get(j, "sequence_batching"),
      "{\"max_sequence_idle_microseconds\": 0, \"state\": [], \"iterative_sequence\": false,"
      " \"control_input\": [{\"name\": \"c\", \"control\": [{\"kind\": \"CONTROL_SEQUENCE_READY\","
      "  \"int32_false_true\": [], \"fp32_false_true\": [0.1, \"NaN\", \"-Infinity\"],"
      "  \"bool_false_true\": [], \"data_type\": \"TYPE_INVALID\"}]}]}");
  assert_json_equal(json_object_get(j, "model_metrics"),
                    "{\"metric_control\": [{\"metric_identifier\": {\"family\": \"f\"}}]}");
  /* Present but empty prints with its defaults; absent ones do not print. */
  assert_json_equal(json_object_get(j, "response_cache"), "{\"enable\": false}");
  assert_null(json_object_get(j, "dynamic_batching"));
  assert_null(json_object_get(j, "version_policy"));
  assert_null(json_object_get(j, "model_transaction_policy"));
  json_decref(j);
  pts_model_config_free(cfg);
}

static void warmup_and_maps(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = parse_ok(
      "model_warmup [ { name: \"w\" batch_size: 2 count: 3 inputs { key: \"IN\" value {"
      "  data_type: TYPE_STRING dims: [ 2 ] input_data_file: \"in.bin\" } } } ]\n"
      "metric_tags { key: \"a\" value: \"\\u00e9\" }\n"
      "cc_model_filenames [ { key: \"7.5\" value: \"m_T4.plan\" } ]\n");
  json_t *j = render(cfg);
  assert_json_equal(
      json_object_get(j, "model_warmup"),
      "[{\"name\": \"w\", \"batch_size\": 2, \"count\": 3, \"inputs\": {\"IN\": {"
      "  \"data_type\": \"TYPE_STRING\", \"dims\": [2], \"input_data_file\": \"in.bin\"}}}]");
  assert_json_equal(json_object_get(j, "metric_tags"), "{\"a\": \"\\u00e9\"}");
  assert_json_equal(json_object_get(j, "cc_model_filenames"), "{\"7.5\": \"m_T4.plan\"}");
  json_decref(j);
  pts_model_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(completed_config),
      cmocka_unit_test(int64_numbers_and_strings),
      cmocka_unit_test(floats_oneofs_and_presence),
      cmocka_unit_test(warmup_and_maps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
