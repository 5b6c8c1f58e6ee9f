/* tests/unit/ptperf/ptperf_infer_test.c — inputs from metadata + config (§1.5: a
 * batching model's shapes start with -1), and the request bytes of the
 * binary tensor extension (§1.7). Expected values are written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "ptperf/lib/infer.h"

static const char *mlp_metadata =
    "{\"name\":\"mlp\",\"versions\":[\"1\"],\"platform\":\"pytorch_libtorch\","
    "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[-1,16]}],"
    "\"outputs\":[{\"name\":\"OUTPUT0\",\"datatype\":\"FP32\",\"shape\":[-1,4]}]}";

static void batching_model_gets_the_batch_dimension(void **state) {
  (void)state;
  struct ptperf_model *m;
  struct pts_error err;
  assert_int_equal(
      ptperf_model_parse(mlp_metadata, "{\"max_batch_size\":8}", NULL, 3, NULL, 0, &m, &err),
      PTS_OK);
  assert_string_equal(m->name, "mlp");
  assert_int_equal(m->max_batch_size, 8);
  assert_int_equal(m->n_inputs, 1);
  assert_string_equal(m->inputs[0].name, "INPUT0");
  assert_int_equal(m->inputs[0].dtype, PTS_DTYPE_FP32);
  assert_int_equal(m->inputs[0].ndim, 2);
  assert_int_equal(m->inputs[0].dims[0], 3);
  assert_int_equal(m->inputs[0].dims[1], 16);
  assert_int_equal(m->inputs[0].byte_size, 3 * 16 * 4);
  ptperf_model_free(m);
}

static void batch_size_limits(void **state) {
  (void)state;
  struct ptperf_model *m;
  struct pts_error err;
  assert_int_equal(
      ptperf_model_parse(mlp_metadata, "{\"max_batch_size\":8}", NULL, 9, NULL, 0, &m, &err),
      PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "max_batch_size 8"));
  /* No config: the shape is taken as it is, and -1 must be given. */
  assert_int_equal(ptperf_model_parse(mlp_metadata, NULL, NULL, 1, NULL, 0, &m, &err),
                   PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "--shape INPUT0"));
}

static void variable_dims_need_a_shape(void **state) {
  (void)state;
  const char *md =
      "{\"name\":\"v\",\"inputs\":[{\"name\":\"A\",\"datatype\":\"INT64\","
      "\"shape\":[-1,-1,3]},{\"name\":\"B\",\"datatype\":\"BYTES\",\"shape\":[2]}]}";
  struct ptperf_model *m;
  struct pts_error err;
  struct ptperf_shape_arg s[2];
  assert_int_equal(ptperf_model_parse(md, "{\"max_batch_size\":4}", "2", 2, NULL, 0, &m, &err),
                   PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "input 'A'"));
  assert_int_equal(ptperf_shape_arg_parse("A:5,3", &s[0], &err), PTS_OK);
  assert_int_equal(ptperf_model_parse(md, "{\"max_batch_size\":4}", "2", 2, s, 1, &m, &err),
                   PTS_OK);
  assert_string_equal(m->version, "2");
  assert_int_equal(m->inputs[0].ndim, 3);
  assert_int_equal(m->inputs[0].dims[0], 2);
  assert_int_equal(m->inputs[0].dims[1], 5);
  assert_int_equal(m->inputs[0].dims[2], 3);
  assert_int_equal(m->inputs[0].byte_size, 2 * 5 * 3 * 8);
  assert_int_equal(m->inputs[1].byte_size, 0); /* BYTES: data-dependent */
  ptperf_model_free(m);
  /* A fixed dimension may not be changed, an unknown input is refused. */
  assert_int_equal(ptperf_shape_arg_parse("A:5,4", &s[0], &err), PTS_OK);
  assert_int_equal(ptperf_model_parse(md, "{\"max_batch_size\":4}", NULL, 1, s, 1, &m, &err),
                   PTS_INVALID_ARG);
  assert_int_equal(ptperf_shape_arg_parse("A:5,3", &s[0], &err), PTS_OK);
  assert_int_equal(ptperf_shape_arg_parse("C:1", &s[1], &err), PTS_OK);
  assert_int_equal(ptperf_model_parse(md, "{\"max_batch_size\":4}", NULL, 1, s, 2, &m, &err),
                   PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "no such input"));
}

static void shape_arguments(void **state) {
  (void)state;
  struct ptperf_shape_arg s;
  struct pts_error err;
  assert_int_equal(ptperf_shape_arg_parse("in:put:1,2", &s, &err), PTS_OK); /* last ':' */
  assert_int_equal(s.ndim, 2);
  assert_int_equal(ptperf_shape_arg_parse("A", &s, &err), PTS_INVALID_ARG);
  assert_int_equal(ptperf_shape_arg_parse("A:", &s, &err), PTS_INVALID_ARG);
  assert_int_equal(ptperf_shape_arg_parse("A:1,-2", &s, &err), PTS_INVALID_ARG);
  assert_int_equal(ptperf_shape_arg_parse("A:1,x", &s, &err), PTS_INVALID_ARG);
}

