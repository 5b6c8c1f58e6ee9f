/* tests/unit/config/pbjson_parse_test.c — JSON into a ModelConfig with
 * protobuf's JSON mapping (the `config` parameter of a repository load,
 * protocol-facts §1.12). Each case states its JSON and the same config in
 * protobuf text format, written by hand; the two must give identical
 * messages (compared by their packed bytes). Errors must name the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config/pbjson.h"
#include "config_test_util.h"
#include "core/alloc.h"

static Inference__ModelConfig *from_json(const char *text, struct pts_error *err) {
  json_error_t je;
  json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
  if (!j) fail_msg("bad test JSON at %d:%d: %s", je.line, je.column, je.text);
  ProtobufCMessage *msg = NULL;
  pts_error_clear(err);
  pts_pbjson_parse(&inference__model_config__descriptor, j, &msg, err);
  json_decref(j);
  return (Inference__ModelConfig *)msg;
}

/* The packed bytes of a message (caller frees). */
static uint8_t *packed(const Inference__ModelConfig *cfg, size_t *n) {
  *n = protobuf_c_message_get_packed_size(&cfg->base);
  uint8_t *buf = malloc(*n + 1);
  assert_non_null(buf);
  assert_int_equal(protobuf_c_message_pack(&cfg->base, buf), *n);
  return buf;
}

