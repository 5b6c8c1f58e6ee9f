/* tests/unit/ptperf/ptperf_grpc_msg_test.c — the bytes of ptperf's gRPC
 * messages (ptperf/lib/grpc_msg.h).
 *
 * Requests are compared with encodings worked out by hand from the
 * protobuf wire format (key = field << 3 | wire type; proto3 packs repeated
 * scalars) and the field numbers of protocol-facts §2 (ModelInferRequest:
 * model_name 1, model_version 2, inputs 5, raw_input_contents 7; its
 * InferInputTensor: name 1, datatype 2, shape 3), and unpacked with
 * protobuf-c. Responses are written byte by byte (ModelInferResponse:
 * outputs 5, raw_output_contents 6; ModelStreamInferResponse:
 * error_message 1, infer_response 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/alloc.h"
#include "grpc_service.pb-c.h"
#include "ptperf/lib/grpc_msg.h"
#include "ptperf/lib/infer.h"

static struct ptperf_model *model(const char *metadata, const char *version) {
  struct ptperf_model *m;
  struct pts_error err;
  assert_int_equal(
      ptperf_model_parse(metadata, "{\"max_batch_size\":4}", version, 1, NULL, 0, &m, &err),
      PTS_OK);
  return m;
}

static const char *int32_model =
    "{\"name\":\"m\",\"inputs\":[{\"name\":\"X\",\"datatype\":\"INT32\",\"shape\":[-1,2]}]}";

static void request_bytes_by_hand(void **state) {
  (void)state;
  struct ptperf_model *m = model(int32_model, NULL);
  uint8_t *msg;
  size_t len;
  struct pts_error err;
  assert_int_equal(ptperf_grpc_request_build(m, 1, true, &msg, &len, &err), PTS_OK);
  static const uint8_t want[] = {
      0x0a, 0x01, 'm',                                /* 1: model_name "m" */
      0x2a, 0x0e,                                     /* 5: inputs, 14 bytes */
      0x0a, 0x01, 'X',                                /*   1: name "X" */
      0x12, 0x05, 'I',  'N',  'T', '3', '2',          /*   2: datatype "INT32" */
      0x1a, 0x02, 0x01, 0x02,                         /*   3: shape [1, 2], packed */
      0x3a, 0x08, 0,    0,    0,   0,   0,   0, 0, 0, /* 7: raw_input_contents, 2 x int32 0 */
  };
  assert_int_equal(len, sizeof want);
  assert_memory_equal(msg, want, sizeof want);
  pts_free(msg);
  ptperf_model_free(m);

  /* A version is field 2, right after the name. */
  m = model(int32_model, "3");
  assert_int_equal(ptperf_grpc_request_build(m, 1, true, &msg, &len, &err), PTS_OK);
  assert_int_equal(len, sizeof want + 3);
  static const uint8_t head[] = {0x0a, 0x01, 'm', 0x12, 0x01, '3', 0x2a, 0x0e};
  assert_memory_equal(msg, head, sizeof head);
  pts_free(msg);
  ptperf_model_free(m);
}

/* Two inputs of the add_sub shape: each its own raw entry, in input order,
 * holding the same tensors the HTTP request of the same seed carries. */
