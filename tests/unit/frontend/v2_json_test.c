/* tests/unit/frontend/v2_json_test.c — the KServe v2 REST codec as pure
 * functions: request decoding (protocol-facts §1.6, §1.7, §5) and response
 * encoding. Expected bytes are written out by hand from the little-endian
 * layouts of §5 (e.g. 1.5f = 0x3FC00000); expected JSON text is what a
 * reader of §1.6 would write, with floats in Python's repr form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "config/json_arena.h"
#include "config/model_config.h"
#include "core/alloc.h"
#include "frontend/http/jsonw.h"
#include "frontend/http/v2_json.h"
#include "scheduler/request.h"

/* ------------------------------------------------------------------ */
/* helpers                                                             */

/* Decodes json + tail with the header length set to the JSON's length. */
static enum pts_status decode_with_tail(const char *json, const void *tail, size_t tail_len,
                                        struct pts_infer_request **out, struct pts_buf **body_out,
                                        struct pts_error *err) {
  size_t jl = strlen(json);
  struct pts_buf *body = pts_buf_new(jl + tail_len);
  memcpy(body->data, json, jl);
  if (tail_len) memcpy((char *)body->data + jl, tail, tail_len);
  struct pts_infer_request *req = pts_infer_request_new();
  enum pts_status st = pts_v2_decode_infer(body, jl, req, err);
  *out = req;
  if (body_out)
    *body_out = body;
  else
    pts_buf_release(body);
  return st;
}

static enum pts_status decode(const char *json, struct pts_infer_request **out,
                              struct pts_error *err) {
  return decode_with_tail(json, NULL, 0, out, NULL, err);
}

/* Expects `json` to be refused with `code` and every word in the message. */
static void expect_error(const char *json, enum pts_status code, const char *w1, const char *w2) {
  struct pts_infer_request *req;
  struct pts_error err;
  enum pts_status st = decode(json, &req, &err);
  pts_infer_request_free(req);
  if (st != code) fail_msg("%s\n  -> status %d (%s), want %d", json, st, err.msg, code);
  if (w1 && !strstr(err.msg, w1)) fail_msg("'%s' not in error '%s'", w1, err.msg);
  if (w2 && !strstr(err.msg, w2)) fail_msg("'%s' not in error '%s'", w2, err.msg);
}

/* Decodes one JSON input and checks its bytes. */
static void expect_bytes(const char *dtype, const char *shape, const char *data, const void *want,
                         size_t want_len) {
  char json[4096];
  snprintf(json, sizeof json,
           "{\"inputs\":[{\"name\":\"IN\",\"datatype\":\"%s\",\"shape\":%s,\"data\":%s}]}", dtype,
           shape, data);
  struct pts_infer_request *req;
  struct pts_error err;
  enum pts_status st = decode(json, &req, &err);
  if (st != PTS_OK) fail_msg("%s -> %s", json, err.msg);
  assert_int_equal(req->n_inputs, 1);
  const struct pts_tensor *t = &req->inputs[0];
  assert_string_equal(t->name, "IN");
  assert_string_equal(pts_dtype_name(t->dtype), dtype);
  assert_int_equal(t->byte_size, want_len);
  assert_memory_equal(t->data, want, want_len);
  pts_infer_request_free(req);
}

#define BYTES(...) \
  ((const unsigned char[]){__VA_ARGS__}), sizeof((const unsigned char[]){__VA_ARGS__})

/* ------------------------------------------------------------------ */
/* JSON tensor data, every datatype                                    */

static void bool_data(void **state) {
  (void)state;
  expect_bytes("BOOL", "[3]", "[true,false,true]", BYTES(1, 0, 1));
  /* Strict: 0/1, strings and null are not booleans (Triton). */
  expect_error(
      "{\"inputs\":[{\"name\":\"B\",\"datatype\":\"BOOL\",\"shape\":[2],\"data\":[true,1]}]}",
      PTS_INVALID_ARG, "'B'", "element 1");
  expect_error(
      "{\"inputs\":[{\"name\":\"B\",\"datatype\":\"BOOL\",\"shape\":[1],\"data\":[\"true\"]}]}",
      PTS_INVALID_ARG, "true or false", NULL);
}

static void unsigned_ranges(void **state) {
  (void)state;
  expect_bytes("UINT8", "[2]", "[0,255]", BYTES(0x00, 0xff));
  expect_bytes("UINT16", "[2]", "[1,65535]", BYTES(0x01, 0x00, 0xff, 0xff));
  expect_bytes("UINT32", "[1]", "[4294967295]", BYTES(0xff, 0xff, 0xff, 0xff));
  expect_bytes("UINT64", "[1]", "[9223372036854775807]",
               BYTES(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f));
  expect_bytes("UINT32", "[1]", "[305419896]", BYTES(0x78, 0x56, 0x34, 0x12)); /* 0x12345678 */
  expect_error(
      "{\"inputs\":[{\"name\":\"U\",\"datatype\":\"UINT8\",\"shape\":[2],\"data\":[1,256]}]}",
      PTS_INVALID_ARG, "256", "element 1");
  expect_error("{\"inputs\":[{\"name\":\"U\",\"datatype\":\"UINT8\",\"shape\":[1],\"data\":[-1]}]}",
               PTS_INVALID_ARG, "-1", "'U'");
  expect_error(
      "{\"inputs\":[{\"name\":\"U\",\"datatype\":\"UINT16\",\"shape\":[1],\"data\":[65536]}]}",
      PTS_INVALID_ARG, "65536", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"U\",\"datatype\":\"UINT32\",\"shape\":[1],\"data\":[4294967296]}]}",
      PTS_INVALID_ARG, "4294967296", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"U\",\"datatype\":\"UINT64\",\"shape\":[1],\"data\":[-1]}]}",
      PTS_INVALID_ARG, "-1", NULL);
  /* The full UINT64 range, beyond what a JSON int64 parser holds. */
  expect_bytes("UINT64", "[3]", "[18446744073709551615, 9223372036854775808,1]",
               BYTES(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x80, 1,
                     0, 0, 0, 0, 0, 0, 0));
  /* ...and only there; digits inside strings stay strings. */
  expect_error(
      "{\"inputs\":[{\"name\":\"I\",\"datatype\":\"INT64\",\"shape\":[1],"
      "\"data\":[9223372036854775808]}]}",
      PTS_INVALID_ARG, "9223372036854775808", "out of range");
  expect_error(
      "{\"inputs\":[{\"name\":\"U\",\"datatype\":\"UINT64\",\"shape\":[1],"
      "\"data\":[18446744073709551616]}]}",
      PTS_INVALID_ARG, "too big integer", NULL);
  expect_bytes("BYTES", "[1]", "[\"18446744073709551615\"]",
               BYTES(20, 0, 0, 0, '1', '8', '4', '4', '6', '7', '4', '4', '0', '7', '3', '7', '0',
                     '9', '5', '5', '1', '6', '1', '5'));
}

