/* tests/unit/scheduler/validate_test.c — request validation against a
 * model config, one test per rule. The expected messages are Triton's
 * (protocol-facts §1.6, §4.4), written out by hand; expected byte sizes are
 * element count × element size computed by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "scheduler/validate.h"

static Inference__ModelConfig *parse(const char *text) {
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  assert_int_equal(pts_model_config_parse(text, strlen(text), "test", &cfg, &err), PTS_OK);
  return cfg;
}

/* Zero-filled backing store big enough for every test tensor. */
static unsigned char zeros[4096];

static void add_input(struct pts_infer_request *req, const char *name, enum pts_dtype t,
                      size_t byte_size, int ndim, ...) {
  req->inputs = pts_realloc(req->inputs, (req->n_inputs + 1) * sizeof *req->inputs);
  assert_non_null(req->inputs);
  struct pts_tensor *x = &req->inputs[req->n_inputs++];
  memset(x, 0, sizeof *x);
  x->name = pts_strdup(name);
  x->dtype = t;
  x->shape.ndim = ndim;
  va_list ap;
  va_start(ap, ndim);
  for (int i = 0; i < ndim; i++) x->shape.dims[i] = va_arg(ap, int64_t);
  va_end(ap);
  x->data = zeros;
  x->byte_size = byte_size;
}

static void add_output(struct pts_infer_request *req, const char *name) {
  req->outputs = pts_realloc(req->outputs, (req->n_outputs + 1) * sizeof *req->outputs);
  assert_non_null(req->outputs);
  memset(&req->outputs[req->n_outputs], 0, sizeof req->outputs[0]);
  req->outputs[req->n_outputs++].name = pts_strdup(name);
}

#define I64(x) ((int64_t)(x))

static const char two_inputs[] =
    "max_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },"
    "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },"
    "         { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n";

/* Runs the validation and checks the outcome. */
static void expect(const char *cfg_text, struct pts_infer_request *req, enum pts_status code,
                   const char *msg, int64_t want_batch) {
  Inference__ModelConfig *cfg = parse(cfg_text);
  struct pts_error err;
  pts_error_clear(&err);
  int64_t batch = -7;
  enum pts_status st = pts_validate_request(cfg, "m", req, &batch, &err);
  if (st != code) fail_msg("got %d (%s), want %d", st, err.msg, code);
  if (msg) assert_string_equal(err.msg, msg);
  if (code == PTS_OK) assert_int_equal(batch, want_batch);
  pts_model_config_free(cfg);
  pts_infer_request_free(req);
}

static void valid_batched_request(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  /* [2,16] INT32 = 32 elements × 4 bytes = 128. */
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 128, 2, I64(2), I64(16));
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 128, 2, I64(2), I64(16));
  add_output(req, "OUTPUT1");
  expect(two_inputs, req, PTS_OK, NULL, 2);
}

static void unknown_input(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  add_input(req, "X", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG, "unexpected inference input 'X' for model 'm'", 0);
}

static void missing_input(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG,
         "expected 2 inputs but got 1 inputs for model 'm'. Got input(s) ['INPUT0'], but missing "
         "required input(s) ['INPUT1']. Please provide all required input(s).",
         0);
}

static void optional_input_may_be_left_out(void **state) {
  (void)state;
  static const char cfg[] =
      "max_batch_size: 0\n"
      "input [ { name: \"A\" data_type: TYPE_FP32 dims: [ 2 ] },"
      "        { name: \"B\" data_type: TYPE_FP32 dims: [ 2 ] optional: true },"
      "        { name: \"C\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
      "output [ { name: \"O\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n";
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "A", PTS_DTYPE_FP32, 8, 1, I64(2));
  add_input(req, "C", PTS_DTYPE_FP32, 8, 1, I64(2));
  expect(cfg, req, PTS_OK, NULL, 0);

  req = pts_infer_request_new();
  add_input(req, "B", PTS_DTYPE_FP32, 8, 1, I64(2));
  expect(cfg, req, PTS_INVALID_ARG,
         "expected number of inputs between 2 and 3 but got 1 inputs for model 'm'. Got "
         "input(s) ['B'], but missing required input(s) ['A','C']. Please provide all required "
         "input(s).",
         0);
}