static void random_inputs_match_http(void **state) {
  (void)state;
  struct ptperf_model *m = model(
      "{\"name\":\"add_sub\",\"inputs\":["
      "{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[-1,16]},"
      "{\"name\":\"INPUT1\",\"datatype\":\"FP32\",\"shape\":[-1,16]}]}",
      NULL);
  uint8_t *msg;
  size_t len;
  char *http;
  size_t http_len;
  struct pts_error err;
  assert_int_equal(ptperf_grpc_request_build(m, 5, false, &msg, &len, &err), PTS_OK);
  assert_int_equal(ptperf_request_build(m, "h", 5, false, &http, &http_len, &err), PTS_OK);
  Inference__ModelInferRequest *r = inference__model_infer_request__unpack(NULL, len, msg);
  assert_non_null(r);
  assert_string_equal(r->model_name, "add_sub");
  assert_string_equal(r->model_version, "");
  assert_int_equal(r->n_inputs, 2);
  assert_int_equal(r->n_outputs, 0); /* none asked for: the server sends all */
  assert_int_equal(r->n_raw_input_contents, 2);
  for (size_t i = 0; i < 2; i++) {
    assert_string_equal(r->inputs[i]->name, i ? "INPUT1" : "INPUT0");
    assert_string_equal(r->inputs[i]->datatype, "FP32");
    assert_int_equal(r->inputs[i]->n_shape, 2);
    assert_int_equal(r->inputs[i]->shape[0], 1);
    assert_int_equal(r->inputs[i]->shape[1], 16);
    assert_null(r->inputs[i]->contents);
    assert_int_equal(r->raw_input_contents[i].len, 64);
    for (size_t k = 0; k < 16; k++) {
      float f;
      memcpy(&f, r->raw_input_contents[i].data + 4 * k, 4);
      assert_true(f >= 0.0f && f < 1.0f);
    }
  }
  /* The HTTP body ends with INPUT0's 64 bytes, then INPUT1's. */
  assert_memory_equal(r->raw_input_contents[0].data, http + http_len - 128, 64);
  assert_memory_equal(r->raw_input_contents[1].data, http + http_len - 64, 64);
  assert_memory_not_equal(r->raw_input_contents[0].data, r->raw_input_contents[1].data, 64);
  inference__model_infer_request__free_unpacked(r, NULL);
  pts_free(msg);
  pts_free(http);
  ptperf_model_free(m);
}

/* model_name "m", one output named "Y", one raw entry of 4 bytes. */
#define RESPONSE_1 0x0a, 0x01, 'm', 0x2a, 0x03, 0x0a, 0x01, 'Y', 0x32, 0x04, 1, 0, 0, 0

static enum pts_status check(const uint8_t *b, size_t n, bool stream, struct ptperf_grpc_reply *r,
                             struct pts_error *err) {
  return ptperf_grpc_response_check(b, n, stream, r, err);
}

static void infer_response_counts(void **state) {
  (void)state;
  struct ptperf_grpc_reply r;
  struct pts_error err;
  static const uint8_t one[] = {RESPONSE_1};
  assert_int_equal(check(one, sizeof one, false, &r, &err), PTS_OK);
  assert_int_equal(r.n_outputs, 1);
  assert_int_equal(r.n_raw, 1);

  /* Fields the check does not use are skipped, whatever their wire type:
   * 4 as a varint (150 = 0x96 0x01), 9 as fixed64, 10 as fixed32, and an
   * empty raw entry (a 0-byte output). */
  static const uint8_t extra[] = {0x20, 0x96, 0x01, 0x49, 1, 2, 3,    4,    5,    6,    7,
                                  8,    0x55, 1,    2,    3, 4, 0x2a, 0x00, 0x32, 0x00, RESPONSE_1};
  assert_int_equal(check(extra, sizeof extra, false, &r, &err), PTS_OK);
  assert_int_equal(r.n_outputs, 2);
  assert_int_equal(r.n_raw, 2);

  static const uint8_t two_outputs[] = {RESPONSE_1, 0x2a, 0x03, 0x0a, 0x01, 'Z'};
  assert_int_equal(check(two_outputs, sizeof two_outputs, false, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "2 outputs but 1 raw_output_contents"));

  static const uint8_t no_outputs[] = {0x0a, 0x01, 'm'};
  assert_int_equal(check(no_outputs, sizeof no_outputs, false, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "no outputs"));
  assert_int_equal(check(NULL, 0, false, &r, &err), PTS_INVALID_ARG);
}

