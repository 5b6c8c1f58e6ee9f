/* frontend/grpc/admit.c — see admit.h. */
#include "frontend/grpc/admit.h"

#include "core/alloc.h"
#include "core/overload.h"
#include "trace/trace.h"

struct pts_infer_request *pts_grpc_admit(struct pts_buf *msg, pts_infer_done_fn done, void *ctx,
                                         struct pts_error *err) {
  uint64_t now = pts_now_ns();
  /* The message is in memory already, but admitting it would keep it
   * there, decoded, for as long as it waits for a model. */
  size_t len = msg->size;
  if (!pts_overload_try_charge(len)) {
    pts_overload_count(PTS_OVERLOAD_GRPC_MEMORY_REFUSED, 1);
    pts_error_set(err, PTS_EXHAUSTED,
                  "request of %zu bytes refused: the request memory budget is exhausted (%zu of "
                  "%zu bytes held; --request-memory-budget); retry later",
                  len, pts_overload_held(), pts_overload_budget());
    return NULL;
  }
  struct pts_infer_request *req = pts_infer_request_new();
  if (!req) {
    pts_overload_release(len);
    pts_error_set(err, PTS_NOMEM, "out of memory accepting a request");
    return NULL;
  }
  req->budget_bytes = len; /* pts_infer_request_free returns it */
  if (pts_grpc_decode_infer(msg, req, NULL, err) != PTS_OK) {
    pts_infer_request_free(req);
    return NULL;
  }
  /* Admitted: from now on it is charged what it holds, decoded. */
  req->budget_bytes = pts_overload_recharge(req->budget_bytes, pts_infer_request_held_bytes(req));
  req->done = done;
  req->done_ctx = ctx;
  req->receive_ns = now;
  req->trace = pts_trace_sample(req->model_name);
  pts_trace_record(req->trace, PTS_TRACE_GRPC_WAITREAD_START, now);
  pts_trace_record(req->trace, PTS_TRACE_GRPC_WAITREAD_END, pts_now_ns());
  return req;
}

void pts_grpc_encode_done(const struct pts_infer_request *req,
                          const struct pts_infer_response *resp, const struct pts_error *ierr,
                          bool stream, struct pts_grpc_reply *reply, struct pts_error *err) {
  pts_error_clear(err);
  pts_trace_record(req->trace, PTS_TRACE_GRPC_SEND_START, pts_now_ns());
  if (ierr && ierr->code != PTS_OK)
    *err = *ierr;
  else if (!resp)
    pts_error_set(err, PTS_INTERNAL, "inference on model '%s' returned no response",
                  req->model_name);
  else
    pts_grpc_encode_infer(req, resp, stream, reply, err);
}

char *pts_grpc_request_id(struct pts_buf *msg) {
  struct pts_error err;
  struct pts_infer_request *req = pts_infer_request_new();
  char *id = NULL;
  if (req) {
    pts_grpc_decode_infer(msg, req, NULL, &err);
    /* A copy: the decoders may keep the id inside the request's own
     * allocation. */
    if (req->id) id = pts_strdup(req->id);
  }
  pts_infer_request_free(req);
  return id;
}