static void duplicate_input(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG,
         "inference input 'INPUT0' is given more than once for model 'm'", 0);
}

static void datatype_mismatch(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_FP32, 64, 2, I64(1), I64(16));
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG,
         "inference input 'INPUT0' data-type is 'FP32', but model 'm' expects 'INT32'", 0);
}

static void missing_batch_dimension(void **state) {
  (void)state;
  static const char cfg[] =
      "max_batch_size: 16\n"
      "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 16 ] } ]\n"
      "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 16 ] } ]\n";
  struct pts_infer_request *req = pts_infer_request_new();
  /* [16] reads as batch 16 of shape [], which does not match dims [16]. */
  add_input(req, "x", PTS_DTYPE_FP32, 64, 1, I64(16));
  expect(cfg, req, PTS_INVALID_ARG,
         "unexpected shape for input 'x' for model 'm'. Expected [-1,16], got [16]. NOTE: Setting "
         "a non-zero max_batch_size in the model config requires a batch dimension to be "
         "prepended to each input shape. If you want to specify the full shape including the "
         "batch dim in your input dims config, try setting max_batch_size to zero. See the model "
         "configuration docs for more info on max_batch_size.",
         0);
}

static void non_batched_shape(void **state) {
  (void)state;
  static const char cfg[] =
      "max_batch_size: 0\n"
      "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ -1, 2 ] } ]\n"
      "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ -1, 2 ] } ]\n";
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "x", PTS_DTYPE_FP32, 24, 2, I64(3), I64(2)); /* 6 × 4 bytes */
  expect(cfg, req, PTS_OK, NULL, 0);

  req = pts_infer_request_new();
  add_input(req, "x", PTS_DTYPE_FP32, 36, 2, I64(3), I64(3));
  expect(cfg, req, PTS_INVALID_ARG,
         "unexpected shape for input 'x' for model 'm'. Expected [-1,2], got [3,3]", 0);

  req = pts_infer_request_new();
  add_input(req, "x", PTS_DTYPE_FP32, 24, 3, I64(1), I64(3), I64(2));
  expect(cfg, req, PTS_INVALID_ARG,
         "unexpected shape for input 'x' for model 'm'. Expected [-1,2], got [1,3,2]", 0);
}

static void batch_sizes_must_agree(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 128, 2, I64(2), I64(16));
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 192, 2, I64(3), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG,
         "input 'INPUT1' batch size does not match other inputs for 'm'", 0);
}

static void batch_size_limits(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 576, 2, I64(9), I64(16));
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 576, 2, I64(9), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG, "inference request batch-size must be <= 8 for 'm'", 0);

  req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 0, 2, I64(0), I64(16));
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 0, 2, I64(0), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG,
         "inference request batch-size must be >= 1 for 'm', got 0", 0);

  req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 512, 2, I64(8), I64(16));
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 512, 2, I64(8), I64(16));
  expect(two_inputs, req, PTS_OK, NULL, 8);
}

static void scalar_input_of_batched_model(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 4, 0);
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG,
         "input 'INPUT0' has no shape but model requires batch dimension for 'm'", 0);
}

static void negative_dimension(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(-1));
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG,
         "input 'INPUT0' for model 'm' has shape [1,-1]: all input dimensions should be "
         "specified (no negative values)",
         0);
}

static void byte_size_mismatch(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 124, 2, I64(2), I64(16));
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 128, 2, I64(2), I64(16));
  expect(two_inputs, req, PTS_INVALID_ARG,
         "input byte size mismatch for input 'INPUT0' for model 'm'. Expected 128, got 124", 0);
}

static const char strings_cfg[] =
    "max_batch_size: 4\n"
    "input [ { name: \"s\" data_type: TYPE_STRING dims: [ -1 ] } ]\n"
    "output [ { name: \"t\" data_type: TYPE_STRING dims: [ -1 ] } ]\n";

