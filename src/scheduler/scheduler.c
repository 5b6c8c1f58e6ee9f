/* scheduler/scheduler.c — see scheduler.h.
 *
 * One mutex guards the queue; instance threads sleep on `work` and the
 * shutdown path sleeps on `idle`. A request's life here: enqueue (its
 * priority level, its deadline) → a free instance thread forms a batch
 * (next_batch: timeouts applied, the batcher's choice, at most one thread
 * forming at a time) → run_batch (inputs gathered, backend, outputs checked
 * and split, responses built, statistics) → complete (done callback, in
 * arrival order with preserve_ordering; model reference released). A
 * pipelined instance (a CUDA one) runs the same steps split in two around
 * the device's work, with the next batch gathered and begun in between
 * (pipeline_main). */
#include "scheduler/scheduler.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "config/model_config.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/copy.h"
#include "core/host_policy.h"
#include "core/log.h"
#include "core/overload.h"
#include "scheduler/assemble.h"
#include "scheduler/classify.h"
#include "scheduler/queue.h"
#include "scheduler/rate_limit.h"
#include "scheduler/reshape.h"
#include "scheduler/sequence.h"
#include "scheduler/warmup.h"
#include "shm/shm.h"
#include "tensor/bytes.h"
#include "trace/nvtx.h"
#include "trace/profile.h"
#include "trace/trace.h"

struct instance {
  struct pts_scheduler *sched;
  char *name;   /* owned */
  char *policy; /* owned: its host policy's name (core/host_policy.h), desc.host_policy */
  struct pts_backend_instance_desc desc;
  void *state; /* the backend's; destroyed with instance_destroy */
  pthread_t thread;
  bool running;
  /* Both guarded by the scheduler's lock. `idle`: the thread is in
   * next_batch without a batch, so the state is not in use. `lent`: an
   * enqueuing thread runs a batch on this instance's state (run to
   * completion, see pts_scheduler_enqueue); the thread takes no batch until
   * it is given back. */
  bool idle;
  bool lent;
  /* Whether the thread keeps a batch in flight while it gathers the next
   * (backend.h execute_begin; see pipeline_main). Fixed before the thread
   * starts. */
  bool pipelined;
  /* Owned; NULL without --rate-limit=execution_count (rate_limit.h): each
   * execution waits for the rate limiter (run_batch). */
  struct pts_rate_limit_instance *rl;
};

struct pts_scheduler {
  const char *model_name;
  int64_t version;
  /* What the backend runs: the model's config, or for sequence_batching its
   * execution config (more inputs and outputs after the model's own). */
  const Inference__ModelConfig *config;
  size_t n_user_inputs, n_user_outputs; /* the model's own, leading config's */
  const struct pts_backend *backend;
  void *model_state;
  void (*release_hold)(void *hold); /* params.release_hold */
  bool batching; /* max_batch_size > 0 */
  /* The backend gathers device-memory inputs on the device (backend.h
   * gather_device): CUDA shared-memory requests may then batch. */
  bool device_gather;
  bool preserve_ordering;
  struct pts_batch_limits limits;

  pthread_mutex_t lock;
  pthread_cond_t work; /* queue changed, or stopping was set */
  pthread_cond_t idle; /* outstanding dropped to 0 */
  struct pts_sched_queue queue;
  struct pts_seq *seq; /* sequence_batching: replaces `queue`; else NULL */
  size_t outstanding; /* queued + running */
  bool stopping;
  /* wait_idle ran: the caller takes no more requests, so open sequences
   * with nothing queued are released (sequence.h, flush). */
  bool draining;
  bool forming; /* a thread is waiting for its batch to fill */
  size_t hold;  /* PTSERVE_DELAY_SCHEDULER: queue this many first */
  uint64_t next_seq;
  /* Run to completion (pts_scheduler_enqueue): whether this model may run a
   * request on the thread that enqueued it (instances that may be lent:
   * KIND_CPU or backend.h lendable, none pipelined; no
   * preserve_ordering; fixed at create), and the recent execute time of its
   * batches (exponential average, ns; 0 until one has run), which must be
   * short for it to happen. Guarded by `lock`. */
  bool inline_ok;
  uint64_t inline_max_ns; /* run to completion below this batch time (fixed at create) */
  uint64_t exec_avg_ns;
  /* PTSERVE_PIPELINE=1: instances whose backend can pipeline do (fixed at
   * create). */
  bool pipeline_on;

  /* preserve_ordering: finished requests wait here for earlier ones */
  pthread_mutex_t order_lock;
  uint64_t next_release;
  struct pts_pending *held; /* sorted by seq */

  struct pts_stats stats;

  /* response_cache { enable: true }: the process's response cache
   * (borrowed; NULL when the model does not cache or the server has none)
   * and the number that tells this load's answers from those of any other
   * load of the same name and version (cache.h). Fixed at create. */
  struct pts_cache *cache;
  uint64_t cache_generation;

  /* Per config output: its label_filename's lines (empty without one), for
   * the classification extension; read-only after create. */
  struct pts_labels *labels;

  size_t n_instances;
  struct instance *instances;
};

/* Keeps the message, changes the code: a shape the backend got wrong is the
 * server's fault (500), not the client's. */
static enum pts_status recode(struct pts_error *err, enum pts_status code) {
  if (err) err->code = code;
  return code;
}

/* ---------------------------------------------------------------- shapes */

/* ------------------------------------------------------------ completion */

/* Answers the request, then gives back its hold: the hold keeps the model
 * version (and so this scheduler) alive until the answer is out. */
static void deliver(struct pts_scheduler *s, struct pts_pending *p,
                    struct pts_infer_response *resp, const struct pts_error *err) {
  struct pts_infer_request *req = p->req;
  void *hold = p->hold;
  void (*release)(void *) = s->release_hold;
  pts_cache_key_clear(&p->cache_key);
  pts_free(p);
  req->done(req, resp, err, req->done_ctx);
  if (release && hold) release(hold); /* NULL: run inline, its caller releases it */
}

/* Inserts p among the held requests (sorted by seq), then delivers every
 * request whose predecessors have all been delivered. Delivery happens
 * under order_lock so that two threads can not overtake each other. */
static void deliver_in_order(struct pts_scheduler *s, struct pts_pending *p) {
  pthread_mutex_lock(&s->order_lock);
  struct pts_pending **at = &s->held;
  while (*at && (*at)->seq < p->seq) at = &(*at)->next;
  p->next = *at;
  *at = p;
  while (s->held && s->held->seq == s->next_release) {
    struct pts_pending *q = s->held;
    s->held = q->next;
    s->next_release++;
    deliver(s, q, q->resp, q->err.code == PTS_OK ? NULL : &q->err);
  }
  pthread_mutex_unlock(&s->order_lock);
}

static uint64_t request_duration(const struct pts_pending *p, uint64_t now) {
  uint64_t from = p->req->receive_ns ? p->req->receive_ns : p->enqueue_ns;
  return now > from ? now - from : 0;
}

/* The request's last stamps before it goes back to its frontend. */
static void trace_completion(struct pts_infer_request *req, const struct pts_infer_response *resp,
                             uint64_t now) {
  pts_nvtx_request_end(req->nvtx_range);
  req->nvtx_range = 0;
  if (!req->trace) return;
  for (size_t i = 0; resp && pts_trace_wants_tensors(req->trace) && i < resp->n_outputs; i++)
    pts_trace_tensor(req->trace, "TENSOR_BACKEND_OUTPUT", &resp->outputs[i]);
  if (resp) pts_trace_record(req->trace, PTS_TRACE_INFER_RESPONSE_COMPLETE, now);
  pts_trace_record(req->trace, PTS_TRACE_REQUEST_END, now);
}

/* Counts the outcome, then answers the request (resp or err; ownership of
 * both passes on). */
/* A padding row (pad_rows) and its request; nobody asked for it, so it
 * gets no answer and no statistics. */
static void padding_free(struct pts_pending *p, struct pts_infer_response *resp) {
  pts_infer_response_free(resp);
  pts_infer_request_free(p->req);
  pts_cache_key_clear(&p->cache_key);
  pts_free(p);
}

static void complete(struct pts_scheduler *s, struct pts_pending *p,
                     struct pts_infer_response *resp, const struct pts_error *err,
                     enum pts_fail_reason why) {
  if (p->padding) {
    padding_free(p, resp);
    return;
  }
  bool ok = !err || err->code == PTS_OK;
  /* The answer may reach the client before the frontend frees the request:
   * let go of its regions now (the outputs are written), or an unregister
   * right after the answer could still find them in use. */
  pts_infer_request_release_shm(p->req);
  uint64_t now = pts_now_ns();
  uint64_t d = request_duration(p, now);
  trace_completion(p->req, ok ? resp : NULL, now);
  if (ok)
    pts_stats_request_success(&s->stats, d);
  else
    pts_stats_request_failure(&s->stats, why, d);
  if (!s->preserve_ordering) {
    deliver(s, p, resp, ok ? NULL : err);
    return;
  }
  p->resp = resp;
  if (ok)
    pts_error_clear(&p->err);
  else
    p->err = *err;
  deliver_in_order(s, p);
}

/* ------------------------------------------------------------- execution */

/* One batch on its way through run_batch. */
struct run {
  struct pts_pending **items; /* n */
  struct pts_infer_request **reqs;
  int64_t *rows; /* each request's batch size */
  size_t n;
  int64_t total;              /* sum of rows */
  struct pts_tensor *inputs;  /* config order; views */
  struct pts_buf **gathered;  /* per input: the buffer gather made, or NULL */
  struct pts_tensor *outputs; /* the backend's, config order */
  struct pts_tensor *slices;  /* n × n_output, request-major */
  struct pts_infer_response **resps;
  struct pts_error *errs; /* per request (response building) */
  struct pts_output_dest *dests; /* output_dests, or NULL */
  /* The arrays above (but dests) are pieces of one block: one allocation
   * per batch instead of eight (issue #13). Owned; run_free frees it. */
  void *block;
  struct pts_arena arena;
};

/* Drops the batch's own buffers (gathered inputs, the backend's outputs
 * and their slices; an identity-like backend's outputs may be views of a
 * shared-memory region). Idempotent. */
