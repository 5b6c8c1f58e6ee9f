/* tests/unit/pytorch/device_test.c — the device policy (device.h) over faked
 * capability sets: the CUDA and MPS branches run here without either. The
 * expected devices are the policy written in device.h and
 * docs/pytorch-backend.md, worked out by hand per case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "backends/pytorch/device.h"

static const struct pts_device_caps CPU_ONLY = {0};
static const struct pts_device_caps CUDA_2 = {.built_with_cuda = true,
                                              .cuda_available = true,
                                              .cuda_device_count = 2};
static const struct pts_device_caps CUDA_NO_DEVICE = {.built_with_cuda = true};
static const struct pts_device_caps MAC = {.built_with_mps = true, .mps_available = true};
static const struct pts_device_caps MAC_NO_MPS = {.built_with_mps = true};

struct result {
  enum pts_status st;
  struct pts_device dev;
  char device[32];
  char warning[256];
  struct pts_error err;
};

static struct result choose(const struct pts_device_caps *caps, enum pts_device_kind kind,
                            int gpu_id, const char *const *acc, size_t n_acc) {
  struct result r;
  memset(&r, 0, sizeof r);
  struct pts_device_request req = {
      .kind = kind, .gpu_id = gpu_id, .accelerators = acc, .n_accelerators = n_acc};
  strcpy(r.warning, "untouched");
  r.st = pts_device_choose(caps, &req, &r.dev, r.warning, sizeof r.warning, &r.err);
  pts_device_format(&r.dev, r.device, sizeof r.device);
  return r;
}

static void kind_cpu_is_cpu_everywhere(void **state) {
  (void)state;
  const struct pts_device_caps *all[] = {&CPU_ONLY, &CUDA_2, &MAC};
  for (size_t i = 0; i < 3; i++) {
    struct result r = choose(all[i], PTS_DEVICE_KIND_CPU, -1, NULL, 0);
    assert_int_equal(r.st, PTS_OK);
    assert_string_equal(r.device, "cpu");
    assert_string_equal(r.warning, "");
    assert_false(r.dev.keep_placement);
  }
}

static void kind_gpu_on_cuda_uses_the_gpu_id(void **state) {
  (void)state;
  struct result r = choose(&CUDA_2, PTS_DEVICE_KIND_GPU, 1, NULL, 0);
  assert_int_equal(r.st, PTS_OK);
  assert_string_equal(r.device, "cuda:1");
  assert_string_equal(r.warning, "");
  r = choose(&CUDA_2, PTS_DEVICE_KIND_GPU, -1, NULL, 0); /* no gpus listed: 0 */
  assert_string_equal(r.device, "cuda:0");
}

static void kind_gpu_with_missing_cuda_device_is_an_error(void **state) {
  (void)state;
  struct result r = choose(&CUDA_2, PTS_DEVICE_KIND_GPU, 2, NULL, 0);
  assert_int_equal(r.st, PTS_INVALID_ARG);
  assert_non_null(strstr(r.err.msg, "GPU 2"));
  assert_non_null(strstr(r.err.msg, "2 CUDA device"));
}

static void kind_gpu_on_mac_is_mps(void **state) {
  (void)state;
  struct result r = choose(&MAC, PTS_DEVICE_KIND_GPU, 0, NULL, 0);
  assert_int_equal(r.st, PTS_OK);
  assert_string_equal(r.device, "mps");
  assert_string_equal(r.warning, "");
}

static void kind_gpu_without_gpu_falls_back_with_reason(void **state) {
  (void)state;
  struct result r = choose(&CPU_ONLY, PTS_DEVICE_KIND_GPU, 0, NULL, 0);
  assert_int_equal(r.st, PTS_OK);
  assert_string_equal(r.device, "cpu");
  assert_non_null(strstr(r.warning, "built without CUDA and MPS"));
  assert_non_null(strstr(r.warning, "falling back to cpu"));

  r = choose(&CUDA_NO_DEVICE, PTS_DEVICE_KIND_GPU, 0, NULL, 0);
  assert_string_equal(r.device, "cpu");
  assert_non_null(strstr(r.warning, "no CUDA device is available"));

  r = choose(&MAC_NO_MPS, PTS_DEVICE_KIND_GPU, 0, NULL, 0);
  assert_string_equal(r.device, "cpu");
  assert_non_null(strstr(r.warning, "MPS is not available"));
}