static void bytes_element_count(void **state) {
  (void)state;
  /* "ab", "" serialized: 02 00 00 00 'a' 'b' 00 00 00 00 (protocol-facts §5). */
  static const unsigned char two[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0};
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "s", PTS_DTYPE_BYTES, sizeof two, 2, I64(1), I64(2));
  req->inputs[0].data = two;
  expect(strings_cfg, req, PTS_OK, NULL, 1);

  req = pts_infer_request_new();
  add_input(req, "s", PTS_DTYPE_BYTES, sizeof two, 2, I64(1), I64(3));
  req->inputs[0].data = two;
  expect(strings_cfg, req, PTS_INVALID_ARG,
         "expected 3 string elements for inference input 's' for model 'm', got 2", 0);

  /* The length prefix claims 2 bytes but only 1 follows. */
  req = pts_infer_request_new();
  add_input(req, "s", PTS_DTYPE_BYTES, 5, 2, I64(1), I64(1));
  req->inputs[0].data = two;
  Inference__ModelConfig *cfg = parse(strings_cfg);
  struct pts_error err;
  int64_t b;
  assert_int_equal(pts_validate_request(cfg, "m", req, &b, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "model 'm'"));
  assert_non_null(strstr(err.msg, "truncated"));
  pts_model_config_free(cfg);
  pts_infer_request_free(req);
}

static void unknown_and_duplicate_outputs(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  add_output(req, "OUTPUT0");
  add_output(req, "Y");
  expect(two_inputs, req, PTS_INVALID_ARG, "unexpected inference output 'Y' for model 'm'", 0);

  req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  add_input(req, "INPUT1", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  add_output(req, "OUTPUT1");
  add_output(req, "OUTPUT1");
  expect(two_inputs, req, PTS_INVALID_ARG,
         "inference output 'OUTPUT1' is requested more than once for model 'm'", 0);
}

/* Classification (§1.9) ranks numbers: a BYTES, BOOL, FP16 or BF16 output
 * is refused before the model runs; numeric outputs are fine. */
static void classification_of_outputs(void **state) {
  (void)state;
  static const char cfg[] =
      "max_batch_size: 8\n"
      "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
      "output [ { name: \"NUM\" data_type: TYPE_FP32 dims: [ 4 ] },"
      "         { name: \"TEXT\" data_type: TYPE_STRING dims: [ 1 ] },"
      "         { name: \"HALF\" data_type: TYPE_FP16 dims: [ 4 ] } ]\n";
  struct pts_infer_request *req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  add_output(req, "NUM");
  req->outputs[0].classification = 3;
  expect(cfg, req, PTS_OK, NULL, 1);

  req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  add_output(req, "NUM");
  add_output(req, "TEXT");
  req->outputs[1].classification = 1;
  expect(cfg, req, PTS_INVALID_ARG,
         "output 'TEXT' of model 'm': classification is not supported for datatype BYTES", 0);

  req = pts_infer_request_new();
  add_input(req, "INPUT0", PTS_DTYPE_INT32, 64, 2, I64(1), I64(16));
  add_output(req, "HALF");
  req->outputs[0].classification = 2;
  expect(cfg, req, PTS_INVALID_ARG,
         "output 'HALF' of model 'm': classification is not supported for datatype FP16", 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_batched_request),
      cmocka_unit_test(unknown_input),
      cmocka_unit_test(missing_input),
      cmocka_unit_test(optional_input_may_be_left_out),
      cmocka_unit_test(duplicate_input),
      cmocka_unit_test(datatype_mismatch),
      cmocka_unit_test(missing_batch_dimension),
      cmocka_unit_test(non_batched_shape),
      cmocka_unit_test(batch_sizes_must_agree),
      cmocka_unit_test(batch_size_limits),
      cmocka_unit_test(scalar_input_of_batched_model),
      cmocka_unit_test(negative_dimension),
      cmocka_unit_test(byte_size_mismatch),
      cmocka_unit_test(bytes_element_count),
      cmocka_unit_test(unknown_and_duplicate_outputs),
      cmocka_unit_test(classification_of_outputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
