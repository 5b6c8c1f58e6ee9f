/* tests/unit/frontend/v2_fast_test.c — the one-pass decoder of the common
 * infer header (frontend/http/v2_fast.h): it takes the headers tritonclient
 * and perf_analyzer send, filling the request as written out by hand below
 * and exactly as the full (jansson) decoder does; it declines everything
 * else untouched, and pts_v2_decode_infer then answers with the full
 * decoder's own error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "frontend/http/v2_fast.h"
#include "frontend/http/v2_json.h"
#include "scheduler/request.h"
#include "tensor/tensor.h"
#include "../../fuzz/v2_same.h"

/* The body: json, then tail_len bytes of tail (zeros). Header length =
 * the JSON's length. */
static struct pts_buf *body_of(const char *json, size_t tail_len) {
  size_t jl = strlen(json);
  struct pts_buf *body = pts_buf_new(jl + tail_len);
  assert_non_null(body);
  memcpy(body->data, json, jl);
  memset((char *)body->data + jl, 0, tail_len);
  return body;
}

/* Decodes with both decoders; when the fast one accepts, the full one must
 * too, alike. Returns the fast one's verdict; *out (if given) gets the
 * fast decoder's request. */
static enum pts_v2_fast both(const char *json, size_t tail_len, struct pts_infer_request **out) {
  struct pts_buf *body = body_of(json, tail_len);
  size_t hl = strlen(json);
  struct pts_infer_request *fast = pts_infer_request_new(), *tree = pts_infer_request_new();
  enum pts_v2_fast f = pts_v2_fast_decode(body, hl, fast);
  if (f == PTS_V2_FAST_DONE) {
    struct pts_error err;
    pts_error_clear(&err);
    assert_int_equal(pts_v2_decode_infer_tree(body, hl, tree, &err), PTS_OK);
    assert_true(v2_same_request(fast, tree));
  } else {
    assert_int_equal(f, PTS_V2_FAST_DECLINED);
    assert_null(fast->id);
    assert_int_equal(fast->n_inputs, 0);
    assert_null(fast->inputs);
    assert_int_equal(fast->n_outputs, 0);
  }
  pts_infer_request_free(tree);
  pts_buf_release(body);
  if (out)
    *out = fast;
  else
    pts_infer_request_free(fast);
  return f;
}

/* tritonclient.http's header for one FP32 [1,16] input sent as binary and
 * one output asked for as binary. */
static void test_takes_tritonclients_header(void **state) {
  (void)state;
  const char *json =
      "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16],\"datatype\":\"FP32\","
      "\"parameters\":{\"binary_data_size\":64}}],"
      "\"outputs\":[{\"name\":\"OUTPUT0\",\"parameters\":{\"binary_data\":true}}]}";
  struct pts_infer_request *req;
  assert_int_equal(both(json, 64, &req), PTS_V2_FAST_DONE);
  assert_null(req->id);
  assert_int_equal(req->n_inputs, 1);
  assert_string_equal(req->inputs[0].name, "INPUT0");
  assert_int_equal(req->inputs[0].dtype, PTS_DTYPE_FP32);
  assert_int_equal(req->inputs[0].shape.ndim, 2);
  assert_int_equal(req->inputs[0].shape.dims[0], 1);
  assert_int_equal(req->inputs[0].shape.dims[1], 16);
  assert_int_equal(req->inputs[0].byte_size, 64);
  assert_ptr_equal(req->inputs[0].data, (const char *)req->inputs[0].buf->data + strlen(json));
  assert_int_equal(req->n_outputs, 1);
  assert_string_equal(req->outputs[0].name, "OUTPUT0");
  assert_true(req->outputs[0].binary);
  assert_true(req->outputs[0].binary_set);
  pts_infer_request_free(req);
}

/* Other shapes of the same subset: an id, binary_data_output, spaces and
 * newlines, keys in another order, several inputs (their tails one after
 * the other), BYTES, a scalar shape, no outputs, an empty outputs array. */
