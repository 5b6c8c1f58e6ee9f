/* scheduler/request.c — see request.h. */
#include "scheduler/request.h"

#include <stddef.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/overload.h"
#include "trace/nvtx.h"
#include "trace/trace.h"

/* The request's struct is one allocation: most of it is the arena, which is
 * zeroed again piece by piece as it is handed out, so only the fields
 * before it are cleared here. */
struct pts_infer_request *pts_infer_request_new(void) {
  struct pts_infer_request *req = pts_malloc(sizeof *req);
  if (!req) return NULL;
  memset(req, 0, offsetof(struct pts_infer_request, arena_mem));
  req->model_version = -1;
  pts_arena_init(&req->arena, req->arena_mem, sizeof req->arena_mem);
  return req;
}

void *pts_infer_request_calloc(struct pts_infer_request *req, size_t count, size_t size) {
  return pts_arena_calloc(&req->arena, count, size);
}

char *pts_infer_request_strndup(struct pts_infer_request *req, const char *s, size_t n) {
  return pts_arena_strndup(&req->arena, s, n);
}

char *pts_infer_request_strdup(struct pts_infer_request *req, const char *s) {
  return pts_arena_strdup(&req->arena, s);
}

void pts_infer_request_free(struct pts_infer_request *req) {
  if (!req) return;
  const struct pts_arena *a = &req->arena;
  pts_nvtx_request_end(req->nvtx_range);
  pts_trace_end(req->trace);
  for (size_t i = 0; i < req->n_inputs; i++) {
    struct pts_tensor *t = &req->inputs[i];
    if (pts_arena_owns(a, t->name)) t->name = NULL; /* not freed alone */
    pts_tensor_clear(t);
    if (req->input_shm) pts_arena_free(a, req->input_shm[i].region);
  }
  pts_arena_free(a, req->inputs);
  pts_arena_free(a, req->input_shm);
  for (size_t i = 0; i < req->n_outputs; i++) {
    pts_arena_free(a, req->outputs[i].name);
    pts_arena_free(a, req->outputs[i].shm.region);
    pts_buf_release(req->outputs[i].shm_target);
  }
  pts_arena_free(a, req->outputs);
  pts_arena_free(a, req->id);
  pts_arena_free(a, req->sequence_id_str);
  pts_arena_free(a, req->model_name);
  for (size_t i = 0; i < req->n_params; i++) {
    pts_free(req->params[i].key);
    if (req->params[i].type == PTS_PARAM_STRING) pts_free(req->params[i].v.s);
  }
  pts_free(req->params);
  pts_overload_release(req->budget_bytes);
  pts_arena_done(&req->arena);
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

void pts_infer_request_note_pinned(struct pts_infer_request *req) {
  for (size_t i = 0; req && i < req->n_inputs; i++) {
    struct pts_tensor *t = &req->inputs[i];
    if (t->mem == PTS_MEM_HOST && t->buf && t->buf->pinned) t->mem = PTS_MEM_PINNED;
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

enum pts_status pts_infer_request_add_param(struct pts_infer_request *req,
                                            const struct pts_request_param *p,
                                            struct pts_error *err) {
  if (req->n_params == req->cap_params) {
    size_t cap = req->cap_params ? req->cap_params * 2 : 4;
    struct pts_request_param *grown = pts_realloc(req->params, cap * sizeof *grown);
    if (!grown)
      return pts_error_set(err, PTS_NOMEM, "out of memory keeping request parameter '%.60s'",
                           p->key);
    req->params = grown;
    req->cap_params = cap;
  }
  struct pts_request_param copy = *p;
  copy.key = pts_strdup(p->key);
  if (copy.key && p->type == PTS_PARAM_STRING) copy.v.s = pts_strdup(p->v.s ? p->v.s : "");
  if (!copy.key || (p->type == PTS_PARAM_STRING && !copy.v.s)) {
    pts_free(copy.key);
    return pts_error_set(err, PTS_NOMEM, "out of memory keeping request parameter '%.60s'",
                         p->key);
  }
  req->params[req->n_params++] = copy;
  return PTS_OK;
}

enum pts_status pts_infer_request_add_string_param(struct pts_infer_request *req, const char *key,
                                                   size_t key_len, const char *value,
                                                   size_t value_len, struct pts_error *err) {
  char *k = pts_strndup(key, key_len), *v = pts_strndup(value, value_len);
  enum pts_status st =
      k && v ? pts_infer_request_add_param(
                   req, &(struct pts_request_param){.key = k, .type = PTS_PARAM_STRING, .v.s = v},
                   err)
             : pts_error_set(err, PTS_NOMEM, "out of memory forwarding header '%.*s'",
                             (int)(key_len > 60 ? 60 : key_len), key);
  pts_free(k);
  pts_free(v);
  return st;
}

struct pts_shm_place *pts_infer_request_input_shm(struct pts_infer_request *req, size_t i) {
  if (i >= req->n_inputs) return NULL;
  if (!req->input_shm) req->input_shm = pts_calloc(req->n_inputs, sizeof *req->input_shm);
  return req->input_shm ? &req->input_shm[i] : NULL;
}

struct pts_infer_response *pts_infer_response_new(void) {
  struct pts_infer_response *resp = pts_malloc(sizeof *resp);
  if (!resp) return NULL;
  memset(resp, 0, offsetof(struct pts_infer_response, arena_mem));
  resp->model_version = -1;
  pts_arena_init(&resp->arena, resp->arena_mem, sizeof resp->arena_mem);
  return resp;
}

struct pts_infer_response *pts_infer_response_new_for(const char *model_name, const char *id,
                                                      size_t n_outputs) {
  struct pts_infer_response *resp = pts_infer_response_new();
  if (!resp) return NULL;
  resp->model_name = pts_arena_strdup(&resp->arena, model_name);
  resp->id = pts_arena_strdup(&resp->arena, id);
  resp->outputs = pts_arena_calloc(&resp->arena, n_outputs ? n_outputs : 1, sizeof *resp->outputs);
  if (!resp->model_name || (id && !resp->id) || !resp->outputs) {
    pts_infer_response_free(resp);
    return NULL;
  }
  return resp;
}

void pts_infer_response_free(struct pts_infer_response *resp) {
  if (!resp) return;
  const struct pts_arena *a = &resp->arena;
  for (size_t i = 0; i < resp->n_outputs; i++) pts_tensor_clear(&resp->outputs[i]);
  pts_arena_free(a, resp->outputs);
  pts_arena_free(a, resp->model_name);
  pts_arena_free(a, resp->id);
  pts_arena_done(&resp->arena);
  pts_free(resp);
}

uint64_t pts_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
