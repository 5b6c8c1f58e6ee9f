/* tests/unit/ensemble/ensemble_test.c — the graph check of ensemble/ensemble.h:
 * what a well-formed graph is, and the message each malformed one gets.
 * Expected texts are written by hand from the configs below. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "config/model_config.h"
#include "ensemble/ensemble.h"

/* Ensemble tensors X, Y in and OUT out; steps as "model:in=tensor:out=tensor". */
#define IO                                                                 \
  "name: 'e' platform: 'ensemble' "                                        \
  "input { name: 'X' data_type: TYPE_FP32 dims: 4 } "                      \
  "input { name: 'Y' data_type: TYPE_FP32 dims: 4 } "                      \
  "output { name: 'OUT' data_type: TYPE_FP32 dims: 4 } "

#define STEP(model, in_key, in_val, out_key, out_val)                                 \
  "step { model_name: '" model "' input_map { key: '" in_key "' value: '" in_val      \
  "' } output_map { key: '" out_key "' value: '" out_val "' } } "

static Inference__ModelConfig *parse(const char *text) {
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  if (pts_model_config_parse(text, strlen(text), "t", &cfg, &err) != PTS_OK)
    fail_msg("does not parse: %s", err.msg);
  return cfg;
}

/* Builds the graph of `text`; returns the status, the message in err. */
static enum pts_status build(const char *text, struct pts_error *err) {
  Inference__ModelConfig *cfg = parse(text);
  struct pts_ensemble_graph *g = NULL;
  enum pts_status st = pts_ensemble_graph_build(cfg, &g, err);
  if (st == PTS_OK) assert_non_null(g);
  pts_ensemble_graph_free(g);
  pts_model_config_free(cfg);
  return st;
}

static void refused(const char *text, const char *want) {
  struct pts_error err;
  assert_int_equal(build(text, &err), PTS_INVALID_ARG);
  if (!strstr(err.msg, want)) fail_msg("want '%s', got '%s'", want, err.msg);
  if (strncmp(err.msg, "ensemble 'e': ", 14) != 0) fail_msg("no ensemble name: '%s'", err.msg);
}

/* A diamond, steps written out of order: X -> a -> t1, Y -> b -> t2,
 * (t1, t2) -> c -> OUT. */
static void diamond_is_accepted(void **state) {
  (void)state;
  struct pts_error err;
  assert_int_equal(build(IO "ensemble_scheduling { "
                            "step { model_name: 'c' input_map { key: 'p' value: 't1' } "
                            "input_map { key: 'q' value: 't2' } "
                            "output_map { key: 'r' value: 'OUT' } } " STEP("a", "i", "X", "o", "t1")
                                STEP("b", "i", "Y", "o", "t2") "}",
                         &err),
                   PTS_OK);
}

static void cycle_is_named(void **state) {
  (void)state;
  /* s0 reads t2 (written by s1), s1 reads t1 (written by s0). */
  refused(IO "ensemble_scheduling { " STEP("a", "i", "t2", "o", "t1") STEP("b", "i", "t1", "o",
                                                                            "t2")
             "step { model_name: 'c' input_map { key: 'p' value: 'X' } input_map { key: 'q' "
             "value: 'Y' } output_map { key: 'r' value: 'OUT' } } }",
          "the steps form a cycle: step 1 (model 'b') -> step 0 (model 'a') -> step 1 (model "
          "'b')");
}

static void self_cycle_is_named(void **state) {
  (void)state;
  refused(IO "ensemble_scheduling { "
             "step { model_name: 'a' input_map { key: 'i' value: 'X' } input_map { key: 'j' "
             "value: 'Y' } input_map { key: 'k' value: 'OUT' } output_map { key: 'o' value: "
             "'OUT' } } }",
          "the steps form a cycle: step 0 (model 'a') -> step 0 (model 'a')");
}

static void missing_tensor_is_named(void **state) {
  (void)state;
  refused(IO "ensemble_scheduling { " STEP("a", "i", "X", "o", "t1")
             "step { model_name: 'b' input_map { key: 'i' value: 'Y' } input_map { key: 'j' "
             "value: 'nowhere' } output_map { key: 'o' value: 'OUT' } } }",
          "step 1 (model 'b') reads ensemble tensor 'nowhere' (for its input 'j'), which is "
          "neither an input of the ensemble nor written by any step");
}

static void second_writer_is_refused(void **state) {
  (void)state;
  refused(IO "ensemble_scheduling { " STEP("a", "i", "X", "o", "OUT") STEP("b", "i", "Y", "o",
                                                                           "OUT") "}",
          "ensemble tensor 'OUT' is written by step 0 (model 'a') and step 1 (model 'b')");
}

static void writing_an_input_is_refused(void **state) {
  (void)state;
  refused(IO "ensemble_scheduling { " STEP("a", "i", "X", "o", "Y") STEP("b", "i", "Y", "o",
                                                                         "OUT") "}",
          "step 0 (model 'a') writes ensemble tensor 'Y', which is an input of the ensemble");
}

static void unwritten_output_is_refused(void **state) {
  (void)state;
  refused(IO "ensemble_scheduling { " STEP("a", "i", "X", "o", "t1") STEP("b", "i", "Y", "o",
                                                                          "t2") "}",
          "output 'OUT' is not written by any step");
}

static void unused_input_is_refused(void **state) {
  (void)state;
  refused(IO "ensemble_scheduling { " STEP("a", "i", "X", "o", "OUT") "}",
          "input 'Y' is not used by any step");
}

static void composing_models_are_distinct(void **state) {
  (void)state;
  Inference__ModelConfig *cfg =
      parse(IO "ensemble_scheduling { " STEP("a", "i", "X", "o", "t1") STEP("b", "i", "t1", "o",
                                                                            "t2")
               STEP("a", "i", "t2", "o", "OUT") "}");
  const char *names[4];
  assert_int_equal(pts_ensemble_composing_models(cfg, names, 4), 2);
  assert_string_equal(names[0], "a");
  assert_string_equal(names[1], "b");
  assert_int_equal(pts_ensemble_composing_models(cfg, names, 1), 1);
  assert_int_equal(pts_ensemble_composing_models(NULL, names, 4), 0);
  pts_model_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(diamond_is_accepted),
      cmocka_unit_test(cycle_is_named),
      cmocka_unit_test(self_cycle_is_named),
      cmocka_unit_test(missing_tensor_is_named),
      cmocka_unit_test(second_writer_is_refused),
      cmocka_unit_test(writing_an_input_is_refused),
      cmocka_unit_test(unwritten_output_is_refused),
      cmocka_unit_test(unused_input_is_refused),
      cmocka_unit_test(composing_models_are_distinct),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
