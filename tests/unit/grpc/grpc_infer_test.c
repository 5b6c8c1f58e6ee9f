/* tests/unit/grpc/grpc_infer_test.c — ModelInferRequest/Response wire
 * conversion (frontend/grpc/infer.h) without sockets.
 *
 * Requests are built with protobuf-c (an independent encoder) or written
 * byte by byte; expected tensor bytes are worked out by hand from the
 * little-endian layouts of protocol-facts §5. Encoded responses are checked
 * by unpacking them with protobuf-c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "frontend/grpc/infer.h"
#include "frontend/grpc/rpc.h"
#include "frontend/grpc/version.h"
#include "grpc_service.pb-c.h"

/* ------------------------------------------------------------ helpers */

/* A request message being built: protobuf-c structures on the test's stack. */
struct builder {
  Inference__ModelInferRequest req;
  Inference__ModelInferRequest__InferInputTensor in[4], *in_ptrs[4];
  Inference__InferTensorContents contents[4];
  ProtobufCBinaryData raw[4];
  int64_t shapes[4][4];
  Inference__ModelInferRequest__ParametersEntry param, *param_ptrs[1];
  Inference__InferParameter param_value;
};

static void builder_init(struct builder *b, const char *model) {
  memset(b, 0, sizeof *b);
  inference__model_infer_request__init(&b->req);
  b->req.model_name = (char *)model;
  b->req.inputs = b->in_ptrs;
  b->req.raw_input_contents = b->raw;
}

static Inference__ModelInferRequest__InferInputTensor *add_input(struct builder *b,
                                                                 const char *name, const char *dt,
                                                                 int64_t d0, int64_t d1) {
  size_t i = b->req.n_inputs++;
  Inference__ModelInferRequest__InferInputTensor *t = &b->in[i];
  inference__model_infer_request__infer_input_tensor__init(t);
  t->name = (char *)name;
  t->datatype = (char *)dt;
  b->shapes[i][0] = d0;
  b->shapes[i][1] = d1;
  t->shape = b->shapes[i];
  t->n_shape = 2;
  b->in_ptrs[i] = t;
  return t;
}

static void add_raw(struct builder *b, const void *data, size_t len) {
  b->raw[b->req.n_raw_input_contents].data = (uint8_t *)data;
  b->raw[b->req.n_raw_input_contents++].len = len;
}

static Inference__InferTensorContents *add_contents(
    struct builder *b, Inference__ModelInferRequest__InferInputTensor *t) {
  Inference__InferTensorContents *c = &b->contents[t - b->in];
  inference__infer_tensor_contents__init(c);
  t->contents = c;
  return c;
}

static struct pts_buf *pack_builder(struct builder *b) {
  size_t n = inference__model_infer_request__get_packed_size(&b->req);
  struct pts_buf *buf = pts_buf_new(n ? n : 1);
  assert_non_null(buf);
  inference__model_infer_request__pack(&b->req, buf->data);
  buf->size = n;
  return buf;
}

static struct pts_buf *buf_of(const void *data, size_t n) {
  struct pts_buf *buf = pts_buf_new(n ? n : 1);
  assert_non_null(buf);
  memcpy(buf->data, data, n);
  buf->size = n;
  return buf;
}

/* Decodes and returns the status; *out is the request (caller frees). */
static enum pts_status decode(struct pts_buf *msg, struct pts_infer_request **out,
                              struct pts_error *err) {
  *out = pts_infer_request_new();
  assert_non_null(*out);
  return pts_grpc_decode_infer(msg, *out, NULL, err);
}

static void expect_decode_error(struct builder *b, enum pts_status code, const char *word) {
  struct pts_buf *msg = pack_builder(b);
  struct pts_infer_request *req;
  struct pts_error err;
  pts_error_clear(&err);
  assert_int_equal(decode(msg, &req, &err), code);
  if (!strstr(err.msg, word)) fail_msg("message '%s' does not mention '%s'", err.msg, word);
  pts_infer_request_free(req);
  pts_buf_release(msg);
}

