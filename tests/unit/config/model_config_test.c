/* tests/unit/config/model_config_test.c — autofill and normalization
 * (protocol-facts §4.1, §4.3), validation (§4.1, §4.4, §3.3), the fields
 * ptserve rejects, backend parameters, and loading from a model directory.
 * Expected values come from the protocol facts and the task's rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_test_util.h"
#include "config/model_config_sequence.h"
#include "core/alloc.h"

/* Parses and completes as model "m" (no model directory). */
static enum pts_status complete_text(const char *text, Inference__ModelConfig **out,
                                     struct pts_error *err) {
  Inference__ModelConfig *cfg = test_parse(text, err);
  if (!cfg) fail_msg("does not parse: %s", err->msg);
  enum pts_status s = pts_model_config_complete(cfg, NULL, "m", err);
  if (out && s == PTS_OK) {
    *out = cfg;
  } else {
    pts_model_config_free(cfg);
  }
  return s;
}

static Inference__ModelConfig *completed(const char *text) {
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  if (complete_text(text, &cfg, &err) != PTS_OK) fail_msg("[%s]: %s", text, err.msg);
  return cfg;
}

/* ---- autofill ---- */

static void pytorch_defaults(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed("backend: 'pytorch'");
  assert_string_equal(cfg->name, "m");
  assert_string_equal(cfg->platform, "pytorch_libtorch");
  assert_string_equal(cfg->default_model_filename, "model.pt");
  assert_int_equal(cfg->version_policy->policy_choice_case,
                   INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST);
  assert_int_equal(cfg->version_policy->latest->num_versions, 1);
  assert_true(cfg->optimization->input_pinned_memory->enable);
  assert_true(cfg->optimization->output_pinned_memory->enable);
  assert_int_equal(cfg->n_instance_group, 1);
  assert_string_equal(cfg->instance_group[0]->name, "m_0");
  /* Triton's default group is KIND_AUTO until the devices are known. */
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO);
  assert_int_equal(cfg->instance_group[0]->count, 1);
  assert_int_equal(cfg->scheduling_choice_case,
                   INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE__NOT_SET);
  pts_model_config_free(cfg);
}

