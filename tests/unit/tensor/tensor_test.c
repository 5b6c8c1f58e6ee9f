/* tests/unit/tensor/tensor_test.c — shape arithmetic and tensor views. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/alloc.h"
#include "tensor/tensor.h"

static void counts_and_sizes(void **state) {
  (void)state;
  struct pts_shape s = {4, {1, 3, 224, 224}};
  assert_int_equal(pts_shape_count(&s), 150528);        /* 3*224*224 */
  assert_int_equal(pts_shape_byte_size(PTS_DTYPE_FP32, &s), 602112);
  assert_int_equal(pts_shape_byte_size(PTS_DTYPE_BYTES, &s), -1);
  struct pts_shape scalar = {0, {0}};
  assert_int_equal(pts_shape_count(&scalar), 1);
  struct pts_shape empty = {2, {0, 5}};
  assert_int_equal(pts_shape_count(&empty), 0);
  struct pts_shape neg = {1, {-1}};
  assert_int_equal(pts_shape_count(&neg), -1);
  /* 2^62 * 4 overflows int64: must report, not wrap. */
  struct pts_shape huge = {2, {INT64_C(1) << 62, 4}};
  assert_int_equal(pts_shape_count(&huge), -1);
  struct pts_shape big = {1, {INT64_C(1) << 62}};
  assert_int_equal(pts_shape_byte_size(PTS_DTYPE_FP64, &big), -1);
}

static void formats_shapes(void **state) {
  (void)state;
  char out[64];
  struct pts_shape s = {2, {-1, 16}};
  pts_shape_format(&s, out, sizeof out);
  assert_string_equal(out, "[-1,16]");
  struct pts_shape e = {0, {0}};
  pts_shape_format(&e, out, sizeof out);
  assert_string_equal(out, "[]");
  char tiny[4];
  pts_shape_format(&s, tiny, sizeof tiny);
  assert_int_equal(strlen(tiny), 3); /* truncated but terminated */
}

static void builds_a_batched_shape_from_dims(void **state) {
  (void)state;
  const int64_t dims[] = {3, -1, 224};
  struct pts_shape s;
  assert_true(pts_shape_set(&s, dims, 3));
  assert_true(pts_shape_prepend(&s, 8));
  struct pts_shape want = {4, {8, 3, -1, 224}};
  assert_true(pts_shape_equal(&s, &want));
  /* No dims at all: the batch dimension alone. */
  assert_true(pts_shape_set(&s, NULL, 0));
  assert_true(pts_shape_prepend(&s, -1));
  assert_int_equal(s.ndim, 1);
  assert_int_equal(s.dims[0], -1);
}

static void refuses_a_shape_over_the_rank_limit(void **state) {
  (void)state;
  int64_t many[PTS_TENSOR_MAX_DIMS + 1];
  for (int i = 0; i <= PTS_TENSOR_MAX_DIMS; i++) many[i] = i + 1;
  struct pts_shape s = {1, {7}};
  assert_false(pts_shape_set(&s, many, PTS_TENSOR_MAX_DIMS + 1));
  assert_int_equal(s.ndim, 1); /* left alone */
  assert_int_equal(s.dims[0], 7);
  /* At the limit the dims fit, and the batch dimension does not: no dim is
   * dropped to make room. */
  assert_true(pts_shape_set(&s, many, PTS_TENSOR_MAX_DIMS));
  assert_false(pts_shape_prepend(&s, 2));
  assert_int_equal(s.ndim, PTS_TENSOR_MAX_DIMS);
  assert_int_equal(s.dims[0], 1);
  assert_int_equal(s.dims[PTS_TENSOR_MAX_DIMS - 1], PTS_TENSOR_MAX_DIMS);
}

static void views_share_the_buffer(void **state) {
  (void)state;
  struct pts_buf *b = pts_buf_new(8);
  assert_non_null(b);
  memcpy(b->data, "abcdefgh", 8);
  struct pts_tensor t = {.name = pts_strdup("X"), .dtype = PTS_DTYPE_UINT8,
                         .shape = {1, {8}}, .data = b->data, .byte_size = 8, .buf = b};
  struct pts_tensor v;
  struct pts_error err;
  assert_int_equal(pts_tensor_copy_view(&v, &t, &err), PTS_OK);
  assert_int_equal(atomic_load(&b->refs), 2);
  assert_ptr_equal(v.data, t.data);
  assert_string_equal(v.name, "X");
  assert_ptr_not_equal(v.name, t.name);
  pts_tensor_clear(&t);
  assert_int_equal(atomic_load(&b->refs), 1);
  assert_memory_equal(v.data, "abcdefgh", 8); /* still alive through the view */
  pts_tensor_clear(&v);
  assert_null(v.buf);
}

static void copy_view_reports_allocation_failure(void **state) {
  (void)state;
  struct pts_tensor t = {.name = "X", .dtype = PTS_DTYPE_UINT8, .shape = {1, {1}}};
  struct pts_tensor v;
  struct pts_error err;
  pts_alloc_fail_after(0);
  enum pts_status st = pts_tensor_copy_view(&v, &t, &err);
  pts_alloc_fail_after(-1);
  assert_int_equal(st, PTS_NOMEM);
  assert_null(v.name);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(counts_and_sizes),
      cmocka_unit_test(builds_a_batched_shape_from_dims),
      cmocka_unit_test(refuses_a_shape_over_the_rank_limit),
      cmocka_unit_test(formats_shapes),
      cmocka_unit_test(views_share_the_buffer),
      cmocka_unit_test(copy_view_reports_allocation_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
