/* tests/unit/scheduler/assemble_test.c — batch assembly (assemble.h) and
 * the statistics accumulator (stats.h): one request is a view, several are
 * one contiguous copy; output slices point into the batch buffer and hold
 * references; BYTES outputs are split by each request's element count; the
 * counters follow Triton's rules (protocol-facts §1.11), worked by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "scheduler/assemble.h"
#include "scheduler/stats.h"
#include "tensor/bytes.h"

/* A request with one INT32 input "X" of shape [rows, 2] holding base, base+1, ... */
static struct pts_infer_request *request(int64_t rows, int32_t base) {
  struct pts_infer_request *r = pts_infer_request_new();
  r->inputs = pts_calloc(1, sizeof *r->inputs);
  r->n_inputs = 1;
  struct pts_tensor *t = &r->inputs[0];
  t->name = pts_strdup("X");
  t->dtype = PTS_DTYPE_INT32;
  t->shape.ndim = 2;
  t->shape.dims[0] = rows;
  t->shape.dims[1] = 2;
  t->byte_size = (size_t)rows * 2 * sizeof(int32_t);
  t->buf = pts_buf_new(t->byte_size);
  for (int64_t i = 0; i < rows * 2; i++) ((int32_t *)t->buf->data)[i] = base + (int32_t)i;
  t->data = t->buf->data;
  return r;
}

static void gather_one_is_a_view_many_one_copy(void **state) {
  (void)state;
  struct pts_infer_request *reqs[3] = {request(1, 0), request(2, 100), request(1, 200)};
  struct pts_tensor t = {0};
  struct pts_buf *owned = (struct pts_buf *)1;
  struct pts_error err;
  assert_int_equal(pts_batch_gather("X", reqs, 1, &t, &owned, &err), PTS_OK);
  assert_null(owned);
  assert_ptr_equal(t.data, reqs[0]->inputs[0].data);
  assert_int_equal(atomic_load(&reqs[0]->inputs[0].buf->refs), 1); /* no reference taken */

  memset(&t, 0, sizeof t);
  assert_int_equal(pts_batch_gather("X", reqs, 3, &t, &owned, &err), PTS_OK);
  assert_non_null(owned);
  assert_ptr_equal(t.buf, owned);
  assert_int_equal(t.shape.ndim, 2);
  assert_int_equal(t.shape.dims[0], 4);
  assert_int_equal(t.shape.dims[1], 2);
  assert_int_equal(t.byte_size, 32);
  const int32_t want[] = {0, 1, 100, 101, 102, 103, 200, 201};
  assert_memory_equal(t.data, want, sizeof want);
  pts_buf_release(owned);

  /* An input nobody sent (optional) stays empty. */
  memset(&t, 0, sizeof t);
  assert_int_equal(pts_batch_gather("Y", reqs, 3, &t, &owned, &err), PTS_OK);
  assert_null(t.data);
  assert_null(owned);
  for (int i = 0; i < 3; i++) pts_infer_request_free(reqs[i]);
}

/* Gathering into memory the caller provides (a backend's staging buffer):
 * the same bytes, the caller's memory kind, no buffer of its own. */
