/* tests/unit/pytorch/bridge_test.c — torch_bridge.h against real TorchScript
 * models written by tests/models/gen_models.py (the torch whose LibTorch ptserve links).
 * Expected values are computed by hand from each model's definition. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "backends/pytorch/torch_bridge.h"
#include "core/alloc.h"

static char repo[64];
static bool have_models;

static int generate(void **state) {
  (void)state;
  const char *src = getenv("PTS_SOURCE_DIR");
  strcpy(repo, "/tmp/pts-bridge-XXXXXX");
  if (!src || !mkdtemp(repo)) return -1; /* no models: every test fails */
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s %s/tests/models/gen_models.py %s add_sub_fp32 add_sub_bf16 strings "
           "dict_out list_out dict_in identity scalar_out bad_file threads stateful >/dev/null 2>&1",
           getenv("PTS_MODELS_PYTHON") ? getenv("PTS_MODELS_PYTHON") : "/usr/bin/python3", src,
           repo);
  have_models = system(cmd) == 0;
  return have_models ? 0 : -1;
}

static int cleanup(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", repo);
  return system(cmd) == 0 ? 0 : -1;
}

static struct pts_torch_module *load(const char *model) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s/1/model.pt", repo, model);
  struct pts_device cpu = {.type = PTS_DEVICE_CPU};
  struct pts_torch_module *m = NULL;
  struct pts_error err = {0};
  enum pts_status st = pts_torch_load(path, &cpu, &m, &err);
  if (st != PTS_OK) fail_msg("%s", err.msg);
  return m;
}

static struct pts_torch_input tensor(const char *name, enum pts_dtype t, int ndim,
                                     const int64_t *dims, const void *data, size_t size) {
  struct pts_torch_input in = {false, name, t, ndim, dims, data, size, PTS_TORCH_MEM_HOST, 0};
  return in;
}

static const struct pts_torch_run_opts DEFAULT_OPTS = {.inference_mode = true,
                                                       .optimized_execution = true};

static void add_sub_fp32(void **state) {
  (void)state;
  struct pts_torch_module *m = load("add_sub_fp32");
  assert_int_equal(pts_torch_arg_count(m), 2);
  assert_string_equal(pts_torch_arg_at(m, 0)->name, "a");
  assert_string_equal(pts_torch_arg_at(m, 1)->name, "b");
  assert_int_equal(pts_torch_arg_at(m, 0)->kind, PTS_TORCH_ARG_TENSOR);
  assert_null(pts_torch_arg_at(m, 2));

  const int64_t dims[] = {2, 4};
  const float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const float b[8] = {0.5f, 0.5f, 1, 1, -2, -2, 10, 10};
  struct pts_torch_input in[2] = {tensor("INPUT0", PTS_DTYPE_FP32, 2, dims, a, sizeof a),
                                  tensor("INPUT1", PTS_DTYPE_FP32, 2, dims, b, sizeof b)};
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, in, 2, &DEFAULT_OPTS, &out, &err), PTS_OK);
  assert_int_equal(out.count, 2);
  assert_false(out.keyed);
  const float sum[8] = {1.5f, 2.5f, 4, 5, 3, 4, 17, 18};
  const float diff[8] = {0.5f, 1.5f, 2, 3, 7, 8, -3, -2};
  for (size_t k = 0; k < 2; k++) {
    assert_int_equal(out.items[k].dtype, PTS_DTYPE_FP32);
    assert_int_equal(out.items[k].ndim, 2);
    assert_int_equal(out.items[k].dims[0], 2);
    assert_int_equal(out.items[k].dims[1], 4);
    assert_int_equal(out.items[k].byte_size, sizeof sum);
    assert_null(out.items[k].key);
  }
  assert_memory_equal(out.items[0].data, sum, sizeof sum);
  assert_memory_equal(out.items[1].data, diff, sizeof diff);
  pts_torch_outputs_free(&out);
  pts_torch_free(m);
}

/* The two halves on a CPU module: begin does the work, end hands the
 * outputs over; two sets can be begun before either ends, each keeps its
 * own batch; a set is begun once before it is ended, and the set index is
 * checked. Staging offers nothing off CUDA. */