static void run_release_tensors(const struct pts_scheduler *s, struct run *r) {
  const Inference__ModelConfig *cfg = s->config;
  for (size_t k = 0; r->gathered && k < cfg->n_input; k++) {
    pts_buf_release(r->gathered[k]);
    r->gathered[k] = NULL;
  }
  for (size_t k = 0; r->outputs && k < cfg->n_output; k++) pts_tensor_clear(&r->outputs[k]);
  for (size_t i = 0; r->slices && i < r->n * cfg->n_output; i++) pts_tensor_clear(&r->slices[i]);
}

static void run_free(const struct pts_scheduler *s, struct run *r) {
  run_release_tensors(s, r);
  /* Pieces the block held are freed with it; pts_arena_free frees only
   * one that came from the heap instead (none, as the block is sized). */
  pts_arena_free(&r->arena, r->items);
  pts_arena_free(&r->arena, r->reqs);
  pts_arena_free(&r->arena, r->rows);
  pts_arena_free(&r->arena, r->inputs);
  pts_arena_free(&r->arena, r->gathered);
  pts_arena_free(&r->arena, r->outputs);
  pts_arena_free(&r->arena, r->slices);
  pts_arena_free(&r->arena, r->resps);
  pts_arena_free(&r->arena, r->errs);
  pts_free(r->dests);
  pts_arena_done(&r->arena);
  pts_free(r->block);
  r->block = NULL;
}

static enum pts_status run_init(const struct pts_scheduler *s, struct pts_pending *list, size_t n,
                                struct run *r, struct pts_error *err) {
  const Inference__ModelConfig *cfg = s->config;
  size_t ni = cfg->n_input ? cfg->n_input : 1, no = cfg->n_output ? cfg->n_output : 1;
  memset(r, 0, sizeof *r);
  r->n = n;
  size_t cap =
      pts_arena_piece_size(n, sizeof *r->items) + pts_arena_piece_size(n, sizeof *r->reqs) +
      pts_arena_piece_size(n, sizeof *r->rows) + pts_arena_piece_size(ni, sizeof *r->inputs) +
      pts_arena_piece_size(ni, sizeof *r->gathered) + pts_arena_piece_size(no, sizeof *r->outputs) +
      pts_arena_piece_size(n, sizeof *r->resps) + pts_arena_piece_size(n, sizeof *r->errs) +
      (n > 1 ? pts_arena_piece_size(n * no, sizeof *r->slices) : 0) + 16;
  /* Huge batches (cap overflowed) take every array from the heap. */
  r->block = cap < ((size_t)1 << 30) ? pts_malloc(cap) : NULL;
  pts_arena_init(&r->arena, r->block, r->block ? cap : 0);
  r->items = pts_arena_calloc(&r->arena, n, sizeof *r->items);
  r->reqs = pts_arena_calloc(&r->arena, n, sizeof *r->reqs);
  r->rows = pts_arena_calloc(&r->arena, n, sizeof *r->rows);
  r->inputs = pts_arena_calloc(&r->arena, ni, sizeof *r->inputs);
  r->gathered = pts_arena_calloc(&r->arena, ni, sizeof *r->gathered);
  r->outputs = pts_arena_calloc(&r->arena, no, sizeof *r->outputs);
  r->resps = pts_arena_calloc(&r->arena, n, sizeof *r->resps);
  r->errs = pts_arena_calloc(&r->arena, n, sizeof *r->errs);
  if (n > 1) r->slices = pts_arena_calloc(&r->arena, n * no, sizeof *r->slices);
  size_t i = 0;
  for (struct pts_pending *p = list; p && i < n; p = p->next, i++) {
    if (r->items) r->items[i] = p;
    if (r->reqs) r->reqs[i] = p->req;
    if (r->rows) r->rows[i] = p->batch_size;
    r->total += p->batch_size;
  }
  if (!r->items || !r->reqs || !r->rows || !r->inputs || !r->gathered || !r->outputs || !r->resps ||
      !r->errs || (n > 1 && !r->slices))
    return pts_error_set(err, PTS_NOMEM,
                         "out of memory running a batch of %zu requests of model '%s'", n,
                         s->model_name);
  return PTS_OK;
}

/* Gathers input k straight into the backend's staging memory when it
 * offers some: then the bytes are copied once, into memory the device
 * reads by DMA. Only when there is something to copy: several requests,
 * or one whose bytes are in ordinary host memory (pinned or device memory
 * is handed over as it is). BYTES inputs stay on the host (the model takes
 * them as strings). *done says whether it gathered. */
static enum pts_status gather_staged(const struct pts_scheduler *s, struct instance *inst,
                                     struct run *r, unsigned set, size_t k,
                                     struct pts_tensor *dst, bool *done, struct pts_error *err) {
  *done = false;
  const char *name = s->config->input[k]->name;
  const struct pts_tensor *first = pts_request_input(r->reqs[0], name);
  if (!s->backend->input_staging || !first || first->dtype == PTS_DTYPE_BYTES ||
      (r->n == 1 && first->mem != PTS_MEM_HOST))
    return PTS_OK;
  size_t bytes;
  enum pts_status st = pts_batch_gather_size(name, r->reqs, r->n, &bytes, err);
  void *into = NULL;
  enum pts_mem mem = PTS_MEM_HOST;
  if (st == PTS_OK && bytes > 0)
    st = s->backend->input_staging(inst->state, set, k, bytes, &into, &mem, err);
  if (st != PTS_OK || !into) return st;
  st = pts_batch_gather_into(name, r->reqs, r->n, into, bytes, mem, dst, err);
  *done = st == PTS_OK;
  return st;
}

/* Reads every part (device memory: CUDA shared memory) into one new host
 * buffer, for an instance that declined to gather them on its device (one
 * not on a GPU, which would have copied each to the host anyway). */
static enum pts_status gather_to_host(const struct pts_scheduler *s, struct run *r, size_t k,
                                      size_t total, struct pts_tensor *dst,
                                      struct pts_error *err) {
  const char *name = s->config->input[k]->name;
  struct pts_buf *b = pts_buf_new(total ? total : 1);
  if (!b)
    return pts_error_set(err, PTS_NOMEM, "out of memory gathering %zu bytes of input '%s'", total,
                         name);
  enum pts_status st = PTS_OK;
  size_t at = 0;
  for (size_t i = 0; st == PTS_OK && i < r->n; i++) {
    const struct pts_tensor *t = pts_request_input(r->reqs[i], name);
    st = pts_shm_read_device(t->buf, t->device, (char *)b->data + at, t->byte_size, err);
    at += t->byte_size;
  }
  if (st == PTS_OK)
    st = pts_batch_gathered(name, r->reqs, r->n, b->data, PTS_MEM_HOST, 0, dst, err);
  if (st != PTS_OK) {
    pts_buf_release(b);
    pts_error_prefix(err, "input '%s' of model '%s'", name, s->model_name);
    return st;
  }
  r->gathered[k] = b;
  return PTS_OK;
}

/* Gathers input k of a batch of several requests whose bytes are in device
 * memory (they batch only with each other: pts_batch_compatible) on the
 * instance's device (backend.h gather_device): device-to-device copies into
 * memory the instance owns, no host copy. A single request's device memory
 * is handed over as it is, by pts_batch_gather. *done says whether it
 * gathered. */
static enum pts_status gather_on_device(const struct pts_scheduler *s, struct instance *inst,
                                        struct run *r, unsigned set, size_t k,
                                        struct pts_tensor *dst, bool *done,
                                        struct pts_error *err) {
  *done = false;
  const char *name = s->config->input[k]->name;
  const struct pts_tensor *first = pts_request_input(r->reqs[0], name);
  if (r->n == 1 || !first || first->mem != PTS_MEM_DEVICE) return PTS_OK;
  struct pts_device_part stack[32];
  struct pts_device_part *parts = r->n <= 32 ? stack : pts_malloc(r->n * sizeof *parts);
  if (!parts)
    return pts_error_set(err, PTS_NOMEM, "out of memory gathering input '%s'", name);
  size_t total;
  void *into = NULL;
  int device = 0;
  enum pts_status st = pts_batch_device_parts(name, r->reqs, r->n, parts, &total, err);
  if (st == PTS_OK && s->backend->gather_device) {
    st = s->backend->gather_device(inst->state, set, k, parts, r->n, total, &into, &device, err);
    if (st == PTS_OK && into)
      st = pts_batch_gathered(name, r->reqs, r->n, into, PTS_MEM_DEVICE, device, dst, err);
  }
  if (parts != stack) pts_free(parts);
  if (st == PTS_OK && !into) st = gather_to_host(s, r, k, total, dst, err);
  *done = st == PTS_OK;
  return st;
}

/* The backend's view of the batch's inputs: config order, gathered (on
 * the device or into the backend's staging memory, both of `set`, or a
 * view for one request), reshaped. An optional input the requests left out
 * is passed with data == NULL. */
static enum pts_status build_inputs(const struct pts_scheduler *s, struct instance *inst,
                                    struct run *r, unsigned set, struct pts_error *err) {
  const Inference__ModelConfig *cfg = s->config;
  for (size_t k = 0; k < cfg->n_input; k++) {
    const Inference__ModelInput *in = cfg->input[k];
    struct pts_tensor *dst = &r->inputs[k];
    dst->name = in->name;
    dst->dtype = (enum pts_dtype)in->data_type;
    if (k >= s->n_user_inputs) { /* a control input or a state */
      enum pts_status st = pts_seq_build_input(s->seq, k - s->n_user_inputs, r->items, r->n, dst,
                                               &r->gathered[k], err);
      if (st != PTS_OK) return st;
      continue;
    }
    bool staged;
    enum pts_status st = gather_on_device(s, inst, r, set, k, dst, &staged, err);
    if (st == PTS_OK && !staged) st = gather_staged(s, inst, r, set, k, dst, &staged, err);
    if (st == PTS_OK && !staged)
      st = pts_batch_gather(in->name, r->reqs, r->n, dst, &r->gathered[k], err);
    if (st != PTS_OK) return st;
    if (!dst->data && dst->shape.ndim == 0) continue;
    if (!in->reshape) continue;
    struct pts_shape full = dst->shape;
    st = pts_reshape_map_batched(in->dims, in->n_dims, in->reshape->shape, in->reshape->n_shape,
                                 s->batching, &full, &dst->shape, err);
    if (st != PTS_OK) {
      pts_error_prefix(err, "input '%s' of model '%s'", in->name, s->model_name);
      return st;
    }
  }
  return PTS_OK;
}
static enum pts_status check_output_size(const struct pts_scheduler *s,
                                         const struct pts_tensor *out, struct pts_error *err) {
  int64_t count = pts_shape_count(&out->shape);
  if (out->dtype == PTS_DTYPE_BYTES) {
    if (pts_bytes_validate(out->data, out->byte_size, count, NULL, out->name, err) == PTS_OK)
      return PTS_OK;
    pts_error_prefix(err, "backend '%s', model '%s'", s->backend->name, s->model_name);
    return recode(err, PTS_INTERNAL);
  }
  int64_t want = pts_shape_byte_size(out->dtype, &out->shape);
  if (want < 0 || (uint64_t)want != (uint64_t)out->byte_size || (!out->data && want > 0))
    return pts_error_set(err, PTS_INTERNAL,
                         "backend '%s' returned %zu bytes for output '%s' of model '%s', but its "
                         "shape and data type need %lld",
                         s->backend->name, out->byte_size, out->name, s->model_name,
                         (long long)want);
  return PTS_OK;
}