static void gather_into_caller_memory(void **state) {
  (void)state;
  struct pts_infer_request *reqs[3] = {request(1, 0), request(2, 100), request(1, 200)};
  struct pts_error err;
  size_t bytes = 0;
  assert_int_equal(pts_batch_gather_size("X", reqs, 3, &bytes, &err), PTS_OK);
  assert_int_equal(bytes, 32);
  assert_int_equal(pts_batch_gather_size("Y", reqs, 3, &bytes, &err), PTS_OK);
  assert_int_equal(bytes, 0);
  unsigned char into[40];
  memset(into, 0xee, sizeof into);
  struct pts_tensor t = {0};
  assert_int_equal(pts_batch_gather_into("X", reqs, 3, into, 32, PTS_MEM_PINNED, &t, &err), PTS_OK);
  assert_ptr_equal(t.data, into);
  assert_null(t.buf);
  assert_int_equal(t.mem, PTS_MEM_PINNED);
  assert_int_equal(t.shape.dims[0], 4);
  assert_int_equal(t.byte_size, 32);
  const int32_t want[] = {0, 1, 100, 101, 102, 103, 200, 201};
  assert_memory_equal(into, want, sizeof want);
  assert_int_equal(into[32], 0xee); /* nothing past the gathered bytes */
  /* one request is copied too (the backend asked for its memory) */
  memset(&t, 0, sizeof t);
  assert_int_equal(pts_batch_gather_into("X", reqs + 1, 1, into, 32, PTS_MEM_HOST, &t, &err),
                   PTS_OK);
  assert_int_equal(t.shape.dims[0], 2);
  assert_memory_equal(into, want + 2, 16);
  /* too little room, and device memory, are refused */
  assert_int_equal(pts_batch_gather_into("X", reqs, 3, into, 31, PTS_MEM_PINNED, &t, &err),
                   PTS_INTERNAL);
  assert_non_null(strstr(err.msg, "needs 32 bytes, the staging buffer holds 31"));
  reqs[2]->inputs[0].mem = PTS_MEM_DEVICE;
  assert_int_equal(pts_batch_gather_into("X", reqs, 3, into, 32, PTS_MEM_PINNED, &t, &err),
                   PTS_INTERNAL);
  assert_non_null(strstr(err.msg, "device memory"));
  for (int i = 0; i < 3; i++) pts_infer_request_free(reqs[i]);
}

/* A large gather (past the parallel-copy threshold) with rows of an odd
 * size, so chunks of the copy pool straddle request boundaries. */
static void large_gather_is_exact(void **state) {
  (void)state;
  enum { N = 5, ROWS = 331 * 1024 }; /* 5 × 2.6 MB, INT32 pairs */
  struct pts_infer_request *reqs[N];
  for (int i = 0; i < N; i++) reqs[i] = request(ROWS + i, 1000000 * i);
  struct pts_tensor t = {0};
  struct pts_buf *owned;
  struct pts_error err;
  assert_int_equal(pts_batch_gather("X", reqs, N, &t, &owned, &err), PTS_OK);
  const int32_t *v = t.data;
  size_t at = 0;
  for (int i = 0; i < N; i++)
    for (int64_t k = 0; k < (int64_t)(ROWS + i) * 2; k++, at++)
      if (v[at] != 1000000 * i + (int32_t)k) fail_msg("request %d element %lld", i, (long long)k);
  assert_int_equal(at * 4, t.byte_size);
  pts_buf_release(owned);
  for (int i = 0; i < N; i++) pts_infer_request_free(reqs[i]);
}

/* Device memory: the parts are listed for the backend (each request's
 * address, size and device, in order), and the gathered result is
 * described as device memory of all the rows; the host gathers refuse it. */
static void device_parts_and_gathered(void **state) {
  (void)state;
  struct pts_infer_request *reqs[3] = {request(1, 0), request(2, 100), request(1, 200)};
  for (int i = 0; i < 3; i++) {
    reqs[i]->inputs[0].mem = PTS_MEM_DEVICE; /* host bytes flagged: nothing reads them here */
    reqs[i]->inputs[0].device = 1;
  }
  struct pts_device_part parts[3];
  size_t total = 0;
  struct pts_error err;
  assert_int_equal(pts_batch_device_parts("X", reqs, 3, parts, &total, &err), PTS_OK);
  assert_int_equal(total, 32);
  for (int i = 0; i < 3; i++) {
    assert_ptr_equal(parts[i].data, reqs[i]->inputs[0].data);
    assert_int_equal(parts[i].byte_size, reqs[i]->inputs[0].byte_size);
    assert_int_equal(parts[i].device, 1);
  }
  char into[32];
  struct pts_tensor t = {0};
  assert_int_equal(pts_batch_gathered("X", reqs, 3, into, PTS_MEM_DEVICE, 1, &t, &err), PTS_OK);
  assert_ptr_equal(t.data, into);
  assert_null(t.buf);
  assert_int_equal(t.mem, PTS_MEM_DEVICE);
  assert_int_equal(t.device, 1);
  assert_int_equal(t.byte_size, 32);
  assert_int_equal(t.shape.ndim, 2);
  assert_int_equal(t.shape.dims[0], 4);
  assert_int_equal(t.shape.dims[1], 2);
  /* the CPU can not gather device memory */
  struct pts_buf *owned;
  assert_int_equal(pts_batch_gather("X", reqs, 3, &t, &owned, &err), PTS_INTERNAL);
  assert_non_null(strstr(err.msg, "can not be gathered on the host"));
  /* nor the device host memory */
  reqs[1]->inputs[0].mem = PTS_MEM_PINNED;
  assert_int_equal(pts_batch_device_parts("X", reqs, 3, parts, &total, &err), PTS_INTERNAL);
  assert_non_null(strstr(err.msg, "request 1 is in host memory"));
  for (int i = 0; i < 3; i++) pts_infer_request_free(reqs[i]);
}

