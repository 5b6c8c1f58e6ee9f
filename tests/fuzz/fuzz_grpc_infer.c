/* tests/fuzz/fuzz_grpc_infer.c — a ModelInferRequest message (the bytes of
 * one gRPC message, after the transport's framing) through the gRPC
 * frontend's decoder, which splits the top-level fields by hand and hands the
 * rest to protobuf-c; then the core's validation against a fixed config and,
 * for a valid request, the encoding of an identity response.
 *
 * Properties: every error has a message; accepted tensors lie inside the
 * message; the one-pass decoder of the common message (infer_fast.h)
 * either declines and leaves the request untouched, or fills it exactly as
 * the full decoder does, which must then accept it too. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "frontend/grpc/infer.h"
#include "frontend/grpc/infer_fast.h"
#include "fuzz_common.h"
#include "fuzz_infer.h"
#include "grpc_same.h"
#include "scheduler/validate.h"

static const char CONFIG[] =
    "name: \"m\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ -1 ] },\n"
    "        { name: \"INPUT1\" data_type: TYPE_STRING dims: [ 2 ] },\n"
    "        { name: \"INPUT2\" data_type: TYPE_FP32 dims: [ 2, 2 ] optional: true } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ -1 ] },\n"
    "         { name: \"OUTPUT1\" data_type: TYPE_STRING dims: [ 2 ] },\n"
    "         { name: \"OUTPUT2\" data_type: TYPE_FP32 dims: [ 2, 2 ] } ]\n";

static Inference__ModelConfig *config;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet_log();
  config = fuzz_load_config(CONFIG, sizeof CONFIG - 1, "fuzz_grpc_infer");
  return 0;
}

static void check_tensors(const struct pts_infer_request *req, const struct pts_buf *msg) {
  for (size_t i = 0; i < req->n_inputs; i++) {
    const struct pts_tensor *t = &req->inputs[i];
    fuzz_check(t->name != NULL, "input without a name");
    if (t->buf == msg && t->byte_size > 0) {
      const char *lo = msg->data, *p = t->data;
      fuzz_check(p >= lo && p + t->byte_size <= lo + msg->size, "raw input outside the message");
    }
  }
}

static void encode(const struct pts_infer_request *req, bool stream) {
  struct pts_infer_response *resp = fuzz_identity_response(req);
  if (!resp) return;
  struct pts_error err;
  struct pts_grpc_reply r;
  if (pts_grpc_encode_infer(req, resp, stream, &r, &err) == PTS_OK) {
    size_t total = 0;
    for (size_t i = 0; i < r.n_pieces; i++) total += r.pieces[i].size;
    fuzz_check(total == r.size, "reply pieces do not add up to its size");
    pts_grpc_reply_clear(&r);
  }
  pts_infer_response_free(resp);
}

/* The fast decoder against the full one, on the same message. */
static void compare_decoders(struct pts_buf *msg) {
  struct pts_infer_request *fast = pts_infer_request_new(), *full = pts_infer_request_new();
  if (fast && full) {
    enum pts_grpc_fast f = pts_grpc_fast_decode(msg, fast);
    if (f == PTS_GRPC_FAST_DONE) {
      struct pts_error err;
      pts_error_clear(&err);
      fuzz_check(pts_grpc_decode_infer_full(msg, full, NULL, &err) == PTS_OK,
                 "the fast decoder took a message the full decoder refuses");
      fuzz_check(grpc_same_request(fast, full), "the two decoders filled different requests");
    } else if (f == PTS_GRPC_FAST_DECLINED) {
      fuzz_check(!fast->model_name && !fast->id && !fast->inputs && !fast->outputs &&
                     fast->n_inputs == 0 && fast->n_outputs == 0,
                 "the fast decoder declined but touched the request");
    }
  }
  pts_infer_request_free(fast);
  pts_infer_request_free(full);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct pts_buf *msg = pts_buf_new(size);
  if (!msg) return 0;
  if (size) memcpy(msg->data, data, size);
  compare_decoders(msg);
  struct pts_infer_request *req = pts_infer_request_new();
  if (!req) {
    pts_buf_release(msg);
    return 0;
  }
  struct pts_error err;
  pts_error_clear(&err);
  struct pts_grpc_infer_opts opts = {0};
  enum pts_status st = pts_grpc_decode_infer(msg, req, &opts, &err);
  if (st == PTS_OK) {
    check_tensors(req, msg);
    int64_t batch = 0;
    st = pts_validate_request(config, "m", req, &batch, &err);
    if (st == PTS_OK) encode(req, size % 2 == 1);
  }
  fuzz_check(st == PTS_OK || err.msg[0] != '\0', "error without a message");
  pts_infer_request_free(req);
  pts_buf_release(msg);
  return 0;
}
