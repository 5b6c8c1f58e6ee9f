/* tests/fuzz/fuzz_grpc_infer.c — a ModelInferRequest message (the bytes of
 * one gRPC message, after the transport's framing) through the gRPC
 * frontend's decoder, which splits the top-level fields by hand and hands the
 * rest to protobuf-c; then the core's validation against a fixed config and,
 * for a valid request, the encoding of an identity response.
 *
 * Properties: every error has a message; accepted tensors lie inside the
 * message and their byte sizes match their shapes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "frontend/grpc/infer.h"
#include "fuzz_common.h"
#include "fuzz_infer.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct pts_buf *msg = pts_buf_new(size);
  if (!msg) return 0;
  if (size) memcpy(msg->data, data, size);
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