static void compatibility_is_shape_but_batch(void **state) {
  (void)state;
  const char *text =
      "max_batch_size: 8 input [ { name: \"X\" data_type: TYPE_INT32 dims: [ -1 ] } ]";
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  assert_int_equal(pts_model_config_parse(text, strlen(text), "t", &cfg, &err), PTS_OK);
  struct pts_infer_request *a = request(1, 0), *b = request(3, 0), *c = request(1, 0);
  c->inputs[0].shape.dims[1] = 5;
  assert_true(pts_batch_compatible(cfg, a, b, false));
  assert_false(pts_batch_compatible(cfg, a, c, false));
  b->inputs[0].mem = PTS_MEM_PINNED;
  assert_true(pts_batch_compatible(cfg, a, b, false));
  /* device memory (CUDA shared memory): never with host memory; with device
   * memory on the same device only when the backend gathers on the device */
  b->inputs[0].mem = PTS_MEM_DEVICE;
  assert_false(pts_batch_compatible(cfg, a, b, false));
  assert_false(pts_batch_compatible(cfg, a, b, true));
  assert_false(pts_batch_compatible(cfg, b, a, true));
  a->inputs[0].mem = PTS_MEM_DEVICE;
  assert_false(pts_batch_compatible(cfg, a, b, false));
  assert_true(pts_batch_compatible(cfg, a, b, true));
  b->inputs[0].device = 1;
  assert_false(pts_batch_compatible(cfg, a, b, true));
  pts_infer_request_free(a);
  pts_infer_request_free(b);
  pts_infer_request_free(c);
  pts_model_config_free(cfg);
}

static void split_fixed_size_slices_share_the_buffer(void **state) {
  (void)state;
  struct pts_buf *b = pts_buf_new(6 * 3 * sizeof(float));
  for (int i = 0; i < 18; i++) ((float *)b->data)[i] = (float)i;
  struct pts_tensor out = {.name = "Y",
                           .dtype = PTS_DTYPE_FP32,
                           .shape = {2, {6, 3}},
                           .data = b->data,
                           .byte_size = 72,
                           .buf = b};
  const int64_t rows[] = {1, 3, 2};
  struct pts_tensor slices[3];
  memset(slices, 0, sizeof slices);
  struct pts_error err;
  assert_int_equal(pts_batch_split(&out, rows, 3, slices, &err), PTS_OK);
  assert_int_equal(atomic_load(&b->refs), 4);
  assert_ptr_equal(slices[0].data, b->data);
  assert_ptr_equal(slices[1].data, (char *)b->data + 12);
  assert_ptr_equal(slices[2].data, (char *)b->data + 48);
  assert_int_equal(slices[1].byte_size, 36);
  assert_int_equal(slices[1].shape.dims[0], 3);
  assert_int_equal(slices[1].shape.dims[1], 3);
  assert_string_equal(slices[2].name, "Y");
  assert_true(((const float *)slices[2].data)[0] == 12.0f);
  pts_buf_release(b); /* the batch goes first; the slices keep the bytes */
  assert_true(((const float *)slices[2].data)[5] == 17.0f);
  for (int i = 0; i < 3; i++) pts_tensor_clear(&slices[i]);

  /* Rows that do not add up to the batch are the backend's bug. */
  const int64_t bad[] = {1, 1};
  struct pts_buf *b2 = pts_buf_new(72);
  out.buf = b2;
  out.data = b2->data;
  assert_int_equal(pts_batch_split(&out, bad, 2, slices, &err), PTS_INTERNAL);
  assert_null(slices[0].name);
  pts_buf_release(b2);
}

