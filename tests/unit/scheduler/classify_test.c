/* tests/unit/scheduler/classify_test.c — the classification extension
 * (classify.h, protocol-facts §1.9): top-k per batch item, highest first,
 * "value:index[:label]" with the value printed as std::to_string prints the
 * output's type, label files read line by line. Every expected string is
 * written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "scheduler/classify.h"
#include "tensor/bytes.h"

/* A tensor over `data` (borrowed), shape dims[0..ndim). */
static struct pts_tensor tensor(enum pts_dtype t, const void *data, size_t bytes, int ndim,
                                const int64_t *dims) {
  struct pts_tensor x;
  memset(&x, 0, sizeof x);
  x.name = "OUT";
  x.dtype = t;
  x.shape.ndim = ndim;
  for (int i = 0; i < ndim; i++) x.shape.dims[i] = dims[i];
  x.data = data;
  x.byte_size = bytes;
  return x;
}

/* The result's elements, in order, must be `want` (NULL-terminated). */
static void expect_strings(const struct pts_tensor *r, const char *const *want) {
  assert_int_equal(r->dtype, PTS_DTYPE_BYTES);
  size_t off = 0, i = 0;
  const char *elem;
  uint32_t len;
  while (pts_bytes_next(r->data, r->byte_size, &off, &elem, &len) == 1) {
    assert_non_null(want[i]);
    if (len != strlen(want[i]) || memcmp(elem, want[i], len) != 0)
      fail_msg("element %zu: '%.*s', want '%s'", i, (int)len, elem, want[i]);
    i++;
  }
  assert_null(want[i]);
  assert_int_equal(off, r->byte_size);
}

static struct pts_labels labels_of(const char *const *names, size_t n) {
  struct pts_labels l = {.n = n, .names = pts_calloc(n, sizeof(char *))};
  for (size_t i = 0; i < n; i++) l.names[i] = pts_strdup(names[i]);
  return l;
}

static void fp32_batched_with_labels(void **state) {
  (void)state;
  const float v[] = {0.1f, 0.7f, 0.2f, 0.0f, /* row 1 */ 3.3f, -1.0f, 3.5f, 0.25f};
  const int64_t dims[] = {2, 4};
  struct pts_tensor out = tensor(PTS_DTYPE_FP32, v, sizeof v, 2, dims);
  static const char *const names[] = {"cat", "dog", "bird"}; /* class 3 has no label */
  struct pts_labels labels = labels_of(names, 3);
  struct pts_tensor r;
  struct pts_error err;
  assert_int_equal(pts_classify(&out, true, 3, &labels, &r, &err), PTS_OK);
  assert_string_equal(r.name, "OUT");
  assert_int_equal(r.shape.ndim, 2);
  assert_int_equal(r.shape.dims[0], 2);
  assert_int_equal(r.shape.dims[1], 3);
  /* %f of the float widened to double: 0.7f is 0.699999988079071... */
  static const char *const want[] = {"0.700000:1:dog", "0.200000:2:bird", "0.100000:0:cat",
                                     "3.500000:2:bird", "3.300000:0:cat", "0.250000:3", NULL};
  expect_strings(&r, want);
  pts_tensor_clear(&r);
  pts_labels_clear(&labels);
  assert_int_equal(labels.n, 0);
}

static void k_beyond_the_classes_and_not_batched(void **state) {
  (void)state;
  const double v[] = {1.5, -2.0, 1.5, 1e300, -0.0};
  const int64_t dims[] = {5};
  struct pts_tensor out = tensor(PTS_DTYPE_FP64, v, sizeof v, 1, dims);
  struct pts_tensor r;
  struct pts_error err;
  /* Not batched: the whole output is one item; k = 10 > 5 gives 5. Ties
   * (the two 1.5) keep the lower index first. */
  assert_int_equal(pts_classify(&out, false, 10, NULL, &r, &err), PTS_OK);
  assert_int_equal(r.shape.ndim, 1);
  assert_int_equal(r.shape.dims[0], 5);
  char big[400];
  snprintf(big, sizeof big, "%f:3", 1e300);
  const char *want[] = {big, "1.500000:0", "1.500000:2", "-0.000000:4", "-2.000000:1", NULL};
  expect_strings(&r, want);
  pts_tensor_clear(&r);
}