/* ------------------------------------------------------------ decoding */

static void raw_inputs_are_views_of_the_message(void **state) {
  (void)state;
  struct builder b;
  builder_init(&b, "id_multi");
  b.req.model_version = "2";
  b.req.id = "req-7";
  add_input(&b, "INPUT0", "INT32", 1, 2);
  add_input(&b, "INPUT1", "BYTES", 1, 1);
  static const uint8_t a[] = {1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}; /* [1, -2] */
  static const uint8_t s[] = {3, 0, 0, 0, 'a', 'b', 'c'};
  add_raw(&b, a, sizeof a);
  add_raw(&b, s, sizeof s);
  struct pts_buf *msg = pack_builder(&b);
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(decode(msg, &req, &err), PTS_OK);
  assert_string_equal(req->model_name, "id_multi");
  assert_int_equal(req->model_version, 2);
  assert_string_equal(req->id, "req-7");
  assert_int_equal(req->n_inputs, 2);
  const struct pts_tensor *t0 = &req->inputs[0], *t1 = &req->inputs[1];
  assert_string_equal(t0->name, "INPUT0");
  assert_int_equal(t0->dtype, PTS_DTYPE_INT32);
  assert_int_equal(t0->shape.ndim, 2);
  assert_int_equal(t0->shape.dims[1], 2);
  assert_int_equal(t0->byte_size, sizeof a);
  assert_memory_equal(t0->data, a, sizeof a);
  /* Zero copy: the tensors point into the message and hold it. */
  assert_ptr_equal(t0->buf, msg);
  assert_ptr_equal(t1->buf, msg);
  assert_true((const uint8_t *)t0->data > (const uint8_t *)msg->data &&
              (const uint8_t *)t0->data < (const uint8_t *)msg->data + msg->size);
  assert_int_equal(t1->dtype, PTS_DTYPE_BYTES);
  assert_memory_equal(t1->data, s, sizeof s);
  pts_buf_release(msg); /* the request keeps the bytes alive */
  assert_memory_equal(t1->data, s, sizeof s);
  pts_infer_request_free(req);
}

/* raw_input_contents may come before the other fields on the wire. */
static void raw_entries_first_on_the_wire(void **state) {
  (void)state;
  /* field 7 "abcd"; field 1 "m"; field 5 { name "I", datatype "UINT8", shape [4] } */
  static const uint8_t wire[] = {0x3a, 4,   'a',  'b', 'c', 'd', 0x0a, 1,   'm', 0x2a, 13, 0x0a,
                                 1,    'I', 0x12, 5,   'U', 'I', 'N',  'T', '8', 0x1a, 1,  4};
  struct pts_buf *msg = buf_of(wire, sizeof wire);
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(decode(msg, &req, &err), PTS_OK);
  assert_string_equal(req->model_name, "m");
  assert_int_equal(req->model_version, -1);
  assert_null(req->id);
  assert_int_equal(req->n_inputs, 1);
  assert_int_equal(req->inputs[0].dtype, PTS_DTYPE_UINT8);
  assert_int_equal(req->inputs[0].shape.dims[0], 4);
  assert_int_equal(req->inputs[0].byte_size, 4);
  assert_memory_equal(req->inputs[0].data, "abcd", 4);
  pts_infer_request_free(req);
  pts_buf_release(msg);
}

