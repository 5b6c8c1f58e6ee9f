/* tests/unit/pytorch/aoti_test.c — an AOTInductor package's config rules
 * (aoti.h): devices, the "ptserve.io" record, auto-complete, binding and
 * checking. Call specifications are torch 2.13's for the signatures named;
 * the expected configs and messages follow the rules in aoti.h and
 * docs/pytorch-backend.md, written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "backends/pytorch/aoti.h"
#include "config/model_config.h"
#include "core/alloc.h"

#define LEAF "{\"type\": null, \"context\": null, \"children_spec\": []}"

/* forward(self, x, *, scale) -> {"sum": t, "pair": (t, t)} */
static const char *IN_SPEC =
    "[1, {\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": ["
    "{\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [" LEAF "]}, "
    "{\"type\": \"builtins.dict\", \"context\": \"[\\\"scale\\\"]\", \"children_spec\": [" LEAF
    "]}]}]";
static const char *OUT_SPEC =
    "[1, {\"type\": \"builtins.dict\", \"context\": \"[\\\"sum\\\", \\\"pair\\\"]\", "
    "\"children_spec\": [" LEAF ", {\"type\": \"builtins.tuple\", \"context\": \"null\", "
    "\"children_spec\": [" LEAF ", " LEAF "]}]}]";

/* What examples/export_aoti.py records for it with a dynamic batch. */
static const char *IO_DYNAMIC =
    "{\"inputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [-1, 4]}, {\"dtype\": \"TYPE_FP32\", "
    "\"shape\": [-1, 3]}], \"outputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [-1, 3]}, "
    "{\"dtype\": \"TYPE_FP32\", \"shape\": [-1, 3]}, {\"dtype\": \"TYPE_INT64\", \"shape\": [-1, 2]}]}";
/* ... and with static shapes (batch 2). */
static const char *IO_STATIC =
    "{\"inputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [2, 4]}, {\"dtype\": \"TYPE_FP32\", "
    "\"shape\": [2, 3]}], \"outputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [2, 3]}, "
    "{\"dtype\": \"TYPE_FP32\", \"shape\": [2, 3]}, {\"dtype\": \"TYPE_INT64\", \"shape\": [2]}]}";

static struct pts_callspec *spec(void) {
  struct pts_callspec *cs = NULL;
  struct pts_error err = {0};
  if (pts_callspec_parse(IN_SPEC, OUT_SPEC, &cs, &err) != PTS_OK) fail_msg("%s", err.msg);
  return cs;
}

static struct pts_aoti_io *record(const struct pts_callspec *cs, const char *json) {
  struct pts_aoti_io *io = NULL;
  struct pts_error err = {0};
  if (pts_aoti_io_parse(json, cs, &io, &err) != PTS_OK) fail_msg("%s", err.msg);
  return io;
}

static Inference__ModelConfig *config(const char *text) {
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err = {0};
  if (pts_model_config_parse(text, strlen(text), "test", &cfg, &err) != PTS_OK ||
      pts_model_config_complete(cfg, NULL, "m", &err) != PTS_OK)
    fail_msg("%s", err.msg);
  return cfg;
}

static void device_keys(void **state) {
  (void)state;
  enum pts_aoti_device d;
  struct pts_error err = {0};
  assert_int_equal(pts_aoti_device_parse("cpu", &d, &err), PTS_OK);
  assert_int_equal(d, PTS_AOTI_CPU);
  assert_int_equal(pts_aoti_device_parse("cuda", &d, &err), PTS_OK);
  assert_int_equal(d, PTS_AOTI_CUDA);
  assert_int_equal(pts_aoti_device_parse("mps", &d, &err), PTS_OK);
  assert_int_equal(d, PTS_AOTI_MPS);
  assert_int_equal(pts_aoti_device_parse("xpu", &d, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "the package was compiled for 'xpu'; ptserve runs packages compiled for "
                      "cpu, cuda or mps");
  assert_int_equal(pts_aoti_device_parse(NULL, &d, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "no AOTI_DEVICE_KEY"));
}

static void groups_follow_the_package(void **state) {
  (void)state;
  struct pts_error err = {0};
  /* KIND_AUTO takes the package's kind; GPU ids go with a cpu package. */
  Inference__ModelConfig *cfg = config(
      "platform: 'torch_aoti' instance_group [ { kind: KIND_AUTO gpus: [ 0 ] }, "
      "{ kind: KIND_CPU } ]");
  assert_int_equal(pts_aoti_settle_groups(cfg, PTS_AOTI_CPU, &err), PTS_OK);
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  assert_int_equal(cfg->instance_group[0]->n_gpus, 0);
  pts_model_config_free(cfg);
  cfg = config("platform: 'torch_aoti'");
  assert_int_equal(pts_aoti_settle_groups(cfg, PTS_AOTI_CUDA, &err), PTS_OK);
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  pts_model_config_free(cfg);
  /* A group of the other kind names both devices. */
  cfg = config("platform: 'torch_aoti' instance_group [ { name: 'g' kind: KIND_CPU } ]");
  assert_int_equal(pts_aoti_settle_groups(cfg, PTS_AOTI_CUDA, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "the package was compiled for cuda, but instance group 'g' is KIND_CPU "
                      "(cpu); serve it with KIND_GPU, or export the model for the cpu");
  pts_model_config_free(cfg);
  cfg = config("platform: 'torch_aoti' instance_group [ { name: 'g' kind: KIND_GPU } ]");
  assert_int_equal(pts_aoti_settle_groups(cfg, PTS_AOTI_CPU, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "the package was compiled for cpu, but instance group 'g' is KIND_GPU "
                      "(cuda or mps); serve it with KIND_CPU, or export the model for the GPU");
  pts_model_config_free(cfg);
}

static void io_record_is_checked(void **state) {
  (void)state;
  struct pts_callspec *cs = spec();
  struct pts_aoti_io *io = record(cs, IO_DYNAMIC);
  assert_int_equal(io->n_inputs, 2);
  assert_int_equal(io->outputs[2].dtype, PTS_DTYPE_INT64);
  assert_int_equal(io->outputs[2].shape.ndim, 2);
  assert_int_equal(io->inputs[0].shape.dims[0], -1);
  assert_int_equal(io->inputs[0].shape.dims[1], 4);
  pts_aoti_io_free(io);
  struct pts_error err = {0};
  const char *bad[][2] = {
      {"[]", "is not a JSON object"},
      {"{\"inputs\": [], \"outputs\": []}",
       "metadata 'ptserve.io' records 0 inputs, but the call specification has 2"},
      {"{\"inputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [4]}, {\"dtype\": \"TYPE_STRING\", "
       "\"shape\": [4]}], \"outputs\": []}",
       "input 1 (KWARGS[scale]) has dtype 'TYPE_STRING'"},
      {"{\"inputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [-2]}, {}], \"outputs\": []}",
       "input 0 (ARGS[0]) has a shape entry that is not a size or -1"},
      {"{\"inputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [-1], \"min\": [4], \"max\": [2]}, "
       "{}], \"outputs\": []}",
       "input 0 (ARGS[0]) has a range for dimension 0 that is not min <= max"},
      {"{\"inputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [-1], \"min\": [1]}, {}], "
       "\"outputs\": []}",
       "needs \"min\" and \"max\" arrays as long as its shape"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    io = NULL;
    assert_int_equal(pts_aoti_io_parse(bad[i][0], cs, &io, &err), PTS_INVALID_ARG);
    assert_null(io);
    if (!strstr(err.msg, bad[i][1])) fail_msg("[%s] gave '%s'", bad[i][0], err.msg);
  }
  pts_callspec_free(cs);
}

/* With ranges, as examples/export_aoti.py writes them (batch 1..16, the
 * second input's last dimension 2 or more). */
static const char *IO_RANGED =
    "{\"inputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [-1, 4], \"min\": [1, 4], \"max\": "
    "[16, 4]}, {\"dtype\": \"TYPE_FP32\", \"shape\": [-1, -1], \"min\": [1, 2], \"max\": [16, "
    "-1]}], \"outputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [-1, 3]}, {\"dtype\": "
    "\"TYPE_FP32\", \"shape\": [-1, 3]}, {\"dtype\": \"TYPE_INT64\", \"shape\": [-1, 2]}]}";

static void ranges_checked_at_load_and_per_request(void **state) {
  (void)state;
  struct pts_callspec *cs = spec();
  struct pts_aoti_io *io = record(cs, IO_RANGED);
  struct pts_error err = {0};
  assert_true(io->inputs[1].ranged);
  assert_int_equal(io->inputs[1].min[1], 2);
  assert_int_equal(io->inputs[1].max[1], -1);
  int in[2], out[1];
  /* max_batch_size within 1..16 fits; 32 does not. */
  Inference__ModelConfig *cfg = config(
      "platform: 'torch_aoti' max_batch_size: 16 input [ { name: 'ARGS[0]' data_type: TYPE_FP32 "
      "dims: [ 4 ] }, { name: 'KWARGS[scale]' data_type: TYPE_FP32 dims: [ -1 ] } ] output { "
      "name: 'RESULT[sum]' data_type: TYPE_FP32 dims: [ 3 ] }");
  assert_int_equal(pts_aoti_bind(cfg, cs, in, out, &err), PTS_OK);
  assert_int_equal(pts_aoti_check(cfg, cs, io, in, out, &err), PTS_OK);
  cfg->max_batch_size = 32;
  assert_int_equal(pts_aoti_check(cfg, cs, io, in, out, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "max_batch_size is 32, but the package takes batch sizes 1 to 16 (its input "
                      "ARGS[0]): export it with a batch dimension from 1 to at least 32");
  pts_model_config_free(cfg);
  /* A fixed size the package does not take. */
  cfg = config(
      "platform: 'torch_aoti' max_batch_size: 8 input [ { name: 'ARGS[0]' data_type: TYPE_FP32 "
      "dims: [ 4 ] }, { name: 'KWARGS[scale]' data_type: TYPE_FP32 dims: [ 1 ] } ] output { "
      "name: 'RESULT[sum]' data_type: TYPE_FP32 dims: [ 3 ] }");
  assert_int_equal(pts_aoti_bind(cfg, cs, in, out, &err), PTS_OK);
  assert_int_equal(pts_aoti_check(cfg, cs, io, in, out, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "input 'KWARGS[scale]' has size 1 in dimension 0 of the configuration, but "
                      "the package's KWARGS[scale] takes 2 or more there");
  pts_model_config_free(cfg);
  /* Per request: the shape the package would see. */
  struct pts_shape ok = {.ndim = 2, .dims = {16, 9}}, big = {.ndim = 2, .dims = {17, 9}},
                   small = {.ndim = 2, .dims = {3, 1}}, rank = {.ndim = 1, .dims = {3}};
  assert_int_equal(pts_aoti_check_shape(io, 1, "x", &ok, &err), PTS_OK);
  assert_int_equal(pts_aoti_check_shape(io, 1, "x", &big, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "input 'x' has size 17 in dimension 0, but the compiled package takes 1 to "
                      "16 there");
  assert_int_equal(pts_aoti_check_shape(io, 1, "x", &small, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "input 'x' has size 1 in dimension 1, but the compiled package takes 2 or "
                      "more there");
  assert_int_equal(pts_aoti_check_shape(io, 1, "x", &rank, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg, "input 'x' reaches the package with the shape [3], but it takes [-1,-1]");
  /* Nothing recorded: nothing to check. */
  assert_int_equal(pts_aoti_check_shape(NULL, 0, "x", &big, &err), PTS_OK);
  pts_aoti_io_free(io);
  pts_callspec_free(cs);
}

static void auto_complete_fills_names_types_and_dims(void **state) {
  (void)state;
  struct pts_callspec *cs = spec();
  struct pts_aoti_io *io = record(cs, IO_DYNAMIC);
  struct pts_error err = {0};
  Inference__ModelConfig *cfg = config("platform: 'torch_aoti' max_batch_size: 8");
  assert_int_equal(pts_aoti_complete(cfg, cs, io, &err), PTS_OK);
  assert_int_equal(cfg->n_input, 2);
  assert_string_equal(cfg->input[0]->name, "ARGS[0]");
  assert_int_equal(cfg->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
  assert_int_equal(cfg->input[0]->n_dims, 1); /* the batch dimension is implicit */
  assert_int_equal(cfg->input[0]->dims[0], 4);
  assert_string_equal(cfg->input[1]->name, "KWARGS[scale]");
  assert_int_equal(cfg->n_output, 3);
  assert_string_equal(cfg->output[1]->name, "RESULT[pair][0]");
  assert_string_equal(cfg->output[2]->name, "RESULT[pair][1]");
  assert_int_equal(cfg->output[2]->data_type, INFERENCE__DATA_TYPE__TYPE_INT64);
  assert_int_equal(cfg->output[2]->n_dims, 1);
  assert_int_equal(cfg->output[2]->dims[0], 2);
  assert_int_equal(pts_model_config_check_completed(cfg, &err), PTS_OK);
  pts_model_config_free(cfg);

  /* A [batch] output is a scalar per request: the config must reshape it. */
  struct pts_aoti_io *scalar = record(
      cs, "{\"inputs\": [{\"dtype\": \"TYPE_FP32\", \"shape\": [-1, 4]}, {\"dtype\": "
          "\"TYPE_FP32\", \"shape\": [-1, 3]}], \"outputs\": [{\"dtype\": \"TYPE_FP32\", "
          "\"shape\": [-1]}, {\"dtype\": \"TYPE_FP32\", \"shape\": [-1]}, {\"dtype\": "
          "\"TYPE_FP32\", \"shape\": [-1]}]}");
  cfg = config("platform: 'torch_aoti' max_batch_size: 8");
  assert_int_equal(pts_aoti_complete(cfg, cs, scalar, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "output 'RESULT[sum]' of the package is a scalar per batch entry; write it "
                      "in config.pbtxt with dims: [ 1 ] and reshape: { shape: [ ] }");
  pts_model_config_free(cfg);
  pts_aoti_io_free(scalar);

  /* Without batching the dims are the whole shape; a side the config
   * lists is left alone. */
  cfg = config(
      "platform: 'torch_aoti' output { name: 'RESULT[sum]' data_type: TYPE_FP32 dims: [ -1, 3 ] }");
  assert_int_equal(pts_aoti_complete(cfg, cs, io, &err), PTS_OK);
  assert_int_equal(cfg->n_output, 1);
  assert_int_equal(cfg->input[1]->n_dims, 2);
  assert_int_equal(cfg->input[1]->dims[0], -1);
  assert_int_equal(cfg->input[1]->dims[1], 3);
  assert_int_equal(pts_model_config_check_completed(cfg, &err), PTS_OK);
  pts_model_config_free(cfg);
  pts_aoti_io_free(io);
  pts_callspec_free(cs);
}

static void auto_complete_needs_a_record_and_a_dynamic_batch(void **state) {
  (void)state;
  struct pts_callspec *cs = spec();
  struct pts_error err = {0};
  Inference__ModelConfig *cfg = config("platform: 'torch_aoti'");
  assert_int_equal(pts_aoti_complete(cfg, cs, NULL, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "the configuration lists no inputs or outputs, and the package does not "
                      "record their data types and shapes (metadata 'ptserve.io', written by "
                      "examples/export_aoti.py); list them in config.pbtxt: inputs ARGS[0], "
                      "KWARGS[scale]; outputs RESULT[sum], RESULT[pair][0], RESULT[pair][1]");
  pts_model_config_free(cfg);
  struct pts_aoti_io *io = record(cs, IO_STATIC);
  cfg = config("platform: 'torch_aoti' max_batch_size: 4");
  assert_int_equal(pts_aoti_complete(cfg, cs, io, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "max_batch_size is 4, but input 'ARGS[0]' of the package has the static "
                      "shape [2,4] (no dynamic first dimension to batch along): export it with a "
                      "dynamic batch dimension (torch.export.Dim), or serve it with "
                      "max_batch_size: 0");
  pts_model_config_free(cfg);
  pts_aoti_io_free(io);
  pts_callspec_free(cs);
}

#define IO(io_in0, io_in1, outs)                                                             \
  "platform: 'torch_aoti' max_batch_size: 8 input [ { name: '" io_in0                          \
  "' data_type: TYPE_FP32 dims: [ 4 ] }, { name: '" io_in1 "' data_type: TYPE_FP32 dims: [ 3 ] } " \
  "] " outs

static void binding_by_either_convention(void **state) {
  (void)state;
  struct pts_callspec *cs = spec();
  struct pts_error err = {0};
  int in[2], out[2];
  /* Config order need not follow the package's. */
  Inference__ModelConfig *cfg = config(IO("KWARGS[scale]", "INPUT__0",
      "output [ { name: 'RESULT[pair][1]' data_type: TYPE_INT64 dims: [ 1 ] }, "
      "{ name: 'OUT__0' data_type: TYPE_FP32 dims: [ 3 ] } ]"));
  assert_int_equal(pts_aoti_bind(cfg, cs, in, out, &err), PTS_OK);
  assert_int_equal(in[0], 1);
  assert_int_equal(in[1], 0);
  assert_int_equal(out[0], 2);
  assert_int_equal(out[1], 0);
  pts_model_config_free(cfg);
  pts_callspec_free(cs);
}

static void binding_errors(void **state) {
  (void)state;
  struct pts_callspec *cs = spec();
  struct pts_error err = {0};
  int in[2], out[2];
  const char *cases[][2] = {
      {IO("ARGS[0]", "image", "output { name: 'RESULT[sum]' data_type: TYPE_FP32 dims: 3 }"),
       "input 'image' matches no input of the package; its inputs are ARGS[0], KWARGS[scale], or "
       "by position <name>__0 to <name>__1"},
      {IO("ARGS[0]", "INPUT__0", "output { name: 'RESULT[sum]' data_type: TYPE_FP32 dims: 3 }"),
       "inputs 'ARGS[0]' and 'INPUT__0' both name ARGS[0]"},
      {"platform: 'torch_aoti' input { name: 'KWARGS[scale]' data_type: TYPE_FP32 dims: 3 } "
       "output { name: 'RESULT[sum]' data_type: TYPE_FP32 dims: 3 }",
       "configuration expects 1 inputs, the package takes 2 (ARGS[0], KWARGS[scale]); nothing "
       "feeds ARGS[0]"},
      {IO("ARGS[0]", "KWARGS[scale]", "output { name: 'RESULT[pair]' data_type: TYPE_FP32 dims: 3 }"),
       "output 'RESULT[pair]' is a container in the package, not a tensor; name its tensors: "
       "RESULT[pair][0], RESULT[pair][1]"},
      {IO("ARGS[0]", "KWARGS[scale]",
          "output [ { name: 'RESULT[sum]' data_type: TYPE_FP32 dims: 3 }, "
          "{ name: 'OUTPUT__0' data_type: TYPE_FP32 dims: 3 } ]"),
       "outputs 'RESULT[sum]' and 'OUTPUT__0' both name RESULT[sum]"},
      {"platform: 'torch_aoti' input [ { name: 'ARGS[0]' data_type: TYPE_FP32 dims: 4 optional: "
       "true } ] output { name: 'RESULT[sum]' data_type: TYPE_FP32 dims: 3 }",
       "input 'ARGS[0]' is optional, but a compiled package takes every input"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    Inference__ModelConfig *cfg = config(cases[i][0]);
    assert_int_equal(pts_aoti_bind(cfg, cs, in, out, &err), PTS_INVALID_ARG);
    if (strcmp(err.msg, cases[i][1]) != 0) fail_msg("case %zu: '%s'", i, err.msg);
    pts_model_config_free(cfg);
  }
  pts_callspec_free(cs);
}

static void config_checked_against_the_record(void **state) {
  (void)state;
  struct pts_callspec *cs = spec();
  struct pts_aoti_io *dyn = record(cs, IO_DYNAMIC), *stat = record(cs, IO_STATIC);
  struct pts_error err = {0};
  int in[2], out[1];
  Inference__ModelConfig *cfg = config(IO("ARGS[0]", "KWARGS[scale]", "output { name: "
                                                                        "'RESULT[sum]' data_type: "
                                                                        "TYPE_FP32 dims: [ 3 ] }"));
  assert_int_equal(pts_aoti_bind(cfg, cs, in, out, &err), PTS_OK);
  assert_int_equal(pts_aoti_check(cfg, cs, dyn, in, out, &err), PTS_OK);
  /* A static batch dimension and max_batch_size > 0. */
  assert_int_equal(pts_aoti_check(cfg, cs, stat, in, out, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "max_batch_size is 8, but input 'ARGS[0]' of the package has "
                                  "the static shape [2,4]"));
  pts_model_config_free(cfg);
  /* Wrong dims and wrong types name both sides. */
  cfg = config(IO("ARGS[0]", "KWARGS[scale]",
                  "output { name: 'RESULT[sum]' data_type: TYPE_FP32 dims: [ 5 ] }"));
  assert_int_equal(pts_aoti_bind(cfg, cs, in, out, &err), PTS_OK);
  assert_int_equal(pts_aoti_check(cfg, cs, dyn, in, out, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "output 'RESULT[sum]' has the shape [-1,5] in the configuration (batch "
                      "dimension included as -1), but the package's RESULT[sum] has [-1,3] (-1: "
                      "dynamic)");
  pts_model_config_free(cfg);
  cfg = config(
      "platform: 'torch_aoti' input [ { name: 'ARGS[0]' data_type: TYPE_FP16 dims: [ 2, 4 ] }, "
      "{ name: 'KWARGS[scale]' data_type: TYPE_FP32 dims: [ 2, 3 ] } ] output { name: 'RESULT[sum]' "
      "data_type: TYPE_FP32 dims: [ 2, 3 ] }");
  assert_int_equal(pts_aoti_bind(cfg, cs, in, out, &err), PTS_OK);
  assert_int_equal(pts_aoti_check(cfg, cs, stat, in, out, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "input 'ARGS[0]' is TYPE_FP16 in the configuration, but the package's "
                      "ARGS[0] is TYPE_FP32");
  pts_model_config_free(cfg);
  /* A fixed size where the package has a dynamic one is fine. */
  cfg = config(
      "platform: 'torch_aoti' input [ { name: 'ARGS[0]' data_type: TYPE_FP32 dims: [ 5, 4 ] }, "
      "{ name: 'KWARGS[scale]' data_type: TYPE_FP32 dims: [ 5, 3 ] } ] output { name: 'RESULT[sum]' "
      "data_type: TYPE_FP32 dims: [ -1, 3 ] }");
  assert_int_equal(pts_aoti_bind(cfg, cs, in, out, &err), PTS_OK);
  assert_int_equal(pts_aoti_check(cfg, cs, dyn, in, out, &err), PTS_OK);
  pts_model_config_free(cfg);
  pts_aoti_io_free(dyn);
  pts_aoti_io_free(stat);
  pts_callspec_free(cs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(device_keys),
      cmocka_unit_test(groups_follow_the_package),
      cmocka_unit_test(io_record_is_checked),
      cmocka_unit_test(auto_complete_fills_names_types_and_dims),
      cmocka_unit_test(auto_complete_needs_a_record_and_a_dynamic_batch),
      cmocka_unit_test(binding_by_either_convention),
      cmocka_unit_test(binding_errors),
      cmocka_unit_test(config_checked_against_the_record),
      cmocka_unit_test(ranges_checked_at_load_and_per_request),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