/* Makes the backend's outputs what the client should see: config names,
 * config data types checked, batch dimension checked, shapes mapped back
 * from reshape to dims, sizes consistent. */
static enum pts_status check_outputs(const struct pts_scheduler *s, int64_t batch_size,
                                     struct pts_tensor *outputs, struct pts_error *err) {
  const Inference__ModelConfig *cfg = s->config;
  bool batched = cfg->max_batch_size > 0;
  for (size_t k = 0; k < cfg->n_output; k++) {
    const Inference__ModelOutput *co = cfg->output[k];
    struct pts_tensor *out = &outputs[k];
    enum pts_dtype want = (enum pts_dtype)co->data_type;
    if (out->dtype != want)
      return pts_error_set(err, PTS_INTERNAL,
                           "backend '%s' returned output '%s' of model '%s' with data type '%s', "
                           "but the config says '%s'",
                           s->backend->name, co->name, s->model_name, pts_dtype_name(out->dtype),
                           pts_dtype_name(want));
    if (!out->name || strcmp(out->name, co->name) != 0) {
      char *name = pts_strdup(co->name);
      if (!name) return pts_error_set(err, PTS_NOMEM, "out of memory naming output '%s'", co->name);
      pts_free(out->name);
      out->name = name;
    }
    if (batched && (out->shape.ndim < 1 || out->shape.dims[0] != batch_size))
      return pts_error_set(err, PTS_INTERNAL,
                           "backend '%s' returned output '%s' of model '%s' without the batch "
                           "dimension %lld leading its shape",
                           s->backend->name, co->name, s->model_name, (long long)batch_size);
    if (co->reshape) {
      struct pts_shape mapped;
      enum pts_status st =
          pts_reshape_map_batched(co->reshape->shape, co->reshape->n_shape, co->dims, co->n_dims,
                                  batched, &out->shape, &mapped, err);
      if (st != PTS_OK) {
        pts_error_prefix(err, "output '%s' of model '%s'", co->name, s->model_name);
        return recode(err, PTS_INTERNAL);
      }
      out->shape = mapped;
    }
    enum pts_status st = check_output_size(s, out, err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

static int config_output_index(const Inference__ModelConfig *cfg, const char *name) {
  for (size_t k = 0; k < cfg->n_output; k++)
    if (strcmp(cfg->output[k]->name, name) == 0) return (int)k;
  return -1;
}

/* An output the request placed in shared memory: its bytes go there (one
 * copy, host to region, or host to device for CUDA regions) and the
 * response keeps only name, datatype and shape, as Triton's does. With `w`
 * a copy to a CUDA region is only noted, and the caller makes the batch's
 * copies together (pts_shm_writes_finish): t's bytes must then
 * outlive the release below, which they do when t is a view of the batch's
 * outputs (the run holds those until after build_responses). */
static enum pts_status write_shm_output(const struct pts_scheduler *s,
                                        const struct pts_requested_output *o, struct pts_tensor *t,
                                        struct pts_shm_writes *w, struct pts_error *err) {
  if (t->byte_size > o->shm_target->size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "shared memory size specified with the request for output '%s' (%zu "
                         "bytes) should be at least %zu bytes to hold the results (model '%s')",
                         o->name, o->shm_target->size, t->byte_size, s->model_name);
  /* A backend that wrote straight into the region (pts_batch.output_dest)
   * left nothing to copy. */
  if (t->data != o->shm_target->data) {
    enum pts_status st =
        w ? pts_shm_write_deferred(w, o->shm_target, o->shm_mem, o->shm_device, t->data,
                                   t->byte_size, err)
          : pts_shm_write(o->shm_target, o->shm_mem, o->shm_device, t->data, t->byte_size, err);
    if (st != PTS_OK) {
      pts_error_prefix(err, "writing output '%s' of model '%s' to shared memory region '%s'",
                       o->name, s->model_name, o->shm.region);
      return st;
    }
  }
  pts_buf_release(t->buf);
  t->buf = NULL;
  t->data = NULL;
  t->byte_size = 0;
  return PTS_OK;
}

/* An output that is a view of a shared-memory region (a backend that
 * returns its input, as identity does, fed from shared memory) but goes
 * back in the response body: the response gets its own copy, so that the
 * region is not in use any more once the outputs are written (a client may
 * unregister it as soon as it has the answer). */
static enum pts_status own_copy(const struct pts_scheduler *s, struct pts_tensor *t,
                                struct pts_error *err) {
  if (t->mem == PTS_MEM_DEVICE)
    return pts_error_set(err, PTS_INTERNAL,
                         "model '%s' returned output '%s' in device memory of a CUDA region",
                         s->model_name, t->name);
  struct pts_buf *copy = pts_buf_new(t->byte_size ? t->byte_size : 1);
  if (!copy)
    return pts_error_set(err, PTS_NOMEM, "out of memory copying output '%s' of model '%s'",
                         t->name, s->model_name);
  struct pts_copy_part part = {copy->data, t->data, t->byte_size};
  pts_copy_parts(&part, 1);
  pts_buf_release(t->buf);
  t->buf = copy;
  t->data = copy->data;
  t->mem = PTS_MEM_HOST;
  return PTS_OK;
}

/* The response shares the output buffers: each tensor is a second view that
 * holds its own reference. `w`: as write_shm_output's (NULL: every write
 * done on return). */
static enum pts_status build_response(const struct pts_scheduler *s,
                                      const struct pts_infer_request *req,
                                      const struct pts_tensor *outputs, struct pts_shm_writes *w,
                                      struct pts_infer_response **out, struct pts_error *err) {
  const Inference__ModelConfig *cfg = s->config;
  size_t n = req->n_outputs ? req->n_outputs : s->n_user_outputs;
  struct pts_infer_response *resp = pts_infer_response_new_for(s->model_name, req->id, n);
  if (!resp) goto nomem;
  resp->model_version = s->version;
  for (size_t i = 0; i < n; i++) {
    int k = req->n_outputs ? config_output_index(cfg, req->outputs[i].name) : (int)i;
    if (k < 0) {
      pts_infer_response_free(resp);
      return pts_error_set(err, PTS_INVALID_ARG, "unexpected inference output '%s' for model '%s'",
                           req->outputs[i].name, s->model_name);
    }
    uint32_t classes = req->n_outputs ? req->outputs[i].classification : 0;
    enum pts_status st =
        classes ? pts_classify(&outputs[k], s->batching, classes, &s->labels[k],
                               &resp->outputs[i], err)
                : pts_tensor_copy_view(&resp->outputs[i], &outputs[k], err);
    if (st != PTS_OK) {
      pts_infer_response_free(resp);
      return st;
    }
    resp->n_outputs = i + 1;
    if (req->n_outputs && req->outputs[i].shm_target)
      /* A classification is a buffer of its own, freed in there: written
       * at once. */
      st = write_shm_output(s, &req->outputs[i], &resp->outputs[i], classes ? NULL : w, err);
    else if (pts_shm_is_view(resp->outputs[i].buf))
      st = own_copy(s, &resp->outputs[i], err);
    if (st != PTS_OK) {
      pts_infer_response_free(resp);
      return st;
    }
  }
  *out = resp;
  return PTS_OK;
nomem:
  pts_infer_response_free(resp);
  return pts_error_set(err, PTS_NOMEM, "out of memory building the response of model '%s'",
                       s->model_name);
}

/* A request that missed the response cache and has its answer: a copy of
 * its outputs (the model's own, config order, before classification and
 * shared memory) is stored under its key, and the miss counted with the
 * lookup's and the insertion's time. */
static void cache_store(struct pts_scheduler *s, struct pts_pending *p,
                        const struct pts_tensor *outputs) {
  if (!p->cache_key.bytes) return;
  uint64_t t0 = pts_now_ns();
  pts_cache_insert(s->cache, &p->cache_key, outputs, s->n_user_outputs);
  pts_stats_cache_miss(&s->stats, p->cache_lookup_ns + (pts_now_ns() - t0));
}

/* Makes the batch's copies into CUDA regions and waits for them. When one
 * failed, no region can be trusted to hold its answer: every response is
 * dropped and the batch fails with the reason. */
static enum pts_status shm_writes_land(const struct pts_scheduler *s, struct run *r,
                                       struct pts_shm_writes *w, struct pts_error *err) {
  if (pts_shm_writes_finish(w, err) == PTS_OK) return PTS_OK;
  for (size_t i = 0; i < r->n; i++) {
    pts_infer_response_free(r->resps[i]);
    r->resps[i] = NULL;
  }
  pts_error_prefix(err, "writing the outputs of model '%s' to CUDA shared memory",
                   s->model_name);
  return recode(err, PTS_INTERNAL);
}

/* Per-request responses: the outputs themselves for a batch of one, else
 * each request's slices of every output. A failure here fails only the
 * request concerned. */
static enum pts_status build_responses(struct pts_scheduler *s, struct run *r,
                                       struct pts_error *err) {
  const Inference__ModelConfig *cfg = s->config;
  /* Outputs bound for CUDA regions: enqueued request by request, waited
   * for once below, before any answer leaves. */
  struct pts_shm_writes w = {0};
  if (r->n == 1) {
    if (build_response(s, r->reqs[0], r->outputs, &w, &r->resps[0], &r->errs[0]) != PTS_OK)
      r->resps[0] = NULL;
    else
      cache_store(s, r->items[0], r->outputs);
    return shm_writes_land(s, r, &w, err);
  }
  for (size_t k = 0; k < cfg->n_output; k++) {
    struct pts_tensor *column = pts_calloc(r->n, sizeof *column);
    if (!column)
      return pts_error_set(err, PTS_NOMEM, "out of memory splitting the outputs of model '%s'",
                           s->model_name);
    enum pts_status st = pts_batch_split(&r->outputs[k], r->rows, r->n, column, err);
    for (size_t i = 0; st == PTS_OK && i < r->n; i++) r->slices[i * cfg->n_output + k] = column[i];
    pts_free(column);
    if (st != PTS_OK) {
      pts_error_prefix(err, "model '%s'", s->model_name);
      return recode(err, PTS_INTERNAL);
    }
  }
  for (size_t i = 0; i < r->n; i++) {
    if (build_response(s, r->reqs[i], &r->slices[i * cfg->n_output], &w, &r->resps[i],
                       &r->errs[i]) != PTS_OK)
      r->resps[i] = NULL;
    else
      cache_store(s, r->items[i], &r->slices[i * cfg->n_output]);
  }
  return shm_writes_land(s, r, &w, err);
}

/* A backend that timed its phases on the device (CUDA events) reports the
 * model's own time (device_infer_ns) and the output copies'
 * (device_output_ns). The host waited for both right before execute (or
 * execute_end) returned, so they are placed at the end of that call:
 * infer_end becomes "output copies start" and input_end "forward() starts
 * on the device". Statistics and traces then show compute_infer as
 * measured on the device; compute_input keeps the gather, the launch and
 * the input copies (for a pipelined batch also the wait behind the batch
 * ahead of it on the device), compute_output the output copies and the
 * split. */
static void apply_device_times(struct pts_batch_times *t, const struct pts_batch *b) {
  if (!b->device_timed || t->infer_end_ns < t->start_ns) return;
  uint64_t span = t->infer_end_ns - t->start_ns;
  uint64_t out = b->device_output_ns < span ? b->device_output_ns : span;
  uint64_t infer = b->device_infer_ns < span - out ? b->device_infer_ns : span - out;
  t->infer_end_ns -= out;
  t->input_end_ns = t->infer_end_ns - infer;
}

/* A batch of one request whose outputs go to shared memory: where, per
 * config output, so a backend can write them there directly (the copy
 * build_response would make then finds nothing to do). NULL otherwise, or
 * when out of memory (the copy then happens as usual). */
static struct pts_output_dest *output_dests(const struct pts_scheduler *s, struct run *r) {
  const struct pts_infer_request *req = r->reqs[0];
  bool any = false;
  for (size_t i = 0; r->n == 1 && i < req->n_outputs; i++)
    any |= req->outputs[i].shm_target != NULL;
  if (!any) return NULL;
  r->dests = pts_calloc(s->config->n_output, sizeof *r->dests);
  for (size_t i = 0; r->dests && i < req->n_outputs; i++) {
    const struct pts_requested_output *o = &req->outputs[i];
    int k = config_output_index(s->config, o->name);
    if (!o->shm_target || k < 0) continue;
    r->dests[k] = (struct pts_output_dest){o->shm_target->data, o->shm_target->size, o->shm_mem,
                                           o->shm_device};
  }
  return r->dests;
}

/* Every traced request of the batch gets the batch's compute stamps. */
static void trace_compute(const struct run *r, size_t n, const struct pts_batch_times *t) {
  if (!r->reqs || t->infer_end_ns == 0) return; /* nothing ran */
  uint64_t end = t->output_end_ns ? t->output_end_ns : pts_now_ns();
  for (size_t i = 0; i < n; i++) {
    struct pts_trace *tr = r->reqs[i]->trace;
    if (!tr) continue;
    pts_trace_record(tr, PTS_TRACE_COMPUTE_START, t->start_ns);
    pts_trace_record(tr, PTS_TRACE_COMPUTE_INPUT_END, t->input_end_ns);
    pts_trace_record(tr, PTS_TRACE_COMPUTE_OUTPUT_START, t->infer_end_ns);
    pts_trace_record(tr, PTS_TRACE_COMPUTE_END, end);
  }
}

/* Their sequences may go on (sequence.h); before the pendings are freed. */
static void sequences_done(struct pts_scheduler *s, struct pts_pending *list, size_t n) {
  pthread_mutex_lock(&s->lock);
  pts_seq_done(s->seq, list, n, pts_now_ns());
  pthread_cond_broadcast(&s->work);
  pthread_mutex_unlock(&s->lock);
}

/* A padding row of the sequence batcher's direct strategy (sequence.h): a
 * request of one row whose inputs are zeros shaped as `like`'s (a request
 * of the same batch), so that the batch gathers as any other. Its control
 * inputs and states come from the sequence batcher (READY false). */
static struct pts_pending *padding_row(const struct pts_scheduler *s,
                                       const struct pts_infer_request *like, size_t row,
                                       uint64_t now) {
  struct pts_pending *p = pts_calloc(1, sizeof *p);
  struct pts_infer_request *req = pts_infer_request_new();
  bool ok = p && req && (req->model_name = pts_strdup(s->model_name)) &&
            (req->inputs = pts_calloc(like->n_inputs + 1, sizeof *req->inputs));
  for (size_t k = 0; ok && k < like->n_inputs; k++) {
    const struct pts_tensor *src = &like->inputs[k];
    struct pts_tensor *t = &req->inputs[k];
    int64_t count = pts_shape_count(&src->shape);
    /* BYTES: each element an empty string (its 4-byte length, 0). */
    size_t bytes = src->dtype == PTS_DTYPE_BYTES ? (size_t)(count > 0 ? count : 0) * 4
                                                 : src->byte_size;
    t->buf = pts_buf_new(bytes ? bytes : 1);
    t->name = pts_strdup(src->name);
    req->n_inputs = k + 1; /* freed with the request from here on */
    ok = t->buf && t->name;
    if (!ok) break;
    memset(t->buf->data, 0, bytes ? bytes : 1);
    t->dtype = src->dtype;
    t->shape = src->shape;
    t->data = t->buf->data;
    t->byte_size = bytes;
    t->mem = PTS_MEM_HOST;
  }
  if (!ok) {
    pts_infer_request_free(req);
    pts_free(p);
    return NULL;
  }
  p->req = req;
  p->batch_size = 1;
  p->enqueue_ns = now;
  p->row = row;
  p->padding = true;
  return p;
}

/* Puts the `n` requests of *list at their rows (pts_seq_choose) among
 * `rows`, with padding rows in between; *list becomes the padded list. On
 * failure *list is as it was. */
static enum pts_status pad_rows(const struct pts_scheduler *s, struct pts_pending **list,
                                size_t rows, struct pts_error *err) {
  struct pts_pending **at = pts_calloc(rows, sizeof *at);
  if (!at)
    return pts_error_set(err, PTS_NOMEM, "out of memory padding a batch of model '%s'",
                         s->model_name);
  for (struct pts_pending *p = *list; p; p = p->next)
    if (p->row < rows) at[p->row] = p;
  uint64_t now = pts_now_ns();
  for (size_t i = 0; i < rows; i++) {
    if (at[i]) continue;
    at[i] = padding_row(s, (*list)->req, i, now);
    if (at[i]) continue;
    for (size_t j = 0; j < i; j++)
      if (at[j]->padding) padding_free(at[j], NULL);
    pts_free(at);
    return pts_error_set(err, PTS_NOMEM, "out of memory padding a batch of model '%s'",
                         s->model_name);
  }
  for (size_t i = 0; i < rows; i++) at[i]->next = i + 1 < rows ? at[i + 1] : NULL;
  *list = at[0];
  pts_free(at);
  return PTS_OK;
}

/* One batch from its gather to its answers. run_batch takes it through
 * in one go; a pipelined instance (pipeline_main) keeps two, one per
 * staging set: one begun on the device while the next is gathered. */
struct flight {
  struct pts_pending *list; /* the batch's requests, padding rows included */
  size_t n;                 /* requests in list */
  size_t pad;               /* padding rows among them (sequence batches) */
  unsigned set;             /* the staging set its inputs are gathered into */
  struct run r;
  struct pts_batch batch;   /* what the backend sees; its outputs are r.outputs */
  struct pts_batch_times t;
  enum pts_status st;       /* the batch's fate so far */
  struct pts_error err;
  enum pts_fail_reason why; /* whose fault a failure of the whole batch is */
  bool begun;               /* execute_begin succeeded: execute_end is owed */
};

/* Pads, gathers (into staging `set`) and describes the batch of the `n`
 * requests of `list` (`rows` as run_batch says); takes its profile ticket.
 * A failure is kept in f->st for flight_land to answer with. */
static void flight_prepare(struct pts_scheduler *s, struct instance *inst, struct flight *f,
                           struct pts_pending *list, size_t n, size_t rows, unsigned set) {
  memset(f, 0, sizeof *f);
  f->t.start_ns = pts_now_ns();
  pts_error_clear(&f->err);
  f->why = PTS_FAIL_OTHER;
  f->set = set;
  enum pts_status st = PTS_OK;
  if (rows > n && (st = pad_rows(s, &list, rows, &f->err)) == PTS_OK) {
    f->pad = rows - n;
    n = rows;
  }
  f->list = list;
  f->n = n;
  enum pts_status init = run_init(s, list, n, &f->r, &f->err);
  if (st == PTS_OK) st = init;
  if (st == PTS_OK) st = build_inputs(s, inst, &f->r, set, &f->err);
  f->t.input_end_ns = pts_now_ns();
  f->st = st;
  if (st != PTS_OK) return;
  struct run *r = &f->r;
  const Inference__ModelConfig *cfg = s->config;
  PTS_LOG_VERBOSE(1, "model '%s' version %lld: instance '%s' runs %zu requests (batch size %lld)",
                  s->model_name, (long long)s->version, inst->name, r->n, (long long)r->total);
  f->batch = (struct pts_batch){
      .batch_size = s->batching ? r->total : 0,
      .n_inputs = cfg->n_input,
      .inputs = r->inputs,
      .n_outputs = cfg->n_output,
      .outputs = r->outputs,
      .output_dest = output_dests(s, r),
      .set = set,
  };
  if (r->n == 1) {
    const struct pts_infer_request *one = r->reqs[0];
    f->batch.sequence_id = one->sequence_id;
    f->batch.sequence_id_str = one->sequence_id_str;
    f->batch.sequence_start = one->sequence_start;
    f->batch.sequence_end = one->sequence_end;
    f->batch.params = one->params;
    f->batch.n_params = one->n_params;
  }
  f->batch.profile = pts_profile_take(s->model_name, s->version, inst->name, r->total);
}

/* After execute (or execute_end) returned `st`: the times, the profile
 * ticket, and the outputs checked. */
static void flight_executed(struct pts_scheduler *s, struct instance *inst, struct flight *f,
                            enum pts_status st) {
  f->t.infer_end_ns = pts_now_ns();
  pts_profile_done(f->batch.profile);
  f->batch.profile = NULL;
  if (st == PTS_OK) apply_device_times(&f->t, &f->batch);
  if (st != PTS_OK && f->err.code == PTS_OK)
    pts_error_set(&f->err, st, "backend '%s' failed to run model '%s' on instance '%s'",
                  s->backend->name, s->model_name, inst->name);
  if (st == PTS_OK) st = check_outputs(s, f->r.total, f->r.outputs, &f->err);
  if (st == PTS_OK && s->seq)
    st = pts_seq_keep_state(s->seq, f->r.items, f->r.n, f->r.outputs + s->n_user_outputs,
                            &f->err);
  f->st = st;
}

/* Runs a prepared batch: with `begin`, only starts it (execute_begin;
 * flight_land ends it), else the whole execute. */
static void flight_launch(struct pts_scheduler *s, struct instance *inst, struct flight *f,
                          bool begin) {
  if (f->st != PTS_OK) return;
  f->why = PTS_FAIL_BACKEND;
  pts_nvtx_batch_push(s->model_name, f->r.n, f->r.total);
  enum pts_status st = begin ? s->backend->execute_begin(inst->state, &f->batch, &f->err)
                             : s->backend->execute(inst->state, &f->batch, &f->err);
  pts_nvtx_batch_pop();
  f->begun = begin && st == PTS_OK;
  if (!f->begun) flight_executed(s, inst, f, st);
}

/* Ends the batch (execute_end when it was begun), splits the outputs into
 * responses and answers every request. Returns how long the batch took
 * (ns), for the average that decides run to completion. */
static uint64_t flight_land(struct pts_scheduler *s, struct instance *inst, struct flight *f) {
  struct run *r = &f->r;
  if (f->begun) {
    f->begun = false;
    flight_executed(s, inst, f, s->backend->execute_end(inst->state, &f->batch, &f->err));
  }
  if (f->st == PTS_OK) {
    f->why = PTS_FAIL_OTHER;
    f->st = build_responses(s, r, &f->err);
    f->t.output_end_ns = pts_now_ns();
  }
  enum pts_status st = f->st;
  size_t n = f->n;
  if (st != PTS_OK && f->err.code == PTS_OK) f->err.code = st;
  if (st != PTS_OK)
    PTS_LOG_VERBOSE(1, "batch of %zu requests for model '%s' failed: %s", n, s->model_name,
                    f->err.msg);
  trace_compute(r, n, &f->t);
  if (st == PTS_OK) {
    uint64_t queue_ns = 0;
    for (size_t i = 0; i < n; i++) {
      if (r->items[i]->padding) continue;
      uint64_t enq = r->items[i]->enqueue_ns;
      uint64_t q = f->t.start_ns > enq ? f->t.start_ns - enq : 0;
      queue_ns += q;
      pts_stats_observe(&s->stats, PTS_SUMMARY_QUEUE, q);
    }
    /* Padding rows ran, but nobody asked for them: not inferences. */
    pts_stats_batch_done(&s->stats, s->batching ? r->total - (int64_t)f->pad : 1, n - f->pad,
                         queue_ns, &f->t);
  }
  if (s->seq) sequences_done(s, f->list, n);
  /* Responses hold their own references: the batch's tensors go first, so
   * that nothing but the responses holds a shared-memory region once the
   * answers leave (complete() drops the requests' own references). */
  run_release_tensors(s, r);
  struct pts_pending *p = f->list;
  for (size_t i = 0; i < n && p; i++) {
    struct pts_pending *next = p->next;
    if (st != PTS_OK)
      complete(s, p, NULL, &f->err, f->why);
    else if (!r->resps[i])
      complete(s, p, NULL, &r->errs[i], PTS_FAIL_OTHER);
    else
      complete(s, p, r->resps[i], NULL, f->why);
    p = next;
  }
  run_free(s, r);
  uint64_t end = pts_now_ns();
  return end > f->t.start_ns ? end - f->t.start_ns : 1;
}

/* Runs the `n` requests of `list` as one batch and answers each; `rows`
 * (> n: a sequence batch with padding rows, see pad_rows) is how many rows
 * the batch spans. Returns how long that took (ns), for the average that
 * decides run to completion. Staging set 0: nothing else is in flight on
 * the instance. */
static uint64_t run_batch(struct pts_scheduler *s, struct instance *inst, struct pts_pending *list,
                          size_t n, size_t rows) {
  struct flight f;
  /* The wait for the rate limiter is queue time, as in Triton: the batch's
   * compute starts once the instance is allotted. */
  pts_rate_limit_acquire(inst->rl);
  flight_prepare(s, inst, &f, list, n, rows, 0);
  flight_launch(s, inst, &f, false);
  uint64_t took = flight_land(s, inst, &f);
  /* After the answers, as Triton's instance is released once its execute
   * (which sends the responses) returned. */
  if (inst->rl) {
    pthread_mutex_lock(&s->lock);
    bool more = s->queue.size > 0;
    pthread_mutex_unlock(&s->lock);
    pts_rate_limit_release(inst->rl, more);
  }
  return took;
}

/* ----------------------------------------------------------------- queue */

static bool compatible(const struct pts_pending *first, const struct pts_pending *p, void *ctx) {
  const struct pts_scheduler *s = ctx;
  return pts_batch_compatible(s->config, first->req, p->req, s->device_gather);
}

/* Counts n requests done (lock held); `took_ns` is how long their batch
 * ran (0: none ran, they were rejected), folded into the average that run
 * to completion reads. */
static void count_batch(struct pts_scheduler *s, size_t n, uint64_t took_ns) {
  if (took_ns)  /* weight 1/8: a few slow batches stop run to completion */
    s->exec_avg_ns = s->exec_avg_ns ? s->exec_avg_ns - s->exec_avg_ns / 8 + took_ns / 8 : took_ns;
  s->outstanding -= n;
  if (s->outstanding == 0) pthread_cond_broadcast(&s->idle);
}

/* count_batch with the lock taken here. */
static void finish_batch(struct pts_scheduler *s, size_t n, uint64_t took_ns) {
  pthread_mutex_lock(&s->lock);
  count_batch(s, n, took_ns);
  pthread_mutex_unlock(&s->lock);
}

/* Answers requests whose queue timeout expired under REJECT (Triton's code
 * and text). Called without the lock. */
static void reject_expired(struct pts_scheduler *s, struct pts_pending *list) {
  size_t n = 0;
  while (list) {
    struct pts_pending *next = list->next;
    struct pts_error err;
    pts_error_set(&err, PTS_UNAVAILABLE, "Request timeout expired");
    complete(s, list, NULL, &err, PTS_FAIL_REJECTED);
    list = next;
    n++;
  }
  finish_batch(s, n, 0);
}

/* Applies the queue timeouts (lock held) and answers what expired, with the
 * lock dropped meanwhile; true when something did (the queue may have
 * changed: look again). */
static bool answer_expired(struct pts_scheduler *s, uint64_t now) {
  struct pts_pending *rejected = NULL;
  pts_sched_queue_expire(&s->queue, now, &rejected);
  if (!rejected) return false;
  pthread_mutex_unlock(&s->lock);
  reject_expired(s, rejected);
  pthread_mutex_lock(&s->lock);
  return true;
}

/* Sleeps on `work` until woken or until `until_ns` (0 = no limit). */
static void wait_work(struct pts_scheduler *s, uint64_t until_ns) {
  if (until_ns == 0) {
    pthread_cond_wait(&s->work, &s->lock);
    return;
  }
  struct timespec ts = {.tv_sec = (time_t)(until_ns / 1000000000u),
                        .tv_nsec = (long)(until_ns % 1000000000u)};
  pthread_cond_timedwait(&s->work, &s->lock, &ts); /* `work` uses CLOCK_MONOTONIC */
}

static uint64_t earlier(uint64_t a, uint64_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return a < b ? a : b;
}

/* Requests queued, not running (lock held). */
static size_t queued(const struct pts_scheduler *s) {
  return s->seq ? pts_seq_queued(s->seq) : s->queue.size;
}

/* Whether the delay hook still holds the queue (lock held). */
static bool held_back(struct pts_scheduler *s) {
  if (s->hold == 0 || s->stopping) return false;
  if (queued(s) < s->hold) return true;
  PTS_LOG_VERBOSE(1, "model '%s': PTSERVE_DELAY_SCHEDULER released with %zu requests queued",
                  s->model_name, queued(s));
  s->hold = 0;
  return false;
}

/* Whether an instance thread could take work now (lock held): waking the
 * others only costs two context switches. */
static bool any_free_thread(const struct pts_scheduler *s) {
  for (size_t i = 0; i < s->n_instances; i++)
    if (s->instances[i].idle && !s->instances[i].lent) return true;
  return false;
}

/* Blocks until this instance has a batch; returns its size and the requests
 * in *out, or 0 once stopping and drained. One thread at a time waits for a
 * batch to fill (`forming`); the others wait for it to leave. */
static size_t next_batch(struct pts_scheduler *s, struct instance *inst,
                         struct pts_pending **out) {
  pthread_mutex_lock(&s->lock);
  inst->idle = true;
  for (;;) {
    if (s->queue.size == 0 && s->stopping) break;
    if (inst->lent || s->forming || s->queue.size == 0 || held_back(s)) {
      pts_rate_limit_withdraw(inst->rl); /* staged at its release, nothing came */
      wait_work(s, 0);
      continue;
    }
    uint64_t now = pts_now_ns();
    struct pts_pending *rejected = NULL;
    uint64_t deadline = pts_sched_queue_expire(&s->queue, now, &rejected);
    if (rejected) {
      pthread_mutex_unlock(&s->lock);
      reject_expired(s, rejected);
      pthread_mutex_lock(&s->lock);
      continue;
    }
    uint64_t wake = 0;
    size_t n =
        pts_sched_queue_choose(&s->queue, &s->limits, now, s->stopping, compatible, s, &wake);
    if (n > 0) {
      *out = pts_sched_queue_take(&s->queue, n);
      if (s->queue.size) pthread_cond_broadcast(&s->work); /* another free instance may go */
      inst->idle = false;
      pthread_mutex_unlock(&s->lock);
      return n;
    }
    s->forming = true;
    pts_rate_limit_withdraw(inst->rl);
    wait_work(s, earlier(wake, deadline));
    s->forming = false;
  }
  inst->idle = false;
  pts_rate_limit_withdraw(inst->rl);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

/* next_batch without waiting, for an instance that has a batch in flight
 * (pipeline_main): under the same rules, a batch the batcher would hand
 * out at this moment, or 0 when there is none — nothing queued, another
 * thread forming a batch, the delay hook holding the queue, an idle
 * instance that can take it (it runs it at once on its own stream instead
 * of behind our batch), or no FULL batch queued. Only a full batch
 * (max_batch_size, or one that can not grow) is taken early: measured on
 * an H100 (docs/gpu.md), taking whatever was queued the moment the last
 * batch began halved the average batch of a saturated ResNet-50 and its
 * throughput with it, since the requests that would have filled it arrive
 * while the batch ahead computes. A smaller batch waits for the batch in
 * flight to end and is formed as next_batch forms it. Expired requests are
 * answered as next_batch would. The instance stays busy (not `idle`), so
 * it is never lent meanwhile. */
static size_t take_next_batch(struct pts_scheduler *s, struct pts_pending **out) {
  struct pts_batch_limits full = s->limits;
  full.n_preferred = 0;             /* the target is max_batch_size */
  full.max_delay_ns = UINT64_MAX / 2; /* never "waited long enough": full or nothing */
  pthread_mutex_lock(&s->lock);
  size_t n = 0;
  while (!s->forming && s->queue.size > 0 && !held_back(s) && !any_free_thread(s)) {
    uint64_t now = pts_now_ns();
    if (answer_expired(s, now)) continue;
    uint64_t wake = 0;
    n = pts_sched_queue_choose(&s->queue, &full, now, s->stopping, compatible, s, &wake);
    if (n > 0) {
      *out = pts_sched_queue_take(&s->queue, n);
      if (s->queue.size) pthread_cond_broadcast(&s->work); /* another free instance may go */
    }
    break;
  }
  pthread_mutex_unlock(&s->lock);
  return n;
}

/* next_batch for the sequence batcher: every instance asks for its own
 * batch (direct slots belong to one instance), so there is no `forming`
 * turn; a thread sleeps until a request arrives, a batch finishes, or the
 * batcher's wake time (a queue delay, an idle sequence) comes. */
static size_t next_sequence_batch(struct pts_scheduler *s, const struct instance *inst,
                                  struct pts_pending **out, size_t *rows) {
  pthread_mutex_lock(&s->lock);
  size_t n = 0;
  for (;;) {
    if (held_back(s)) {
      pts_rate_limit_withdraw(inst->rl);
      wait_work(s, 0);
      continue;
    }
    uint64_t wake = 0;
    n = pts_seq_choose(s->seq, (size_t)inst->desc.index, pts_now_ns(),
                       s->stopping || s->draining, out, rows, &wake);
    if (n > 0 || (s->stopping && pts_seq_queued(s->seq) == 0)) break;
    pts_rate_limit_withdraw(inst->rl);
    wait_work(s, wake);
  }
  pthread_mutex_unlock(&s->lock);
  return n;
}

/* Ends the batch in flight and does the accounting run_batch's caller
 * does. */
static void land_and_finish(struct pts_scheduler *s, struct instance *inst, struct flight *f) {
  size_t asked = f->n - f->pad;
  finish_batch(s, asked, flight_land(s, inst, f));
}

/* The loop of a pipelined instance: a pipeline of depth 2. After batch N
 * is begun on the device (execute_begin, staging set k), the thread takes
 * batch N+1 only if the batcher hands one out right now
 * (take_next_batch), gathers it into set 1-k and begins it — the device
 * queues it behind N, so its input copies overlap N's compute — and only
 * then ends N (execute_end: the wait, the outputs, responses, answers).
 * With nothing to take it ends N at once, so a lone request waits for
 * nothing. Batches end in the order they began, so preserve_ordering and
 * the statistics see the same sequence as without the pipeline. A batch
 * with a profile ticket runs alone: N is ended first, then it is executed
 * whole. Never more than two batches: set k is gathered into again only
 * after the batch that used it has ended. */
static void pipeline_main(struct pts_scheduler *s, struct instance *inst) {
  struct flight fl[2];
  struct flight *flying = NULL; /* begun, not yet ended */
  for (;;) {
    struct pts_pending *list = NULL;
    size_t n = flying ? take_next_batch(s, &list) : next_batch(s, inst, &list);
    if (n == 0) {
      if (!flying) break; /* stopping, and the queue is drained */
      land_and_finish(s, inst, flying);
      flying = NULL;
      continue;
    }
    unsigned set = flying ? 1u - flying->set : 0u;
    struct flight *f = &fl[set];
    flight_prepare(s, inst, f, list, n, n, set);
    bool begin = f->st == PTS_OK && !f->batch.profile;
    if (!begin && flying) { /* alone: a profiled batch, or one that failed already */
      land_and_finish(s, inst, flying);
      flying = NULL;
    }
    flight_launch(s, inst, f, begin);
    if (flying) land_and_finish(s, inst, flying);
    flying = NULL;
    if (f->begun)
      flying = f;
    else
      land_and_finish(s, inst, f);
  }
}

static void *instance_main(void *arg) {
  struct instance *inst = arg;
  struct pts_scheduler *s = inst->sched;
  /* Its name and CPUs were set when the thread was made (create_instance);
   * memory binds per thread. */
  struct pts_error err;
  if (pts_host_policy_bind_memory(inst->policy, &err) != PTS_OK)
    PTS_LOG_ERROR("instance '%s', host policy '%s': %s", inst->name, inst->policy, err.msg);
  if (inst->pipelined) {
    pipeline_main(s, inst);
    return NULL;
  }
  struct pts_pending *list;
  size_t n;
  size_t rows = 0;
  while ((n = s->seq ? next_sequence_batch(s, inst, &list, &rows)
                     : (rows = 0, next_batch(s, inst, &list))) != 0)
    finish_batch(s, n, run_batch(s, inst, list, n, rows));
  return NULL;
}

/* Before the request is visible to the instance threads (which stamp it
 * next). A request refused here keeps its stamps: its trace still ends. */
static void trace_enqueue(struct pts_scheduler *s, struct pts_infer_request *req, uint64_t now) {
  if (pts_nvtx_enabled())
    req->nvtx_range = pts_nvtx_request_begin(s->model_name, pts_trace_id(req->trace));
  if (!req->trace) return;
  for (size_t i = 0; pts_trace_wants_tensors(req->trace) && i < req->n_inputs; i++)
    pts_trace_tensor(req->trace, "TENSOR_QUEUE_INPUT", &req->inputs[i]);
  pts_trace_record(req->trace, PTS_TRACE_QUEUE_START, now);
}

/* Batches at most this long (on average) may run on the enqueuing thread:
 * that thread is a frontend's event loop or completion-queue thread, and
 * everything else it serves waits meanwhile. 1 ms is about what one
 * request's network and protocol work costs on a loaded machine.
 * PTSERVE_INLINE_MAX_US overrides it (inline_max_from_env). */
#define INLINE_MAX_NS 1000000u

/* Whether a frontend thread may run this model's batches (lock held): run
 * to completion is on for this model, its recent batches were short, the
 * delay hook does not hold the queue, no thread is waiting for a batch to
 * fill, the scheduler is not stopping. */
static bool drainable(const struct pts_scheduler *s) {
  return s->inline_ok && !s->stopping && !s->forming && !s->hold && s->exec_avg_ns != 0 &&
         s->exec_avg_ns <= s->inline_max_ns;
}

/* An instance the enqueuing thread may run the queue's next batch on (lock
 * held), or NULL: drainable, and an instance's thread is idle. */
static struct instance *lendable(struct pts_scheduler *s) {
  if (!drainable(s)) return NULL;
  for (size_t i = 0; i < s->n_instances; i++)
    if (s->instances[i].idle && !s->instances[i].lent) return &s->instances[i];
  return NULL;
}

/* Run to completion: the request just queued found an idle instance and
 * nothing ahead of it. The enqueuing thread does what that instance's thread
 * would do at this moment, with the same code: apply timeouts, ask the
 * batcher, and run the batch it chooses on the instance's state (lent, so
 * its thread keeps off). When the batcher wants to wait (a queue delay), the
 * request stays queued for the instance threads as usual. Called with the
 * lock held; returns with it released. */
static void run_inline(struct pts_scheduler *s, struct instance *inst) {
  uint64_t now = pts_now_ns();
  struct pts_pending *rejected = NULL, *list = NULL;
  pts_sched_queue_expire(&s->queue, now, &rejected);
  uint64_t wake = 0;
  size_t n = rejected ? 0
                      : pts_sched_queue_choose(&s->queue, &s->limits, now, false, compatible, s,
                                               &wake);
  if (n > 0) {
    list = pts_sched_queue_take(&s->queue, n);
    inst->lent = true;
  } else if (s->queue.size) {
    pthread_cond_broadcast(&s->work);
  }
  pthread_mutex_unlock(&s->lock);
  if (rejected) reject_expired(s, rejected);
  if (!list) return;
  /* The queue was empty, so the batch is this request alone (n == 1). Its
   * hold is released here, after the scheduler is no longer touched: no
   * join protects this thread from an unload, the hold does. */
  void *hold = list->hold;
  list->hold = NULL;
  uint64_t took = run_batch(s, inst, list, n, n);
  pthread_mutex_lock(&s->lock);
  count_batch(s, n, took);
  /* Requests queued while the instance was lent (other loops' and gRPC's:
   * every instance was busy) are what the instance thread would take the
   * moment the instance comes back: take them here instead of waking it,
   * while the rules above still hold, for at most the inline limit's worth
   * of batches. Their answers go to their own frontend threads as an
   * instance thread's would; the wake of the instance thread is saved. */
  uint64_t spent = took;
  while (s->queue.size && spent < s->inline_max_ns && drainable(s)) {
    now = pts_now_ns();
    if (answer_expired(s, now)) continue;
    n = pts_sched_queue_choose(&s->queue, &s->limits, now, false, compatible, s, &wake);
    if (n == 0) break; /* the batcher waits: the instance thread forms it */
    list = pts_sched_queue_take(&s->queue, n);
    pthread_mutex_unlock(&s->lock);
    took = run_batch(s, inst, list, n, n); /* each answer gives back its own hold */
    spent += took;
    pthread_mutex_lock(&s->lock);
    count_batch(s, n, took);
  }
  inst->lent = false;
  if (s->queue.size) pthread_cond_broadcast(&s->work); /* queued meanwhile: the thread's now */
  pthread_mutex_unlock(&s->lock);
  if (s->release_hold && hold) s->release_hold(hold);
}

/* response_cache: looks the request up before it is queued. A hit is
 * answered here, on the enqueuing thread, from the stored outputs through
 * the same response building as an executed request (requested outputs,
 * classification, shared memory), and true says p and its request are
 * handed on. A miss keeps its key in p for cache_store; a request the
 * cache can not key (an input in device memory) goes on uncached. */
static bool cache_answer(struct pts_scheduler *s, struct pts_pending *p) {
  struct pts_infer_request *req = p->req;
  uint64_t t0 = pts_now_ns();
  if (pts_cache_key_make(s->cache_generation, s->model_name, s->version, req->inputs,
                         req->n_inputs, &p->cache_key, NULL) != PTS_OK)
    return false;
  size_t n = s->n_user_outputs;
  struct pts_tensor *outs = pts_calloc(n ? n : 1, sizeof *outs);
  if (!outs || !pts_cache_lookup(s->cache, &p->cache_key, outs, n)) {
    pts_free(outs);
    p->cache_lookup_ns = pts_now_ns() - t0;
    return false;
  }
  pts_cache_key_clear(&p->cache_key); /* a hit stores nothing */
  pthread_mutex_lock(&s->lock);
  bool stopping = s->stopping;
  if (!stopping) p->seq = s->next_seq++;
  pthread_mutex_unlock(&s->lock);
  struct pts_infer_response *resp = NULL;
  struct pts_error err;
  pts_error_clear(&err);
  enum pts_status st =
      stopping ? PTS_UNAVAILABLE : build_response(s, req, outs, NULL, &resp, &err);
  for (size_t i = 0; i < n; i++) pts_tensor_clear(&outs[i]);
  pts_free(outs);
  if (stopping) return false; /* the caller refuses it, as any request now */
  if (st == PTS_OK) pts_stats_cache_hit(&s->stats, t0 - p->enqueue_ns, pts_now_ns() - t0);
  complete(s, p, resp, st == PTS_OK ? NULL : &err, PTS_FAIL_OTHER);
  return true;
}

enum pts_status pts_scheduler_enqueue(struct pts_scheduler *s, struct pts_infer_request *req,
                                      int64_t batch_size, void *hold, struct pts_error *err) {
  struct pts_pending *p = pts_calloc(1, sizeof *p);
  if (!p)
    return pts_error_set(err, PTS_NOMEM, "out of memory queueing a request for model '%s'",
                         s->model_name);
  p->req = req;
  p->hold = hold;
  p->batch_size = s->batching && batch_size > 0 ? batch_size : 1;
  p->enqueue_ns = pts_now_ns();
  trace_enqueue(s, req, p->enqueue_ns);
  if (s->cache && cache_answer(s, p)) return PTS_OK; /* answered; req may be freed already */
  pthread_mutex_lock(&s->lock);
  enum pts_status st;
  bool full = false;
  bool alone = s->queue.size == 0;
  if (s->stopping) {
    st = pts_error_set(err, PTS_UNAVAILABLE, "model '%s' version %lld is unloading", s->model_name,
                       (long long)s->version);
  } else if (s->seq) {
    /* sequence_batching has no max_queue_size: the server's default cap
     * (--default-max-queue-size) bounds its backlog. */
    st = pts_seq_push(s->seq, p, p->enqueue_ns, pts_overload_queue_cap(), err);
    full = st == PTS_UNAVAILABLE;
  } else {
    st = pts_sched_queue_push(&s->queue, p, req->priority, req->timeout_us, p->enqueue_ns,
                              pts_overload_queue_cap(), err);
    full = st != PTS_OK;
  }
  if (st == PTS_OK) {
    p->seq = s->next_seq++;
    s->outstanding++;
    struct instance *inst = alone ? lendable(s) : NULL;
    if (inst) {
      run_inline(s, inst); /* unlocks; req may be answered and freed already */
      return PTS_OK;
    }
    /* Sequence instances never mark themselves idle: each waits for its own
     * slots' requests, so they are always woken. */
    if (s->seq || any_free_thread(s)) pthread_cond_broadcast(&s->work);
  }
  pthread_mutex_unlock(&s->lock);
  if (st != PTS_OK) {
    if (full) {
      /* Said at once, naming the model, so a client under overload retries
       * elsewhere instead of waiting out its timeout. */
      pts_error_prefix(err, "model '%s' version %lld", s->model_name, (long long)s->version);
      pts_stats_request_failure(&s->stats, PTS_FAIL_REJECTED, request_duration(p, pts_now_ns()));
    }
    pts_cache_key_clear(&p->cache_key);
    pts_free(p);
  }
  return st;
}

enum pts_status pts_scheduler_stats(struct pts_scheduler *s, struct pts_model_stats *out,
                                    struct pts_error *err) {
  enum pts_status st = pts_stats_snapshot(&s->stats, out, err);
  if (st != PTS_OK) return st;
  out->version = s->version;
  pthread_mutex_lock(&s->lock);
  out->pending = queued(s);
  pthread_mutex_unlock(&s->lock);
  return PTS_OK;
}

size_t pts_scheduler_wait_idle(struct pts_scheduler *s, uint64_t deadline_ns) {
  pthread_mutex_lock(&s->lock);
  if (s->hold || (s->seq && !s->draining)) {
    s->hold = 0;
    s->draining = true;
    pthread_cond_broadcast(&s->work);
  }
  while (s->outstanding > 0) {
    if (deadline_ns == 0) {
      pthread_cond_wait(&s->idle, &s->lock);
      continue;
    }
    if (pts_now_ns() >= deadline_ns) break;
    /* `idle` uses CLOCK_MONOTONIC (see init_sync), like pts_now_ns. */
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                          .tv_nsec = (long)(deadline_ns % 1000000000u)};
    pthread_cond_timedwait(&s->idle, &s->lock, &ts);
  }
  size_t left = s->outstanding;
  pthread_mutex_unlock(&s->lock);
  return left;
}

/* ------------------------------------------------------------- lifecycle */

static void stop_threads(struct pts_scheduler *s) {
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_cond_broadcast(&s->work);
  pthread_mutex_unlock(&s->lock);
  for (size_t i = 0; i < s->n_instances; i++) {
    if (!s->instances[i].running) continue;
    pthread_join(s->instances[i].thread, NULL);
    s->instances[i].running = false;
  }
}

static void free_scheduler(struct pts_scheduler *s) {
  for (size_t i = 0; i < s->n_instances; i++) {
    struct instance *inst = &s->instances[i];
    if (inst->state && s->backend->instance_destroy) s->backend->instance_destroy(inst->state);
    pts_free(inst->name);
    pts_free(inst->policy);
    pts_rate_limit_unregister(inst->rl);
  }
  pts_free(s->instances);
  for (size_t k = 0; s->labels && k < s->config->n_output; k++) pts_labels_clear(&s->labels[k]);
  pts_free(s->labels);
  pts_sched_queue_free(&s->queue);
  pts_seq_destroy(s->seq);
  pts_stats_destroy(&s->stats);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->idle);
  pthread_mutex_destroy(&s->lock);
  pthread_mutex_destroy(&s->order_lock);
  pts_free(s);
}

void pts_scheduler_destroy(struct pts_scheduler *s) {
  if (!s) return;
  stop_threads(s);
  free_scheduler(s);
}

static enum pts_status create_instance(struct pts_scheduler *s, struct instance *inst,
                                       const struct pts_backend_instance_desc *d,
                                       const char *model_dir, struct pts_error *err) {
  inst->sched = s;
  inst->name = pts_strdup(d->name ? d->name : "");
  inst->policy = pts_strdup(d->host_policy ? d->host_policy : "");
  if (!inst->name || !inst->policy)
    return pts_error_set(err, PTS_NOMEM, "out of memory creating instance of model '%s'",
                         s->model_name);
  inst->desc = *d;
  inst->desc.name = inst->name;
  inst->desc.host_policy = inst->policy;
  PTS_LOG_VERBOSE(1, "model '%s' version %lld: creating instance '%s' (kind %d, device %d)",
                  s->model_name, (long long)s->version, inst->name, (int)d->kind, d->device_id);
  if (s->backend->instance_create) {
    enum pts_status st =
        s->backend->instance_create(s->model_state, &inst->desc, &inst->state, err);
    if (st != PTS_OK) {
      if (err && err->code == PTS_OK) pts_error_set(err, st, "backend failed");
      pts_error_prefix(err, "instance '%s'", inst->name);
      return st;
    }
  }
  /* Every instance of a backend model, as Triton registers them; an
   * ensemble's steps are the instances that execute. */
  if (strcmp(s->backend->name, "ensemble") != 0) {
    enum pts_status st = pts_rate_limit_register(d->rate_limiter, d->device_id, &inst->rl, err);
    if (st != PTS_OK) {
      pts_error_prefix(err, "instance '%s'", inst->name);
      return st;
    }
  }
  /* Before the thread starts: a model is READY only once it is warm. */
  enum pts_status st = pts_warmup_run(s->config, s->model_name, model_dir ? model_dir : ".",
                                      s->backend, inst->state, inst->name, err);
  if (st != PTS_OK) return st;
  /* Not for sequences: their batches are formed per instance from slots
   * (next_sequence_batch), and a request's state must be kept before the
   * next request of its sequence runs. */
  const struct pts_backend *be = s->backend;
  inst->pipelined = s->pipeline_on && !s->seq && be->pipelined && be->execute_begin &&
                    be->execute_end && be->pipelined(inst->state) &&
                    !inst->rl; /* a second batch would wait for what the first holds */
  if (inst->pipelined)
    PTS_LOG_VERBOSE(1, "model '%s' version %lld: instance '%s' pipelines its batches (depth 2)",
                    s->model_name, (long long)s->version, inst->name);
  /* A host policy's CPUs from the thread's first instruction on, so the
   * threads it starts (LibTorch's intra-op pool) inherit them. */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  cpu_set_t cpus;
  bool bound = pts_host_policy_cpus(inst->policy, &cpus);
  int rc = bound ? pthread_attr_setaffinity_np(&attr, sizeof cpus, &cpus) : 0;
  if (rc == 0) rc = pthread_create(&inst->thread, &attr, instance_main, inst);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    return pts_error_set(err, PTS_INTERNAL, "failed to start the thread of instance '%s'%s%s: %s",
                         inst->name, bound ? " under host policy " : "",
                         bound ? inst->policy : "", strerror(rc));
  /* Named here, not by the thread itself: the name (which tools such as
   * top and /proc show) is then in place before the model is ready, however
   * late the new thread first runs. */
  char tname[16];
  snprintf(tname, sizeof tname, "%s", inst->name);
  pthread_setname_np(inst->thread, tname);
  if (bound)
    PTS_LOG_INFO("instance '%s' of model '%s' runs under host policy '%s'", inst->name,
                 s->model_name, inst->policy);
  inst->running = true;
  return PTS_OK;
}

/* Both condition variables use CLOCK_MONOTONIC, the clock of pts_now_ns,
 * so absolute wake-up times are computed from it directly. */
static bool init_sync(struct pts_scheduler *s) {
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0) return false;
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  bool ok = pthread_mutex_init(&s->lock, NULL) == 0;
  ok = ok && pthread_mutex_init(&s->order_lock, NULL) == 0;
  ok = ok && pthread_cond_init(&s->work, &attr) == 0;
  ok = ok && pthread_cond_init(&s->idle, &attr) == 0;
  pthread_condattr_destroy(&attr);
  return ok;
}

/* The batcher's limits from the config. */
static void init_limits(struct pts_scheduler *s) {
  const Inference__ModelConfig *cfg = s->config;
  s->batching = cfg->max_batch_size > 0;
  struct pts_batch_limits *l = &s->limits;
  memset(l, 0, sizeof *l);
  l->max_batch_size = s->batching ? cfg->max_batch_size : 1;
  if (cfg->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING)
    return;
  const Inference__ModelDynamicBatching *db = cfg->dynamic_batching;
  s->preserve_ordering = db->preserve_ordering;
  l->dynamic = s->batching;
  l->preferred = db->preferred_batch_size;
  l->n_preferred = db->n_preferred_batch_size;
  uint64_t delay_us = db->max_queue_delay_microseconds;
  /* Beyond 2^64 ns is "forever"; keep it from wrapping to a short delay. */
  l->max_delay_ns = delay_us > UINT64_MAX / 2000u ? UINT64_MAX / 2 : delay_us * 1000u;
}

/* PTSERVE_DELAY_SCHEDULER=N (test only; see scheduler.h). */
static size_t delay_hook(const char *model) {
  const char *v = getenv("PTSERVE_DELAY_SCHEDULER");
  if (!v || !*v) return 0;
  char *end;
  unsigned long n = strtoul(v, &end, 10);
  if (*end || n == 0) return 0;
  PTS_LOG_WARN(
      "test hook PTSERVE_DELAY_SCHEDULER=%lu: model '%s' holds its queue until %lu "
      "requests are queued",
      n, model, n);
  return (size_t)n;
}

/* PTSERVE_INLINE_MAX_US=N: run to completion for batches of at most N µs
 * on average (0 turns it off); unset or not a number keeps INLINE_MAX_NS.
 * For measuring under valgrind, where everything runs some 50 times slower
 * and a small model would otherwise leave the inline path it takes
 * natively (docs/experiments/hotpath), and for tuning a loop's stall limit. */
static uint64_t inline_max_from_env(void) {
  const char *v = getenv("PTSERVE_INLINE_MAX_US");
  if (!v || !*v) return INLINE_MAX_NS;
  char *end;
  unsigned long long us = strtoull(v, &end, 10);
  if (*end || us > UINT64_MAX / 1000u) return INLINE_MAX_NS;
  return (uint64_t)us * 1000u;
}

/* PTSERVE_PIPELINE=1 turns pipelined instances on; unset or anything
 * else leaves them off. Off by default because on an H100 it measured
 * slower, not faster: a saturated ResNet-50 FP16 with one instance served
 * 0.62-0.64x the throughput with it on (docs/gpu.md, "Pipelined
 * instances"), for reasons not yet found. */
static bool pipeline_switch(void) {
  const char *v = getenv("PTSERVE_PIPELINE");
  return v && strcmp(v, "1") == 0;
}

/* PROFILE_EXECUTIONS: "N" records the model's first N executions with the
 * operator profiler (trace/profile.h), warmup excluded. */
static enum pts_status arm_profiler(const struct pts_scheduler_params *p, struct pts_error *err) {
  long n = 0;
  enum pts_status st = pts_model_config_param_int(p->config, "PROFILE_EXECUTIONS", 0, &n, err);
  if (st == PTS_OK && n < 0)
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "model '%s': parameter PROFILE_EXECUTIONS must be >= 0, got %ld",
                       p->model_name, n);
  if (st != PTS_OK || n == 0) return st;
  return pts_profile_arm(p->model_name, n, err);
}