static void typed_contents_are_decoded_once(void **state) {
  (void)state;
  struct builder b;
  builder_init(&b, "m");
  int32_t i16[] = {-2, 300};
  Inference__InferTensorContents *c = add_contents(&b, add_input(&b, "A", "INT16", 1, 2));
  c->int_contents = i16;
  c->n_int_contents = 2;
  ProtobufCBinaryData strs[] = {{2, (uint8_t *)"ab"}, {0, (uint8_t *)""}};
  c = add_contents(&b, add_input(&b, "B", "BYTES", 2, 1));
  c->bytes_contents = strs;
  c->n_bytes_contents = 2;
  float f[] = {1.5f};
  c = add_contents(&b, add_input(&b, "C", "FP32", 1, 1));
  c->fp32_contents = f;
  c->n_fp32_contents = 1;
  protobuf_c_boolean bools[] = {1, 0, 1};
  c = add_contents(&b, add_input(&b, "D", "BOOL", 1, 3));
  c->bool_contents = bools;
  c->n_bool_contents = 3;
  struct pts_buf *msg = pack_builder(&b);
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(decode(msg, &req, &err), PTS_OK);
  /* -2 = 0xfffe, 300 = 0x012c, little-endian */
  static const uint8_t want_a[] = {0xfe, 0xff, 0x2c, 0x01};
  static const uint8_t want_b[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0};
  static const uint8_t want_c[] = {0x00, 0x00, 0xc0, 0x3f}; /* 1.5f */
  static const uint8_t want_d[] = {1, 0, 1};
  assert_int_equal(req->inputs[0].byte_size, sizeof want_a);
  assert_memory_equal(req->inputs[0].data, want_a, sizeof want_a);
  assert_int_equal(req->inputs[1].byte_size, sizeof want_b);
  assert_memory_equal(req->inputs[1].data, want_b, sizeof want_b);
  assert_memory_equal(req->inputs[2].data, want_c, sizeof want_c);
  assert_memory_equal(req->inputs[3].data, want_d, sizeof want_d);
  /* Its own buffer, not the message. */
  assert_ptr_not_equal(req->inputs[0].buf, msg);
  pts_buf_release(msg);
  pts_infer_request_free(req);
}

static void parameters(void **state) {
  (void)state;
  struct builder b;
  builder_init(&b, "m");
  inference__model_infer_request__parameters_entry__init(&b.param);
  inference__infer_parameter__init(&b.param_value);
  b.param.value = &b.param_value;
  b.param_ptrs[0] = &b.param;
  b.req.parameters = b.param_ptrs;
  b.req.n_parameters = 1;

  b.param.key = "priority";
  b.param_value.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
  b.param_value.uint64_param = 3;
  struct pts_buf *msg = pack_builder(&b);
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(decode(msg, &req, &err), PTS_OK);
  assert_int_equal(req->priority, 3);
  pts_infer_request_free(req);
  pts_buf_release(msg);

  b.param.key = "timeout";
  b.param_value.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
  b.param_value.int64_param = 2500;
  msg = pack_builder(&b);
  assert_int_equal(decode(msg, &req, &err), PTS_OK);
  assert_int_equal(req->timeout_us, 2500);
  pts_infer_request_free(req);
  pts_buf_release(msg);

  b.param.key = "triton_enable_empty_final_response";
  b.param_value.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
  b.param_value.bool_param = 1;
  msg = pack_builder(&b);
  struct pts_grpc_infer_opts opts;
  req = pts_infer_request_new();
  assert_int_equal(pts_grpc_decode_infer(msg, req, &opts, &err), PTS_OK);
  assert_true(opts.empty_final_response);
  pts_infer_request_free(req);
  pts_buf_release(msg);

  b.param.key = "triton_other";
  expect_decode_error(&b, PTS_INVALID_ARG, "triton_other");
  b.param.key = "timeout";
  b.param_value.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
  b.param_value.int64_param = -1;
  expect_decode_error(&b, PTS_INVALID_ARG, "timeout");
  b.param.key = "custom";
  b.param_value.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE__NOT_SET;
  expect_decode_error(&b, PTS_INVALID_ARG, "custom");
}

