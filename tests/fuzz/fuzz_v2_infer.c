/* tests/fuzz/fuzz_v2_infer.c — the KServe v2 infer request body: JSON header,
 * binary tensor tail, Inference-Header-Content-Length; then the core's
 * validation against a fixed config and, for a valid request, the encoding of
 * an identity response (outputs = inputs), binary or JSON as asked.
 *
 * Input layout: when the first byte is 'H', the text up to the first '\n' is
 * the Inference-Header-Content-Length value and the rest the body; otherwise
 * the whole input is the body and the header is absent. Seeds are readable.
 * A value of 0 is a raw binary request, decoded against RAW_CONFIG (one
 * INT32 input of dims [2, -1]) and validated against it.
 *
 * Properties: every error has a message; an accepted request's tensors lie
 * inside the body and their byte sizes match their shapes; the one-pass
 * decoder of the common header (v2_fast.h) either declines and leaves the
 * request untouched, or fills it exactly as the full (jansson) decoder does,
 * which must then accept it too. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "frontend/http/v2_fast.h"
#include "frontend/http/v2_json.h"
#include "fuzz_common.h"
#include "fuzz_infer.h"
#include "scheduler/validate.h"
#include "v2_same.h"

static const char CONFIG[] =
    "name: \"m\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ -1 ] },\n"
    "        { name: \"INPUT1\" data_type: TYPE_STRING dims: [ 2 ] },\n"
    "        { name: \"INPUT2\" data_type: TYPE_FP32 dims: [ 2, 2 ] },\n"
    "        { name: \"INPUT3\" data_type: TYPE_BOOL dims: [ 1 ] optional: true } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ -1 ] },\n"
    "         { name: \"OUTPUT1\" data_type: TYPE_STRING dims: [ 2 ] },\n"
    "         { name: \"OUTPUT2\" data_type: TYPE_FP32 dims: [ 2, 2 ] },\n"
    "         { name: \"OUTPUT3\" data_type: TYPE_BOOL dims: [ 1 ] } ]\n";

/* A raw binary request's model (Inference-Header-Content-Length: 0): one
 * input, whose one variable dim the body's length gives. */
static const char RAW_CONFIG[] =
    "name: \"m\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 2, -1 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 2, -1 ] } ]\n";

static Inference__ModelConfig *config, *raw_config;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet_log();
  config = fuzz_load_config(CONFIG, sizeof CONFIG - 1, "fuzz_v2_infer");
  raw_config = fuzz_load_config(RAW_CONFIG, sizeof RAW_CONFIG - 1, "fuzz_v2_infer (raw)");
  return 0;
}

static void check_tensors(const struct pts_infer_request *req, const struct pts_buf *body) {
  for (size_t i = 0; i < req->n_inputs; i++) {
    const struct pts_tensor *t = &req->inputs[i];
    fuzz_check(t->name != NULL, "input without a name");
    if (req->input_shm && req->input_shm[i].region) {
      /* In a region: no bytes yet (the server resolves the place and
       * checks its size against the shape later). */
      fuzz_check(t->data == NULL && t->byte_size == 0 && t->buf == NULL,
                 "input in shared memory with bytes of its own");
      continue;
    }
    if (t->dtype != PTS_DTYPE_BYTES) {
      int64_t bytes = pts_shape_byte_size(t->dtype, &t->shape);
      fuzz_check(bytes >= 0 && (uint64_t)bytes == t->byte_size, "byte size differs from shape");
    }
    if (t->buf == body) {
      const char *lo = body->data, *p = t->data;
      fuzz_check(p >= lo && p + t->byte_size <= lo + body->size, "binary input outside the body");
    }
  }
}

/* The fast decoder against the full one on the same body. */
static void compare_decoders(struct pts_buf *body, size_t header_len) {
  struct pts_infer_request *fast = pts_infer_request_new(), *tree = pts_infer_request_new();
  if (fast && tree) {
    enum pts_v2_fast f = pts_v2_fast_decode(body, header_len, fast);
    if (f == PTS_V2_FAST_DECLINED) {
      fuzz_check(!fast->id && fast->n_inputs == 0 && !fast->inputs && fast->n_outputs == 0,
                 "a declined header left something in the request");
    } else if (f == PTS_V2_FAST_DONE) {
      struct pts_error err;
      pts_error_clear(&err);
      fuzz_check(pts_v2_decode_infer_tree(body, header_len, tree, &err) == PTS_OK,
                 "the fast decoder accepted a header the full decoder refuses");
      fuzz_check(v2_same_request(fast, tree), "the two decoders filled the request differently");
    }
  }
  pts_infer_request_free(fast);
  pts_infer_request_free(tree);
}

static void encode(const struct pts_infer_request *req) {
  struct pts_infer_response *resp = fuzz_identity_response(req);
  if (!resp) return;
  struct pts_v2_reply r;
  struct pts_error err;
  pts_error_clear(&err);
  if (pts_v2_encode_infer(req, resp, &r, &err) == PTS_OK) {
    fuzz_check(r.json != NULL && r.json_len > 0, "encoded reply without JSON");
    pts_v2_reply_clear(&r);
  } else {
    fuzz_check(err.msg[0] != '\0', "encode error without a message");
  }
  pts_infer_response_free(resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char hdr[64];
  const char *value = NULL;
  if (size > 0 && data[0] == 'H') {
    const uint8_t *nl = memchr(data, '\n', size < sizeof hdr ? size : sizeof hdr);
    if (!nl) return 0;
    size_t n = (size_t)(nl - data) - 1;
    memcpy(hdr, data + 1, n);
    hdr[n] = '\0';
    value = hdr;
    size -= (size_t)(nl - data) + 1;
    data = nl + 1;
  }
  struct pts_buf *body = pts_buf_new(size);
  if (!body) return 0;
  if (size) memcpy(body->data, data, size);
  struct pts_infer_request *req = pts_infer_request_new();
  if (!req) {
    pts_buf_release(body);
    return 0;
  }
  struct pts_error err;
  pts_error_clear(&err);
  size_t header_len = 0;
  enum pts_status st = pts_v2_header_length(value, body->size, &header_len, &err);
  /* 0: a raw binary request, the body the fixed config's input */
  bool raw = st == PTS_OK && value && header_len == 0;
  if (st == PTS_OK && !raw) compare_decoders(body, header_len);
  if (st == PTS_OK)
    st = raw ? pts_v2_decode_raw(body, raw_config, req, &err)
             : pts_v2_decode_infer(body, header_len, req, &err);
  if (st == PTS_OK) {
    check_tensors(req, body);
    int64_t batch = 0;
    st = pts_validate_request(raw ? raw_config : config, "m", req, &batch, &err);
    if (st == PTS_OK) encode(req);
  }
  fuzz_check(st == PTS_OK || err.msg[0] != '\0', "error without a message");
  pts_infer_request_free(req);
  pts_buf_release(body);
  return 0;
}