static void test_takes_the_common_variants(void **state) {
  (void)state;
  struct pts_infer_request *req;
  assert_int_equal(
      both("{ \"id\" : \"abc\",\n \"parameters\": {\"binary_data_output\": true},\n"
           " \"inputs\": [ {\"parameters\": {\"binary_data_size\": 8}, \"datatype\": \"INT32\","
           " \"name\": \"A\", \"shape\": [2]},\n {\"name\": \"B\", \"datatype\": \"BYTES\","
           " \"shape\": [1], \"parameters\": {\"binary_data_size\": 7}} ] }\r\n",
           15, &req),
      PTS_V2_FAST_DONE);
  assert_string_equal(req->id, "abc");
  assert_true(req->binary_data_output);
  assert_int_equal(req->n_inputs, 2);
  assert_int_equal(req->inputs[1].byte_size, 7);
  assert_ptr_equal(req->inputs[1].data, (const char *)req->inputs[0].data + 8);
  assert_int_equal(req->n_outputs, 0);
  pts_infer_request_free(req);
  assert_int_equal(both("{\"inputs\":[{\"name\":\"S\",\"datatype\":\"FP64\",\"shape\":[],"
                        "\"parameters\":{\"binary_data_size\":8}}],\"outputs\":[]}",
                        8, NULL),
                   PTS_V2_FAST_DONE);
  assert_int_equal(both("{\"inputs\":[{\"name\":\"X\",\"datatype\":\"UINT8\",\"shape\":[1,0],"
                        "\"parameters\":{\"binary_data_size\":0}}],\"outputs\":[{\"name\":\"Y\"},"
                        "{\"name\":\"Z\",\"parameters\":{}}]}",
                        0, NULL),
                   PTS_V2_FAST_DONE);
}

/* Shared memory as ptperf and tritonclient name it: each input's place in a
 * region (the offset optional), each output's place with binary_data false
 * or left out. No body besides the header. */
static void test_takes_shared_memory(void **state) {
  (void)state;
  struct pts_infer_request *req;
  assert_int_equal(
      both("{\"inputs\":[{\"name\":\"INPUT__0\",\"shape\":[1,3,224,224],\"datatype\":\"FP16\","
           "\"parameters\":{\"shared_memory_region\":\"in0\",\"shared_memory_byte_size\":301056,"
           "\"shared_memory_offset\":602112}},{\"name\":\"B\",\"shape\":[2],\"datatype\":\"INT64\","
           "\"parameters\":{\"shared_memory_byte_size\":16,\"shared_memory_region\":\"in1\"}}],"
           "\"outputs\":[{\"name\":\"OUTPUT__0\",\"parameters\":{\"binary_data\":false,"
           "\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":2000,"
           "\"shared_memory_offset\":4000}},{\"name\":\"O2\",\"parameters\":{"
           "\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":8}}]}",
           0, &req),
      PTS_V2_FAST_DONE);
  assert_int_equal(req->n_inputs, 2);
  assert_non_null(req->input_shm);
  assert_string_equal(req->input_shm[0].region, "in0");
  assert_int_equal(req->input_shm[0].byte_size, 301056);
  assert_int_equal(req->input_shm[0].offset, 602112);
  assert_int_equal(req->inputs[0].dtype, PTS_DTYPE_FP16);
  assert_int_equal(req->inputs[0].shape.ndim, 4);
  assert_int_equal(req->inputs[0].shape.dims[3], 224);
  assert_null(req->inputs[0].data);
  assert_null(req->inputs[0].buf);
  assert_int_equal(req->inputs[0].byte_size, 0);
  assert_string_equal(req->input_shm[1].region, "in1");
  assert_int_equal(req->input_shm[1].byte_size, 16);
  assert_int_equal(req->input_shm[1].offset, 0);
  assert_int_equal(req->n_outputs, 2);
  assert_string_equal(req->outputs[0].shm.region, "out");
  assert_int_equal(req->outputs[0].shm.byte_size, 2000);
  assert_int_equal(req->outputs[0].shm.offset, 4000);
  assert_false(req->outputs[0].binary);
  assert_true(req->outputs[0].binary_set);
  assert_string_equal(req->outputs[1].shm.region, "out");
  assert_false(req->outputs[1].binary_set);
  pts_infer_request_free(req);
  /* One input in a region beside one sent as binary: the binary one's
   * bytes are the body's tail, the region's none of it. */
  assert_int_equal(
      both("{\"inputs\":[{\"name\":\"A\",\"shape\":[1],\"datatype\":\"INT32\","
           "\"parameters\":{\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":4}},"
           "{\"name\":\"B\",\"shape\":[1],\"datatype\":\"INT32\","
           "\"parameters\":{\"binary_data_size\":4}}],\"outputs\":[{\"name\":\"O\"}]}",
           4, &req),
      PTS_V2_FAST_DONE);
  assert_null(req->input_shm[1].region);
  assert_non_null(req->inputs[1].data);
  assert_int_equal(req->inputs[1].byte_size, 4);
  pts_infer_request_free(req);
}