static void bad_requests(void **state) {
  (void)state;
  struct builder b;
  static const uint8_t four[4] = {0};
  float f[] = {1, 2, 3, 4};
  int32_t big[] = {128};

  /* raw and typed together */
  builder_init(&b, "m");
  add_raw(&b, four, 4);
  add_input(&b, "A", "FP32", 1, 1);
  Inference__InferTensorContents *c = add_contents(&b, add_input(&b, "B", "FP32", 1, 4));
  c->fp32_contents = f;
  c->n_fp32_contents = 4;
  expect_decode_error(&b, PTS_INVALID_ARG, "raw_input_contents");

  /* contents in the wrong field for the datatype */
  builder_init(&b, "m");
  c = add_contents(&b, add_input(&b, "A", "INT32", 1, 4));
  c->fp32_contents = f;
  c->n_fp32_contents = 4;
  expect_decode_error(&b, PTS_INVALID_ARG, "int_contents");

  /* element count against the shape */
  builder_init(&b, "m");
  c = add_contents(&b, add_input(&b, "A", "FP32", 1, 3));
  c->fp32_contents = f;
  c->n_fp32_contents = 4;
  expect_decode_error(&b, PTS_INVALID_ARG, "3 elements");

  /* INT8 narrowing range */
  builder_init(&b, "m");
  c = add_contents(&b, add_input(&b, "A", "INT8", 1, 1));
  c->int_contents = big;
  c->n_int_contents = 1;
  expect_decode_error(&b, PTS_INVALID_ARG, "out of range");

  /* FP16 has no typed field */
  builder_init(&b, "m");
  c = add_contents(&b, add_input(&b, "A", "FP16", 1, 1));
  expect_decode_error(&b, PTS_INVALID_ARG, "raw_input_contents");

  /* unknown datatype, negative dim */
  builder_init(&b, "m");
  add_input(&b, "A", "float32", 1, 1);
  add_raw(&b, four, 4);
  expect_decode_error(&b, PTS_INVALID_ARG, "float32");
  builder_init(&b, "m");
  add_input(&b, "A", "FP32", 1, -1);
  add_raw(&b, four, 4);
  expect_decode_error(&b, PTS_INVALID_ARG, "shape");

  /* missing and extra raw entries */
  builder_init(&b, "m");
  add_input(&b, "A", "FP32", 1, 1);
  expect_decode_error(&b, PTS_INVALID_ARG, "unable to find data");
  builder_init(&b, "m");
  add_input(&b, "A", "FP32", 1, 1);
  add_raw(&b, four, 4);
  add_raw(&b, four, 4);
  expect_decode_error(&b, PTS_INVALID_ARG, "2 entries");

  /* version strings */
  builder_init(&b, "m");
  b.req.model_version = "1a";
  expect_decode_error(&b, PTS_INVALID_ARG, "1a");
  builder_init(&b, "");
  expect_decode_error(&b, PTS_INVALID_ARG, "model_name");
}

static void undecodable_messages(void **state) {
  (void)state;
  static const struct {
    const char *what;
    uint8_t bytes[8];
    size_t n;
  } cases[] = {
      {"truncated key", {0x80}, 1},
      {"length past the end", {0x0a, 0x05, 'a'}, 3},
      {"group wire type", {0x0b, 0x0c}, 2},
      {"field number 0", {0x02, 0x00}, 2},
      {"truncated fixed64", {0x09, 1, 2}, 3},
      {"bad field 1 type", {0x08, 0x01}, 2}, /* model_name as a varint: protobuf-c refuses */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct pts_buf *msg = buf_of(cases[i].bytes, cases[i].n);
    struct pts_infer_request *req;
    struct pts_error err;
    pts_error_clear(&err);
    if (decode(msg, &req, &err) != PTS_INVALID_ARG) fail_msg("%s: decoded", cases[i].what);
    assert_non_null(strstr(err.msg, "ModelInferRequest"));
    pts_infer_request_free(req);
    pts_buf_release(msg);
  }
}

