/* tests/unit/grpc/grpc_torture_test.c — allocation-failure walks over the
 * gRPC wire conversions (tests/unit/torture/torture.h): every allocation of
 * decoding a ModelInferRequest (protobuf-c's included) and of encoding a
 * stream response fails in turn; each run must end in a clean error, and
 * the sanitizer build proves none crashed or leaked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "frontend/grpc/infer.h"
#include "grpc_service.pb-c.h"
#include "torture/torture.h"

/* A request with two raw inputs (INT32, BYTES), a parameter and a
 * requested output, packed once with plain malloc (outside the walk). */
struct packed {
  uint8_t *data;
  size_t len;
};

static const uint8_t RAW_A[8] = {1, 0, 0, 0, 2, 0, 0, 0};
static const uint8_t RAW_B[12] = {3, 0, 0, 0, 'a', 'b', 'c', 1, 0, 0, 0, 'd'};

static void pack_request(struct packed *p) {
  Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
  Inference__ModelInferRequest__InferInputTensor in[2], *in_ptrs[2] = {&in[0], &in[1]};
  int64_t shape[2] = {1, 2};
  ProtobufCBinaryData raws[2] = {{sizeof RAW_A, (uint8_t *)RAW_A},
                                 {sizeof RAW_B, (uint8_t *)RAW_B}};
  Inference__ModelInferRequest__ParametersEntry pe =
      INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT;
  Inference__ModelInferRequest__ParametersEntry *pes[1] = {&pe};
  Inference__InferParameter pv = INFERENCE__INFER_PARAMETER__INIT;
  Inference__ModelInferRequest__InferRequestedOutputTensor out =
      INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__INIT;
  Inference__ModelInferRequest__InferRequestedOutputTensor *outs[1] = {&out};
  for (int i = 0; i < 2; i++) {
    inference__model_infer_request__infer_input_tensor__init(&in[i]);
    in[i].shape = shape;
    in[i].n_shape = 2;
  }
  in[0].name = "A";
  in[0].datatype = "INT32";
  in[1].name = "B";
  in[1].datatype = "BYTES";
  pv.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
  pv.int64_param = 5;
  pe.key = "priority";
  pe.value = &pv;
  out.name = "A_OUT";
  req.model_name = "m";
  req.id = "r1";
  req.inputs = in_ptrs;
  req.n_inputs = 2;
  req.parameters = pes;
  req.n_parameters = 1;
  req.outputs = outs;
  req.n_outputs = 1;
  req.raw_input_contents = raws;
  req.n_raw_input_contents = 2;
  p->len = inference__model_infer_request__get_packed_size(&req);
  p->data = malloc(p->len);
  assert_non_null(p->data);
  inference__model_infer_request__pack(&req, p->data);
}

static enum pts_status decode_step(void *ctx, struct pts_error *err) {
  const struct packed *p = ctx;
  struct pts_buf *msg = pts_buf_new(p->len);
  if (!msg) return pts_error_set(err, PTS_NOMEM, "out of memory for the message");
  memcpy(msg->data, p->data, p->len);
  struct pts_infer_request *req = pts_infer_request_new();
  enum pts_status st = req ? pts_grpc_decode_infer(msg, req, NULL, err)
                           : pts_error_set(err, PTS_NOMEM, "out of memory for the request");
  if (st == PTS_OK) {
    assert_int_equal(req->n_inputs, 2);
    assert_int_equal(req->priority, 5);
    assert_memory_equal(req->inputs[1].data, RAW_B, sizeof RAW_B);
  }
  pts_infer_request_free(req);
  pts_buf_release(msg);
  return st;
}

static void decode_walk(void **state) {
  (void)state;
  struct packed p;
  pack_request(&p);
  struct torture_result r = torture_walk(decode_step, &p, 500);
  torture_report("grpc decode", &r);
  free(p.data);
  assert_true(r.runs > 10);
  /* No allocation failure is swallowed, none is reported as a bad message
   * (the walk's last run may have needed exactly n allocations: -1). */
  assert_true(r.failed >= r.runs - 1);
  assert_int_equal(r.nomem, r.failed);
  assert_int_equal(r.bad_messages, 0);
  assert_int_equal(r.final_status, PTS_OK);
}

static enum pts_status encode_step(void *ctx, struct pts_error *err) {
  (void)ctx;
  static const uint8_t small[3] = {1, 2, 3};
  struct pts_infer_request *req = pts_infer_request_new();
  struct pts_infer_response *resp = pts_infer_response_new();
  struct pts_tensor *t = resp ? pts_calloc(2, sizeof *t) : NULL;
  struct pts_buf *big = pts_buf_new(256);
  enum pts_status st = PTS_OK;
  if (!req || !resp || !t || !big) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory setting up");
    pts_free(t);
    pts_buf_release(big);
  } else {
    memset(big->data, 7, 256);
    resp->outputs = t;
    resp->n_outputs = 2;
    t[0].dtype = PTS_DTYPE_UINT8;
    t[0].shape.ndim = 1;
    t[0].shape.dims[0] = 256;
    t[0].buf = big;
    t[0].data = big->data;
    t[0].byte_size = 256;
    t[1].dtype = PTS_DTYPE_INT8;
    t[1].shape.ndim = 1;
    t[1].shape.dims[0] = 3;
    t[1].data = small;
    t[1].byte_size = 3;
    struct pts_grpc_reply reply;
    st = pts_grpc_encode_infer(req, resp, true, &reply, err);
    if (st == PTS_OK) pts_grpc_reply_clear(&reply);
  }
  pts_infer_request_free(req);
  pts_infer_response_free(resp);
  return st;
}

static void encode_walk(void **state) {
  (void)state;
  struct torture_result r = torture_walk(encode_step, NULL, 200);
  torture_report("grpc encode", &r);
  assert_true(r.runs >= 4);
  assert_true(r.failed >= r.runs - 1);
  assert_int_equal(r.nomem, r.failed);
  assert_int_equal(r.bad_messages, 0);
  assert_int_equal(r.final_status, PTS_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(decode_walk),
      cmocka_unit_test(encode_walk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
