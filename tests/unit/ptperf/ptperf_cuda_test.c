/* tests/unit/ptperf/ptperf_cuda_test.c — the CUDA runtime loaded at run
 * time (ptperf/lib/cuda.h), against the build's stand-in library
 * (fake_cudart.c): the calls go through, and every way of failing names
 * what failed — a library that is not there, one without the functions,
 * no GPU, a GPU index past the last. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ptperf/lib/cuda.h"

static void has(const char *msg, const char *needle) {
  if (!strstr(msg, needle)) fail_msg("message '%s' lacks '%s'", msg, needle);
}

static void calls_go_through(void **state) {
  (void)state;
  setenv("PTPERF_CUDART", PTS_FAKE_CUDART, 1);
  unsetenv("FAKE_CUDART_DEVICES");
  struct ptperf_cuda *c;
  struct pts_error err;
  assert_int_equal(ptperf_cuda_open(0, &c, &err), PTS_OK);
  assert_string_equal(ptperf_cuda_library(c), PTS_FAKE_CUDART);
  void *dev;
  assert_int_equal(ptperf_cuda_alloc(c, 16, &dev, &err), PTS_OK);
  assert_int_equal(ptperf_cuda_upload(c, dev, "0123456789abcdef", 16, &err), PTS_OK);
  /* The fake's device memory is host memory: the copy is readable. */
  assert_memory_equal(dev, "0123456789abcdef", 16);
  unsigned char h[PTPERF_CUDA_IPC_HANDLE_SIZE];
  assert_int_equal(ptperf_cuda_ipc_handle(c, dev, h, &err), PTS_OK);
  uint64_t at;
  memcpy(&at, h, sizeof at);
  assert_true(at == (uint64_t)(uintptr_t)dev);
  assert_int_equal(h[63], 0xab);
  ptperf_cuda_free(c, dev);
  ptperf_cuda_close(c);
  ptperf_cuda_close(NULL);
}

static void missing_library(void **state) {
  (void)state;
  setenv("PTPERF_CUDART", "/nonexistent/libcudart.so.99", 1);
  struct ptperf_cuda *c = (struct ptperf_cuda *)&c;
  struct pts_error err;
  assert_int_equal(ptperf_cuda_open(0, &c, &err), PTS_UNAVAILABLE);
  assert_null(c);
  has(err.msg, "can not load the CUDA runtime PTPERF_CUDART=/nonexistent/libcudart.so.99: ");
  has(err.msg, "No such file");
}

static void library_without_the_functions(void **state) {
  (void)state;
  setenv("PTPERF_CUDART", "libm.so.6", 1);
  struct ptperf_cuda *c;
  struct pts_error err;
  assert_int_equal(ptperf_cuda_open(0, &c, &err), PTS_UNAVAILABLE);
  has(err.msg, "the CUDA runtime libm.so.6 has no cudaSetDevice");
}

static void missing_device(void **state) {
  (void)state;
  setenv("PTPERF_CUDART", PTS_FAKE_CUDART, 1);
  struct ptperf_cuda *c;
  struct pts_error err;
  setenv("FAKE_CUDART_DEVICES", "0", 1);
  assert_int_equal(ptperf_cuda_open(0, &c, &err), PTS_UNAVAILABLE);
  has(err.msg, "CUDA device 0 (runtime " PTS_FAKE_CUDART
               "): cudaSetDevice: no CUDA-capable device is detected");
  setenv("FAKE_CUDART_DEVICES", "2", 1);
  assert_int_equal(ptperf_cuda_open(2, &c, &err), PTS_UNAVAILABLE);
  has(err.msg, "CUDA device 2 ");
  has(err.msg, "invalid device ordinal");
  assert_int_equal(ptperf_cuda_open(1, &c, &err), PTS_OK);
  ptperf_cuda_close(c);
  unsetenv("FAKE_CUDART_DEVICES");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(calls_go_through),
      cmocka_unit_test(missing_library),
      cmocka_unit_test(library_without_the_functions),
      cmocka_unit_test(missing_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