static void versions(void **state) {
  (void)state;
  int64_t v;
  struct pts_error err;
  assert_int_equal(pts_grpc_parse_version("", "m", &v, &err), PTS_OK);
  assert_int_equal(v, -1);
  assert_int_equal(pts_grpc_parse_version("0", "m", &v, &err), PTS_OK);
  assert_int_equal(v, 0);
  assert_int_equal(pts_grpc_parse_version("9223372036854775807", "m", &v, &err), PTS_OK);
  assert_int_equal(v, INT64_MAX);
  assert_int_equal(pts_grpc_parse_version("9223372036854775808", "m", &v, &err), PTS_INVALID_ARG);
  assert_int_equal(pts_grpc_parse_version("-1", "m", &v, &err), PTS_INVALID_ARG);
  assert_int_equal(pts_grpc_parse_version(" 1", "m", &v, &err), PTS_INVALID_ARG);
}

/* ------------------------------------------------------------ encoding */

static uint8_t *flatten(const struct pts_grpc_reply *r) {
  uint8_t *out = pts_malloc(r->size ? r->size : 1);
  size_t used = 0;
  for (size_t i = 0; i < r->n_pieces; i++) {
    memcpy(out + used, r->pieces[i].data, r->pieces[i].size);
    used += r->pieces[i].size;
  }
  assert_int_equal(used, r->size);
  return out;
}

/* A response with a referenced output (has a buffer), a borrowed one and an
 * empty one. */
struct sample {
  struct pts_infer_request *req;
  struct pts_infer_response *resp;
  struct pts_buf *big;
};

static const uint8_t SMALL[] = {9, 8, 7};

static void sample_init(struct sample *s) {
  s->req = pts_infer_request_new();
  s->req->model_name = pts_strdup("m");
  s->req->id = pts_strdup("id-1");
  s->resp = pts_infer_response_new();
  s->resp->model_version = 3;
  s->resp->n_outputs = 3;
  s->resp->outputs = pts_calloc(3, sizeof *s->resp->outputs);
  s->big = pts_buf_new(1000);
  for (int i = 0; i < 1000; i++) ((uint8_t *)s->big->data)[i] = (uint8_t)i;
  struct pts_tensor *t = s->resp->outputs;
  t[0].name = pts_strdup("OUT_BIG");
  t[0].dtype = PTS_DTYPE_UINT8;
  t[0].shape.ndim = 2;
  t[0].shape.dims[0] = 1;
  t[0].shape.dims[1] = 1000;
  t[0].buf = s->big; /* the response owns this reference */
  t[0].data = s->big->data;
  t[0].byte_size = 1000;
  t[1].name = pts_strdup("OUT_SMALL");
  t[1].dtype = PTS_DTYPE_INT8;
  t[1].shape.ndim = 1;
  t[1].shape.dims[0] = 3;
  t[1].data = SMALL;
  t[1].byte_size = 3;
  t[2].name = pts_strdup("OUT_EMPTY");
  t[2].dtype = PTS_DTYPE_FP32;
  t[2].shape.ndim = 2;
  t[2].shape.dims[0] = 1;
}

static void sample_clear(struct sample *s) {
  pts_infer_request_free(s->req);
  pts_infer_response_free(s->resp);
}

static void check_response(const Inference__ModelInferResponse *r, bool stream) {
  assert_string_equal(r->model_name, "m");
  assert_string_equal(r->model_version, "3");
  assert_string_equal(r->id, "id-1");
  assert_int_equal(r->n_outputs, 3);
  assert_string_equal(r->outputs[0]->name, "OUT_BIG");
  assert_string_equal(r->outputs[0]->datatype, "UINT8");
  assert_int_equal(r->outputs[0]->n_shape, 2);
  assert_int_equal(r->outputs[0]->shape[1], 1000);
  assert_null(r->outputs[0]->contents);
  assert_string_equal(r->outputs[1]->datatype, "INT8");
  assert_int_equal(r->n_raw_output_contents, 3);
  assert_int_equal(r->raw_output_contents[0].len, 1000);
  for (int i = 0; i < 1000; i++) assert_int_equal(r->raw_output_contents[0].data[i], (uint8_t)i);
  assert_int_equal(r->raw_output_contents[1].len, 3);
  assert_memory_equal(r->raw_output_contents[1].data, SMALL, 3);
  assert_int_equal(r->raw_output_contents[2].len, 0);
  if (!stream) {
    assert_int_equal(r->n_parameters, 0);
    return;
  }
  assert_int_equal(r->n_parameters, 1);
  assert_string_equal(r->parameters[0]->key, "triton_final_response");
  assert_int_equal(r->parameters[0]->value->parameter_choice_case,
                   INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM);
  assert_true(r->parameters[0]->value->bool_param);
}