/* Everything outside the subset, valid or not, goes to the full decoder. */
static void test_declines_the_rest(void **state) {
  (void)state;
  const char *in = "{\"name\":\"A\",\"datatype\":\"INT32\",\"shape\":[1]";
  char json[512];
  struct {
    const char *fmt; /* %s: the start of a valid input object, not closed */
    size_t tail;
  } cases[] = {
      {"{\"inputs\":[%s,\"data\":[1]}]}", 0},                                   /* JSON data */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"r\"}}]}", 0}, /* no size */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_byte_size\":4}}]}", 0}, /* no region */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_offset\":0}}]}", 0},  /* no region */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"\","
       "\"shared_memory_byte_size\":4}}]}", 0},                                  /* empty name */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"r\","
       "\"shared_memory_byte_size\":4,\"binary_data_size\":4}}]}", 4},          /* both */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"r\","
       "\"shared_memory_byte_size\":4,\"shared_memory_region\":\"s\"}}]}", 0}, /* dup key */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":7,"
       "\"shared_memory_byte_size\":4}}]}", 0},                                  /* not a string */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"r\","
       "\"shared_memory_byte_size\":-4}}]}", 0},                                 /* negative */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"r\","
       "\"shared_memory_byte_size\":4,\"shared_memory_offset\":18446744073709551615}}]}",
       0},                                                                        /* big offset */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"r\","
       "\"shared_memory_byte_size\":4}}],\"outputs\":[{\"name\":\"O\",\"parameters\":{"
       "\"binary_data\":true,\"shared_memory_region\":\"o\",\"shared_memory_byte_size\":4}}]}",
       0},                                                                        /* binary + shm */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"r\","
       "\"shared_memory_byte_size\":4}}],\"outputs\":[{\"name\":\"O\",\"parameters\":{"
       "\"shared_memory_offset\":4}}]}",
       0},                                                                        /* no region */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"r\","
       "\"shared_memory_byte_size\":4}}],\"outputs\":[{\"name\":\"O\",\"parameters\":{"
       "\"shared_memory_region\":\"o\"}}]}",
       0},                                                                        /* no size */
      {"{\"inputs\":[%s,\"parameters\":{\"shared_memory_region\":\"r\","
       "\"shared_memory_byte_size\":4}}],\"outputs\":[{\"name\":\"O\",\"parameters\":{"
       "\"shared_memory_region\":\"o\",\"shared_memory_byte_size\":4,"
       "\"classification\":1}}]}",
       0},                                                     /* classification with shm */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}],\"parameters\":{\"priority\":1}}",
       4},                                                                        /* priority */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}],\"x\":1}", 4},  /* unknown key */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4},\"shape\":[1]}]}", 4}, /* dup key */
      {"{\"id\":\"a\\u0041\",\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}]}", 4},
      {"{\"id\":\"\xc3\xa9\",\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}]}", 4},
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":5}}]}", 5},   /* size != shape */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}]}", 6},   /* bytes left over */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}]}", 2},   /* body too short */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}},"
       "%s,\"parameters\":{\"binary_data_size\":4}}]}", 8},                 /* same name twice */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}]} x", 4}, /* trailing text */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}]", 4},    /* truncated */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4.0}}]}", 4}, /* a real */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":04}}]}", 4},  /* leading zero */
      {"{\"inputs\":[],\"x\":%s}", 0},                                     /* no inputs */
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}],"
       "\"outputs\":[{\"name\":\"O\",\"parameters\":{\"classification\":2}}]}", 4},
      {"{\"inputs\":[%s,\"parameters\":{\"binary_data_size\":4}}],"
       "\"outputs\":[{\"name\":\"O\"},{\"name\":\"O\"}]}", 4},              /* output twice */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(json, sizeof json, cases[i].fmt, in, in);
    if (both(json, cases[i].tail, NULL) != PTS_V2_FAST_DECLINED)
      fail_msg("case %zu taken: %s", i, json);
  }
  /* An unknown datatype, a negative dimension, one dimension too many, one
   * input too many. */
  assert_int_equal(both("{\"inputs\":[{\"name\":\"A\",\"datatype\":\"FP8\",\"shape\":[1],"
                        "\"parameters\":{\"binary_data_size\":1}}]}", 1, NULL),
                   PTS_V2_FAST_DECLINED);
  assert_int_equal(both("{\"inputs\":[{\"name\":\"A\",\"datatype\":\"INT8\",\"shape\":[-1],"
                        "\"parameters\":{\"binary_data_size\":1}}]}", 1, NULL),
                   PTS_V2_FAST_DECLINED);
  char many[4096] = "{\"inputs\":[{\"name\":\"A\",\"datatype\":\"INT8\",\"shape\":[1";
  for (int i = 0; i < PTS_TENSOR_MAX_DIMS; i++) strcat(many, ",1");
  strcat(many, "],\"parameters\":{\"binary_data_size\":1}}]}");
  assert_int_equal(both(many, 1, NULL), PTS_V2_FAST_DECLINED);
  strcpy(many, "{\"inputs\":[");
  for (int i = 0; i < PTS_V2_FAST_MAX + 1; i++)
    snprintf(many + strlen(many), sizeof many - strlen(many),
             "%s{\"name\":\"I%d\",\"datatype\":\"INT8\",\"shape\":[1],"
             "\"parameters\":{\"binary_data_size\":1}}",
             i ? "," : "", i);
  strcat(many, "]}");
  assert_int_equal(both(many, PTS_V2_FAST_MAX + 1, NULL), PTS_V2_FAST_DECLINED);
}