static void signed_ranges(void **state) {
  (void)state;
  expect_bytes("INT8", "[2]", "[-128,127]", BYTES(0x80, 0x7f));
  expect_bytes("INT16", "[2]", "[-32768,32767]", BYTES(0x00, 0x80, 0xff, 0x7f));
  expect_bytes("INT32", "[2]", "[-2147483648,2147483647]",
               BYTES(0x00, 0x00, 0x00, 0x80, 0xff, 0xff, 0xff, 0x7f));
  expect_bytes("INT64", "[2]", "[-9223372036854775808,-2]",
               BYTES(0, 0, 0, 0, 0, 0, 0, 0x80, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff));
  expect_error("{\"inputs\":[{\"name\":\"I\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[128]}]}",
               PTS_INVALID_ARG, "128", "INT8");
  expect_error(
      "{\"inputs\":[{\"name\":\"I\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[-129]}]}",
      PTS_INVALID_ARG, "-129", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"I\",\"datatype\":\"INT16\",\"shape\":[1],\"data\":[32768]}]}",
      PTS_INVALID_ARG, "32768", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"I\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[2147483648]}]}",
      PTS_INVALID_ARG, "2147483648", NULL);
  /* 1.0 is a real, not an integer (Triton rejects it too). */
  expect_error(
      "{\"inputs\":[{\"name\":\"I\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[1.0]}]}",
      PTS_INVALID_ARG, "an integer", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"I\",\"datatype\":\"INT64\",\"shape\":[1],\"data\":[true]}]}",
      PTS_INVALID_ARG, "boolean", NULL);
}

static void float_data(void **state) {
  (void)state;
  /* 1.5f = 0x3FC00000, -2.0f = 0xC0000000; integers are numbers too. */
  expect_bytes("FP32", "[3]", "[1.5,-2,0]",
               BYTES(0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0, 0, 0, 0));
  /* 0.1 = 0x3FB999999999999A. */
  expect_bytes("FP64", "[1]", "[0.1]", BYTES(0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f));
  expect_error(
      "{\"inputs\":[{\"name\":\"F\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1e39]}]}",
      PTS_INVALID_ARG, "out of range", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"F\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[\"1\"]}]}",
      PTS_INVALID_ARG, "a number", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"F\",\"datatype\":\"FP64\",\"shape\":[1],\"data\":[null]}]}",
      PTS_INVALID_ARG, "null", NULL);
}

static void half_precision_refused_in_json(void **state) {
  (void)state;
  expect_error("{\"inputs\":[{\"name\":\"H\",\"datatype\":\"FP16\",\"shape\":[1],\"data\":[1.0]}]}",
               PTS_INVALID_ARG, "FP16", "binary");
  expect_error("{\"inputs\":[{\"name\":\"H\",\"datatype\":\"BF16\",\"shape\":[1],\"data\":[1.0]}]}",
               PTS_INVALID_ARG, "BF16", "binary");
}

static void bytes_data(void **state) {
  (void)state;
  /* §5's example: ["ab", ""] -> 02 00 00 00 61 62 00 00 00 00. */
  expect_bytes("BYTES", "[2]", "[\"ab\",\"\"]", BYTES(2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0));
  /* Escapes and NUL bytes survive; UTF-8 is kept as bytes. */
  expect_bytes("BYTES", "[1]", "[\"a\\u0000\\u00fc\"]", BYTES(4, 0, 0, 0, 'a', 0, 0xc3, 0xbc));
  expect_error("{\"inputs\":[{\"name\":\"S\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[7]}]}",
               PTS_INVALID_ARG, "a string", NULL);
}

static void nested_equals_flat(void **state) {
  (void)state;
  const unsigned char want[] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0,
                                4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0};
  expect_bytes("INT32", "[2,3]", "[1,2,3,4,5,6]", want, sizeof want);
  expect_bytes("INT32", "[2,3]", "[[1,2,3],[4,5,6]]", want, sizeof want);
  /* Any nesting flattens row-major; only the count must match (Triton). */
  expect_bytes("INT32", "[2,3]", "[[1],[2,[3,4]],5,[[6]]]", want, sizeof want);
  /* Zero elements. */
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(decode("{\"inputs\":[{\"name\":\"Z\",\"datatype\":\"FP32\",\"shape\":[0,2],"
                          "\"data\":[]}]}",
                          &req, &err),
                   PTS_OK);
  assert_int_equal(req->inputs[0].byte_size, 0);
  assert_int_equal(req->inputs[0].shape.ndim, 2);
  pts_infer_request_free(req);
}

static void count_must_match_shape(void **state) {
  (void)state;
  expect_error(
      "{\"inputs\":[{\"name\":\"C\",\"datatype\":\"FP32\",\"shape\":[2,2],\"data\":[1,2,3]}]}",
      PTS_INVALID_ARG, "has 3 elements", "[2,2]");
  expect_error(
      "{\"inputs\":[{\"name\":\"C\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[[1],[2]]}]}",
      PTS_INVALID_ARG, "'C'", NULL);
  expect_error("{\"inputs\":[{\"name\":\"C\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":5}]}",
               PTS_INVALID_ARG, "must be an array", NULL);
}

static char *nested(int depth) {
  static char buf[1024];
  char *p = buf;
  for (int i = 0; i < depth; i++) *p++ = '[';
  *p++ = '7';
  for (int i = 0; i < depth; i++) *p++ = ']';
  *p = '\0';
  return buf;
}

static void depth_limit(void **state) {
  (void)state;
  char json[1200];
  /* The data array itself is level 1: 100 levels are fine, 101 are not. */
  snprintf(json, sizeof json,
           "{\"inputs\":[{\"name\":\"D\",\"datatype\":\"INT64\",\"shape\":[1],\"data\":%s}]}",
           nested(100));
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(decode(json, &req, &err), PTS_OK);
  assert_int_equal(((const unsigned char *)req->inputs[0].data)[0], 7);
  pts_infer_request_free(req);
  snprintf(json, sizeof json,
           "{\"inputs\":[{\"name\":\"D\",\"datatype\":\"INT64\",\"shape\":[1],\"data\":%s}]}",
           nested(101));
  /* Triton's words first (its QA matches them), then the input */
  expect_error(json, PTS_INVALID_ARG, "JSON nesting depth exceeds maximum allowed limit (100)",
               "'D'");
}