static void encode_unary_response(void **state) {
  (void)state;
  struct sample s;
  sample_init(&s);
  struct pts_grpc_reply reply;
  struct pts_error err;
  assert_int_equal(pts_grpc_encode_infer(s.req, s.resp, false, &reply, &err), PTS_OK);
  /* The big output is referenced, not copied. */
  bool referenced = false;
  for (size_t i = 0; i < reply.n_pieces; i++)
    if (reply.pieces[i].data == s.big->data && reply.pieces[i].buf == s.big) referenced = true;
  assert_true(referenced);
  uint8_t *flat = flatten(&reply);
  size_t size = reply.size;
  sample_clear(&s); /* the reply keeps what it references alive */
  pts_grpc_reply_clear(&reply);
  Inference__ModelInferResponse *r = inference__model_infer_response__unpack(NULL, size, flat);
  assert_non_null(r);
  check_response(r, false);
  inference__model_infer_response__free_unpacked(r, NULL);
  pts_free(flat);
}

static void encode_stream_response(void **state) {
  (void)state;
  struct sample s;
  sample_init(&s);
  struct pts_grpc_reply reply;
  struct pts_error err;
  assert_int_equal(pts_grpc_encode_infer(s.req, s.resp, true, &reply, &err), PTS_OK);
  uint8_t *flat = flatten(&reply);
  Inference__ModelStreamInferResponse *r =
      inference__model_stream_infer_response__unpack(NULL, reply.size, flat);
  assert_non_null(r);
  assert_string_equal(r->error_message, "");
  assert_non_null(r->infer_response);
  check_response(r->infer_response, true);
  inference__model_stream_infer_response__free_unpacked(r, NULL);
  pts_free(flat);
  pts_grpc_reply_clear(&reply);
  sample_clear(&s);

  assert_int_equal(pts_grpc_encode_stream_error("rq", "it broke", &reply, &err), PTS_OK);
  flat = flatten(&reply);
  r = inference__model_stream_infer_response__unpack(NULL, reply.size, flat);
  assert_non_null(r);
  assert_string_equal(r->error_message, "it broke");
  assert_string_equal(r->infer_response->id, "rq");
  inference__model_stream_infer_response__free_unpacked(r, NULL);
  pts_free(flat);
  pts_grpc_reply_clear(&reply);
}

/* The reply's bytes are what protobuf-c writes for the message they hold:
 * unpacked and packed again, byte for byte the same, unary and streamed,
 * for the sample and for the corners of proto3's form (no id, an output
 * with an empty name, a scalar output, a dimension of three varint bytes,
 * the latest version, no outputs at all). */
static void expect_canonical(const struct pts_infer_request *req,
                             const struct pts_infer_response *resp) {
  for (int stream = 0; stream < 2; stream++) {
    struct pts_grpc_reply reply;
    struct pts_error err;
    assert_int_equal(pts_grpc_encode_infer(req, resp, stream, &reply, &err), PTS_OK);
    uint8_t *flat = flatten(&reply);
    ProtobufCMessage *m =
        stream ? protobuf_c_message_unpack(&inference__model_stream_infer_response__descriptor,
                                           NULL, reply.size, flat)
               : protobuf_c_message_unpack(&inference__model_infer_response__descriptor, NULL,
                                           reply.size, flat);
    assert_non_null(m);
    size_t size = protobuf_c_message_get_packed_size(m);
    assert_int_equal(size, reply.size);
    uint8_t *again = pts_malloc(size ? size : 1);
    protobuf_c_message_pack(m, again);
    assert_memory_equal(again, flat, size);
    pts_free(again);
    protobuf_c_message_free_unpacked(m, NULL);
    pts_free(flat);
    pts_grpc_reply_clear(&reply);
  }
}