static void forward_in_two_halves(void **state) {
  (void)state;
  struct pts_torch_module *m = load("add_sub_fp32");
  assert_false(pts_torch_async(m));
  const int64_t dims[] = {1, 2};
  const float a0[2] = {1, 2}, b0[2] = {10, 20}, a1[2] = {5, 5}, b1[2] = {1, 2};
  struct pts_torch_input in0[2] = {tensor("INPUT0", PTS_DTYPE_FP32, 2, dims, a0, sizeof a0),
                                   tensor("INPUT1", PTS_DTYPE_FP32, 2, dims, b0, sizeof b0)};
  struct pts_torch_input in1[2] = {tensor("INPUT0", PTS_DTYPE_FP32, 2, dims, a1, sizeof a1),
                                   tensor("INPUT1", PTS_DTYPE_FP32, 2, dims, b1, sizeof b1)};
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward_begin(m, in0, 2, &DEFAULT_OPTS, 0, &err), PTS_OK);
  assert_int_equal(pts_torch_forward_begin(m, in1, 2, &DEFAULT_OPTS, 1, &err), PTS_OK);
  assert_int_equal(pts_torch_forward_begin(m, in1, 2, &DEFAULT_OPTS, 1, &err), PTS_INTERNAL);
  assert_non_null(strstr(err.msg, "already in flight"));
  struct pts_torch_outputs out0, out1;
  assert_int_equal(pts_torch_forward_end(m, 0, &out0, &err), PTS_OK);
  assert_int_equal(pts_torch_forward_end(m, 1, &out1, &err), PTS_OK);
  const float sum0[2] = {11, 22}, sum1[2] = {6, 7};
  assert_int_equal(out0.count, 2);
  assert_memory_equal(out0.items[0].data, sum0, sizeof sum0);
  assert_memory_equal(out1.items[0].data, sum1, sizeof sum1);
  pts_torch_outputs_free(&out0);
  pts_torch_outputs_free(&out1);
  assert_int_equal(pts_torch_forward_end(m, 0, &out0, &err), PTS_INTERNAL);
  assert_int_equal(out0.count, 0);
  assert_int_equal(pts_torch_forward_begin(m, in0, 2, &DEFAULT_OPTS, 2, &err), PTS_INTERNAL);
  void *staging = (void *)1;
  size_t grown = 1;
  assert_int_equal(pts_torch_staging(m, 1, 0, 64, &staging, &grown, &err), PTS_OK);
  assert_null(staging);
  assert_int_equal(grown, 0); /* nothing pinned off CUDA */
  /* A model error in begin leaves the set free for the next batch. */
  const int64_t bad[] = {1, 3};
  const float b3[3] = {1, 2, 3};
  struct pts_torch_input wrong[2] = {tensor("INPUT0", PTS_DTYPE_FP32, 2, dims, a0, sizeof a0),
                                     tensor("INPUT1", PTS_DTYPE_FP32, 2, bad, b3, sizeof b3)};
  assert_int_equal(pts_torch_forward_begin(m, wrong, 2, &DEFAULT_OPTS, 0, &err), PTS_INTERNAL);
  assert_int_equal(pts_torch_forward_begin(m, in0, 2, &DEFAULT_OPTS, 0, &err), PTS_OK);
  /* Freed with a set still begun: its outputs go with the module. */
  pts_torch_free(m);
}

static void bf16_round_trip(void **state) {
  (void)state;
  struct pts_torch_module *m = load("add_sub_bf16");
  /* bf16 bits: 1.0 = 0x3F80, 2.0 = 0x4000, 3.0 = 0x4040, -1.0 = 0xBF80. */
  const int64_t dims[] = {1, 2};
  const uint16_t a[2] = {0x3F80, 0x4000}, b[2] = {0x4000, 0x3F80};
  struct pts_torch_input in[2] = {tensor("INPUT0", PTS_DTYPE_BF16, 2, dims, a, sizeof a),
                                  tensor("INPUT1", PTS_DTYPE_BF16, 2, dims, b, sizeof b)};
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, in, 2, &DEFAULT_OPTS, &out, &err), PTS_OK);
  const uint16_t sum[2] = {0x4040, 0x4040}, diff[2] = {0xBF80, 0x3F80};
  assert_int_equal(out.items[0].dtype, PTS_DTYPE_BF16);
  assert_memory_equal(out.items[0].data, sum, sizeof sum);
  assert_memory_equal(out.items[1].data, diff, sizeof diff);
  pts_torch_outputs_free(&out);
  pts_torch_free(m);
}

