/* scheduler/request.c — see request.h. */
#include "scheduler/request.h"

#include <time.h>

#include "core/alloc.h"
#include "core/overload.h"
#include "trace/nvtx.h"
#include "trace/trace.h"

struct pts_infer_request *pts_infer_request_new(void) {
  struct pts_infer_request *req = pts_calloc(1, sizeof *req);
  if (req) req->model_version = -1;
  return req;
}

void pts_infer_request_free(struct pts_infer_request *req) {
  if (!req) return;
  pts_nvtx_request_end(req->nvtx_range);
  pts_trace_end(req->trace);
  for (size_t i = 0; i < req->n_inputs; i++) {
    pts_tensor_clear(&req->inputs[i]);
    if (req->input_shm) pts_free(req->input_shm[i].region);
  }
  pts_free(req->inputs);
  pts_free(req->input_shm);
  for (size_t i = 0; i < req->n_outputs; i++) {
    pts_free(req->outputs[i].name);
    pts_free(req->outputs[i].shm.region);
    pts_buf_release(req->outputs[i].shm_target);
  }
  pts_free(req->outputs);
  pts_free(req->id);
  pts_free(req->sequence_id_str);
  pts_free(req->model_name);
  pts_overload_release(req->budget_bytes);
  pts_free(req);
}

void pts_infer_request_release_shm(struct pts_infer_request *req) {
  for (size_t i = 0; req && req->input_shm && i < req->n_inputs; i++) {
    if (!req->input_shm[i].region) continue;
    struct pts_tensor *t = &req->inputs[i];
    pts_buf_release(t->buf);
    t->buf = NULL;
    t->data = NULL;
    t->byte_size = 0;
  }
  for (size_t i = 0; req && i < req->n_outputs; i++) {
    pts_buf_release(req->outputs[i].shm_target);
    req->outputs[i].shm_target = NULL;
  }
}

size_t pts_infer_request_held_bytes(const struct pts_infer_request *req) {
  size_t total = 0;
  for (size_t i = 0; i < req->n_inputs; i++) {
    const struct pts_buf *b = req->inputs[i].buf;
    if (!b) continue;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; j++) seen = req->inputs[j].buf == b;
    if (!seen) total += b->size;
  }
  return total;
}

struct pts_shm_place *pts_infer_request_input_shm(struct pts_infer_request *req, size_t i) {
  if (i >= req->n_inputs) return NULL;
  if (!req->input_shm) req->input_shm = pts_calloc(req->n_inputs, sizeof *req->input_shm);
  return req->input_shm ? &req->input_shm[i] : NULL;
}

struct pts_infer_response *pts_infer_response_new(void) {
  struct pts_infer_response *resp = pts_calloc(1, sizeof *resp);
  if (resp) resp->model_version = -1;
  return resp;
}

void pts_infer_response_free(struct pts_infer_response *resp) {
  if (!resp) return;
  for (size_t i = 0; i < resp->n_outputs; i++) pts_tensor_clear(&resp->outputs[i]);
  pts_free(resp->outputs);
  pts_free(resp->model_name);
  pts_free(resp->id);
  pts_free(resp);
}

uint64_t pts_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