static void devices_resolve_as_triton(void **state) {
  (void)state;
  struct pts_error err;
  /* No GPU: the default group and every KIND_AUTO group run on the CPU,
   * dropping GPU ids a CPU group may not list; KIND_GPU stays (the backend
   * falls back with a warning). */
  Inference__ModelConfig *cfg = completed(
      "backend: 'identity' instance_group [ { kind: KIND_AUTO gpus: [ 1 ] }, { kind: KIND_GPU } ]");
  assert_int_equal(pts_model_config_resolve_devices(cfg, 0, &err), PTS_OK);
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  assert_int_equal(cfg->instance_group[0]->n_gpus, 0);
  assert_int_equal(cfg->instance_group[1]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  assert_int_equal(cfg->instance_group[1]->n_gpus, 0);
  pts_model_config_free(cfg);

  /* Two GPUs: KIND_AUTO listing GPU 1 becomes KIND_GPU on it; one listing
   * GPU 2 (absent) becomes KIND_CPU; a GPU group without ids gets 0 and 1. */
  cfg = completed(
      "backend: 'identity' instance_group [ { kind: KIND_AUTO gpus: [ 1 ] }, "
      "{ kind: KIND_AUTO gpus: [ 2 ] }, { kind: KIND_GPU }, { kind: KIND_CPU } ]");
  assert_int_equal(pts_model_config_resolve_devices(cfg, 2, &err), PTS_OK);
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  assert_int_equal(cfg->instance_group[0]->n_gpus, 1);
  assert_int_equal(cfg->instance_group[0]->gpus[0], 1);
  assert_int_equal(cfg->instance_group[1]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  assert_int_equal(cfg->instance_group[2]->n_gpus, 2);
  assert_int_equal(cfg->instance_group[2]->gpus[0], 0);
  assert_int_equal(cfg->instance_group[2]->gpus[1], 1);
  assert_int_equal(cfg->instance_group[3]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  pts_model_config_free(cfg);

  /* The default group with one GPU (or MPS): KIND_GPU on GPU 0. */
  cfg = completed("backend: 'identity'");
  assert_int_equal(pts_model_config_resolve_devices(cfg, 1, &err), PTS_OK);
  assert_int_equal(cfg->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  assert_int_equal(cfg->instance_group[0]->n_gpus, 1);
  assert_int_equal(cfg->instance_group[0]->gpus[0], 0);
  pts_model_config_free(cfg);
}

static void backend_from_platform_or_file(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed("platform: 'libtorch'");
  assert_string_equal(cfg->backend, "pytorch");
  assert_string_equal(cfg->platform, "libtorch");
  pts_model_config_free(cfg);
  cfg = completed("platform: 'pytorch_libtorch'");
  assert_string_equal(cfg->backend, "pytorch");
  pts_model_config_free(cfg);
  cfg = completed("default_model_filename: 'model.pt'");
  assert_string_equal(cfg->backend, "pytorch");
  assert_string_equal(cfg->platform, "pytorch_libtorch");
  pts_model_config_free(cfg);
  cfg = completed("backend: 'pytorch' default_model_filename: 'traced.pt'");
  assert_string_equal(cfg->default_model_filename, "traced.pt");
  pts_model_config_free(cfg);
}

/* AOTInductor packages: platform torch_aoti, backend pytorch, model.pt2
 * (Triton's names, protocol-facts §4.1). */
static void torch_aoti_platform(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed("platform: 'torch_aoti'");
  assert_string_equal(cfg->backend, "pytorch");
  assert_string_equal(cfg->default_model_filename, "model.pt2");
  pts_model_config_free(cfg);
  cfg = completed("backend: 'pytorch' platform: 'torch_aoti' default_model_filename: 'mlp.pt2'");
  assert_string_equal(cfg->default_model_filename, "mlp.pt2");
  pts_model_config_free(cfg);
  cfg = completed("default_model_filename: 'model.pt2'");
  assert_string_equal(cfg->backend, "pytorch");
  assert_string_equal(cfg->platform, "torch_aoti");
  pts_model_config_free(cfg);
  /* backend pytorch with a *.pt2 default file: the package's platform. */
  cfg = completed("backend: 'pytorch' default_model_filename: 'net.pt2'");
  assert_string_equal(cfg->platform, "torch_aoti");
  pts_model_config_free(cfg);
}

/* Warmups of a model without inputs are checked once the backend has
 * completed them (pts_model_config_check_completed). */
static void warmup_checked_after_backend_completion(void **state) {
  (void)state;
  struct pts_error err;
  Inference__ModelConfig *cfg = completed(
      "platform: 'torch_aoti' model_warmup { name: 'w' batch_size: 1 inputs { key: 'X' value "
      "{ data_type: TYPE_FP32 dims: 4 zero_data: true } } }");
  assert_int_equal(pts_model_config_check_completed(cfg, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg, "model 'm': model_warmup 'w': 'X' is not an input of the model");
  pts_model_config_free(cfg);
  cfg = completed(
      "platform: 'torch_aoti' input { name: 'ARGS[0]' data_type: TYPE_FP32 dims: 4 } "
      "output { name: 'RESULT' data_type: TYPE_FP32 dims: 4 } model_warmup { name: 'w' "
      "batch_size: 1 inputs { key: 'ARGS[0]' value { data_type: TYPE_FP32 dims: 4 zero_data: "
      "true } } }");
  assert_int_equal(pts_model_config_check_completed(cfg, &err), PTS_OK);
  pts_model_config_free(cfg);
  /* What a backend filled in is validated like a written config. */
  cfg = completed("platform: 'torch_aoti'");
  Inference__ModelInput *in = pts_malloc(sizeof *in);
  inference__model_input__init(in);
  in->name = pts_strdup("ARGS[0]");
  cfg->input = pts_malloc(sizeof *cfg->input);
  cfg->input[0] = in;
  cfg->n_input = 1;
  assert_int_equal(pts_model_config_check_completed(cfg, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg, "model 'm': model input 'ARGS[0]' must specify 'data_type'");
  pts_model_config_free(cfg);
}

static void identity_backend(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed("backend: 'identity'");
  assert_string_equal(cfg->platform, "");
  assert_string_equal(cfg->default_model_filename, "");
  assert_int_equal(cfg->n_instance_group, 1);
  pts_model_config_free(cfg);
}

static void kept_when_given(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed(
      "name: 'm' backend: 'identity' max_batch_size: 8\n"
      "version_policy { all { } }\n"
      "optimization { input_pinned_memory { enable: false } }\n"
      "instance_group [ { name: 'mine' count: 2 kind: KIND_GPU gpus: [ 0, 1 ] }, { kind: KIND_AUTO "
      "count: -3 },"
      " { count: 0 kind: KIND_CPU } ]\n"
      "dynamic_batching { preferred_batch_size: [ 2, 4 ] }");
  assert_int_equal(cfg->version_policy->policy_choice_case,
                   INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL);
  assert_false(cfg->optimization->input_pinned_memory->enable);
  assert_true(cfg->optimization->output_pinned_memory->enable);
  assert_int_equal(cfg->n_instance_group, 3);
  assert_string_equal(cfg->instance_group[0]->name, "mine");
  assert_int_equal(cfg->instance_group[0]->count, 2);
  assert_string_equal(cfg->instance_group[1]->name, "m_1");
  assert_int_equal(cfg->instance_group[1]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO);
  assert_int_equal(cfg->instance_group[1]->count, 1);
  assert_string_equal(cfg->instance_group[2]->name, "m_2");
  assert_int_equal(cfg->instance_group[2]->count, 1);
  assert_int_equal(cfg->dynamic_batching->n_preferred_batch_size, 2);
  pts_model_config_free(cfg);
}

static void preferred_batch_default(void **state) {
  (void)state;
  Inference__ModelConfig *cfg =
      completed("backend: 'identity' max_batch_size: 16 dynamic_batching { }");
  assert_int_equal(cfg->dynamic_batching->n_preferred_batch_size, 1);
  assert_int_equal(cfg->dynamic_batching->preferred_batch_size[0], 16);
  pts_model_config_free(cfg);
  cfg = completed("backend: 'identity' dynamic_batching { }");
  assert_int_equal(cfg->dynamic_batching->n_preferred_batch_size, 0);
  pts_model_config_free(cfg);
  cfg = completed("backend: 'identity' version_policy { }");
  assert_int_equal(cfg->version_policy->latest->num_versions, 1);
  pts_model_config_free(cfg);
}

/* Triton's sequence_batching defaults, and the execution config: control
 * inputs ([1], their control's type) then states after the model's inputs,
 * state outputs after its outputs; the model's own config untouched. */
static void sequence_defaults_and_exec_config(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed(
      "backend: 'identity' max_batch_size: 8 input { name: 'x' data_type: TYPE_FP32 dims: [ 4 ] }"
      " output { name: 'y' data_type: TYPE_FP32 dims: [ 4 ] } sequence_batching {"
      " control_input { name: 'S' control { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 "
      "] } } control_input { name: 'C' control { kind: CONTROL_SEQUENCE_CORRID data_type: "
      "TYPE_UINT64 } } state { input_name: 'si' output_name: 'so' data_type: TYPE_INT32 dims: [ "
      "2, 3 ] } }");
  const Inference__ModelSequenceBatching *sb = cfg->sequence_batching;
  assert_int_equal(sb->max_sequence_idle_microseconds, 1000000);
  assert_int_equal(sb->strategy_choice_case,
                   INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE_DIRECT);
  Inference__ModelConfig *x = NULL;
  struct pts_error err;
  assert_int_equal(pts_model_config_sequence_exec(cfg, &x, &err), PTS_OK);
  assert_int_equal(cfg->n_input, 1);
  assert_int_equal(cfg->n_output, 1);
  assert_int_equal(x->n_input, 4);
  assert_string_equal(x->input[1]->name, "S");
  assert_int_equal(x->input[1]->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
  assert_int_equal(x->input[1]->n_dims, 1);
  assert_int_equal(x->input[1]->dims[0], 1);
  assert_string_equal(x->input[2]->name, "C");
  assert_int_equal(x->input[2]->data_type, INFERENCE__DATA_TYPE__TYPE_UINT64);
  assert_string_equal(x->input[3]->name, "si");
  assert_int_equal(x->input[3]->data_type, INFERENCE__DATA_TYPE__TYPE_INT32);
  assert_int_equal(x->input[3]->n_dims, 2);
  assert_int_equal(x->input[3]->dims[1], 3);
  assert_int_equal(x->n_output, 2);
  assert_string_equal(x->output[1]->name, "so");
  pts_model_config_free(x);
  pts_model_config_free(cfg);
  cfg = completed(
      "backend: 'identity' max_batch_size: 6 sequence_batching { oldest { "
      "max_candidate_sequences: 3 } }");
  assert_int_equal(cfg->sequence_batching->oldest->n_preferred_batch_size, 1);
  assert_int_equal(cfg->sequence_batching->oldest->preferred_batch_size[0], 6);
  pts_model_config_free(cfg);
}

/* At the rank limit: 16 dims without a batch dimension, 15 with one. */
static void dims_up_to_the_rank_limit(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed(
      "backend: 'identity' input { name: 'i' data_type: TYPE_FP32 dims: [ "
      "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 ] }");
  assert_int_equal(cfg->input[0]->n_dims, 16);
  pts_model_config_free(cfg);
  cfg = completed("backend: 'identity' max_batch_size: 4 input { name: 'i' data_type: TYPE_FP32 "
                  "dims: [ 1 ] reshape { shape: [ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 ] "
                  "} }");
  assert_int_equal(cfg->input[0]->reshape->n_shape, 15);
  pts_model_config_free(cfg);
}

static void name_must_match_directory(void **state) {
  (void)state;
  struct pts_error err;
  assert_int_equal(complete_text("name: 'other' backend: 'identity'", NULL, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "model 'm'"));
  assert_non_null(strstr(err.msg, "name 'other'"));
  Inference__ModelConfig *cfg = test_parse("name: 'given' backend: 'identity'", &err);
  assert_int_equal(pts_model_config_complete(cfg, NULL, NULL, &err), PTS_OK);
  assert_string_equal(cfg->instance_group[0]->name, "given_0");
  pts_model_config_free(cfg);
  cfg = test_parse("backend: 'identity'", &err);
  assert_int_equal(pts_model_config_complete(cfg, NULL, NULL, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "no 'name'"));
  pts_model_config_free(cfg);
}

/* ---- validation and rejection, one rule per row ---- */

#define IO_OK                                                                                     \
  "input { name: 'I' data_type: TYPE_FP32 dims: [ 4 ] } output { name: 'O' data_type: TYPE_FP32 " \
  "dims: 4 } "

static const struct {
  const char *text;
  const char *phrase;
} refused[] = {
    /* §4.1 and §4.4 */
    {"backend: 'identity' max_batch_size: -1", "'max_batch_size' must be non-negative value"},
    {"backend: 'identity' input { data_type: TYPE_FP32 dims: 1 }",
     "model input must specify 'name'"},
    {"backend: 'identity' output { name: 'o' dims: 1 }",
     "model output 'o' must specify 'data_type'"},
    {"backend: 'identity' input { name: 'i' data_type: TYPE_FP32 }",
     "model input 'i' must specify 'dims'"},
    {"backend: 'identity' input { name: 'i' data_type: TYPE_FP32 dims: [ 2, 0 ] }",
     "model input 'i' dimension must be integer >= 1, or -1"},
    {"backend: 'identity' output { name: 'o' data_type: TYPE_FP32 dims: -2 }",
     "model output 'o' dimension must be"},
    {"backend: 'identity' input { name: 'i' data_type: TYPE_FP32 dims: 1 } input { name: 'i' "
     "data_type: TYPE_INT8 "
     "dims: 1 }",
     "duplicate input name 'i'"},
    {"backend: 'identity' output { name: 'o' data_type: TYPE_FP32 dims: 1 } output { name: 'o' "
     "data_type: TYPE_FP32 "
     "dims: 1 }",
     "duplicate output name 'o'"},
    {"backend: 'identity' input { name: 'i' data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 3 "
     "] } }",
     "model input 'i' has different size for dims and reshape"},
    {"backend: 'identity' input { name: 'i' data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: "
     "[ -1, 2 ] } }",
     "model input 'i' has different size for dims and reshape"},
    {"backend: 'identity' output { name: 'o' data_type: TYPE_FP32 dims: [ -1 ] reshape { shape: [ "
     "-1, -1 ] } }",
     "different number of variable-size dimensions"},
    {"backend: 'identity' input { name: 'i' data_type: TYPE_FP32 dims: [ 1 ] reshape { } }",
     "empty reshape only when max_batch_size > 0"},
    {"backend: 'identity' max_batch_size: 2 input { name: 'i' data_type: TYPE_FP32 dims: [ 2 ] "
     "reshape { } }",
     "empty reshape"},
    {"backend: 'identity' input { name: 'i' data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 0, "
     "4 ] } }",
     "reshape dimensions must be integer >= 1, or -1"},
    {"backend: 'identity' input { name: 'i' data_type: TYPE_FP32 dims: [ 4611686018427387904, 4 ] "
     "reshape { shape: [ 1 ] } }",
     "too many elements"},
    /* struct pts_shape's rank limit (16), the batch dimension counted */
    {"backend: 'identity' max_batch_size: 2 input { name: 'i' data_type: TYPE_FP32 dims: [ "
     "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 ] }",
     "model input 'i' has 17 dimensions with the batch dimension, more than the 16 ptserve "
     "supports"},
    {"backend: 'identity' output { name: 'o' data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ "
     "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 ] } }",
     "model output 'o' has 17 dimensions, more than the 16"},
    /* §3.3 dynamic batching */
    {"backend: 'identity' max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 0 ] }",
     "dynamic batching preferred size must be positive"},
    {"backend: 'identity' max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 4, 9 ] }",
     "dynamic batching preferred size must be <= max batch size"},
    {"backend: 'identity' max_batch_size: 8 dynamic_batching { priority_levels: 2 }",
     "default priority level must be in range [1, 2]"},
    {"backend: 'identity' max_batch_size: 8 dynamic_batching { priority_levels: 2 "
     "default_priority_level: 3 }",
     "default priority level must be in range [1, 2]"},
    {"backend: 'identity' max_batch_size: 8 dynamic_batching { priority_levels: 2 "
     "default_priority_level: 1 "
     "priority_queue_policy { key: 3 } }",
     "priority queue policy must have priority level in range [1, 2]"},
    {"backend: 'identity' max_batch_size: 8 dynamic_batching { priority_queue_policy { key: 1 } }",
     "priority_queue_policy needs dynamic_batching.priority_levels"},
    {"backend: 'identity' max_batch_size: 8 dynamic_batching { preserve_ordering: true "
     "priority_levels: 2 "
     "default_priority_level: 1 }",
     "Only one priority level is allowed when 'preserve_ordering' is true"},
    {"backend: 'identity' max_batch_size: 8 dynamic_batching { preserve_ordering: true "
     "default_queue_policy { "
     "timeout_action: DELAY default_timeout_microseconds: 10 } }",
     "can not have DELAY as timeout action"},
    /* versions and instances */
    {"backend: 'identity' version_policy { latest { num_versions: 0 } }",
     "num_versions must be at least 1"},
    {"backend: 'identity' instance_group { kind: KIND_CPU gpus: [ 0 ] }",
     "instance group 'm_0' has kind KIND_CPU but specifies one or more GPUs"},
    {"backend: 'identity' instance_group { name: 'g' kind: KIND_GPU gpus: [ -1 ] }",
     "instance group 'g' specifies invalid or unsupported gpu id -1"},
    /* warmup */
    {"backend: 'identity' max_batch_size: 2 " IO_OK
     "model_warmup { name: 'w' inputs { key: 'I' value { data_type: TYPE_FP32 dims: 4 zero_data: "
     "true } } }",
     "model_warmup 'w': batch_size must be >= 1"},
    {"backend: 'identity' " IO_OK "model_warmup { name: 'w' batch_size: 2 inputs { key: 'I' value "
                                  "{ data_type: TYPE_FP32 dims: 4 zero_data: true "
     "} } }",
     "batch_size must be 1 for a model that does not batch"},
    {"backend: 'identity' max_batch_size: 2 " IO_OK
     "model_warmup { name: 'w' batch_size: 3 inputs { key: 'I' value { data_type: TYPE_FP32 dims: "
     "4 zero_data: true "
     "} } }",
     "batch_size 3 is more than max_batch_size 2"},
    {"backend: 'identity' " IO_OK "model_warmup { name: 'w' batch_size: 1 inputs { key: 'X' value "
                                  "{ data_type: TYPE_FP32 dims: 4 zero_data: "
     "true } } }",
     "model_warmup 'w': 'X' is not an input of the model"},
    {"backend: 'identity' " IO_OK "model_warmup { batch_size: 1 }",
     "model_warmup '#0': no data for model input 'I'"},
    {"backend: 'identity' " IO_OK "model_warmup { name: 'w' batch_size: 1 inputs { key: 'I' value "
                                  "{ data_type: TYPE_FP32 dims: 4 } } }",
     "must set one of zero_data, random_data or input_data_file"},
    {"backend: 'identity' " IO_OK "model_warmup { name: 'w' batch_size: 1 inputs { key: 'I' value "
                                  "{ data_type: TYPE_INT32 dims: 4 random_data: "
     "true } } }",
     "input 'I' has data_type TYPE_INT32, but the model input is TYPE_FP32"},
    {"backend: 'identity' " IO_OK "model_warmup { name: 'w' batch_size: 1 inputs { key: 'I' value "
                                  "{ data_type: TYPE_FP32 dims: -1 zero_data: "
     "true } } }",
     "must give every dimension"},
    {"backend: 'identity' " IO_OK "model_warmup { name: 'w' batch_size: 1 inputs { key: 'I' value "
                                  "{ data_type: TYPE_FP32 dims: 4 "
     "input_data_file: '../../etc/passwd' } } }",
     "input_data_file '../../etc/passwd' must name a file under warmup/"},
    /* backend and platform */
    {"", "could not determine the backend"},
    {"backend: 'onnxruntime'", "backend 'onnxruntime' is not supported by ptserve"},
    {"platform: 'onnxruntime_onnx'", "platform 'onnxruntime_onnx' is not supported by ptserve"},
    {"platform: 'tensorflow_savedmodel' backend: 'pytorch'",
     "unexpected 'platform' and 'backend' pair"},
    {"platform: 'pytorch_libtorch' backend: 'identity'",
     "unexpected 'platform' and 'backend' pair"},
    {"platform: 'torch_aoti' backend: 'identity'", "unexpected 'platform' and 'backend' pair"},
    /* ensembles (the graph of the steps is ensemble/'s: tests/unit/ensemble) */
    {"platform: 'ensemble' " IO_OK, "must specify one or more 'step' in 'ensemble_scheduling'"},
    {"platform: 'ensemble' " IO_OK "ensemble_scheduling { }",
     "must specify one or more 'step' in 'ensemble_scheduling'"},
    {"ensemble_scheduling { step { model_name: 'a' } }",
     "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble"},
    {"platform: 'ensemble' backend: 'pytorch' " IO_OK "ensemble_scheduling { step { model_name: "
     "'a' } }",
     "unexpected 'platform' and 'backend' pair: platform 'ensemble' with backend 'pytorch'"},
    {"platform: 'ensemble' " IO_OK "instance_group { count: 2 } ensemble_scheduling { step { "
     "model_name: 'a' } }",
     "instance group should not be specified for ensemble 'm'"},
    {"platform: 'ensemble' " IO_OK "ensemble_scheduling { step { model_name: '' } }",
     "must specify 'model_name' in step 0 of ensemble 'm'"},
    {"platform: 'ensemble' " IO_OK "ensemble_scheduling { step { model_name: 'a' } step { "
     "model_name: 'm' } }",
     "step 1 of ensemble 'm' uses the ensemble itself"},
    {"platform: 'ensemble' " IO_OK "ensemble_scheduling { step { model_name: 'a' "
     "model_namespace: 'ns' } }",
     "step 0: 'model_namespace' is not supported by ptserve"},
    {"platform: 'ensemble' ensemble_scheduling { step { model_name: 'a' } }",
     "ensemble 'm' must specify its 'input' and 'output' tensors"},
    {"backend: 'pytorch' runtime: 'model.py'", "'runtime' 'model.py' is not supported"},
    /* unsupported features, each naming its field */
    {"backend: 'pytorch' sequence_batching { iterative_sequence: true }",
     "'sequence_batching.iterative_sequence' is not supported by ptserve"},
    {"backend: 'pytorch' sequence_batching { direct { minimum_slot_utilization: 0.5 } }",
     "'sequence_batching.direct.minimum_slot_utilization' is not supported"},
    {"backend: 'pytorch' sequence_batching { state { input_name: 'i' output_name: 'o' "
     "data_type: TYPE_FP32 dims: [ -1 ] } }",
     "'sequence_batching.state' with variable-size dims is not supported"},
    {"backend: 'pytorch' sequence_batching { state { input_name: 'i' output_name: 'o' "
     "data_type: TYPE_STRING dims: [ 1 ] } }",
     "'sequence_batching.state' of TYPE_STRING is not supported"},
    {"backend: 'identity' max_batch_size: 2 sequence_batching { state { input_name: 'i' "
     "output_name: 'o' data_type: TYPE_FP32 dims: [ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
     "1 ] } }",
     "sequence_batching state 'i' has 17 dimensions with the batch dimension, more than the 16"},
    {"backend: 'identity' max_batch_size: 2 sequence_batching { state { input_name: 'i' "
     "output_name: 'o' data_type: TYPE_FP32 dims: [ 4611686018427387904, 2 ] } }",
     "sequence_batching state 'i' is too large"},
    /* sequence_batching validation */
    {"backend: 'pytorch' sequence_batching { oldest { } }",
     "max_candidate_sequences must be > 0, got 0"},
    {"backend: 'pytorch' max_batch_size: 4 sequence_batching { oldest { max_candidate_sequences: 2 "
     "preferred_batch_size: [ 5 ] } }",
     "preferred batch size 5 must be in 1..4"},
    {"backend: 'pytorch' sequence_batching { control_input { name: 'S' } }",
     "control input 'S' must have exactly one control, has 0"},
    {"backend: 'pytorch' sequence_batching { control_input { name: 'S' control { kind: "
     "CONTROL_SEQUENCE_START int32_false_true: [ 0 ] } } }",
     "with two values (false, true)"},
    {"backend: 'pytorch' sequence_batching { control_input { name: 'S' control { kind: "
     "CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ] } } }",
     "exactly one of int32_false_true, fp32_false_true or bool_false_true"},
    {"backend: 'pytorch' sequence_batching { control_input { name: 'C' control { kind: "
     "CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } } }",
     "CONTROL_SEQUENCE_CORRID must have data_type TYPE_INT32"},
    {"backend: 'pytorch' sequence_batching { control_input [ { name: 'A' control { kind: "
     "CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } }, { name: 'B' control { kind: "
     "CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } } ] }",
     "more than one CONTROL_SEQUENCE_READY control"},
    {"backend: 'pytorch' input { name: 'x' data_type: TYPE_FP32 dims: 1 } sequence_batching { "
     "control_input { name: 'x' control { kind: CONTROL_SEQUENCE_READY bool_false_true: [ 0, 1 ] "
     "} } }",
     "control input 'x' has the name of another input"},
    {"backend: 'pytorch' output { name: 'y' data_type: TYPE_FP32 dims: 1 } sequence_batching { "
     "state { input_name: 'i' output_name: 'y' data_type: TYPE_FP32 dims: [ 1 ] } }",
     "state output 'y' has the name of another output"},
    {"backend: 'pytorch' sequence_batching { state { input_name: 'i' output_name: 'o' "
     "data_type: TYPE_FP32 dims: [ 2 ] initial_state { data_type: TYPE_FP32 dims: [ 3 ] "
     "zero_data: true } } }",
     "initial_state dims must equal the state's dims"},
    {"backend: 'pytorch' sequence_batching { state { input_name: 'i' output_name: 'o' "
     "data_type: TYPE_FP32 dims: [ 2 ] initial_state { data_type: TYPE_FP32 dims: [ 2 ] "
     "data_file: '../x' } } }",
     "data_file '../x' must be a file name inside"},
    {"backend: 'pytorch' batch_input { target_name: 'x' }", "'batch_input' is not supported"},
    {"backend: 'pytorch' batch_output { target_name: 'x' }", "'batch_output' is not supported"},
    {"backend: 'pytorch' model_repository_agents { agents { name: 'checksum' } }",
     "'model_repository_agents' is not supported"},
    {"backend: 'pytorch' response_cache { enable: true } sequence_batching { }",
     "'response_cache.enable with sequence_batching' is not supported by ptserve: a sequence's "
     "answers depend on its earlier requests"},
    {"platform: 'ensemble' input { name: 'x' data_type: TYPE_FP32 dims: 1 } output { name: 'y' "
     "data_type: TYPE_FP32 dims: 1 } ensemble_scheduling { step { model_name: 'a' model_version: "
     "-1 input_map { key: 'i' value: 'x' } output_map { key: 'o' value: 'y' } } } "
     "response_cache { enable: true }",
     "'response_cache.enable on an ensemble' is not supported by ptserve: enable it on the "
     "composing models"},
    {"backend: 'pytorch' model_transaction_policy { decoupled: true }",
     "'model_transaction_policy.decoupled' is not supported"},
    {"backend: 'pytorch' input { name: 'a' data_type: TYPE_INT64 dims: 1 is_shape_tensor: true }",
     "input 'a': 'is_shape_tensor: true'"},
    {"backend: 'pytorch' output { name: 'b' data_type: TYPE_INT64 dims: 1 is_shape_tensor: true }",
     "output 'b': 'is_shape_tensor: true'"},
    {"backend: 'pytorch' input { name: 'a' data_type: TYPE_FP32 dims: 1 allow_ragged_batch: true }",
     "'allow_ragged_batch: true'"},
    {"backend: 'pytorch' input { name: 'a' data_type: TYPE_FP32 dims: 1 is_non_linear_format_io: "
     "true }",
     "input 'a': 'is_non_linear_format_io: true'"},
    {"backend: 'pytorch' output { name: 'b' data_type: TYPE_FP32 dims: 1 is_non_linear_format_io: "
     "true }",
     "output 'b': 'is_non_linear_format_io: true'"},
    {"backend: 'pytorch' cc_model_filenames { key: '8.0' value: 'a.pt' }",
     "'cc_model_filenames' is not supported"},
    {"backend: 'pytorch' instance_group { kind: KIND_MODEL }",
     "'kind: KIND_MODEL' is not supported"},
    {"backend: 'pytorch' instance_group { secondary_devices { device_id: 0 } }",
     "'secondary_devices' is not supported"},
    {"backend: 'pytorch' instance_group { passive: true }", "'passive: true' is not supported"},
    {"backend: 'pytorch' model_metrics { metric_control { metric_identifier { family: 'x' } } }",
     "'model_metrics' is not supported"},
    {"backend: 'pytorch' optimization { execution_accelerators { gpu_execution_accelerator { name: "
     "'tensorrt' } } }",
     "gpu_execution_accelerator 'tensorrt' is not supported by ptserve (supported: mps, cuda)"},
    {"backend: 'pytorch' optimization { execution_accelerators { cpu_execution_accelerator { name: "
     "'openvino' } } }",
     "cpu_execution_accelerator 'openvino' is not supported"},
};

/* An ensemble completes without what only models with instances have:
 * no instance group, no pinned-memory defaults, no backend. */
static void ensemble_completes_without_instances(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  assert_int_equal(complete_text("platform: 'ensemble' max_batch_size: 4 " IO_OK
                                 "ensemble_scheduling { step { model_name: 'a' model_version: -1 "
                                 "input_map { key: 'x' value: 'I' } output_map { key: 'y' value: "
                                 "'O' } } }",
                                 &cfg, &err),
                   PTS_OK);
  assert_true(pts_model_config_is_ensemble(cfg));
  assert_int_equal(cfg->n_instance_group, 0);
  assert_null(cfg->optimization);
  assert_string_equal(cfg->backend, "");
  assert_int_equal(cfg->version_policy->latest->num_versions, 1);
  pts_model_config_free(cfg);
}

static void refusals(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    struct pts_error err;
    enum pts_status s = complete_text(refused[i].text, NULL, &err);
    if (s != PTS_INVALID_ARG) fail_msg("[%s]: accepted (status %d)", refused[i].text, (int)s);
    if (!strstr(err.msg, refused[i].phrase) || strstr(err.msg, "model '") == NULL)
      fail_msg("[%s]: want '%s' and the model name, got '%s'", refused[i].text, refused[i].phrase,
               err.msg);
  }
}

static void unsigned_types_for_pytorch(void **state) {
  (void)state;
  static const char *const types[] = {"TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64"};
  for (size_t i = 0; i < 3; i++) {
    char text[256], want[128];
    struct pts_error err;
    snprintf(text, sizeof text, "backend: 'pytorch' input { name: 'INPUT0' data_type: %s dims: 1 }",
             types[i]);
    assert_int_equal(complete_text(text, NULL, &err), PTS_INVALID_ARG);
    snprintf(want, sizeof want, "unsupported datatype %s for input 'INPUT0' for model 'm'",
             types[i]);
    assert_string_equal(err.msg, want);
    snprintf(text, sizeof text,
             "platform: 'pytorch_libtorch' output { name: 'OUT' data_type: %s dims: 1 }", types[i]);
    assert_int_equal(complete_text(text, NULL, &err), PTS_INVALID_ARG);
    snprintf(want, sizeof want, "unsupported datatype %s for output 'OUT' for model 'm'", types[i]);
    assert_string_equal(err.msg, want);
  }
  /* The identity backend copies bytes and takes any type. */
  Inference__ModelConfig *cfg =
      completed("backend: 'identity' input { name: 'a' data_type: TYPE_UINT64 dims: 1 }");
  pts_model_config_free(cfg);
}

static void accepted_features(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed(
      "backend: 'pytorch' max_batch_size: 4\n"
      "input { name: 'INPUT__0' data_type: TYPE_BF16 format: FORMAT_NCHW dims: [ 3, -1, -1 ] }\n"
      "input { name: 'TEXT' data_type: TYPE_STRING dims: [ 1 ] reshape { shape: [ ] } }\n"
      "output { name: 'OUTPUT__0' data_type: TYPE_FP16 dims: [ -1, 6 ] reshape { shape: [ -1, 2, 3 "
      "] }"
      " label_filename: 'labels.txt' }\n"
      "instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] count: 2 }, { kind: KIND_AUTO gpus: [ 1 ] "
      "},"
      " { kind: KIND_CPU host_policy: 'numa0' profile: 'p' } ]\n"
      "dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 "
      "preserve_ordering: true"
      "  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 5 "
      "max_queue_size: 8 } }\n"
      "optimization { priority: PRIORITY_MAX cuda { graphs: true } execution_accelerators {"
      "  gpu_execution_accelerator [ { name: 'mps' }, { name: 'cuda' } ] } }\n"
      "parameters { key: 'INFERENCE_MODE' value { string_value: 'false' } }\n"
      "metric_tags { key: 'team' value: 'x' }\n"
      "model_operations { op_library_filename: 'libcustom.so' }\n"
      "model_transaction_policy { decoupled: false } response_cache { enable: false }\n"
      "version_policy { specific { versions: [ 1, 2 ] } }\n"
      "model_warmup { name: 'w' batch_size: 4 count: 2 inputs [\n"
      "  { key: 'INPUT__0' value { data_type: TYPE_BF16 dims: [ 3, 8, 8 ] random_data: true } },\n"
      "  { key: 'TEXT' value { data_type: TYPE_STRING dims: [ 1 ] input_data_file: 'sub/text.bin' "
      "} } ] }\n");
  assert_string_equal(cfg->model_operations->op_library_filename[0], "libcustom.so");
  assert_string_equal(cfg->instance_group[1]->name, "m_1");
  assert_string_equal(cfg->instance_group[2]->host_policy, "numa0");
  pts_model_config_free(cfg);
}

/* ---- parameters ---- */

static void bool_parameters(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed(
      "backend: 'identity'\n"
      "parameters [ { key: 'T1' value { string_value: 'true' } }, { key: 'T2' value { "
      "string_value: 'ON' } },"
      " { key: 'T3' value { string_value: '1' } }, { key: 'T4' value { string_value: 'True' } },"
      " { key: 'F1' value { string_value: 'false' } }, { key: 'F2' value { string_value: 'Off' } },"
      " { key: 'F3' value { string_value: '0' } }, { key: 'F4' value { string_value: 'FALSE' } },"
      " { key: 'BAD' value { string_value: 'yes' } }, { key: 'EMPTY' } ]");
  struct pts_error err;
  bool v;
  const char *truthy[] = {"T1", "T2", "T3", "T4"}, *falsy[] = {"F1", "F2", "F3", "F4"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(pts_model_config_param_bool(cfg, truthy[i], false, &v, &err), PTS_OK);
    assert_true(v);
    assert_int_equal(pts_model_config_param_bool(cfg, falsy[i], true, &v, &err), PTS_OK);
    assert_false(v);
  }
  assert_int_equal(pts_model_config_param_bool(cfg, "ABSENT", true, &v, &err), PTS_OK);
  assert_true(v);
  assert_int_equal(pts_model_config_param_bool(cfg, "BAD", true, &v, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "'BAD'"));
  assert_non_null(strstr(err.msg, "'yes'"));
  assert_non_null(strstr(err.msg, "model 'm'"));
  assert_int_equal(pts_model_config_param_bool(cfg, "EMPTY", true, &v, &err), PTS_INVALID_ARG);
  pts_model_config_free(cfg);
}

static void int_parameters(void **state) {
  (void)state;
  Inference__ModelConfig *cfg = completed(
      "backend: 'pytorch'\n"
      "parameters [ { key: 'INTRA_OP_THREAD_COUNT' value { string_value: '4' } },"
      " { key: 'NEG' value { string_value: '-2' } }, { key: 'JUNK' value { string_value: '4x' } },"
      " { key: 'EMPTY' value { string_value: '' } }, { key: 'HUGE' value { string_value: "
      "'99999999999999999999' } } ]");
  struct pts_error err;
  long v;
  assert_int_equal(pts_model_config_param_int(cfg, "INTRA_OP_THREAD_COUNT", 0, &v, &err), PTS_OK);
  assert_int_equal(v, 4);
  assert_int_equal(pts_model_config_param_int(cfg, "NEG", 0, &v, &err), PTS_OK);
  assert_int_equal(v, -2);
  assert_int_equal(pts_model_config_param_int(cfg, "INTER_OP_THREAD_COUNT", 7, &v, &err), PTS_OK);
  assert_int_equal(v, 7);
  assert_int_equal(pts_model_config_param_int(cfg, "JUNK", 0, &v, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "'JUNK'"));
  assert_non_null(strstr(err.msg, "'4x'"));
  assert_int_equal(pts_model_config_param_int(cfg, "EMPTY", 0, &v, &err), PTS_INVALID_ARG);
  assert_int_equal(pts_model_config_param_int(cfg, "HUGE", 0, &v, &err), PTS_INVALID_ARG);
  pts_model_config_free(cfg);
}

/* ---- loading from a directory ---- */

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void remove_tree(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static void load_from_directory(void **state) {
  (void)state;
  char root[] = "/tmp/pts_config_testXXXXXX", dir[256], path[300];
  assert_non_null(mkdtemp(root));
  struct pts_error err;
  Inference__ModelConfig *cfg;

  /* No config.pbtxt, a TorchScript file in the first version: pytorch. */
  snprintf(dir, sizeof dir, "%s/plain", root);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(path, sizeof path, "%s/2", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  snprintf(path, sizeof path, "%s/10", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  snprintf(path, sizeof path, "%s/10/model.pt", dir); /* "10" < "2": the lexicographically first */
  write_file(path, "x");
  assert_int_equal(pts_model_config_load(dir, NULL, &cfg, &err), PTS_OK);
  assert_string_equal(cfg->name, "plain");
  assert_string_equal(cfg->backend, "pytorch");
  assert_string_equal(cfg->platform, "pytorch_libtorch");
  pts_model_config_free(cfg);

  /* model.pt2 beside model.pt: TorchScript still wins (Triton's probe
   * order); model.pt2 alone: an AOTInductor package. */
  snprintf(path, sizeof path, "%s/10/model.pt2", dir);
  write_file(path, "x");
  assert_int_equal(pts_model_config_load(dir, "plain", &cfg, &err), PTS_OK);
  assert_string_equal(cfg->platform, "pytorch_libtorch");
  pts_model_config_free(cfg);
  snprintf(path, sizeof path, "%s/10/model.pt", dir);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(pts_model_config_load(dir, "plain", &cfg, &err), PTS_OK);
  assert_string_equal(cfg->backend, "pytorch");
  assert_string_equal(cfg->platform, "torch_aoti");
  assert_string_equal(cfg->default_model_filename, "model.pt2");
  pts_model_config_free(cfg);
  /* backend pytorch alone, only a package present: torch_aoti as well. */
  snprintf(path, sizeof path, "%s/config.pbtxt", dir);
  write_file(path, "backend: \"pytorch\"\n");
  assert_int_equal(pts_model_config_load(dir, "plain", &cfg, &err), PTS_OK);
  assert_string_equal(cfg->platform, "torch_aoti");
  pts_model_config_free(cfg);

  /* A config with an error: the message names <model>/config.pbtxt:line:col. */
  snprintf(dir, sizeof dir, "%s/broken", root);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(path, sizeof path, "%s/config.pbtxt", dir);
  write_file(path, "backend: \"identity\"\nmax_batch_size: 4\ninput { name: \"x\" dimz: 1 }\n");
  assert_int_equal(pts_model_config_load(dir, "broken", &cfg, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "broken/config.pbtxt:3:19: unknown field 'dimz' in inference.ModelInput");

  /* A good config, named by the directory (trailing slash and all). */
  write_file(path,
             "backend: \"identity\"\nmax_batch_size: 4\ninput { name: \"x\" data_type: TYPE_INT32 "
             "dims: 1 }\n");
  snprintf(path, sizeof path, "%s/", dir);
  assert_int_equal(pts_model_config_load(path, NULL, &cfg, &err), PTS_OK);
  assert_string_equal(cfg->name, "broken");
  assert_int_equal(cfg->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_INT32);
  pts_model_config_free(cfg);

  /* config.pbtxt that is a directory. */
  snprintf(dir, sizeof dir, "%s/odd", root);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(path, sizeof path, "%s/config.pbtxt", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(pts_model_config_load(dir, "odd", &cfg, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "odd/config.pbtxt: not a regular file"));

  remove_tree(root);
}

static void complete_survives_allocation_failures(void **state) {
  (void)state;
  const char *text =
      "backend: 'pytorch' max_batch_size: 2 dynamic_batching { }\n"
      "input { name: 'a' data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: [ 2, -1 ] } }\n"
      "instance_group [ { }, { } ]\n";
  bool succeeded = false;
  for (long n = 0; n < 1000 && !succeeded; n++) {
    struct pts_error err;
    Inference__ModelConfig *cfg = test_parse(text, &err);
    assert_non_null(cfg);
    pts_alloc_fail_after(n);
    enum pts_status s = pts_model_config_complete(cfg, NULL, "m", &err);
    pts_alloc_fail_after(-1);
    if (s == PTS_OK) {
      succeeded = true;
      assert_int_equal(cfg->dynamic_batching->preferred_batch_size[0], 2);
      assert_string_equal(cfg->instance_group[1]->name, "m_1");
    } else {
      assert_int_equal(s, PTS_NOMEM);
    }
    pts_model_config_free(cfg);
  }
  assert_true(succeeded);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pytorch_defaults),
      cmocka_unit_test(sequence_defaults_and_exec_config),
      cmocka_unit_test(torch_aoti_platform),
      cmocka_unit_test(warmup_checked_after_backend_completion),
      cmocka_unit_test(backend_from_platform_or_file),
      cmocka_unit_test(devices_resolve_as_triton),
      cmocka_unit_test(identity_backend),
      cmocka_unit_test(kept_when_given),
      cmocka_unit_test(preferred_batch_default),
      cmocka_unit_test(name_must_match_directory),
      cmocka_unit_test(dims_up_to_the_rank_limit),
      cmocka_unit_test(refusals),
      cmocka_unit_test(ensemble_completes_without_instances),
      cmocka_unit_test(unsigned_types_for_pytorch),
      cmocka_unit_test(accepted_features),
      cmocka_unit_test(bool_parameters),
      cmocka_unit_test(int_parameters),
      cmocka_unit_test(load_from_directory),
      cmocka_unit_test(complete_survives_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