static void strings_upper(void **state) {
  (void)state;
  struct pts_torch_module *m = load("strings");
  assert_int_equal(pts_torch_arg_count(m), 1);
  assert_int_equal(pts_torch_arg_at(m, 0)->kind, PTS_TORCH_ARG_STRING_LIST);
  assert_string_equal(pts_torch_arg_at(m, 0)->type, "List[str]");
  /* ["ab", "", "xYz"] in the 4-byte-length layout (protocol-facts §5). */
  const char data[] = "\x02\0\0\0ab\0\0\0\0\x03\0\0\0xYz";
  const int64_t dims[] = {3};
  struct pts_torch_input in = tensor("INPUT0", PTS_DTYPE_BYTES, 1, dims, data, sizeof data - 1);
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, &in, 1, &DEFAULT_OPTS, &out, &err), PTS_OK);
  assert_int_equal(out.count, 1);
  assert_int_equal(out.items[0].dtype, PTS_DTYPE_BYTES);
  assert_int_equal(out.items[0].ndim, 1);
  assert_int_equal(out.items[0].dims[0], 3);
  const char want[] = "\x02\0\0\0AB\0\0\0\0\x03\0\0\0XYZ";
  assert_int_equal(out.items[0].byte_size, sizeof want - 1);
  assert_memory_equal(out.items[0].data, want, sizeof want - 1);
  pts_torch_outputs_free(&out);

  /* A truncated element is the caller's error, not a crash. */
  in.byte_size = 5;
  assert_int_equal(pts_torch_forward(m, &in, 1, &DEFAULT_OPTS, &out, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "INPUT0"));
  pts_torch_free(m);
}

static void dict_output_is_keyed(void **state) {
  (void)state;
  struct pts_torch_module *m = load("dict_out");
  const int64_t dims[] = {1, 4};
  const float a[4] = {1, 2, 3, 4}, b[4] = {2, 2, 2, 2};
  struct pts_torch_input in[2] = {tensor("INPUT__0", PTS_DTYPE_FP32, 2, dims, a, sizeof a),
                                  tensor("INPUT__1", PTS_DTYPE_FP32, 2, dims, b, sizeof b)};
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, in, 2, &DEFAULT_OPTS, &out, &err), PTS_OK);
  assert_true(out.keyed);
  assert_int_equal(out.count, 2);
  const float sum[4] = {3, 4, 5, 6}, prod[4] = {2, 4, 6, 8};
  for (size_t k = 0; k < 2; k++) {
    assert_non_null(out.items[k].key);
    const float *want = strcmp(out.items[k].key, "sum") == 0 ? sum : prod;
    assert_true(strcmp(out.items[k].key, "sum") == 0 || strcmp(out.items[k].key, "prod") == 0);
    assert_memory_equal(out.items[k].data, want, sizeof sum);
  }
  pts_torch_outputs_free(&out);
  pts_torch_free(m);
}

static void list_of_tensors(void **state) {
  (void)state;
  struct pts_torch_module *m = load("list_out");
  const int64_t dims[] = {1, 3};
  const int64_t a[3] = {1, -2, 5};
  struct pts_torch_input in = tensor("INPUT__0", PTS_DTYPE_INT64, 2, dims, a, sizeof a);
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, &in, 1, &DEFAULT_OPTS, &out, &err), PTS_OK);
  assert_int_equal(out.count, 2);
  const int64_t x2[3] = {2, -4, 10}, x3[3] = {3, -6, 15};
  assert_memory_equal(out.items[0].data, x2, sizeof x2);
  assert_memory_equal(out.items[1].data, x3, sizeof x3);
  pts_torch_outputs_free(&out);
  pts_torch_free(m);
}

static void dict_input(void **state) {
  (void)state;
  struct pts_torch_module *m = load("dict_in");
  assert_int_equal(pts_torch_arg_count(m), 1);
  assert_int_equal(pts_torch_arg_at(m, 0)->kind, PTS_TORCH_ARG_TENSOR_DICT);
  const int64_t dims[] = {1, 2};
  const float a[2] = {1, 2}, b[2] = {3, 4};
  struct pts_torch_input in[2] = {tensor("b", PTS_DTYPE_FP32, 2, dims, b, sizeof b),
                                  tensor("a", PTS_DTYPE_FP32, 2, dims, a, sizeof a)};
  struct pts_torch_run_opts opts = DEFAULT_OPTS;
  opts.dict_input = true;
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, in, 2, &opts, &out, &err), PTS_OK);
  const float want[2] = {31, 42}; /* a + 10 b */
  assert_memory_equal(out.items[0].data, want, sizeof want);
  pts_torch_outputs_free(&out);
  pts_torch_free(m);
}