/* The label files of the config's outputs, read at load as Triton does: a
 * file that can not be read fails the model. */
static enum pts_status load_labels(struct pts_scheduler *s, const char *model_dir,
                                   struct pts_error *err) {
  const Inference__ModelConfig *cfg = s->config;
  s->labels = pts_calloc(cfg->n_output ? cfg->n_output : 1, sizeof *s->labels);
  if (!s->labels)
    return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", s->model_name);
  for (size_t k = 0; k < cfg->n_output; k++) {
    const char *file = cfg->output[k]->label_filename;
    if (!file || !file[0]) continue;
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", model_dir ? model_dir : ".", file);
    enum pts_status st =
        n < 0 || (size_t)n >= sizeof path
            ? pts_error_set(err, PTS_INVALID_ARG, "label file path '%s' is too long", file)
            : pts_labels_load(path, &s->labels[k], err);
    if (st != PTS_OK) {
      pts_error_prefix(err, "output '%s' of model '%s'", cfg->output[k]->name, s->model_name);
      return st;
    }
  }
  return PTS_OK;
}

enum pts_status pts_scheduler_create(const struct pts_scheduler_params *p,
                                     struct pts_scheduler **out, struct pts_error *err) {
  *out = NULL;
  struct pts_scheduler *s = pts_calloc(1, sizeof *s);
  if (!s) return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", p->model_name);
  s->model_name = p->model_name;
  s->version = p->version;
  s->config = p->exec_config ? p->exec_config : p->config;
  s->n_user_inputs = p->config->n_input;
  s->n_user_outputs = p->config->n_output;
  s->backend = p->backend;
  s->device_gather = p->backend->gather_device != NULL;
  s->model_state = p->model_state;
  s->release_hold = p->release_hold;
  init_limits(s);
  pts_stats_init(&s->stats);
  if (!init_sync(s)) {
    pts_stats_destroy(&s->stats);
    pts_free(s);
    return pts_error_set(err, PTS_INTERNAL, "failed to initialise the queue of model '%s'",
                         p->model_name);
  }
  enum pts_status st = pts_sched_queue_init(&s->queue, p->config, err);
  if (st == PTS_OK) {
    s->instances = pts_calloc(p->n_instances ? p->n_instances : 1, sizeof *s->instances);
    if (!s->instances)
      st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", p->model_name);
  }
  if (st == PTS_OK) st = load_labels(s, p->model_dir, err);
  if (st == PTS_OK && p->config->scheduling_choice_case ==
                          INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING)
    st = pts_seq_create(p->config, p->model_name, p->model_dir, p->n_instances, &s->seq, err);
  if (st != PTS_OK) {
    free_scheduler(s);
    return st;
  }
  /* The config check refuses response_cache on sequence models; the
   * process has a cache only with --cache-config. */
  if (p->config->response_cache && p->config->response_cache->enable && !s->seq) {
    static atomic_uint_fast64_t generations;
    s->cache_generation = atomic_fetch_add(&generations, 1) + 1;
    s->cache = pts_cache_process();
    if (!s->cache)
      PTS_LOG_WARN("model '%s' version %lld enables response_cache, but the server has no "
                   "response cache (--cache-config local,size=<bytes>): its answers are not cached",
                   p->model_name, (long long)p->version);
  }
  st = pts_stats_enable_summaries(&s->stats, s->cache != NULL, err);
  if (st != PTS_OK) {
    free_scheduler(s);
    return st;
  }
  s->hold = delay_hook(p->model_name);
  s->pipeline_on = pipeline_switch();
  st = arm_profiler(p, err);
  if (st != PTS_OK) {
    free_scheduler(s);
    return st;
  }
  for (size_t i = 0; i < p->n_instances; i++) {
    s->n_instances = i + 1;
    st = create_instance(s, &s->instances[i], &p->instances[i], p->model_dir, err);
    if (st != PTS_OK) {
      pts_scheduler_destroy(s);
      return st;
    }
  }
  /* Run to completion on CPU instances, and on others whose backend says
   * they keep nothing on their thread (backend.h lendable: a CUDA instance
   * of the pytorch backend); never on a pipelined one, whose thread may
   * have a batch in flight while it waits for the next. With
   * preserve_ordering a request may have to wait for an earlier one, so it
   * always goes through the instance threads, as do sequences (their slots
   * belong to instances, and the queue run_inline reads is not theirs). */
  s->inline_ok = !s->preserve_ordering && !s->seq && p->n_instances > 0;
  s->inline_max_ns = inline_max_from_env();
  /* An instance bound by a host policy runs only on its own thread: the
   * enqueuing thread is not bound. */
  /* Nor one the rate limiter gates: waiting for it would block a frontend's
   * event loop. */
  for (size_t i = 0; i < p->n_instances; i++)
    if (pts_host_policy_binds(s->instances[i].policy) || s->instances[i].rl ||
        (p->instances[i].kind != INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU &&
         (s->instances[i].pipelined || !p->backend->lendable ||
          !p->backend->lendable(s->instances[i].state))))
      s->inline_ok = false;
  *out = s;
  return PTS_OK;
}