static void same_as_pbtxt(const char *json, const char *pbtxt) {
  struct pts_error err;
  Inference__ModelConfig *a = from_json(json, &err);
  if (!a) fail_msg("JSON refused: %s", err.msg);
  Inference__ModelConfig *b = test_parse(pbtxt, &err);
  if (!b) fail_msg("pbtxt refused: %s", err.msg);
  size_t na, nb;
  uint8_t *pa = packed(a, &na), *pb = packed(b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(pa, pb, na);
  free(pa);
  free(pb);
  pts_model_config_free(a);
  pts_model_config_free(b);
}

static void snake_and_camel_names(void **state) {
  (void)state;
  same_as_pbtxt("{\"name\": \"m\", \"backend\": \"identity\", \"max_batch_size\": 8,"
                " \"input\": [{\"name\": \"X\", \"data_type\": \"TYPE_FP32\", \"dims\": [4]}]}",
                "name: \"m\" backend: \"identity\" max_batch_size: 8 "
                "input [ { name: \"X\" data_type: TYPE_FP32 dims: [ 4 ] } ]");
  same_as_pbtxt("{\"maxBatchSize\": 8, \"defaultModelFilename\": \"a.pt\","
                " \"input\": [{\"name\": \"X\", \"dataType\": \"TYPE_INT32\", \"dims\": [2]}]}",
                "max_batch_size: 8 default_model_filename: \"a.pt\" "
                "input [ { name: \"X\" data_type: TYPE_INT32 dims: [ 2 ] } ]");
}

static void values_as_protobuf_writes_them(void **state) {
  (void)state;
  /* int64 as strings or numbers, enums in any case or by number, null = not
   * set, nested messages, maps as objects, oneofs. */
  same_as_pbtxt(
      "{\"input\": [{\"name\": \"X\", \"data_type\": \"type_int64\", \"dims\": [\"-1\", 3]}],"
      " \"output\": [{\"name\": \"Y\", \"data_type\": 8, \"dims\": [3]}],"
      " \"platform\": null,"
      " \"dynamic_batching\": {\"preferred_batch_size\": [2, 4],"
      "   \"max_queue_delay_microseconds\": \"100\"},"
      " \"version_policy\": {\"specific\": {\"versions\": [1, \"3\"]}},"
      " \"instance_group\": [{\"count\": 2, \"kind\": \"KIND_CPU\"}],"
      " \"parameters\": {\"k\": {\"string_value\": \"v\"}, \"j\": {\"stringValue\": \"w\"}}}",
      "input [ { name: \"X\" data_type: TYPE_INT64 dims: [ -1, 3 ] } ]\n"
      "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 3 ] } ]\n"
      "dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 }\n"
      "version_policy { specific { versions: [ 1, 3 ] } }\n"
      "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
      "parameters { key: \"k\" value { string_value: \"v\" } }\n"
      "parameters { key: \"j\" value { string_value: \"w\" } }\n");
  /* An empty message is present (perf_analyzer keys off dynamic_batching). */
  same_as_pbtxt("{\"dynamic_batching\": {}}", "dynamic_batching { }");
  same_as_pbtxt("{\"version_policy\": {\"all\": {}}}", "version_policy { all { } }");
}

static void refuses(const char *json, const char *needle) {
  struct pts_error err;
  Inference__ModelConfig *cfg = from_json(json, &err);
  if (cfg) fail_msg("accepted: %s", json);
  assert_int_equal(err.code, PTS_INVALID_ARG);
  if (!strstr(err.msg, needle)) fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void errors_name_the_field(void **state) {
  (void)state;
  refuses("{\"inputs\": []}", "inference.ModelConfig has no field named 'inputs'");
  refuses("{\"input\": [{\"name\": \"X\", \"datatype\": \"FP32\"}]}",
          "field 'input[0]': inference.ModelInput has no field named 'datatype'");
  refuses("{\"max_batch_size\": \"eight\"}", "field 'max_batch_size': 'eight' is not an integer");
  refuses("{\"max_batch_size\": 4294967296}", "field 'max_batch_size': value 4294967296 is out of "
                                              "range for a int32 field");
  refuses("{\"max_batch_size\": 1.5}", "field 'max_batch_size': 1.5 is not an integer");
  refuses("{\"input\": [{\"data_type\": \"TYPE_NOPE\"}]}",
          "field 'input[0].data_type': unknown value 'TYPE_NOPE' for enum inference.DataType");
  refuses("{\"input\": [{\"dims\": [1, null]}]}", "field 'input[0].dims[1]': an array element may "
                                                  "not be null");
  refuses("{\"input\": {\"name\": \"X\"}}", "field 'input': expected an array, got an object");
  refuses("{\"name\": 3}", "field 'name': expected a string, got an integer");
  refuses("{\"max_batch_size\": 1, \"maxBatchSize\": 2}", "field 'max_batch_size': is given twice");
  refuses("{\"version_policy\": {\"all\": {}, \"latest\": {}}}",
          "conflicts with 'all': both are members of one oneof");
  refuses("{\"model_warmup\": [{\"inputs\": {\"X\": {\"data_type\": \"TYPE_FP32\","
          " \"dims\": [1], \"zero_data\": \"yes\"}}}]}",
          "field 'model_warmup[0].inputs.X.zero_data': expected true or false");
  refuses("{\"optimization\": {\"priority\": true}}",
          "field 'optimization.priority': expected an enum name or number, got a boolean");
}

/* The whole path of a load config: JSON text, then completion and
 * validation as for a config.pbtxt. */
static void config_from_json_completes(void **state) {
  (void)state;
  struct pts_error err;
  Inference__ModelConfig *cfg = NULL;
  static const char text[] =
      "{\"backend\": \"identity\", \"max_batch_size\": 2,"
      " \"input\": [{\"name\": \"I\", \"data_type\": \"TYPE_FP32\", \"dims\": [1]}],"
      " \"output\": [{\"name\": \"O\", \"data_type\": \"TYPE_FP32\", \"dims\": [1]}]}";
  assert_int_equal(pts_model_config_from_json(text, sizeof text - 1, NULL, "m", &cfg, &err),
                   PTS_OK);
  assert_string_equal(cfg->name, "m"); /* completed from the model name */
  assert_true(cfg->n_instance_group >= 1);
  pts_model_config_free(cfg);

  assert_int_equal(pts_model_config_from_json("{", 1, NULL, "m", &cfg, &err), PTS_INVALID_ARG);
  assert_null(cfg);
  assert_non_null(strstr(err.msg, "load config of model 'm' is not valid JSON"));
  static const char neg[] = "{\"backend\": \"identity\", \"max_batch_size\": -1}";
  assert_int_equal(pts_model_config_from_json(neg, sizeof neg - 1, NULL, "m", &cfg,
                                              &err),
                   PTS_INVALID_ARG);
  if (!strstr(err.msg, "'max_batch_size' must be non-negative value")) fail_msg("%s", err.msg);
}

/* Every allocation failure is reported and leaks nothing (LeakSanitizer). */
static void allocation_failures(void **state) {
  (void)state;
  static const char text[] =
      "{\"name\": \"m\", \"input\": [{\"name\": \"X\", \"dims\": [1, 2]}],"
      " \"parameters\": {\"k\": {\"string_value\": \"v\"}}, \"dynamic_batching\": {}}";
  json_t *j = json_loads(text, 0, NULL);
  assert_non_null(j);
  for (long n = 0;; n++) {
    ProtobufCMessage *msg = NULL;
    struct pts_error err;
    pts_alloc_fail_after(n);
    enum pts_status st = pts_pbjson_parse(&inference__model_config__descriptor, j, &msg, &err);
    pts_alloc_fail_after(-1);
    if (st == PTS_OK) {
      protobuf_c_message_free_unpacked(msg, NULL);
      break;
    }
    assert_int_equal(st, PTS_NOMEM);
    assert_null(msg);
  }
  json_decref(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(snake_and_camel_names),
      cmocka_unit_test(values_as_protobuf_writes_them),
      cmocka_unit_test(errors_name_the_field),
      cmocka_unit_test(config_from_json_completes),
      cmocka_unit_test(allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