static void split_bytes_by_element_count(void **state) {
  (void)state;
  /* Batch [3, 2]: request 0 has row 0, request 1 rows 1-2. */
  const char *elems[] = {"a", "", "ccc", "dd", "eeeee", "f"};
  size_t used = 0;
  for (int i = 0; i < 6; i++) pts_bytes_put(NULL, 0, &used, elems[i], (uint32_t)strlen(elems[i]));
  struct pts_buf *b = pts_buf_new(used);
  size_t at = 0;
  for (int i = 0; i < 6; i++)
    pts_bytes_put(b->data, used, &at, elems[i], (uint32_t)strlen(elems[i]));
  struct pts_tensor out = {.name = "S",
                           .dtype = PTS_DTYPE_BYTES,
                           .shape = {2, {3, 2}},
                           .data = b->data,
                           .byte_size = used,
                           .buf = b};
  const int64_t rows[] = {1, 2};
  struct pts_tensor slices[2];
  memset(slices, 0, sizeof slices);
  struct pts_error err;
  assert_int_equal(pts_batch_split(&out, rows, 2, slices, &err), PTS_OK);
  /* 4+1 + 4+0 bytes for "a", "" */
  assert_int_equal(slices[0].byte_size, 9);
  assert_int_equal(slices[1].byte_size, used - 9);
  size_t off = 0;
  const char *e;
  uint32_t len;
  const char *want[] = {"ccc", "dd", "eeeee", "f"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(pts_bytes_next(slices[1].data, slices[1].byte_size, &off, &e, &len), 1);
    assert_int_equal(len, strlen(want[i]));
    assert_memory_equal(e, want[i], len);
  }
  assert_int_equal(pts_bytes_next(slices[1].data, slices[1].byte_size, &off, &e, &len), 0);
  for (int i = 0; i < 2; i++) pts_tensor_clear(&slices[i]);
  pts_buf_release(b);
}

static void stats_follow_triton_rules(void **state) {
  (void)state;
  struct pts_stats s;
  pts_stats_init(&s);
  /* A batch of 3 requests, 5 elements: input 10 ns, infer 100 ns, output 1 ns. */
  struct pts_batch_times t = {1000, 1010, 1110, 1111};
  pts_stats_batch_done(&s, 5, 3, 300, &t);
  pts_stats_batch_done(&s, 2, 1, 7, &t);
  pts_stats_batch_done(&s, 5, 2, 0, &t);
  for (int i = 0; i < 6; i++) pts_stats_request_success(&s, 50);
  pts_stats_request_failure(&s, PTS_FAIL_REJECTED, 9);
  struct pts_model_stats st;
  struct pts_error err;
  assert_int_equal(pts_stats_snapshot(&s, &st, &err), PTS_OK);
  assert_int_equal(st.execution_count, 3);
  assert_int_equal(st.inference_count, 12);
  assert_int_equal(st.success.count, 6);
  assert_int_equal(st.success.ns, 300);
  assert_int_equal(st.fail.count, 1);
  assert_int_equal(st.fail.ns, 9);
  assert_int_equal(st.fail_by_reason[PTS_FAIL_REJECTED], 1);
  assert_int_equal(st.queue.count, 6);
  assert_int_equal(st.queue.ns, 307);
  /* every request is charged its whole batch */
  assert_int_equal(st.compute_infer.count, 6);
  assert_int_equal(st.compute_infer.ns, 600);
  assert_int_equal(st.compute_input.ns, 60);
  assert_int_equal(st.compute_output.ns, 6);
  assert_int_equal(st.n_batch_stats, 2);
  assert_int_equal(st.batch_stats[0].batch_size, 2);
  assert_int_equal(st.batch_stats[0].compute_infer.count, 1);
  assert_int_equal(st.batch_stats[1].batch_size, 5);
  assert_int_equal(st.batch_stats[1].compute_infer.count, 2);
  assert_int_equal(st.batch_stats[1].compute_infer.ns, 200);
  assert_true(st.last_inference_ms > 1600000000000ull);
  pts_model_stats_clear(&st);
  pts_stats_destroy(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gather_one_is_a_view_many_one_copy),
      cmocka_unit_test(gather_into_caller_memory),
      cmocka_unit_test(large_gather_is_exact),
      cmocka_unit_test(device_parts_and_gathered),
      cmocka_unit_test(compatibility_is_shape_but_batch),
      cmocka_unit_test(split_fixed_size_slices_share_the_buffer),
      cmocka_unit_test(split_bytes_by_element_count),
      cmocka_unit_test(stats_follow_triton_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