/* Splits a built request into head / JSON / binary and checks the framing. */
static void split_request(const char *req, size_t len, json_t **json, const unsigned char **bin,
                          size_t *bin_len) {
  const char *head_end = strstr(req, "\r\n\r\n");
  assert_non_null(head_end);
  const char *ihcl = strstr(req, "Inference-Header-Content-Length: ");
  const char *cl = strstr(req, "\r\nContent-Length: ");
  assert_true(ihcl && ihcl < head_end && cl && cl < head_end);
  size_t json_len = strtoul(ihcl + 33, NULL, 10), body_len = strtoul(cl + 18, NULL, 10);
  const char *body = head_end + 4;
  assert_int_equal((size_t)(body - req) + body_len, len);
  json_error_t jerr;
  *json = json_loadb(body, json_len, 0, &jerr);
  assert_non_null(*json);
  *bin = (const unsigned char *)body + json_len;
  *bin_len = body_len - json_len;
}

static void request_bytes(void **state) {
  (void)state;
  struct ptperf_model *m;
  struct pts_error err;
  assert_int_equal(
      ptperf_model_parse(mlp_metadata, "{\"max_batch_size\":8}", "1", 2, NULL, 0, &m, &err),
      PTS_OK);
  char *req;
  size_t len;
  assert_int_equal(ptperf_request_build(m, "h:1", 7, false, &req, &len, &err), PTS_OK);
  assert_memory_equal(req, "POST /v2/models/mlp/versions/1/infer HTTP/1.1\r\nHost: h:1\r\n", 58);
  json_t *j;
  const unsigned char *bin;
  size_t bin_len;
  split_request(req, len, &j, &bin, &bin_len);
  assert_int_equal(bin_len, 2 * 16 * 4);
  json_t *in = json_array_get(json_object_get(j, "inputs"), 0);
  assert_string_equal(json_string_value(json_object_get(in, "name")), "INPUT0");
  assert_string_equal(json_string_value(json_object_get(in, "datatype")), "FP32");
  assert_int_equal(json_integer_value(json_array_get(json_object_get(in, "shape"), 0)), 2);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(in, "shape"), 1)), 16);
  assert_int_equal(
      json_integer_value(json_object_get(json_object_get(in, "parameters"), "binary_data_size")),
      128);
  assert_true(
      json_is_true(json_object_get(json_object_get(j, "parameters"), "binary_data_output")));
  bool distinct = false;
  for (size_t i = 0; i < 32; i++) {
    float f;
    memcpy(&f, bin + 4 * i, 4);
    assert_true(f >= 0.0f && f < 1.0f);
    if (i > 0 && memcmp(bin, bin + 4 * i, 4) != 0) distinct = true;
  }
  assert_true(distinct);
  json_decref(j);
  /* Another seed, other data; zero data is zeros. */
  char *req2;
  size_t len2;
  assert_int_equal(ptperf_request_build(m, "h:1", 8, false, &req2, &len2, &err), PTS_OK);
  assert_int_equal(len2, len);
  assert_memory_not_equal(req + len - 128, req2 + len2 - 128, 128);
  pts_free(req2);
  assert_int_equal(ptperf_request_build(m, "h:1", 8, true, &req2, &len2, &err), PTS_OK);
  static const unsigned char zeros[128];
  assert_memory_equal(req2 + len2 - 128, zeros, 128);
  pts_free(req2);
  pts_free(req);
  ptperf_model_free(m);
}

static void bytes_inputs_are_length_prefixed(void **state) {
  (void)state;
  const char *md =
      "{\"name\":\"s p\",\"inputs\":[{\"name\":\"T\",\"datatype\":\"BYTES\","
      "\"shape\":[3]}]}";
  struct ptperf_model *m;
  struct pts_error err;
  assert_int_equal(ptperf_model_parse(md, "{\"max_batch_size\":0}", NULL, 1, NULL, 0, &m, &err),
                   PTS_OK);
  char *req;
  size_t len;
  assert_int_equal(ptperf_request_build(m, "h", 1, false, &req, &len, &err), PTS_OK);
  /* The model name is percent-encoded in the path. */
  assert_memory_equal(req, "POST /v2/models/s%20p/infer ", 28);
  json_t *j;
  const unsigned char *bin;
  size_t bin_len;
  split_request(req, len, &j, &bin, &bin_len);
  assert_int_equal(bin_len, 3 * (4 + 8)); /* §5: u32 LE length + 8 digits each */
  for (int e = 0; e < 3; e++) {
    const unsigned char *p = bin + 12 * e;
    assert_true(p[0] == 8 && p[1] == 0 && p[2] == 0 && p[3] == 0);
    for (int k = 0; k < 8; k++) assert_true(p[4 + k] >= '0' && p[4 + k] <= '9');
  }
  json_decref(j);
  pts_free(req);
  ptperf_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(batching_model_gets_the_batch_dimension),
      cmocka_unit_test(batch_size_limits),
      cmocka_unit_test(variable_dims_need_a_shape),
      cmocka_unit_test(shape_arguments),
      cmocka_unit_test(request_bytes),
      cmocka_unit_test(bytes_inputs_are_length_prefixed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