/* ------------------------------------------------------------------ */
/* structure                                                           */

static void structure_errors(void **state) {
  (void)state;
  expect_error("{\"inputs\": [", PTS_INVALID_ARG, "JSON", "line 1");
  expect_error("", PTS_INVALID_ARG, "JSON", NULL);
  expect_error("[1,2]", PTS_INVALID_ARG, "object", NULL);
  expect_error("{\"id\":\"x\"}", PTS_INVALID_ARG, "inputs", NULL);
  expect_error("{\"inputs\":{}}", PTS_INVALID_ARG, "inputs", NULL);
  expect_error("{\"inputs\":[5]}", PTS_INVALID_ARG, "element 0 of 'inputs'", NULL);
  expect_error("{\"id\":5,\"inputs\":[]}", PTS_INVALID_ARG, "'id'", NULL);
  expect_error("{\"inputs\":[{\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", PTS_INVALID_ARG,
               "'name'", NULL);
  expect_error("{\"inputs\":[{\"name\":\"X\",\"shape\":[1],\"data\":[1]}]}", PTS_INVALID_ARG,
               "'datatype'", "'X'");
  expect_error("{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"data\":[1]}]}",
               PTS_INVALID_ARG, "'shape'", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FLOAT32\",\"shape\":[1],\"data\":[1]}]}",
      PTS_INVALID_ARG, "FLOAT32", NULL);
  expect_error("{\"inputs\":[{\"name\":\"X\",\"datatype\":\"fp32\",\"shape\":[1],\"data\":[1]}]}",
               PTS_INVALID_ARG, "fp32", NULL);
  expect_error("{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[-1],\"data\":[1]}]}",
               PTS_INVALID_ARG, "non-negative", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[1,\"4\"],\"data\":[1]}]}",
      PTS_INVALID_ARG, "'shape' element 1", NULL);
  expect_error("{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[1.0],\"data\":[1]}]}",
               PTS_INVALID_ARG, "'shape'", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\","
      "\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data\":[1]}]}",
      PTS_INVALID_ARG, "17 dimensions", NULL);
  /* The product of the shape overflows int64, or its bytes do (Triton's
   * QA matches both phrases: qa/L0_http test_buffer_size_overflow). */
  expect_error(
      "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\","
      "\"shape\":[4294967296,4294967296],\"data\":[1]}]}",
      PTS_INVALID_ARG,
      "input 'X': shape [4294967296,4294967296] causes total element count to exceed maximum "
      "size of 9223372036854775807",
      NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\","
      "\"shape\":[4,1152921504606846978],\"data\":[1]}]}",
      PTS_INVALID_ARG, "byte size overflow for input 'X': shape [4,1152921504606846978] of FP32",
      NULL);
  /* The same element count of one-byte elements is a size, refused later by
   * the data it lacks, not as an overflow. */
  expect_error(
      "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"UINT8\","
      "\"shape\":[4,1152921504606846978],\"data\":[1]}]}",
      PTS_INVALID_ARG, "'X'", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]},"
      "{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[2]}]}",
      PTS_INVALID_ARG, "'X'", "more than once");
  expect_error("{\"inputs\":[], \"inputs\":[]}", PTS_INVALID_ARG, "duplicate", NULL);
}

static void data_source_exactly_one(void **state) {
  (void)state;
  expect_error("{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[1]}]}",
               PTS_INVALID_ARG, "'X'", "none of them");
  expect_error(
      "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1],"
      "\"parameters\":{\"binary_data_size\":4}}]}",
      PTS_INVALID_ARG, "'data' 'parameters.binary_data_size'", NULL);
  expect_error(
      "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1],"
      "\"parameters\":{\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":4}}]}",
      PTS_INVALID_ARG, "'data' 'parameters.shared_memory_region'", NULL);
}

