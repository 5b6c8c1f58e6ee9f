/* tests/unit/torture/config_torture_test.c — every allocation of config
 * loading made to fail in turn: reading config.pbtxt, the pbtxt parser, the
 * completion and validation, and the /config JSON rendering. Each run must
 * end in a clean error; the one run without a failure must give exactly the
 * config (and JSON) an undisturbed load gives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config/model_config.h"
#include "config/model_config_sequence.h"
#include "core/log.h"
#include "server/fs_helpers.h"
#include "torture/torture.h"

/* Uses most of the grammar: nested messages, lists, maps, enums, oneofs,
 * strings with escapes, comments, and fields the completion fills in. */
static const char CONFIG[] =
    "# a representative config\n"
    "name: \"tm\"\n"
    "backend: \"identity\"\n"
    "max_batch_size: 8\n"
    "input [\n"
    "  { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 3, -1 ] },\n"
    "  { name: \"INPUT1\" data_type: TYPE_STRING dims: [ 1 ] optional: true }\n"
    "]\n"
    "output [\n"
    "  { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 3, -1 ] },\n"
    "  { name: \"OUTPUT1\" data_type: TYPE_STRING dims: [ 1 ] }\n"
    "]\n"
    "version_policy: { latest: { num_versions: 2 } }\n"
    "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
    "dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 }\n"
    "parameters: { key: \"k\\tone\" value: { string_value: \"v\\\"1\\\"\" } }\n"
    "parameters [ { key: \"k2\" value: { string_value: \"v2\" } } ]\n";

struct load_ctx {
  char root[64];
  char dir[128];
  char *json; /* the rendering of the last successful run */
};

static enum pts_status load_step(void *arg, struct pts_error *err) {
  struct load_ctx *c = arg;
  Inference__ModelConfig *cfg = NULL;
  enum pts_status st = pts_model_config_load(c->dir, "tm", &cfg, err);
  if (st != PTS_OK) {
    assert_null(cfg);
    return st;
  }
  char *json = pts_model_config_to_json(cfg);
  pts_model_config_free(cfg);
  if (!json) return pts_error_set(err, PTS_NOMEM, "out of memory rendering the config");
  pts_free(c->json);
  c->json = json;
  return PTS_OK;
}

static void test_config_load_walk(void **state) {
  (void)state;
  struct load_ctx c;
  memset(&c, 0, sizeof c);
  assert_non_null(fs_tempdir(c.root, sizeof c.root));
  snprintf(c.dir, sizeof c.dir, "%s/tm", c.root);
  assert_int_equal(fs_mkdirs(c.root, "tm/1"), 0);
  assert_int_equal(fs_write(c.root, "tm/config.pbtxt", CONFIG), 0);

  /* The reference: one load without injected failures. */
  struct pts_error err;
  assert_int_equal(load_step(&c, &err), PTS_OK);
  char *expected = c.json;
  c.json = NULL;
  /* Independent facts about that config, not ptserve's own rendering. */
  assert_non_null(strstr(expected, "\"max_batch_size\":8"));
  assert_non_null(strstr(expected, "\"preferred_batch_size\":[2,4]"));

  struct torture_result r = torture_walk(load_step, &c, 100000);
  torture_report("config load", &r);
  assert_true(r.runs > 50); /* the walk really went through the parser */
  assert_int_equal(r.bad_messages, 0);
  /* A run may also succeed despite a failed allocation (a fallback path),
   * but nearly every allocation of a load is needed. */
  assert_true(r.failed >= r.runs - 1);
  assert_int_equal(r.final_status, PTS_OK);
  assert_non_null(c.json);
  assert_string_equal(c.json, expected);
  pts_free(c.json);
  pts_free(expected);
  fs_rmtree(c.root);
}

/* The parser alone on text with an error near the end: out-of-memory must
 * win over (or give way to) the syntax error, never mix them up into a
 * crash. */
static enum pts_status parse_bad_step(void *arg, struct pts_error *err) {
  (void)arg;
  static const char text[] =
      "name: \"x\"\ninput [ { name: \"a\" dims: [ 1, 2 ] } ]\nmax_batch_size: {";
  Inference__ModelConfig *cfg = NULL;
  enum pts_status st = pts_model_config_parse(text, sizeof text - 1, "bad.pbtxt", &cfg, err);
  assert_null(cfg);
  return st;
}

static void test_parse_error_walk(void **state) {
  (void)state;
  struct torture_result r = torture_walk(parse_bad_step, NULL, 100000);
  torture_report("config parse error", &r);
  assert_true(r.runs > 3);
  assert_int_equal(r.bad_messages, 0);
  assert_int_equal(r.final_status, PTS_INVALID_ARG);
}

/* sequence_batching: its defaults (an oldest strategy's preferred size),
 * its validation, and the execution config the backend runs (a deep copy
 * with control inputs and states appended). */
static const char SEQ_CONFIG[] =
    "name: \"sq\"\nbackend: \"identity\"\nmax_batch_size: 4\n"
    "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
    "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
    "sequence_batching {\n"
    "  oldest { max_candidate_sequences: 4 }\n"
    "  control_input [ { name: \"S\" control [ { kind: CONTROL_SEQUENCE_START\n"
    "    int32_false_true: [ 0, 1 ] } ] },\n"
    "    { name: \"C\" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] } ]\n"
    "  state [ { input_name: \"si\" output_name: \"so\" data_type: TYPE_FP32 dims: [ 2 ]\n"
    "    initial_state { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } ]\n"
    "}\n";

static enum pts_status seq_step(void *arg, struct pts_error *err) {
  (void)arg;
  Inference__ModelConfig *cfg = NULL, *exec = NULL;
  enum pts_status st = pts_model_config_parse(SEQ_CONFIG, sizeof SEQ_CONFIG - 1, "sq", &cfg, err);
  if (st == PTS_OK) st = pts_model_config_complete(cfg, ".", "sq", err);
  if (st == PTS_OK) st = pts_model_config_sequence_exec(cfg, &exec, err);
  if (st == PTS_OK) {
    assert_int_equal(exec->n_input, 4); /* x, S, C, si */
    assert_int_equal(exec->n_output, 2); /* y, so */
  } else {
    assert_null(exec);
  }
  pts_model_config_free(exec);
  pts_model_config_free(cfg);
  return st;
}

static void test_sequence_config_walk(void **state) {
  (void)state;
  struct torture_result r = torture_walk(seq_step, NULL, 100000);
  torture_report("sequence config", &r);
  assert_true(r.runs > 20);
  assert_int_equal(r.bad_messages, 0);
  assert_int_equal(r.final_status, PTS_OK);
}

int main(void) {
  (void)fs_identity_model; /* shared helper this test has no use for */
  struct pts_log_settings quiet = pts_log_get();
  quiet.info = quiet.warning = quiet.error = false;
  pts_log_set(&quiet);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_load_walk),
      cmocka_unit_test(test_parse_error_walk),
      cmocka_unit_test(test_sequence_config_walk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
