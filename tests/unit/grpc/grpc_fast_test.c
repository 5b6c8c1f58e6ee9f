/* tests/unit/grpc/grpc_fast_test.c — the one-pass decoder of the common
 * ModelInferRequest (frontend/grpc/infer_fast.h): it takes the messages
 * tritonclient, perf_analyzer and ptperf send, filling the request as
 * written out by hand below and exactly as the full (protobuf-c) decoder
 * does; it declines everything else untouched, and pts_grpc_decode_infer
 * then answers as the full decoder does, error messages included.
 *
 * The messages are written here byte by byte (the protobuf wire format:
 * key = field << 3 | wire type, varints, length-delimited payloads), so
 * they are what the test says and not what a packer chose to emit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/alloc.h"
#include "frontend/grpc/infer.h"
#include "frontend/grpc/infer_fast.h"
#include "scheduler/request.h"
#include "tensor/tensor.h"
#include "../../fuzz/grpc_same.h"

/* ------------------------------------------------------------------ */
/* writing messages                                                    */

struct wire {
  uint8_t b[4096];
  size_t n;
};

static void put_varint(struct wire *w, uint64_t v) {
  while (v >= 0x80) {
    w->b[w->n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  w->b[w->n++] = (uint8_t)v;
}

static void put_raw(struct wire *w, const void *p, size_t n) {
  assert_true(w->n + n <= sizeof w->b);
  memcpy(w->b + w->n, p, n);
  w->n += n;
}

static void put_bytes(struct wire *w, unsigned field, const void *p, size_t n) {
  put_varint(w, (uint64_t)field << 3 | 2);
  put_varint(w, n);
  put_raw(w, p, n);
}

static void put_str(struct wire *w, unsigned field, const char *s) {
  put_bytes(w, field, s, strlen(s));
}

static void put_msg(struct wire *w, unsigned field, const struct wire *sub) {
  put_bytes(w, field, sub->b, sub->n);
}

/* A packed run of int64 dimensions (field 3 of InferInputTensor). */
static void put_shape(struct wire *w, const int64_t *dims, size_t n) {
  struct wire packed = {.n = 0};
  for (size_t i = 0; i < n; i++) put_varint(&packed, (uint64_t)dims[i]);
  put_msg(w, 3, &packed);
}

/* InferInputTensor {name, datatype, shape}. */
static void put_input(struct wire *w, const char *name, const char *dtype, const int64_t *dims,
                      size_t ndim) {
  struct wire in = {.n = 0};
  put_str(&in, 1, name);
  put_str(&in, 2, dtype);
  put_shape(&in, dims, ndim);
  put_msg(w, 5, &in);
}

/* InferRequestedOutputTensor {name}. */
static void put_output(struct wire *w, const char *name) {
  struct wire out = {.n = 0};
  put_str(&out, 1, name);
  put_msg(w, 6, &out);
}

/* InferParameter {bool_param: true} under `key` in a map field. */
static void put_bool_param(struct wire *w, unsigned field, const char *key) {
  struct wire value = {.n = 0}, entry = {.n = 0};
  put_varint(&value, 1 << 3 | 0); /* bool_param = 1 */
  put_varint(&value, 1);
  put_str(&entry, 1, key);
  put_msg(&entry, 2, &value);
  put_msg(w, field, &entry);
}

/* The start of a one-input message to "mlp": *w holds the model name, *in
 * the input's name and datatype; the caller adds the rest of the input. */
static void begin_input(struct wire *w, struct wire *in, const char *dtype) {
  w->n = 0;
  put_str(w, 1, "mlp");
  in->n = 0;
  put_str(in, 1, "INPUT0");
  put_str(in, 2, dtype);
}

/* The input into the message, and one 4-byte raw entry for it. */
static void end_input(struct wire *w, const struct wire *in) {
  put_msg(w, 5, in);
  put_bytes(w, 7, "0123", 4);
}

static struct pts_buf *buf_of(const struct wire *w) {
  struct pts_buf *b = pts_buf_new(w->n ? w->n : 1);
  assert_non_null(b);
  memcpy(b->data, w->b, w->n);
  b->size = w->n;
  return b;
}

/* ------------------------------------------------------------------ */
/* both decoders                                                       */

static void assert_untouched(const struct pts_infer_request *req) {
  assert_null(req->model_name);
  assert_null(req->id);
  assert_int_equal(req->n_inputs, 0);
  assert_null(req->inputs);
  assert_int_equal(req->n_outputs, 0);
  assert_null(req->outputs);
}

/* Decodes `w` with both decoders; when the fast one accepts, the full one
 * must too, alike. Returns the fast one's verdict; *out (if given) gets the
 * fast decoder's request, *msg_out its message. */
static enum pts_grpc_fast both(const struct wire *w, struct pts_infer_request **out,
                               struct pts_buf **msg_out) {
  struct pts_buf *msg = buf_of(w);
  struct pts_infer_request *fast = pts_infer_request_new(), *full = pts_infer_request_new();
  enum pts_grpc_fast f = pts_grpc_fast_decode(msg, fast);
  if (f == PTS_GRPC_FAST_DONE) {
    struct pts_error err;
    pts_error_clear(&err);
    struct pts_grpc_infer_opts opts = {.empty_final_response = true};
    assert_int_equal(pts_grpc_decode_infer_full(msg, full, &opts, &err), PTS_OK);
    assert_false(opts.empty_final_response);
    assert_true(grpc_same_request(fast, full));
  } else {
    assert_int_equal(f, PTS_GRPC_FAST_DECLINED);
    assert_untouched(fast);
  }
  pts_infer_request_free(full);
  if (out)
    *out = fast;
  else
    pts_infer_request_free(fast);
  if (msg_out)
    *msg_out = msg;
  else
    pts_buf_release(msg);
  return f;
}

/* A message the fast decoder declines: pts_grpc_decode_infer answers as
 * the full decoder does, status and message. Returns that status. */
static enum pts_status declined(const struct wire *w) {
  assert_int_equal(both(w, NULL, NULL), PTS_GRPC_FAST_DECLINED);
  struct pts_buf *msg = buf_of(w);
  struct pts_infer_request *a = pts_infer_request_new(), *b = pts_infer_request_new();
  struct pts_error ea, eb;
  pts_error_clear(&ea);
  pts_error_clear(&eb);
  enum pts_status sa = pts_grpc_decode_infer(msg, a, NULL, &ea);
  enum pts_status sb = pts_grpc_decode_infer_full(msg, b, NULL, &eb);
  assert_int_equal(sa, sb);
  assert_string_equal(ea.msg, eb.msg);
  if (sa == PTS_OK) assert_string_equal(a->model_name, b->model_name);
  pts_infer_request_free(a);
  pts_infer_request_free(b);
  pts_buf_release(msg);
  return sa;
}

static const int64_t ROW16[] = {1, 16};

/* The message every tritonclient.grpc / perf_analyzer user sends for an
 * FP32 [1,16] input: model_name, inputs, outputs, raw_input_contents, in
 * field order. */
static void mlp_request(struct wire *w) {
  w->n = 0;
  put_str(w, 1, "mlp");
  put_input(w, "INPUT0", "FP32", ROW16, 2);
  put_output(w, "OUTPUT0");
  uint8_t data[64];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)i;
  put_bytes(w, 7, data, sizeof data);
}

static void test_takes_the_common_message(void **state) {
  (void)state;
  struct wire w;
  mlp_request(&w);
  struct pts_infer_request *req;
  struct pts_buf *msg;
  assert_int_equal(both(&w, &req, &msg), PTS_GRPC_FAST_DONE);
  assert_string_equal(req->model_name, "mlp");
  assert_int_equal(req->model_version, -1);
  assert_null(req->id);
  assert_int_equal(req->n_inputs, 1);
  const struct pts_tensor *t = &req->inputs[0];
  assert_string_equal(t->name, "INPUT0");
  assert_int_equal(t->dtype, PTS_DTYPE_FP32);
  assert_int_equal(t->shape.ndim, 2);
  assert_int_equal(t->shape.dims[0], 1);
  assert_int_equal(t->shape.dims[1], 16);
  assert_int_equal(t->byte_size, 64);
  /* A view of the message: its last 64 bytes, holding a reference. */
  assert_ptr_equal(t->buf, msg);
  assert_ptr_equal(t->data, (const uint8_t *)msg->data + msg->size - 64);
  assert_int_equal(((const uint8_t *)t->data)[63], 63);
  assert_int_equal(req->n_outputs, 1);
  assert_string_equal(req->outputs[0].name, "OUTPUT0");
  assert_int_equal(req->outputs[0].classification, 0);
  assert_null(req->outputs[0].shm.region);
  pts_infer_request_free(req);
  pts_buf_release(msg);
}

/* Other shapes of the same subset: a version and an id; an empty version
 * and an empty id (proto3 writes them when set to ""); several inputs whose
 * raw entries come first, in their order; BYTES; a zero dimension; no
 * outputs; an empty shape run; a multi-byte varint dimension. */
static void test_takes_the_common_variants(void **state) {
  (void)state;
  struct wire w = {.n = 0};
  uint8_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, bytes[7] = {3, 0, 0, 0, 'a', 'b', 'c'};
  put_bytes(&w, 7, a, sizeof a);
  put_bytes(&w, 7, bytes, sizeof bytes);
  put_str(&w, 3, "req-7");
  put_str(&w, 1, "m");
  put_str(&w, 2, "3");
  const int64_t two[] = {2}, one[] = {1};
  put_input(&w, "A", "INT32", two, 1);
  put_input(&w, "B", "BYTES", one, 1);
  struct pts_infer_request *req;
  struct pts_buf *msg;
  assert_int_equal(both(&w, &req, &msg), PTS_GRPC_FAST_DONE);
  assert_string_equal(req->id, "req-7");
  assert_int_equal(req->model_version, 3);
  assert_int_equal(req->n_inputs, 2);
  assert_int_equal(req->inputs[0].byte_size, 8);
  assert_memory_equal(req->inputs[0].data, a, 8);
  assert_int_equal(req->inputs[1].dtype, PTS_DTYPE_BYTES);
  assert_int_equal(req->inputs[1].byte_size, 7);
  assert_memory_equal(req->inputs[1].data, bytes, 7);
  assert_int_equal(req->n_outputs, 0);
  assert_null(req->outputs);
  pts_infer_request_free(req);
  pts_buf_release(msg);

  w.n = 0;
  put_str(&w, 1, "m");
  put_str(&w, 2, "");
  put_str(&w, 3, "");
  const int64_t wide[] = {1, 0, 300000};
  put_input(&w, "X", "UINT8", wide, 3);
  put_bytes(&w, 7, "", 0);
  put_output(&w, "Y");
  put_output(&w, "Z");
  assert_int_equal(both(&w, &req, NULL), PTS_GRPC_FAST_DONE);
  assert_null(req->id); /* "" is no id, as for the full decoder */
  assert_int_equal(req->model_version, -1);
  assert_int_equal(req->inputs[0].shape.dims[2], 300000);
  assert_int_equal(req->n_outputs, 2);
  assert_string_equal(req->outputs[1].name, "Z");
  pts_infer_request_free(req);

  w.n = 0;
  put_str(&w, 1, "m");
  put_input(&w, "S", "FP64", NULL, 0); /* a scalar: an empty packed run */
  put_bytes(&w, 7, a, 8);
  assert_int_equal(both(&w, &req, NULL), PTS_GRPC_FAST_DONE);
  assert_int_equal(req->inputs[0].shape.ndim, 0);
  pts_infer_request_free(req);
}

/* Valid messages outside the subset: the full decoder takes them. */
static void test_declines_what_it_does_not_know(void **state) {
  (void)state;
  struct wire w, in;
  /* Request parameters (here triton_enable_empty_final_response). */
  mlp_request(&w);
  put_bool_param(&w, 4, "triton_enable_empty_final_response");
  assert_int_equal(declined(&w), PTS_OK);
  /* An input with parameters: shared memory's keys live there. */
  begin_input(&w, &in, "FP32");
  put_shape(&in, ROW16, 2);
  put_bool_param(&in, 4, "custom");
  end_input(&w, &in);
  assert_int_equal(declined(&w), PTS_OK);
  /* An input without a shape (a scalar the sender left empty). */
  begin_input(&w, &in, "FP32");
  end_input(&w, &in);
  assert_int_equal(declined(&w), PTS_OK);
  /* An output with parameters (classification and shared memory live
   * there). */
  mlp_request(&w);
  in.n = 0;
  put_str(&in, 1, "OUTPUT0");
  put_bool_param(&in, 2, "custom");
  put_msg(&w, 6, &in);
  assert_int_equal(declined(&w), PTS_OK);
  /* An unknown field: protobuf-c skips it. */
  mlp_request(&w);
  put_str(&w, 15, "later");
  assert_int_equal(declined(&w), PTS_OK);
  /* A repeated singular field: the last one counts. */
  mlp_request(&w);
  put_str(&w, 1, "other");
  assert_int_equal(declined(&w), PTS_OK);
  /* The shape unpacked (one varint field per dimension), and packed in two
   * runs: both the same [1,16] to protobuf-c. */
  begin_input(&w, &in, "FP32");
  put_varint(&in, 3 << 3 | 0);
  put_varint(&in, 1);
  put_varint(&in, 3 << 3 | 0);
  put_varint(&in, 16);
  end_input(&w, &in);
  assert_int_equal(declined(&w), PTS_OK);
  begin_input(&w, &in, "FP32");
  put_shape(&in, ROW16, 1);
  put_shape(&in, ROW16 + 1, 1);
  end_input(&w, &in);
  assert_int_equal(declined(&w), PTS_OK);
  /* Typed contents instead of raw_input_contents. */
  begin_input(&w, &in, "INT32");
  const int64_t one[] = {1};
  put_shape(&in, one, 1);
  struct wire contents = {.n = 0};
  struct wire ints = {.n = 0};
  put_varint(&ints, 5);
  put_msg(&contents, 2, &ints); /* int_contents: [5] */
  put_msg(&in, 5, &contents);
  put_msg(&w, 5, &in);
  assert_int_equal(declined(&w), PTS_OK);
  /* More inputs than it holds. */
  w.n = 0;
  put_str(&w, 1, "mlp");
  for (int i = 0; i <= PTS_GRPC_FAST_MAX; i++) {
    char name[8] = {'I', (char)('a' + i), 0};
    put_input(&w, name, "UINT8", one, 1);
  }
  for (int i = 0; i <= PTS_GRPC_FAST_MAX; i++) put_bytes(&w, 7, "x", 1);
  assert_int_equal(declined(&w), PTS_OK);
}

/* Invalid messages: the full decoder's errors, word for word. */
static void test_declines_errors_to_the_full_decoder(void **state) {
  (void)state;
  struct wire w, in;
  /* An empty model name. */
  w.n = 0;
  put_str(&w, 1, "");
  put_input(&w, "INPUT0", "FP32", ROW16, 2);
  put_bytes(&w, 7, "0123", 4);
  assert_int_equal(declined(&w), PTS_INVALID_ARG);
  /* A version that is not a number. */
  mlp_request(&w);
  put_str(&w, 2, "v1");
  assert_int_equal(declined(&w), PTS_INVALID_ARG);
  /* An unknown datatype. */
  begin_input(&w, &in, "FP8");
  put_shape(&in, ROW16, 2);
  end_input(&w, &in);
  assert_int_equal(declined(&w), PTS_INVALID_ARG);
  /* A negative dimension (a ten-byte varint). */
  begin_input(&w, &in, "FP32");
  const int64_t negative[] = {1, -4};
  put_shape(&in, negative, 2);
  end_input(&w, &in);
  assert_int_equal(declined(&w), PTS_INVALID_ARG);
  /* Raw entries that do not match the inputs, both ways. */
  mlp_request(&w);
  put_bytes(&w, 7, "0123", 4);
  assert_int_equal(declined(&w), PTS_INVALID_ARG);
  w.n = 0;
  put_str(&w, 1, "mlp");
  put_input(&w, "INPUT0", "FP32", ROW16, 2);
  assert_int_equal(declined(&w), PTS_INVALID_ARG);
  /* More dimensions than a tensor has. */
  begin_input(&w, &in, "FP32");
  int64_t many[PTS_TENSOR_MAX_DIMS + 1];
  for (size_t i = 0; i < PTS_TENSOR_MAX_DIMS + 1; i++) many[i] = 1;
  put_shape(&in, many, PTS_TENSOR_MAX_DIMS + 1);
  end_input(&w, &in);
  assert_int_equal(declined(&w), PTS_INVALID_ARG);
  /* Truncated: the last payload claims more bytes than there are. */
  mlp_request(&w);
  w.n -= 1;
  assert_int_equal(declined(&w), PTS_INVALID_ARG);
  /* model_name with the wrong wire type (a varint). */
  w.n = 0;
  put_varint(&w, 1 << 3 | 0);
  put_varint(&w, 7);
  put_input(&w, "INPUT0", "FP32", ROW16, 2);
  put_bytes(&w, 7, "0123", 4);
  declined(&w);
  /* A NUL inside an input name: a C string would end there. */
  w.n = 0;
  put_str(&w, 1, "mlp");
  in.n = 0;
  put_bytes(&in, 1, "IN\0PUT0", 7);
  put_str(&in, 2, "FP32");
  put_shape(&in, ROW16, 2);
  end_input(&w, &in);
  declined(&w);
  /* Not a message at all. */
  w.n = 0;
  put_raw(&w, "\xff\xff\xff", 3);
  assert_int_equal(declined(&w), PTS_INVALID_ARG);
}

/* Forms protobuf-c reads its own way: bytes that are not UTF-8 in a
 * string, a field key and a length in more bytes than they need. */
static void test_wire_forms_protobuf_c_reads_its_own_way(void **state) {
  (void)state;
  struct wire w;
  w.n = 0;
  put_str(&w, 1, "m\xff\xfe");
  put_input(&w, "INPUT0", "FP32", ROW16, 2);
  put_bytes(&w, 7, "0123", 4);
  both(&w, NULL, NULL);
  w.n = 0;
  put_raw(&w, "\x8a\x80\x80\x80\x80\x00", 6); /* model_name's key in six bytes */
  put_varint(&w, 3);
  put_raw(&w, "mlp", 3);
  put_input(&w, "INPUT0", "FP32", ROW16, 2);
  put_bytes(&w, 7, "0123", 4);
  both(&w, NULL, NULL);
  w.n = 0;
  put_varint(&w, 1 << 3 | 2);
  put_raw(&w, "\x83\x80\x80\x80\x80\x00", 6); /* its length, 3, in six bytes */
  put_raw(&w, "mlp", 3);
  put_input(&w, "INPUT0", "FP32", ROW16, 2);
  put_bytes(&w, 7, "0123", 4);
  both(&w, NULL, NULL);
}

/* Out of memory at every allocation it makes: NOMEM (the request freed as
 * usual, nothing leaked: the sanitizer build checks) or, once the
 * allocations all succeed, the whole request. */
static void test_out_of_memory_at_each_allocation(void **state) {
  (void)state;
  struct wire w;
  mlp_request(&w);
  put_str(&w, 3, "id");
  struct pts_buf *msg = buf_of(&w);
  bool done = false;
  for (long n = 0; n < 64 && !done; n++) {
    struct pts_infer_request *req = pts_infer_request_new();
    assert_non_null(req);
    pts_alloc_fail_after(n);
    enum pts_grpc_fast f = pts_grpc_fast_decode(msg, req);
    pts_alloc_fail_after(-1);
    assert_true(f == PTS_GRPC_FAST_DONE || f == PTS_GRPC_FAST_NOMEM);
    done = f == PTS_GRPC_FAST_DONE;
    if (done) assert_string_equal(req->outputs[0].name, "OUTPUT0");
    pts_infer_request_free(req);
  }
  assert_true(done);
  pts_buf_release(msg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_takes_the_common_message),
      cmocka_unit_test(test_takes_the_common_variants),
      cmocka_unit_test(test_declines_what_it_does_not_know),
      cmocka_unit_test(test_declines_errors_to_the_full_decoder),
      cmocka_unit_test(test_wire_forms_protobuf_c_reads_its_own_way),
      cmocka_unit_test(test_out_of_memory_at_each_allocation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