/* §1.15: the decoder records where the bytes are; the server resolves it. */
static void shared_memory_params(void **state) {
  (void)state;
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(
      decode("{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]},"
             "{\"name\":\"B\",\"datatype\":\"FP32\",\"shape\":[2],\"parameters\":{"
             "\"shared_memory_region\":\"in\",\"shared_memory_byte_size\":8,"
             "\"shared_memory_offset\":16}}],\"outputs\":[{\"name\":\"O\",\"parameters\":{"
             "\"binary_data\":false,\"shared_memory_region\":\"out\","
             "\"shared_memory_byte_size\":32}}]}",
             &req, &err),
      PTS_OK);
  assert_non_null(req->input_shm);
  assert_null(req->input_shm[0].region);
  assert_string_equal(req->input_shm[1].region, "in");
  assert_int_equal(req->input_shm[1].byte_size, 8);
  assert_int_equal(req->input_shm[1].offset, 16);
  assert_null(req->inputs[1].data); /* no bytes in the body */
  assert_string_equal(req->outputs[0].shm.region, "out");
  assert_int_equal(req->outputs[0].shm.byte_size, 32);
  assert_int_equal(req->outputs[0].shm.offset, 0);
  pts_infer_request_free(req);
  /* no shared memory: no array at all */
  assert_int_equal(
      decode("{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}",
             &req, &err),
      PTS_OK);
  assert_null(req->input_shm);
  pts_infer_request_free(req);
  /* Sizes and offsets are any uint64, as in Triton: 2^64 - 32 is kept as
   * it is, for the region's bounds to refuse in Triton's words. */
  assert_int_equal(
      decode("{\"inputs\":[{\"name\":\"B\",\"datatype\":\"FP32\",\"shape\":[2],\"parameters\":{"
             "\"shared_memory_region\":\"in\",\"shared_memory_byte_size\":18446744073709551584,"
             "\"shared_memory_offset\":32}}],\"outputs\":[{\"name\":\"O\",\"parameters\":{"
             "\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":64,"
             "\"shared_memory_offset\":18446744073709551584}}]}",
             &req, &err),
      PTS_OK);
  assert_true(req->input_shm[0].byte_size == UINT64_MAX - 31);
  assert_int_equal(req->input_shm[0].offset, 32);
  assert_true(req->outputs[0].shm.offset == UINT64_MAX - 31);
  assert_int_equal(req->outputs[0].shm.byte_size, 64);
  pts_infer_request_free(req);

  const char *in = "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[1],"
                   "\"parameters\":{%s}}]}";
  const char *out = "{\"inputs\":[],\"outputs\":[{\"name\":\"O\",\"parameters\":{%s}}]}";
  struct {
    const char *tmpl, *params, *w1, *w2;
  } bad[] = {
      {in, "\"shared_memory_region\":\"r\"", "input 'X'", "'shared_memory_byte_size' must be given"},
      {in, "\"shared_memory_region\":7,\"shared_memory_byte_size\":4", "input 'X'",
       "'shared_memory_region' must be a non-empty string"},
      {in, "\"shared_memory_region\":\"\",\"shared_memory_byte_size\":4", "input 'X'",
       "non-empty string"},
      {in, "\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":-4", "input 'X'",
       "'shared_memory_byte_size' must be a non-negative integer"},
      {in, "\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":4,\"shared_memory_offset\":"
           "\"0\"",
       "input 'X'", "'shared_memory_offset' must be a non-negative integer"},
      {out, "\"shared_memory_byte_size\":4", "output 'O'", "without 'shared_memory_region'"},
      {out, "\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":4,\"binary_data\":true",
       "output 'O'", "'binary_data'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char json[512];
    snprintf(json, sizeof json, bad[i].tmpl, bad[i].params);
    expect_error(json, PTS_INVALID_ARG, bad[i].w1, bad[i].w2);
  }
}

static void request_parameters(void **state) {
  (void)state;
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(decode("{\"id\":\"r1\",\"parameters\":{\"binary_data_output\":true,"
                          "\"priority\":2,\"timeout\":5000,\"custom\":\"x\"},\"inputs\":[]}",
                          &req, &err),
                   PTS_OK);
  assert_string_equal(req->id, "r1");
  assert_true(req->binary_data_output);
  assert_int_equal(req->priority, 2);
  assert_int_equal(req->timeout_us, 5000);
  pts_infer_request_free(req);
  expect_error("{\"parameters\":{\"triton_enable_empty_final_response\":true},\"inputs\":[]}",
               PTS_INVALID_ARG, "triton_enable_empty_final_response", NULL);
  expect_error("{\"parameters\":{\"binary_data_output\":1},\"inputs\":[]}", PTS_INVALID_ARG,
               "binary_data_output", NULL);
  expect_error("{\"parameters\":{\"priority\":-1},\"inputs\":[]}", PTS_INVALID_ARG, "priority",
               NULL);
  expect_error("{\"parameters\":[],\"inputs\":[]}", PTS_INVALID_ARG, "parameters", NULL);
}

static void requested_outputs(void **state) {
  (void)state;
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(decode("{\"inputs\":[],\"outputs\":[{\"name\":\"A\",\"parameters\":"
                          "{\"binary_data\":true}},{\"name\":\"B\"},{\"name\":\"C\","
                          "\"parameters\":{\"binary_data\":false}}]}",
                          &req, &err),
                   PTS_OK);
  assert_int_equal(req->n_outputs, 3);
  assert_string_equal(req->outputs[0].name, "A");
  assert_true(req->outputs[0].binary && req->outputs[0].binary_set);
  assert_false(req->outputs[1].binary || req->outputs[1].binary_set);
  assert_true(!req->outputs[2].binary && req->outputs[2].binary_set);
  pts_infer_request_free(req);
  expect_error("{\"inputs\":[],\"outputs\":[{\"name\":\"A\"},{\"name\":\"A\"}]}", PTS_INVALID_ARG,
               "output 'A' already exists in request", NULL);
  expect_error("{\"inputs\":[],\"outputs\":{}}", PTS_INVALID_ARG, "outputs", NULL);
  assert_int_equal(
      decode("{\"inputs\":[],\"outputs\":[{\"name\":\"A\",\"parameters\":{\"classification\":2}}]}",
             &req, &err),
      PTS_OK);
  assert_int_equal(req->outputs[0].classification, 2);
  pts_infer_request_free(req);
  expect_error(
      "{\"inputs\":[],\"outputs\":[{\"name\":\"A\",\"parameters\":{\"classification\":\"2\"}}]}",
      PTS_INVALID_ARG, "classification", NULL);
  expect_error(
      "{\"inputs\":[],\"outputs\":[{\"name\":\"A\",\"parameters\":{\"classification\":0}}]}",
      PTS_INVALID_ARG, "classification", NULL);
  expect_error(
      "{\"inputs\":[],\"outputs\":[{\"name\":\"A\",\"parameters\":{\"binary_data\":\"y\"}}]}",
      PTS_INVALID_ARG, "binary_data", NULL);
}

/* ------------------------------------------------------------------ */
/* binary extension                                                    */

static void binary_inputs_are_views(void **state) {
  (void)state;
  /* FP32 [2] binary, INT8 [1] JSON, BYTES [1] binary: chunks in inputs order. */
  const char *json =
      "{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP32\",\"shape\":[2],\"parameters\":"
      "{\"binary_data_size\":8}},{\"name\":\"B\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[-1]}"
      ","
      "{\"name\":\"C\",\"datatype\":\"BYTES\",\"shape\":[1],\"parameters\":"
      "{\"binary_data_size\":7}}]}";
  const unsigned char tail[] = {0, 0, 0xc0, 0x3f, 0, 0, 0x80, 0x3f, 3, 0, 0, 0, 'x', 'y', 'z'};
  struct pts_infer_request *req;
  struct pts_buf *body;
  struct pts_error err;
  assert_int_equal(decode_with_tail(json, tail, sizeof tail, &req, &body, &err), PTS_OK);
  size_t jl = strlen(json);
  assert_int_equal(req->n_inputs, 3);
  /* Zero copy: A and C point into the body buffer and hold a reference. */
  assert_ptr_equal(req->inputs[0].buf, body);
  assert_ptr_equal(req->inputs[0].data, (char *)body->data + jl);
  assert_int_equal(req->inputs[0].byte_size, 8);
  assert_ptr_equal(req->inputs[2].buf, body);
  assert_ptr_equal(req->inputs[2].data, (char *)body->data + jl + 8);
  assert_int_equal(req->inputs[2].byte_size, 7);
  assert_int_equal(atomic_load(&body->refs), 3);
  assert_int_equal(((const signed char *)req->inputs[1].data)[0], -1);
  pts_buf_release(body); /* the request keeps it alive */
  assert_memory_equal(req->inputs[2].data, tail + 8, 7);
  pts_infer_request_free(req);
}

static void expect_binary_error(const char *json, const void *tail, size_t tail_len, const char *w1,
                                const char *w2) {
  struct pts_infer_request *req;
  struct pts_error err;
  enum pts_status st = decode_with_tail(json, tail, tail_len, &req, NULL, &err);
  pts_infer_request_free(req);
  if (st != PTS_INVALID_ARG) fail_msg("%s: status %d (%s)", json, st, err.msg);
  if (w1 && !strstr(err.msg, w1)) fail_msg("'%s' not in '%s'", w1, err.msg);
  if (w2 && !strstr(err.msg, w2)) fail_msg("'%s' not in '%s'", w2, err.msg);
}

static void binary_chunk_accounting(void **state) {
  (void)state;
  const char *one16 =
      "{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP32\",\"shape\":[4],"
      "\"parameters\":{\"binary_data_size\":16}}]}";
  unsigned char raw[19] = {0};
  expect_binary_error(one16, raw, 10, "expecting 16 additional bytes", "only 10");
  expect_binary_error(one16, raw, 19, "unexpected additional input data", "3 bytes");
  /* A JSON-only request with bytes after the header. */
  expect_binary_error(
      "{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP32\",\"shape\":[1],"
      "\"data\":[1]}]}",
      raw, 2, "unexpected additional input data", NULL);
  /* Size must equal the fixed-size byte count of the shape. */
  expect_binary_error(
      "{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP32\",\"shape\":[4],"
      "\"parameters\":{\"binary_data_size\":12}}]}",
      raw, 12, "'A'", "needs 16 bytes");
  expect_binary_error(
      "{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP32\",\"shape\":[4],"
      "\"parameters\":{\"binary_data_size\":-4}}]}",
      raw, 16, "binary_data_size", NULL);
  expect_binary_error(
      "{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP32\",\"shape\":[4],"
      "\"parameters\":{\"binary_data_size\":\"16\"}}]}",
      raw, 16, "binary_data_size", NULL);
  /* Zero-byte binary input with nothing after the header. */
  struct pts_infer_request *req;
  struct pts_error err;
  assert_int_equal(decode_with_tail("{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP32\","
                                    "\"shape\":[0],\"parameters\":{\"binary_data_size\":0}}]}",
                                    NULL, 0, &req, NULL, &err),
                   PTS_OK);
  assert_int_equal(req->inputs[0].byte_size, 0);
  pts_infer_request_free(req);
}

/* A raw binary request against the configuration `text`: *req filled,
 * the status returned, the message in err. */
static enum pts_status raw(const char *text, const void *data, size_t size,
                           struct pts_infer_request **req, struct pts_error *err) {
  Inference__ModelConfig *cfg = NULL;
  assert_int_equal(pts_model_config_parse(text, strlen(text), "t", &cfg, err), PTS_OK);
  struct pts_buf *body = pts_buf_new(size ? size : 1);
  body->size = size;
  if (size) memcpy(body->data, data, size);
  *req = pts_infer_request_new();
  enum pts_status st = pts_v2_decode_raw(body, cfg, *req, err);
  pts_buf_release(body); /* the input keeps its own reference */
  pts_model_config_free(cfg);
  return st;
}

#define ONE_INPUT(type, dims, batch)                                                      \
  "name: \"m\" max_batch_size: " batch " input [ { name: \"IN\" data_type: " type       \
  " dims: " dims " } ] output [ { name: \"OUT\" data_type: " type " dims: " dims " } ]"

/* Triton's raw binary requests: the one input's name, type and shape from
 * the configuration (a batch of one when the model batches), the variable
 * dim from the body's length, BYTES as one element with its length
 * prepended, every output in binary; and Triton's refusals. */
static void raw_binary_requests(void **state) {
  (void)state;
  struct pts_infer_request *req;
  struct pts_error err;
  float f[6] = {1, 2, 3, 4, 5, 6};
  /* batching, one variable dim: [1, 2, -1] from 24 bytes is [1, 2, 3] */
  assert_int_equal(raw(ONE_INPUT("TYPE_FP32", "[ 2, -1 ]", "4"), f, sizeof f, &req, &err), PTS_OK);
  assert_int_equal(req->n_inputs, 1);
  assert_string_equal(req->inputs[0].name, "IN");
  assert_int_equal(req->inputs[0].dtype, PTS_DTYPE_FP32);
  assert_int_equal(req->inputs[0].shape.ndim, 3);
  assert_int_equal(req->inputs[0].shape.dims[0], 1);
  assert_int_equal(req->inputs[0].shape.dims[1], 2);
  assert_int_equal(req->inputs[0].shape.dims[2], 3);
  assert_int_equal(req->inputs[0].byte_size, sizeof f);
  assert_memory_equal(req->inputs[0].data, f, sizeof f);
  assert_true(req->binary_data_output);
  pts_infer_request_free(req);
  /* no batching, fixed dims */
  assert_int_equal(raw(ONE_INPUT("TYPE_INT16", "[ 3 ]", "0"), f, 6, &req, &err), PTS_OK);
  assert_int_equal(req->inputs[0].shape.ndim, 1);
  assert_int_equal(req->inputs[0].shape.dims[0], 3);
  pts_infer_request_free(req);
  /* BYTES [1]: one element, its 4-byte little-endian length first */
  assert_int_equal(raw(ONE_INPUT("TYPE_STRING", "[ 1 ]", "8"), "hello", 5, &req, &err), PTS_OK);
  assert_int_equal(req->inputs[0].shape.ndim, 2);
  assert_int_equal(req->inputs[0].byte_size, 9);
  assert_memory_equal(req->inputs[0].data, "\x05\x00\x00\x00hello", 9);
  pts_infer_request_free(req);
  /* the refusals, Triton's words first */
  static const struct {
    const char *cfg;
    size_t size;
    const char *words;
  } bad[] = {
      {"name: \"m\" max_batch_size: 4 input [ { name: \"A\" data_type: TYPE_FP32 dims: [ 2 ] }, "
       "{ name: \"B\" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: \"O\" data_type: "
       "TYPE_FP32 dims: [ 2 ] } ]",
       8, "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'm' "
          "model configuration"},
      {ONE_INPUT("TYPE_FP32", "[ -1, -1 ]", "4"), 8,
       "The shape of the raw input 'IN' can not be deduced because there are more than one "
       "variable-sized dimension"},
      {ONE_INPUT("TYPE_STRING", "[ -1 ]", "4"), 5,
       "For BYTE datatype raw input 'IN', the model must have input shape [1]"},
      {ONE_INPUT("TYPE_STRING", "[ 2 ]", "4"), 5,
       "For BYTE datatype raw input 'IN', the model must have input shape [1]"},
      {ONE_INPUT("TYPE_FP32", "[ -1 ]", "4"), 6, "is 6 bytes, which is no whole number of FP32"},
      {ONE_INPUT("TYPE_FP32", "[ 4 ]", "4"), 8, "is 8 bytes, but its shape from the configuration "
                                               "needs 16 bytes of FP32"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(raw(bad[i].cfg, f, bad[i].size, &req, &err), PTS_INVALID_ARG);
    if (!strstr(err.msg, bad[i].words)) fail_msg("case %zu: '%s'", i, err.msg);
    pts_infer_request_free(req);
  }
}

static void header_length_values(void **state) {
  (void)state;
  size_t n = 0;
  struct pts_error err;
  assert_int_equal(pts_v2_header_length(NULL, 100, &n, &err), PTS_OK);
  assert_int_equal(n, 100);
  assert_int_equal(pts_v2_header_length("42", 100, &n, &err), PTS_OK);
  assert_int_equal(n, 42);
  assert_int_equal(pts_v2_header_length("100", 100, &n, &err), PTS_OK);
  static const char *const bad[] = {"abc", "-5", "101", "12x", "", " 7", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (pts_v2_header_length(bad[i], 100, &n, &err) != PTS_INVALID_ARG)
      fail_msg("header value '%s' accepted", bad[i]);
    assert_non_null(strstr(err.msg, "Inference-Header-Content-Length"));
  }
  /* 0: a raw binary request (pts_v2_decode_raw). */
  assert_int_equal(pts_v2_header_length("0", 100, &n, &err), PTS_OK);
  assert_int_equal(n, 0);
  /* The decoder itself refuses a header longer than the body. */
  struct pts_buf *b = pts_buf_new(2);
  memcpy(b->data, "{}", 2);
  struct pts_infer_request *req = pts_infer_request_new();
  assert_int_equal(pts_v2_decode_infer(b, 3, req, &err), PTS_INVALID_ARG);
  pts_infer_request_free(req);
  pts_buf_release(b);
}

/* ------------------------------------------------------------------ */
/* response encoding                                                   */

struct out_spec {
  const char *name;
  enum pts_dtype dtype;
  int ndim;
  int64_t dims[2];
  const void *data;
  size_t size;
};

static struct pts_infer_response *make_response(const struct out_spec *o, size_t n) {
  struct pts_infer_response *r = pts_infer_response_new();
  r->model_name = pts_strdup("m");
  r->model_version = 1;
  r->outputs = pts_calloc(n, sizeof *r->outputs);
  r->n_outputs = n;
  for (size_t i = 0; i < n; i++) {
    struct pts_tensor *t = &r->outputs[i];
    t->name = pts_strdup(o[i].name);
    t->dtype = o[i].dtype;
    t->shape.ndim = o[i].ndim;
    for (int d = 0; d < o[i].ndim; d++) t->shape.dims[d] = o[i].dims[d];
    t->buf = pts_buf_new(o[i].size);
    if (o[i].size) memcpy(t->buf->data, o[i].data, o[i].size);
    t->data = t->buf->data;
    t->byte_size = o[i].size;
  }
  return r;
}

static void expect_encoded(const struct pts_infer_request *req, const struct out_spec *o, size_t n,
                           const char *want_json) {
  struct pts_infer_response *resp = make_response(o, n);
  struct pts_v2_reply r;
  struct pts_error err;
  if (pts_v2_encode_infer(req, resp, &r, &err) != PTS_OK) fail_msg("encode: %s", err.msg);
  assert_string_equal(r.json, want_json);
  assert_int_equal(r.json_len, strlen(want_json));
  pts_v2_reply_clear(&r);
  pts_infer_response_free(resp);
}

static void encode_json_outputs(void **state) {
  (void)state;
  struct pts_infer_request *req = pts_infer_request_new();
  req->id = pts_strdup("req-1");
  /* 1.5f, 0.1f (0x3DCCCCCD: Python repr of its double is 0.10000000149011612), -0.0f */
  const unsigned char f32[] = {0, 0, 0xc0, 0x3f, 0xcd, 0xcc, 0xcc, 0x3d, 0, 0, 0, 0x80};
  const unsigned char i8[] = {0xff, 0x80};
  const unsigned char u64[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const unsigned char b[] = {0, 2};
  const unsigned char s[] = {2, 0, 0, 0, 'a', '"', 0, 0, 0, 0};
  const unsigned char f64[] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f}; /* 1.0 */
  struct out_spec o[] = {
      {"F", PTS_DTYPE_FP32, 2, {1, 3}, f32, sizeof f32},
      {"I", PTS_DTYPE_INT8, 1, {2}, i8, sizeof i8},
      {"U", PTS_DTYPE_UINT64, 1, {1}, u64, sizeof u64},
      {"B", PTS_DTYPE_BOOL, 1, {2}, b, sizeof b},
      {"S", PTS_DTYPE_BYTES, 1, {2}, s, sizeof s},
      {"D", PTS_DTYPE_FP64, 1, {1}, f64, sizeof f64},
  };
  expect_encoded(req, o, 6,
                 "{\"model_name\":\"m\",\"model_version\":\"1\",\"id\":\"req-1\",\"outputs\":["
                 "{\"name\":\"F\",\"datatype\":\"FP32\",\"shape\":[1,3],"
                 "\"data\":[1.5,0.10000000149011612,-0.0]},"
                 "{\"name\":\"I\",\"datatype\":\"INT8\",\"shape\":[2],\"data\":[-1,-128]},"
                 "{\"name\":\"U\",\"datatype\":\"UINT64\",\"shape\":[1],"
                 "\"data\":[18446744073709551615]},"
                 "{\"name\":\"B\",\"datatype\":\"BOOL\",\"shape\":[2],\"data\":[false,true]},"
                 "{\"name\":\"S\",\"datatype\":\"BYTES\",\"shape\":[2],\"data\":[\"a\\\"\",\"\"]},"
                 "{\"name\":\"D\",\"datatype\":\"FP64\",\"shape\":[1],\"data\":[1.0]}]}");
  /* An empty id is not echoed. */
  pts_free(req->id);
  req->id = pts_strdup("");
  expect_encoded(req, o, 1,
                 "{\"model_name\":\"m\",\"model_version\":\"1\",\"outputs\":["
                 "{\"name\":\"F\",\"datatype\":\"FP32\",\"shape\":[1,3],"
                 "\"data\":[1.5,0.10000000149011612,-0.0]}]}");
  pts_infer_request_free(req);
}

static void encode_binary_rules(void **state) {
  (void)state;
  const unsigned char a[] = {1, 2, 3, 4};
  const unsigned char c[] = {9};
  struct out_spec o[] = {
      {"A", PTS_DTYPE_INT32, 1, {1}, a, sizeof a},
      {"B", PTS_DTYPE_INT32, 1, {0}, NULL, 0},
      {"C", PTS_DTYPE_UINT8, 1, {1}, c, sizeof c},
  };
  /* No outputs listed + binary_data_output: every output binary; the
   * 0-byte one gets binary_data_size 0 and no chunk. */
  struct pts_infer_request *req = pts_infer_request_new();
  req->binary_data_output = true;
  struct pts_infer_response *resp = make_response(o, 3);
  struct pts_v2_reply r;
  struct pts_error err;
  assert_int_equal(pts_v2_encode_infer(req, resp, &r, &err), PTS_OK);
  assert_true(r.binary);
  assert_string_equal(r.json,
                      "{\"model_name\":\"m\",\"model_version\":\"1\",\"outputs\":["
                      "{\"name\":\"A\",\"datatype\":\"INT32\",\"shape\":[1],"
                      "\"parameters\":{\"binary_data_size\":4}},"
                      "{\"name\":\"B\",\"datatype\":\"INT32\",\"shape\":[0],"
                      "\"parameters\":{\"binary_data_size\":0}},"
                      "{\"name\":\"C\",\"datatype\":\"UINT8\",\"shape\":[1],"
                      "\"parameters\":{\"binary_data_size\":1}}]}");
  assert_int_equal(r.n_chunks, 2);
  /* Zero copy: the chunks are the output buffers, retained. */
  assert_ptr_equal(r.chunks[0].data, resp->outputs[0].data);
  assert_ptr_equal(r.chunks[0].buf, resp->outputs[0].buf);
  assert_int_equal(atomic_load(&resp->outputs[0].buf->refs), 2);
  assert_ptr_equal(r.chunks[1].data, resp->outputs[2].data);
  pts_infer_response_free(resp);
  assert_memory_equal(r.chunks[0].data, a, 4); /* still alive through the reply */
  pts_v2_reply_clear(&r);

  /* Listed outputs: binary only with binary_data true (Triton's code);
   * binary_data_output does not change a listed output. */
  req->n_outputs = 2;
  req->outputs = pts_calloc(2, sizeof *req->outputs);
  req->outputs[0].name = pts_strdup("C");
  req->outputs[0].binary = true;
  req->outputs[0].binary_set = true;
  req->outputs[1].name = pts_strdup("A");
  expect_encoded(req, (struct out_spec[]){o[2], o[0]}, 2,
                 "{\"model_name\":\"m\",\"model_version\":\"1\",\"outputs\":["
                 "{\"name\":\"C\",\"datatype\":\"UINT8\",\"shape\":[1],"
                 "\"parameters\":{\"binary_data_size\":1}},"
                 "{\"name\":\"A\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[67305985]}]}");
  pts_infer_request_free(req);
}

static void expect_encode_refused(enum pts_dtype dt, const void *data, size_t size,
                                  const char *word) {
  struct out_spec o = {"X", dt, 1, {1}, data, size};
  struct pts_infer_request *req = pts_infer_request_new();
  struct pts_infer_response *resp = make_response(&o, 1);
  struct pts_v2_reply r;
  struct pts_error err;
  assert_int_equal(pts_v2_encode_infer(req, resp, &r, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "'X'"));
  assert_non_null(strstr(err.msg, "binary_data"));
  if (!strstr(err.msg, word)) fail_msg("'%s' not in '%s'", word, err.msg);
  pts_infer_response_free(resp);
  pts_infer_request_free(req);
}

static void encode_refusals(void **state) {
  (void)state;
  const unsigned char h[] = {0, 0x3c};
  expect_encode_refused(PTS_DTYPE_FP16, h, 2, "FP16");
  expect_encode_refused(PTS_DTYPE_BF16, h, 2, "BF16");
  const unsigned char nan[] = {0, 0, 0xc0, 0x7f};
  expect_encode_refused(PTS_DTYPE_FP32, nan, 4, "NaN");
  const unsigned char bad_utf8[] = {2, 0, 0, 0, 0xc3, 0x28};
  expect_encode_refused(PTS_DTYPE_BYTES, bad_utf8, sizeof bad_utf8, "UTF-8");
}

/* ------------------------------------------------------------------ */
/* small documents                                                     */

static void small_documents(void **state) {
  (void)state;
  size_t len;
  char *e = pts_v2_error_json("bad \"x\"\n\x01", &len);
  assert_string_equal(e, "{\"error\":\"bad \\\"x\\\"\\n\\u0001\"}");
  assert_int_equal(len, strlen(e));
  pts_free(e);
  /* Invalid UTF-8 from a URL becomes U+FFFD, never a broken document. */
  e = pts_v2_error_json("m\xff", &len);
  assert_string_equal(e, "{\"error\":\"m\xef\xbf\xbd\"}");
  pts_free(e);

  const char *ext[] = {"a", "b"};
  e = pts_v2_server_metadata("ptserve", "0.1.0", ext, 2, &len);
  assert_string_equal(e,
                      "{\"name\":\"ptserve\",\"version\":\"0.1.0\",\"extensions\":[\"a\",\"b\"]}");
  pts_free(e);

  int64_t in_dims[] = {4}, out_dims[] = {-1, 2};
  Inference__ModelInput in = INFERENCE__MODEL_INPUT__INIT;
  in.name = "INPUT0";
  in.data_type = INFERENCE__DATA_TYPE__TYPE_FP32;
  in.n_dims = 1;
  in.dims = in_dims;
  Inference__ModelOutput out = INFERENCE__MODEL_OUTPUT__INIT;
  out.name = "OUTPUT0";
  out.data_type = INFERENCE__DATA_TYPE__TYPE_STRING;
  out.n_dims = 2;
  out.dims = out_dims;
  Inference__ModelInput *pin = &in;
  Inference__ModelOutput *pout = &out;
  Inference__ModelConfig cfg = INFERENCE__MODEL_CONFIG__INIT;
  cfg.backend = "identity";
  cfg.max_batch_size = 8;
  cfg.n_input = 1;
  cfg.input = &pin;
  cfg.n_output = 1;
  cfg.output = &pout;
  int64_t versions[] = {1, 3};
  e = pts_v2_model_metadata("m", versions, 2, &cfg, &len);
  assert_string_equal(e,
                      "{\"name\":\"m\",\"versions\":[\"1\",\"3\"],\"platform\":\"identity\","
                      "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[-1,4]}],"
                      "\"outputs\":[{\"name\":\"OUTPUT0\",\"datatype\":\"BYTES\","
                      "\"shape\":[-1,-1,2]}]}");
  pts_free(e);
  /* No batching: dims as they are; platform wins over backend. */
  cfg.max_batch_size = 0;
  cfg.platform = "pytorch_libtorch";
  e = pts_v2_model_metadata("m", versions, 1, &cfg, &len);
  assert_string_equal(e,
                      "{\"name\":\"m\",\"versions\":[\"1\"],\"platform\":\"pytorch_libtorch\","
                      "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[4]}],"
                      "\"outputs\":[{\"name\":\"OUTPUT0\",\"datatype\":\"BYTES\","
                      "\"shape\":[-1,2]}]}");
  pts_free(e);

  struct pts_index_entry entries[] = {
      {"a", 1, PTS_MODEL_READY, ""},
      {"b", 2, PTS_MODEL_UNAVAILABLE, "load failed"},
      {"c", -1, PTS_MODEL_UNKNOWN, ""},
  };
  e = pts_v2_index_json(entries, 3, &len);
  assert_string_equal(e,
                      "[{\"name\":\"a\",\"version\":\"1\",\"state\":\"READY\"},"
                      "{\"name\":\"b\",\"version\":\"2\",\"state\":\"UNAVAILABLE\","
                      "\"reason\":\"load failed\"},{\"name\":\"c\"}]");
  pts_free(e);

  bool ready = true;
  struct pts_error err;
  assert_int_equal(pts_v2_parse_index_request("", 0, &ready, &err), PTS_OK);
  assert_false(ready);
  assert_int_equal(pts_v2_parse_index_request("{\"ready\":true}", 14, &ready, &err), PTS_OK);
  assert_true(ready);
  assert_int_equal(pts_v2_parse_index_request("{\"ready\":1}", 11, &ready, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "ready"));
  assert_int_equal(pts_v2_parse_index_request("{", 1, &ready, &err), PTS_INVALID_ARG);
}

static void shortest_doubles(void **state) {
  (void)state;
  /* Expected texts are Python's repr() of the same doubles. */
  static const struct {
    double v;
    const char *text;
  } cases[] = {{0.1, "0.1"},
               {1.0 / 3.0, "0.3333333333333333"},
               {1e300, "1e+300"},
               {2.5e-8, "2.5e-08"},
               {100.0, "100.0"},
               {-2.5, "-2.5"},
               {123456789012.0, "123456789012.0"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct pts_jsonw w;
    pts_jsonw_init(&w);
    assert_true(pts_jsonw_double(&w, cases[i].v));
    size_t len;
    char *s = pts_jsonw_take(&w, &len);
    assert_string_equal(s, cases[i].text);
    pts_free(s);
  }
}

/* The writer's fast paths (an inline append while the text fits, one
 * memcpy for a string that needs no escaping) against a text built here
 * byte by byte: strings that need escaping and ones that do not, keys of
 * both kinds, across several growths of the buffer. */
static void jsonw_appends_and_grows(void **state) {
  (void)state;
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  char want[8192];
  size_t n = 0;
  for (int i = 0; i < 60; i++) {
    pts_jsonw_key(&w, i % 2 ? "plain_key" : "k\"ey");
    n += (size_t)sprintf(want + n, "%s:", i % 2 ? "\"plain_key\"" : "\"k\\\"ey\"");
    pts_jsonw_str(&w, "abc DEF 123", 11);
    n += (size_t)sprintf(want + n, "\"abc DEF 123\"");
    pts_jsonw_str(&w, "t\tb\\", 4);
    n += (size_t)sprintf(want + n, "\"t\\tb\\\\\"");
    pts_jsonw_raw(&w, ",", 1);
    want[n++] = ',';
  }
  want[n] = '\0';
  size_t len = 0;
  char *got = pts_jsonw_take(&w, &len);
  assert_non_null(got);
  assert_int_equal(len, n);
  assert_string_equal(got, want);
  pts_free(got);
}

/* An allocation that fails part way: every later append is refused (the
 * inline one too), take returns NULL, and nothing leaks (ASan). */
static void jsonw_out_of_memory(void **state) {
  (void)state;
  for (long fail = 0; fail < 3; fail++) {
    struct pts_jsonw w;
    pts_jsonw_init(&w);
    pts_alloc_fail_after(fail);
    for (int i = 0; i < 100; i++) {
      pts_jsonw_key(&w, "name");
      pts_jsonw_str(&w, "value", 5);
      pts_jsonw_raw(&w, ",", 1);
    }
    pts_alloc_fail_after(-1);
    assert_true(w.failed);
    size_t len = 7;
    assert_null(pts_jsonw_take(&w, &len));
    pts_jsonw_free(&w);
  }
}

int main(void) {
  /* As ptserve does: request headers are decoded with the JSON arena. */
  pts_json_arena_install();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bool_data),
      cmocka_unit_test(unsigned_ranges),
      cmocka_unit_test(signed_ranges),
      cmocka_unit_test(float_data),
      cmocka_unit_test(half_precision_refused_in_json),
      cmocka_unit_test(bytes_data),
      cmocka_unit_test(nested_equals_flat),
      cmocka_unit_test(count_must_match_shape),
      cmocka_unit_test(depth_limit),
      cmocka_unit_test(structure_errors),
      cmocka_unit_test(data_source_exactly_one),
      cmocka_unit_test(shared_memory_params),
      cmocka_unit_test(request_parameters),
      cmocka_unit_test(requested_outputs),
      cmocka_unit_test(binary_inputs_are_views),
      cmocka_unit_test(binary_chunk_accounting),
      cmocka_unit_test(header_length_values),
      cmocka_unit_test(raw_binary_requests),
      cmocka_unit_test(encode_json_outputs),
      cmocka_unit_test(encode_binary_rules),
      cmocka_unit_test(encode_refusals),
      cmocka_unit_test(small_documents),
      cmocka_unit_test(shortest_doubles),
      cmocka_unit_test(jsonw_appends_and_grows),
      cmocka_unit_test(jsonw_out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