static void integers_print_as_integers(void **state) {
  (void)state;
  struct pts_tensor r;
  struct pts_error err;
  const int32_t i32[] = {-5, 7, -2147483647 - 1, 2147483647};
  const int64_t d1x4[] = {1, 4};
  struct pts_tensor out = tensor(PTS_DTYPE_INT32, i32, sizeof i32, 2, d1x4);
  assert_int_equal(pts_classify(&out, true, 4, NULL, &r, &err), PTS_OK);
  static const char *const want32[] = {"2147483647:3", "7:1", "-5:0", "-2147483648:2", NULL};
  expect_strings(&r, want32);
  pts_tensor_clear(&r);

  const uint64_t u64[] = {1, UINT64_MAX, 0, 1ull << 63};
  out = tensor(PTS_DTYPE_UINT64, u64, sizeof u64, 2, d1x4);
  assert_int_equal(pts_classify(&out, true, 2, NULL, &r, &err), PTS_OK);
  static const char *const want64[] = {"18446744073709551615:1", "9223372036854775808:3", NULL};
  expect_strings(&r, want64);
  pts_tensor_clear(&r);

  /* Compared in their own type: INT8 -1 is below 0, UINT8 255 above 0. */
  const int8_t i8[] = {-1, 0, 5, -128};
  out = tensor(PTS_DTYPE_INT8, i8, sizeof i8, 2, d1x4);
  assert_int_equal(pts_classify(&out, true, 2, NULL, &r, &err), PTS_OK);
  static const char *const want8[] = {"5:2", "0:1", NULL};
  expect_strings(&r, want8);
  pts_tensor_clear(&r);
  const uint8_t u8[] = {255, 0, 5, 128};
  out = tensor(PTS_DTYPE_UINT8, u8, sizeof u8, 2, d1x4);
  assert_int_equal(pts_classify(&out, true, 1, NULL, &r, &err), PTS_OK);
  static const char *const wantu8[] = {"255:0", NULL};
  expect_strings(&r, wantu8);
  pts_tensor_clear(&r);
}

static void nan_never_wins(void **state) {
  (void)state;
  const float v[] = {NAN, -1.0f, NAN, -3.0f};
  const int64_t dims[] = {1, 4};
  struct pts_tensor out = tensor(PTS_DTYPE_FP32, v, sizeof v, 2, dims);
  struct pts_tensor r;
  struct pts_error err;
  assert_int_equal(pts_classify(&out, true, 3, NULL, &r, &err), PTS_OK);
  static const char *const want[] = {"-1.000000:1", "-3.000000:3", "nan:0", NULL};
  expect_strings(&r, want);
  pts_tensor_clear(&r);
}

static void unsupported_types(void **state) {
  (void)state;
  const uint16_t h[] = {1, 2};
  const int64_t dims[] = {1, 2};
  static const enum pts_dtype bad[] = {PTS_DTYPE_BOOL, PTS_DTYPE_FP16, PTS_DTYPE_BF16,
                                       PTS_DTYPE_BYTES};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_false(pts_classify_supported(bad[i]));
    struct pts_tensor out = tensor(bad[i], h, sizeof h, 2, dims);
    struct pts_tensor r;
    struct pts_error err;
    assert_int_equal(pts_classify(&out, true, 1, NULL, &r, &err), PTS_INVALID_ARG);
    assert_non_null(strstr(err.msg, "output 'OUT'"));
    assert_non_null(strstr(err.msg, pts_dtype_name(bad[i])));
    assert_null(r.buf);
  }
  assert_true(pts_classify_supported(PTS_DTYPE_FP32));
  assert_true(pts_classify_supported(PTS_DTYPE_UINT16));
}

static void out_of_memory(void **state) {
  (void)state;
  const float v[] = {0.5f, 0.25f};
  const int64_t dims[] = {1, 2};
  struct pts_tensor out = tensor(PTS_DTYPE_FP32, v, sizeof v, 2, dims);
  for (long n = 0;; n++) {
    struct pts_tensor r;
    struct pts_error err;
    pts_alloc_fail_after(n);
    enum pts_status st = pts_classify(&out, true, 2, NULL, &r, &err);
    pts_alloc_fail_after(-1);
    if (st == PTS_OK) {
      pts_tensor_clear(&r);
      assert_true(n > 0);
      break;
    }
    assert_int_equal(st, PTS_NOMEM);
    assert_non_null(strstr(err.msg, "classifying output 'OUT'"));
    assert_null(r.name);
    assert_null(r.buf);
  }
}

static char *write_temp(const char *text) {
  static char path[64];
  strcpy(path, "/tmp/pts_labels_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  size_t n = strlen(text);
  assert_int_equal(write(fd, text, n), (ssize_t)n);
  close(fd);
  return path;
}

static void label_files(void **state) {
  (void)state;
  struct pts_labels l;
  struct pts_error err;
  /* \r\n endings, an empty line (an empty label), no newline at the end */
  char *path = write_temp("cat\r\ndog\n\nfish");
  assert_int_equal(pts_labels_load(path, &l, &err), PTS_OK);
  unlink(path);
  assert_int_equal(l.n, 4);
  assert_string_equal(l.names[0], "cat");
  assert_string_equal(l.names[1], "dog");
  assert_string_equal(l.names[2], "");
  assert_string_equal(l.names[3], "fish");
  pts_labels_clear(&l);

  path = write_temp("");
  assert_int_equal(pts_labels_load(path, &l, &err), PTS_OK);
  unlink(path);
  assert_int_equal(l.n, 0);
  pts_labels_clear(&l);

  assert_int_equal(pts_labels_load("/nonexistent/labels.txt", &l, &err), PTS_NOT_FOUND);
  assert_non_null(strstr(err.msg, "/nonexistent/labels.txt"));
  assert_int_equal(l.n, 0);
  assert_int_equal(pts_labels_load("/tmp", &l, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "not a regular file"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fp32_batched_with_labels),
      cmocka_unit_test(k_beyond_the_classes_and_not_batched),
      cmocka_unit_test(integers_print_as_integers),
      cmocka_unit_test(nan_never_wins),
      cmocka_unit_test(unsupported_types),
      cmocka_unit_test(out_of_memory),
      cmocka_unit_test(label_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