static void encoded_bytes_are_protobuf_cs(void **state) {
  (void)state;
  struct sample s;
  sample_init(&s);
  expect_canonical(s.req, s.resp);
  pts_free(s.req->id);
  s.req->id = NULL;
  s.resp->model_version = -1;
  pts_free(s.resp->outputs[1].name);
  s.resp->outputs[1].name = pts_strdup("");
  s.resp->outputs[1].shape.ndim = 0;
  s.resp->outputs[1].byte_size = 1;
  s.resp->outputs[0].shape.dims[1] = 300000;
  expect_canonical(s.req, s.resp);
  size_t n = s.resp->n_outputs;
  s.resp->n_outputs = 0;
  expect_canonical(s.req, s.resp);
  s.resp->n_outputs = n;
  sample_clear(&s);
}

/* ------------------------------------------------------------ the rpc table */

static void rpc_table(void **state) {
  (void)state;
  /* Every rpc of protocol-facts §2.2, plus the health check. */
  static const char *const names[] = {"ServerLive",
                                      "ServerReady",
                                      "ModelReady",
                                      "ServerMetadata",
                                      "ModelMetadata",
                                      "ModelInfer",
                                      "ModelStreamInfer",
                                      "ModelConfig",
                                      "ModelStatistics",
                                      "RepositoryIndex",
                                      "RepositoryModelLoad",
                                      "RepositoryModelUnload",
                                      "SystemSharedMemoryStatus",
                                      "SystemSharedMemoryRegister",
                                      "SystemSharedMemoryUnregister",
                                      "CudaSharedMemoryStatus",
                                      "CudaSharedMemoryRegister",
                                      "CudaSharedMemoryUnregister",
                                      "TraceSetting",
                                      "LogSettings"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[128];
    int n = snprintf(path, sizeof path, "/inference.GRPCInferenceService/%s", names[i]);
    const struct pts_grpc_rpc *r = pts_grpc_rpc_find(path, (size_t)n);
    if (!r) fail_msg("%s is not served", path);
    enum pts_grpc_rpc_kind want = strcmp(names[i], "ModelInfer") == 0         ? PTS_GRPC_INFER
                                  : strcmp(names[i], "ModelStreamInfer") == 0 ? PTS_GRPC_STREAM
                                  : strncmp(names[i], "Repository", 10) == 0  ? PTS_GRPC_ASYNC
                                                                              : PTS_GRPC_UNARY;
    assert_int_equal(r->kind, want);
    assert_true(want != PTS_GRPC_UNARY || r->fn != NULL);
    assert_true(want != PTS_GRPC_ASYNC || r->start != NULL);
  }
  const char *h = "/grpc.health.v1.Health/Check";
  assert_non_null(pts_grpc_rpc_find(h, strlen(h)));
  const char *w = "/grpc.health.v1.Health/Watch";
  assert_null(pts_grpc_rpc_find(w, strlen(w)));
  /* Lengths matter: a prefix is not a match. */
  const char *p = "/inference.GRPCInferenceService/ModelInferX";
  assert_null(pts_grpc_rpc_find(p, strlen(p)));
  assert_null(pts_grpc_rpc_find(p, strlen(p) - 2));
  assert_non_null(pts_grpc_rpc_find(p, strlen(p) - 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(raw_inputs_are_views_of_the_message),
      cmocka_unit_test(raw_entries_first_on_the_wire),
      cmocka_unit_test(typed_contents_are_decoded_once),
      cmocka_unit_test(parameters),
      cmocka_unit_test(bad_requests),
      cmocka_unit_test(undecodable_messages),
      cmocka_unit_test(versions),
      cmocka_unit_test(encode_unary_response),
      cmocka_unit_test(encode_stream_response),
      cmocka_unit_test(encoded_bytes_are_protobuf_cs),
      cmocka_unit_test(rpc_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