static void kind_auto_prefers_gpu_and_falls_back_quietly(void **state) {
  (void)state;
  struct result r = choose(&CUDA_2, PTS_DEVICE_KIND_AUTO, -1, NULL, 0);
  assert_string_equal(r.device, "cuda:0");
  r = choose(&MAC, PTS_DEVICE_KIND_AUTO, -1, NULL, 0);
  assert_string_equal(r.device, "mps");
  r = choose(&CPU_ONLY, PTS_DEVICE_KIND_AUTO, -1, NULL, 0);
  assert_int_equal(r.st, PTS_OK);
  assert_string_equal(r.device, "cpu");
  assert_string_equal(r.warning, "");
  /* A listed GPU that does not exist: AUTO means cpu is fine. */
  r = choose(&CUDA_2, PTS_DEVICE_KIND_AUTO, 5, NULL, 0);
  assert_int_equal(r.st, PTS_OK);
  assert_string_equal(r.device, "cpu");
}

static void mps_accelerator(void **state) {
  (void)state;
  const char *mps[] = {"mps"};
  struct result r = choose(&MAC, PTS_DEVICE_KIND_GPU, 0, mps, 1);
  assert_string_equal(r.device, "mps");
  assert_string_equal(r.warning, "");

  /* On a CUDA host the GPU kind still gets a GPU, with a warning. */
  r = choose(&CUDA_2, PTS_DEVICE_KIND_GPU, 1, mps, 1);
  assert_int_equal(r.st, PTS_OK);
  assert_string_equal(r.device, "cuda:1");
  assert_non_null(strstr(r.warning, "'mps' is not usable"));
  assert_non_null(strstr(r.warning, "built without MPS"));
  assert_non_null(strstr(r.warning, "using cuda:1"));

  r = choose(&CPU_ONLY, PTS_DEVICE_KIND_GPU, 0, mps, 1);
  assert_string_equal(r.device, "cpu");
  assert_non_null(strstr(r.warning, "'mps' is not usable"));
  assert_non_null(strstr(r.warning, "falling back to cpu"));

  /* KIND_CPU is explicit: the accelerator does not move it. */
  r = choose(&MAC, PTS_DEVICE_KIND_CPU, 0, mps, 1);
  assert_string_equal(r.device, "cpu");
}

static void accelerators_are_tried_in_order(void **state) {
  (void)state;
  const char *cuda_then_mps[] = {"cuda", "MPS"};
  struct result r = choose(&MAC, PTS_DEVICE_KIND_GPU, 0, cuda_then_mps, 2);
  assert_string_equal(r.device, "mps");
  /* The first usable one wins, so nothing to warn about. */
  assert_string_equal(r.warning, "");
  r = choose(&CUDA_2, PTS_DEVICE_KIND_GPU, 0, cuda_then_mps, 2);
  assert_string_equal(r.device, "cuda:0");
}

static void unknown_accelerator_is_rejected(void **state) {
  (void)state;
  const char *trt[] = {"tensorrt"};
  struct result r = choose(&CUDA_2, PTS_DEVICE_KIND_GPU, 0, trt, 1);
  assert_int_equal(r.st, PTS_INVALID_ARG);
  assert_non_null(strstr(r.err.msg, "gpu_execution_accelerator 'tensorrt'"));
  r = choose(&CPU_ONLY, PTS_DEVICE_KIND_CPU, 0, trt, 1);
  assert_int_equal(r.st, PTS_INVALID_ARG);
}

static void kind_model_keeps_placement(void **state) {
  (void)state;
  struct result r = choose(&CUDA_2, PTS_DEVICE_KIND_MODEL, -1, NULL, 0);
  assert_int_equal(r.st, PTS_OK);
  assert_true(r.dev.keep_placement);
  assert_string_equal(r.device, "cpu"); /* where inputs are staged */
}

static void unknown_kind_is_rejected(void **state) {
  (void)state;
  struct result r = choose(&CPU_ONLY, (enum pts_device_kind)7, -1, NULL, 0);
  assert_int_equal(r.st, PTS_INVALID_ARG);
  assert_non_null(strstr(r.err.msg, "kind 7"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(kind_cpu_is_cpu_everywhere),
      cmocka_unit_test(kind_gpu_on_cuda_uses_the_gpu_id),
      cmocka_unit_test(kind_gpu_with_missing_cuda_device_is_an_error),
      cmocka_unit_test(kind_gpu_on_mac_is_mps),
      cmocka_unit_test(kind_gpu_without_gpu_falls_back_with_reason),
      cmocka_unit_test(kind_auto_prefers_gpu_and_falls_back_quietly),
      cmocka_unit_test(mps_accelerator),
      cmocka_unit_test(accelerators_are_tried_in_order),
      cmocka_unit_test(unknown_accelerator_is_rejected),
      cmocka_unit_test(kind_model_keeps_placement),
      cmocka_unit_test(unknown_kind_is_rejected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