static void malformed_responses(void **state) {
  (void)state;
  struct ptperf_grpc_reply r;
  struct pts_error err;
  static const uint8_t past_end[] = {0x0a, 0x01, 'm', 0x2a, 0x05, 0x0a, 0x01};
  assert_int_equal(check(past_end, sizeof past_end, false, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "field 5 at byte 3: length 5 runs past the end (2 bytes left)"));
  static const uint8_t open_length[] = {0x0a, 0xff};
  assert_int_equal(check(open_length, sizeof open_length, false, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "truncated length"));
  static const uint8_t group[] = {0x0b};
  assert_int_equal(check(group, sizeof group, false, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "wire type 3"));
  static const uint8_t field0[] = {0x02, 0x00};
  assert_int_equal(check(field0, sizeof field0, false, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "bad field key at byte 0"));
  static const uint8_t short_fixed[] = {0x49, 1, 2, 3};
  assert_int_equal(check(short_fixed, sizeof short_fixed, false, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "field 9 at byte 0: truncated"));
  static const uint8_t open_varint[] = {0x20, 0x80, 0x80};
  assert_int_equal(check(open_varint, sizeof open_varint, false, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "truncated varint"));
}

static void stream_responses(void **state) {
  (void)state;
  struct ptperf_grpc_reply r;
  struct pts_error err;
  /* 2: infer_response, 14 bytes: the response above. */
  static const uint8_t ok[] = {0x12, 0x0e, RESPONSE_1};
  assert_int_equal(check(ok, sizeof ok, true, &r, &err), PTS_OK);
  assert_int_equal(r.n_outputs, 1);
  assert_null(r.error);
  /* An empty error_message is no error. */
  static const uint8_t empty_error[] = {0x0a, 0x00, 0x12, 0x0e, RESPONSE_1};
  assert_int_equal(check(empty_error, sizeof empty_error, true, &r, &err), PTS_OK);

  /* An in-band error: 1: "boom", with an infer_response holding only the
   * id (3: "7"), as a server reports a failed request on a stream. */
  static const uint8_t failed[] = {0x0a, 0x04, 'b', 'o', 'o', 'm', 0x12, 0x03, 0x1a, 0x01, '7'};
  assert_int_equal(check(failed, sizeof failed, true, &r, &err), PTS_UNAVAILABLE);
  assert_int_equal(r.error_len, 4);
  assert_memory_equal(r.error, "boom", 4);
  assert_non_null(strstr(err.msg, "error_message: boom"));

  static const uint8_t no_response[] = {0x0a, 0x00};
  assert_int_equal(check(no_response, sizeof no_response, true, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "no infer_response"));
  /* The nested response is checked too. */
  static const uint8_t empty_response[] = {0x12, 0x00};
  assert_int_equal(check(empty_response, sizeof empty_response, true, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "no outputs"));
  /* A unary response is not a stream response: its field 1 (model_name)
   * reads as error_message. */
  static const uint8_t unary[] = {RESPONSE_1};
  assert_int_equal(check(unary, sizeof unary, true, &r, &err), PTS_UNAVAILABLE);
}

static void status_names(void **state) {
  (void)state;
  assert_string_equal(ptperf_grpc_status_name(0), "OK");
  assert_string_equal(ptperf_grpc_status_name(3), "INVALID_ARGUMENT");
  assert_string_equal(ptperf_grpc_status_name(5), "NOT_FOUND");
  assert_string_equal(ptperf_grpc_status_name(12), "UNIMPLEMENTED");
  assert_string_equal(ptperf_grpc_status_name(14), "UNAVAILABLE");
  assert_string_equal(ptperf_grpc_status_name(16), "UNAUTHENTICATED");
  assert_string_equal(ptperf_grpc_status_name(17), "UNKNOWN");
  assert_string_equal(ptperf_grpc_status_name(-1), "UNKNOWN");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(request_bytes_by_hand), cmocka_unit_test(random_inputs_match_http),
      cmocka_unit_test(infer_response_counts), cmocka_unit_test(malformed_responses),
      cmocka_unit_test(stream_responses),      cmocka_unit_test(status_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