static void outputs_never_alias_inputs(void **state) {
  (void)state;
  struct pts_torch_module *m = load("identity");
  const int64_t dims[] = {1, 4};
  const int32_t x[4] = {7, 8, 9, 10};
  struct pts_torch_input in = tensor("INPUT__0", PTS_DTYPE_INT32, 2, dims, x, sizeof x);
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, &in, 1, &DEFAULT_OPTS, &out, &err), PTS_OK);
  assert_int_equal(out.count, 2);
  for (size_t k = 0; k < 2; k++) {
    const char *p = out.items[k].data;
    assert_true(p + out.items[k].byte_size <= (const char *)x || p >= (const char *)(x + 4));
  }
  assert_memory_equal(out.items[0].data, x, sizeof x);
  assert_memory_equal(out.items[1].data, x + 1, 3 * sizeof x[0]);
  pts_torch_outputs_free(&out);
  pts_torch_free(m);
}

static void scalar_output_has_rank_zero(void **state) {
  (void)state;
  struct pts_torch_module *m = load("scalar_out");
  const int64_t dims[] = {3};
  const float x[3] = {1, 2, 3.5f};
  struct pts_torch_input in = tensor("INPUT__0", PTS_DTYPE_FP32, 1, dims, x, sizeof x);
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, &in, 1, &DEFAULT_OPTS, &out, &err), PTS_OK);
  assert_int_equal(out.items[0].ndim, 0);
  assert_float_equal(*(const float *)out.items[0].data, 6.5, 0);
  pts_torch_outputs_free(&out);
  pts_torch_free(m);
}

static void model_errors_become_statuses(void **state) {
  (void)state;
  struct pts_torch_module *m = load("add_sub_fp32");
  const int64_t d1[] = {1, 4}, d2[] = {1, 3};
  const float a[4] = {0}, b[3] = {0};
  struct pts_torch_input in[2] = {tensor("INPUT0", PTS_DTYPE_FP32, 2, d1, a, sizeof a),
                                  tensor("INPUT1", PTS_DTYPE_FP32, 2, d2, b, sizeof b)};
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, in, 2, &DEFAULT_OPTS, &out, &err), PTS_INTERNAL);
  assert_non_null(strstr(err.msg, "PyTorch execute failure"));
  assert_null(strstr(err.msg, "frame #")); /* no C++ backtrace */
  assert_null(out.items);

  /* Too few arguments: TorchScript's own message. */
  assert_int_equal(pts_torch_forward(m, in, 1, &DEFAULT_OPTS, &out, &err), PTS_INTERNAL);
  assert_non_null(strstr(err.msg, "forward"));

  /* UINT32 has no torch type. */
  in[0].dtype = PTS_DTYPE_UINT32;
  assert_int_equal(pts_torch_forward(m, in, 2, &DEFAULT_OPTS, &out, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "UINT32"));
  pts_torch_free(m);
}

static void thread_and_grad_options(void **state) {
  (void)state;
  struct pts_torch_module *m = load("threads");
  const int64_t dims[] = {1, 8};
  const float x[8] = {1, 0, 0, 0, 0, 0, 0, 1};
  struct pts_torch_input in = tensor("INPUT__0", PTS_DTYPE_FP32, 2, dims, x, sizeof x);
  struct pts_torch_run_opts opts = {.inference_mode = false, .intra_op_threads = 1};
  struct pts_torch_outputs out;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_forward(m, &in, 1, &opts, &out, &err), PTS_OK);
  /* x selects rows 0 and 7 of W[i][j] = (8i + j) / 64: (56 + 2j) / 64. */
  const float *y = out.items[0].data;
  for (int j = 0; j < 8; j++) assert_float_equal(y[j], (56.0 + 2 * j) / 64.0, 1e-6);
  pts_torch_outputs_free(&out);
  pts_torch_set_interop_threads(1, "threads");
  pts_torch_set_interop_threads(3, "other"); /* logs a warning, no error */
  pts_torch_free(m);
}

static void bad_files_fail_to_load(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof path, "%s/bad_file/1/model.pt", repo);
  struct pts_device cpu = {.type = PTS_DEVICE_CPU};
  struct pts_torch_module *m = (struct pts_torch_module *)&m;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_load(path, &cpu, &m, &err), PTS_UNAVAILABLE);
  assert_null(m);
  assert_non_null(strstr(err.msg, path));
  assert_null(strstr(err.msg, "frame #"));
  assert_int_equal(pts_torch_load("/nonexistent/model.pt", &cpu, &m, &err), PTS_UNAVAILABLE);
  assert_non_null(strstr(err.msg, "/nonexistent/model.pt"));
}