/* Every byte value inside a string (here the id): the one-pass decoder
 * takes printable ASCII and DEL (0x20-0x7f) but the quote and the
 * backslash, and declines the rest (control bytes, which JSON forbids
 * unescaped; a lone byte of 0x80 or more, which is not UTF-8; an escape; a
 * quote, which ends the string early), whatever the full decoder makes of
 * it. Where it takes one, both() checks the full decoder reads it alike. */
static void test_string_bytes(void **state) {
  (void)state;
  for (int b = 1; b < 256; b++) {
    char json[256];
    snprintf(json, sizeof json,
             "{\"id\":\"a%cz\",\"inputs\":[{\"name\":\"A\",\"datatype\":\"INT8\","
             "\"shape\":[1],\"parameters\":{\"binary_data_size\":1}}]}",
             b);
    bool plain = b >= 0x20 && b <= 0x7f && b != '"' && b != '\\';
    struct pts_infer_request *req = NULL;
    enum pts_v2_fast f = both(json, 1, &req);
    if (f != (plain ? PTS_V2_FAST_DONE : PTS_V2_FAST_DECLINED))
      fail_msg("byte 0x%02x: %s", (unsigned)b, plain ? "declined" : "taken");
    if (plain) {
      char want[4] = {'a', (char)b, 'z', '\0'};
      assert_string_equal(req->id, want);
    }
    pts_infer_request_free(req);
  }
}

/* A declined header's error is the full decoder's, word for word. */
static void test_errors_stay_the_full_decoders(void **state) {
  (void)state;
  const char *json =
      "{\"inputs\":[{\"name\":\"A\",\"datatype\":\"INT8\",\"shape\":[1],"
      "\"parameters\":{\"binary_data_size\":1}},{\"name\":\"A\",\"datatype\":\"INT8\","
      "\"shape\":[1],\"parameters\":{\"binary_data_size\":1}}]}";
  struct pts_buf *body = body_of(json, 2);
  struct pts_infer_request *req = pts_infer_request_new();
  struct pts_error err;
  pts_error_clear(&err);
  assert_int_equal(pts_v2_decode_infer(body, strlen(json), req, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg, "input 'A' appears more than once in request");
  pts_infer_request_free(req);
  pts_buf_release(body);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_takes_tritonclients_header),
      cmocka_unit_test(test_takes_the_common_variants),
      cmocka_unit_test(test_takes_shared_memory),
      cmocka_unit_test(test_declines_the_rest),
      cmocka_unit_test(test_string_bytes),
      cmocka_unit_test(test_errors_stay_the_full_decoders),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