/* One forward of `stateful` on x = [1, 1]: *y gets its two outputs. */
static enum pts_status stateful_call(struct pts_torch_module *m, bool inference_mode, float y[2],
                                     struct pts_error *err) {
  const int64_t dims[] = {1, 2};
  const float x[2] = {1, 1};
  struct pts_torch_input in = tensor("INPUT__0", PTS_DTYPE_FP32, 2, dims, x, sizeof x);
  struct pts_torch_run_opts opts = DEFAULT_OPTS;
  opts.inference_mode = inference_mode;
  struct pts_torch_outputs out;
  enum pts_status st = pts_torch_forward(m, &in, 1, &opts, &out, err);
  if (st != PTS_OK) return st;
  assert_int_equal(out.count, 1);
  assert_int_equal(out.items[0].byte_size, 2 * sizeof(float));
  memcpy(y, out.items[0].data, 2 * sizeof(float));
  pts_torch_outputs_free(&out);
  return PTS_OK;
}

/* The module's tensors made inference tensors: each counted once, none
 * left over (a second pass finds nothing), and the model still sees one
 * shared weight and a buffer it updates in place. By hand, call k gives
 * (W + k) x + b + k = [3.5 + 3k, 6.5 + 3k]; with the tied weight copied
 * instead of shared it would be [3.5 + k, 6.5 + k]. */
static void inference_tensors_keep_state_and_sharing(void **state) {
  (void)state;
  struct pts_torch_module *m = load("stateful");
  struct pts_error err = {0};
  size_t converted = 0;
  assert_int_equal(pts_torch_inference_tensors(m, &converted, &err), PTS_OK);
  /* lin.weight (also `tied`), lin.bias, calls */
  assert_in_range(converted, 3, 4);
  assert_int_equal(pts_torch_inference_tensors(m, &converted, &err), PTS_OK);
  assert_int_equal(converted, 0);
  for (int k = 1; k <= 3; k++) {
    float y[2];
    assert_int_equal(stateful_call(m, true, y, &err), PTS_OK);
    assert_true(y[0] == 3.5f + 3 * k);
    assert_true(y[1] == 6.5f + 3 * k);
  }
  /* Outside InferenceMode LibTorch refuses in-place updates of inference
   * tensors: why the backend converts only with INFERENCE_MODE on. */
  float y[2];
  assert_int_not_equal(stateful_call(m, false, y, &err), PTS_OK);
  assert_non_null(strstr(err.msg, "nference tensor"));
  pts_torch_free(m);

  /* Not converted, the same model runs either way. */
  m = load("stateful");
  assert_int_equal(stateful_call(m, false, y, &err), PTS_OK);
  assert_true(y[0] == 6.5f && y[1] == 9.5f);
  assert_int_equal(stateful_call(m, true, y, &err), PTS_OK);
  assert_true(y[0] == 9.5f && y[1] == 12.5f);
  pts_torch_free(m);
}

static void probe_reports_this_cpu_build(void **state) {
  (void)state;
  struct pts_device_caps caps;
  pts_torch_probe(&caps);
  /* A CPU wheel (CI's); a CUDA build skips. */
  if (caps.built_with_cuda) skip();
  assert_false(caps.cuda_available);
  assert_int_equal(caps.cuda_device_count, 0);
  assert_false(caps.mps_available);
  assert_non_null(pts_torch_version());
}

/* Gathering on the device needs a module on CUDA: a CPU module (and a
 * build without CUDA) says so instead of touching the parts. */
static void gather_device_refuses_a_cpu_module(void **state) {
  (void)state;
  struct pts_torch_module *m = load("add_sub_fp32");
  struct pts_torch_part parts[2] = {{(const void *)0x1000, 8, 0}, {(const void *)0x2000, 8, 0}};
  void *out = (void *)1;
  struct pts_error err = {0};
  assert_int_equal(pts_torch_gather_device(m, 0, 0, parts, 2, 16, &out, &err), PTS_UNSUPPORTED);
  assert_null(out);
  assert_non_null(strstr(err.msg, "gather"));
  pts_torch_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(add_sub_fp32),
      cmocka_unit_test(bf16_round_trip),
      cmocka_unit_test(strings_upper),
      cmocka_unit_test(dict_output_is_keyed),
      cmocka_unit_test(list_of_tensors),
      cmocka_unit_test(dict_input),
      cmocka_unit_test(outputs_never_alias_inputs),
      cmocka_unit_test(scalar_output_has_rank_zero),
      cmocka_unit_test(forward_in_two_halves),
      cmocka_unit_test(model_errors_become_statuses),
      cmocka_unit_test(thread_and_grad_options),
      cmocka_unit_test(bad_files_fail_to_load),
      cmocka_unit_test(inference_tensors_keep_state_and_sharing),
      cmocka_unit_test(probe_reports_this_cpu_build),
      cmocka_unit_test(gather_device_refuses_a_cpu_module),
  };
  return cmocka_run_group_tests(tests, generate, cleanup);
}
