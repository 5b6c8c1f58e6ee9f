/* scheduler/scheduler.c — see scheduler.h.
 *
 * One mutex guards the queue; instance threads sleep on `work` and the
 * shutdown path sleeps on `idle`. A request's life here: enqueue (FIFO) →
 * take_batch on an instance thread → run_batch (inputs laid out, backend,
 * outputs checked, responses built) → complete (done callback, model
 * reference released). Nothing else touches a queued request. */
#include "scheduler/scheduler.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/log.h"
#include "tensor/bytes.h"

struct pending {
  struct pending *next;
  struct pts_infer_request *req; /* owned until done is called */
  struct pts_model *model;       /* one reference */
  int64_t batch_size;
  uint64_t enqueue_ns;
};

struct instance {
  struct pts_scheduler *sched;
  char *name; /* owned */
  struct pts_backend_instance_desc desc;
  void *state; /* the backend's; destroyed with instance_destroy */
  pthread_t thread;
  bool running;
};

struct pts_scheduler {
  const char *model_name;
  int64_t version;
  const Inference__ModelConfig *config;
  const struct pts_backend *backend;
  void *model_state;

  pthread_mutex_t lock;
  pthread_cond_t work; /* a request was queued, or stopping was set */
  pthread_cond_t idle; /* outstanding dropped to 0 */
  struct pending *head, *tail;
  size_t outstanding; /* queued + running */
  bool stopping;

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

static int count_wildcards(const int64_t *dims, size_t n) {
  int c = 0;
  for (size_t i = 0; i < n; i++)
    if (dims[i] == -1) c++;
  return c;
}

static enum pts_status shape_mismatch(const struct pts_shape *actual, struct pts_error *err) {
  char got[192];
  pts_shape_format(actual, got, sizeof got);
  return pts_error_set(err, PTS_INVALID_ARG, "shape %s does not correspond to the reshape", got);
}

/* Each -1 of `to` takes the value at the matching -1 position of `from`. */
static enum pts_status map_by_position(const int64_t *from, size_t n_from, const int64_t *to,
                                       size_t n_to, const struct pts_shape *actual,
                                       struct pts_shape *out, struct pts_error *err) {
  if ((size_t)actual->ndim != n_from) return shape_mismatch(actual, err);
  size_t src = 0;
  for (size_t i = 0; i < n_to; i++) {
    if (to[i] != -1) {
      out->dims[i] = to[i];
      continue;
    }
    while (src < n_from && from[src] != -1) src++;
    out->dims[i] = actual->dims[src++];
  }
  return PTS_OK;
}

/* A single -1 of `to` takes whatever the element count leaves for it. */
static enum pts_status map_by_count(const int64_t *to, size_t n_to, const struct pts_shape *actual,
                                    struct pts_shape *out, struct pts_error *err) {
  int64_t total = pts_shape_count(actual);
  int64_t known = 1;
  size_t hole = 0;
  for (size_t i = 0; i < n_to; i++) {
    if (to[i] == -1) {
      hole = i;
      continue;
    }
    known *= to[i];
    out->dims[i] = to[i];
  }
  if (total < 0 || known <= 0 || total % known != 0) {
    if (total == 0 && known > 0) {
      out->dims[hole] = 0;
      return PTS_OK;
    }
    return shape_mismatch(actual, err);
  }
  out->dims[hole] = total / known;
  return PTS_OK;
}

enum pts_status pts_scheduler_map_shape(const int64_t *from, size_t n_from, const int64_t *to,
                                        size_t n_to, const struct pts_shape *actual,
                                        struct pts_shape *out, struct pts_error *err) {
  if (n_to > PTS_TENSOR_MAX_DIMS)
    return pts_error_set(err, PTS_INVALID_ARG, "reshape has more than %d dimensions",
                         PTS_TENSOR_MAX_DIMS);
  memset(out, 0, sizeof *out);
  out->ndim = (int)n_to;
  int holes_to = count_wildcards(to, n_to);
  if (holes_to == 0) {
    if (n_to) memcpy(out->dims, to, n_to * sizeof *to);
  } else if (holes_to == count_wildcards(from, n_from) &&
             map_by_position(from, n_from, to, n_to, actual, out, NULL) == PTS_OK &&
             pts_shape_count(out) == pts_shape_count(actual)) {
    return PTS_OK;
  } else if (holes_to != 1 || map_by_count(to, n_to, actual, out, err) != PTS_OK) {
    return shape_mismatch(actual, err);
  }
  if (pts_shape_count(out) != pts_shape_count(actual)) return shape_mismatch(actual, err);
  return PTS_OK;
}

/* Applies a config reshape to a full shape, keeping the batch dimension. */
static enum pts_status reshape_full(const int64_t *from, size_t n_from, const int64_t *to,
                                    size_t n_to, bool batched, const struct pts_shape *actual,
                                    struct pts_shape *out, struct pts_error *err) {
  int lead = batched ? 1 : 0;
  if (actual->ndim < lead) return shape_mismatch(actual, err);
  struct pts_shape inner = {0}, mapped;
  inner.ndim = actual->ndim - lead;
  memcpy(inner.dims, actual->dims + lead, (size_t)inner.ndim * sizeof inner.dims[0]);
  enum pts_status st = pts_scheduler_map_shape(from, n_from, to, n_to, &inner, &mapped, err);
  if (st != PTS_OK) return st;
  if (mapped.ndim + lead > PTS_TENSOR_MAX_DIMS)
    return pts_error_set(err, PTS_INVALID_ARG, "reshape has more than %d dimensions",
                         PTS_TENSOR_MAX_DIMS);
  memset(out, 0, sizeof *out);
  out->ndim = mapped.ndim + lead;
  if (lead) out->dims[0] = actual->dims[0];
  memcpy(out->dims + lead, mapped.dims, (size_t)mapped.ndim * sizeof mapped.dims[0]);
  return PTS_OK;
}

/* ------------------------------------------------------------- execution */

static const struct pts_tensor *request_input(const struct pts_infer_request *req,
                                              const char *name) {
  for (size_t i = 0; i < req->n_inputs; i++)
    if (req->inputs[i].name && strcmp(req->inputs[i].name, name) == 0) return &req->inputs[i];
  return NULL;
}

/* The backend's view of one request's inputs: config order, reshaped, data
 * and buffer borrowed from the request (no copy, no extra reference; the
 * request outlives the execute call). An optional input the request left out
 * is passed with data == NULL. */
static enum pts_status build_inputs(const struct pts_scheduler *s, const struct pending *item,
                                    struct pts_tensor *inputs, struct pts_error *err) {
  const Inference__ModelConfig *cfg = s->config;
  bool batched = cfg->max_batch_size > 0;
  for (size_t k = 0; k < cfg->n_input; k++) {
    const Inference__ModelInput *in = cfg->input[k];
    struct pts_tensor *dst = &inputs[k];
    dst->name = in->name;
    dst->dtype = (enum pts_dtype)in->data_type;
    const struct pts_tensor *src = request_input(item->req, in->name);
    if (!src) continue;
    dst->data = src->data;
    dst->byte_size = src->byte_size;
    dst->buf = src->buf;
    dst->shape = src->shape;
    if (!in->reshape) continue;
    enum pts_status st = reshape_full(in->dims, in->n_dims, in->reshape->shape,
                                      in->reshape->n_shape, batched, &src->shape, &dst->shape, err);
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
      enum pts_status st = reshape_full(co->reshape->shape, co->reshape->n_shape, co->dims,
                                        co->n_dims, batched, &out->shape, &mapped, err);
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

/* The response shares the output buffers: each tensor is a second view that
 * holds its own reference. */
static enum pts_status build_response(const struct pts_scheduler *s,
                                      const struct pts_infer_request *req,
                                      const struct pts_tensor *outputs,
                                      struct pts_infer_response **out, struct pts_error *err) {
  const Inference__ModelConfig *cfg = s->config;
  size_t n = req->n_outputs ? req->n_outputs : cfg->n_output;
  struct pts_infer_response *resp = pts_infer_response_new();
  if (!resp) goto nomem;
  resp->model_version = s->version;
  resp->model_name = pts_strdup(s->model_name);
  if (!resp->model_name) goto nomem;
  if (req->id) {
    resp->id = pts_strdup(req->id);
    if (!resp->id) goto nomem;
  }
  resp->outputs = pts_calloc(n ? n : 1, sizeof *resp->outputs);
  if (!resp->outputs) goto nomem;
  for (size_t i = 0; i < n; i++) {
    int k = req->n_outputs ? config_output_index(cfg, req->outputs[i].name) : (int)i;
    if (k < 0) {
      pts_infer_response_free(resp);
      return pts_error_set(err, PTS_INVALID_ARG, "unexpected inference output '%s' for model '%s'",
                           req->outputs[i].name, s->model_name);
    }
    if (pts_tensor_copy_view(&resp->outputs[i], &outputs[k], err) != PTS_OK) {
      pts_infer_response_free(resp);
      return PTS_NOMEM;
    }
    resp->n_outputs = i + 1;
  }
  *out = resp;
  return PTS_OK;
nomem:
  pts_infer_response_free(resp);
  return pts_error_set(err, PTS_NOMEM, "out of memory building the response of model '%s'",
                       s->model_name);
}

static void complete(struct pending *item, struct pts_infer_response *resp,
                     const struct pts_error *err) {
  struct pts_infer_request *req = item->req;
  struct pts_model *model = item->model;
  pts_free(item);
  req->done(req, resp, err, req->done_ctx);
  pts_model_release(model);
}

/* Runs one request as a batch of its own. When the dynamic batcher lands,
 * this becomes: gather n requests' inputs into one buffer (or views for
 * n == 1), execute once, and slice each output per request along dim 0. */
static void run_batch(struct pts_scheduler *s, struct instance *inst, struct pending *item) {
  const Inference__ModelConfig *cfg = s->config;
  struct pts_error err;
  pts_error_clear(&err);
  struct pts_infer_response *resp = NULL;
  struct pts_tensor *inputs = pts_calloc(cfg->n_input ? cfg->n_input : 1, sizeof *inputs);
  struct pts_tensor *outputs = pts_calloc(cfg->n_output ? cfg->n_output : 1, sizeof *outputs);
  enum pts_status st;
  if (!inputs || !outputs)
    st = pts_error_set(&err, PTS_NOMEM, "out of memory running model '%s'", s->model_name);
  else
    st = build_inputs(s, item, inputs, &err);
  if (st == PTS_OK) {
    PTS_LOG_VERBOSE(1, "model '%s' version %lld: instance '%s' runs request '%s' (batch size %lld)",
                    s->model_name, (long long)s->version, inst->name,
                    item->req->id ? item->req->id : "", (long long)item->batch_size);
    struct pts_batch batch = {
        .batch_size = item->batch_size,
        .n_inputs = cfg->n_input,
        .inputs = inputs,
        .n_outputs = cfg->n_output,
        .outputs = outputs,
    };
    st = s->backend->execute(inst->state, &batch, &err);
    if (st != PTS_OK && err.code == PTS_OK)
      pts_error_set(&err, st, "backend '%s' failed to run model '%s' on instance '%s'",
                    s->backend->name, s->model_name, inst->name);
    if (st == PTS_OK) st = check_outputs(s, item->batch_size, outputs, &err);
    if (st == PTS_OK) st = build_response(s, item->req, outputs, &resp, &err);
  }
  if (st != PTS_OK) {
    if (err.code == PTS_OK) err.code = st;
    PTS_LOG_VERBOSE(1, "request for model '%s' failed: %s", s->model_name, err.msg);
  }
  for (size_t k = 0; outputs && k < cfg->n_output; k++) pts_tensor_clear(&outputs[k]);
  pts_free(outputs);
  pts_free(inputs); /* views only: names and buffers are borrowed */
  complete(item, resp, st == PTS_OK ? NULL : &err);
}

/* ----------------------------------------------------------------- queue */

/* Blocks until there is work; NULL once stopping and drained. Today a batch
 * is the oldest request; this is where the dynamic batcher will choose. */
static struct pending *take_batch(struct pts_scheduler *s) {
  pthread_mutex_lock(&s->lock);
  while (!s->head && !s->stopping) pthread_cond_wait(&s->work, &s->lock);
  struct pending *item = s->head;
  if (item) {
    s->head = item->next;
    if (!s->head) s->tail = NULL;
  }
  pthread_mutex_unlock(&s->lock);
  return item;
}

static void finish_batch(struct pts_scheduler *s, size_t n) {
  pthread_mutex_lock(&s->lock);
  s->outstanding -= n;
  if (s->outstanding == 0) pthread_cond_broadcast(&s->idle);
  pthread_mutex_unlock(&s->lock);
}

static void *instance_main(void *arg) {
  struct instance *inst = arg;
  struct pts_scheduler *s = inst->sched;
  char tname[16];
  snprintf(tname, sizeof tname, "%s", inst->name);
  pthread_setname_np(pthread_self(), tname);
  struct pending *item;
  while ((item = take_batch(s)) != NULL) {
    run_batch(s, inst, item);
    finish_batch(s, 1);
  }
  return NULL;
}

enum pts_status pts_scheduler_enqueue(struct pts_scheduler *s, struct pts_infer_request *req,
                                      int64_t batch_size, struct pts_model *model,
                                      struct pts_error *err) {
  struct pending *item = pts_calloc(1, sizeof *item);
  if (!item)
    return pts_error_set(err, PTS_NOMEM, "out of memory queueing a request for model '%s'",
                         s->model_name);
  item->req = req;
  item->model = model;
  item->batch_size = batch_size;
  item->enqueue_ns = pts_now_ns();
  pthread_mutex_lock(&s->lock);
  if (s->stopping) {
    pthread_mutex_unlock(&s->lock);
    pts_free(item);
    return pts_error_set(err, PTS_UNAVAILABLE, "model '%s' version %lld is unloading",
                         s->model_name, (long long)s->version);
  }
  if (s->tail)
    s->tail->next = item;
  else
    s->head = item;
  s->tail = item;
  s->outstanding++;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  return PTS_OK;
}

size_t pts_scheduler_wait_idle(struct pts_scheduler *s, uint64_t deadline_ns) {
  pthread_mutex_lock(&s->lock);
  while (s->outstanding > 0) {
    if (deadline_ns == 0) {
      pthread_cond_wait(&s->idle, &s->lock);
      continue;
    }
    uint64_t now = pts_now_ns();
    if (now >= deadline_ns) break;
    /* The condition uses CLOCK_MONOTONIC (see create), like pts_now_ns. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t wake = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + (deadline_ns - now);
    ts.tv_sec = (time_t)(wake / 1000000000u);
    ts.tv_nsec = (long)(wake % 1000000000u);
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
  }
  pts_free(s->instances);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->idle);
  pthread_mutex_destroy(&s->lock);
  pts_free(s);
}

void pts_scheduler_destroy(struct pts_scheduler *s) {
  if (!s) return;
  stop_threads(s);
  free_scheduler(s);
}

static enum pts_status create_instance(struct pts_scheduler *s, struct instance *inst,
                                       const struct pts_backend_instance_desc *d,
                                       struct pts_error *err) {
  inst->sched = s;
  inst->name = pts_strdup(d->name ? d->name : "");
  if (!inst->name)
    return pts_error_set(err, PTS_NOMEM, "out of memory creating instance of model '%s'",
                         s->model_name);
  inst->desc = *d;
  inst->desc.name = inst->name;
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
  int rc = pthread_create(&inst->thread, NULL, instance_main, inst);
  if (rc != 0)
    return pts_error_set(err, PTS_INTERNAL, "failed to start the thread of instance '%s': %s",
                         inst->name, strerror(rc));
  inst->running = true;
  return PTS_OK;
}

static bool init_sync(struct pts_scheduler *s) {
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0) return false;
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  bool ok = pthread_mutex_init(&s->lock, NULL) == 0;
  ok = ok && pthread_cond_init(&s->work, NULL) == 0;
  ok = ok && pthread_cond_init(&s->idle, &attr) == 0;
  pthread_condattr_destroy(&attr);
  return ok;
}

enum pts_status pts_scheduler_create(const struct pts_scheduler_params *p,
                                     struct pts_scheduler **out, struct pts_error *err) {
  *out = NULL;
  struct pts_scheduler *s = pts_calloc(1, sizeof *s);
  if (!s) return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", p->model_name);
  s->model_name = p->model_name;
  s->version = p->version;
  s->config = p->config;
  s->backend = p->backend;
  s->model_state = p->model_state;
  if (!init_sync(s)) {
    pts_free(s);
    return pts_error_set(err, PTS_INTERNAL, "failed to initialise the queue of model '%s'",
                         p->model_name);
  }
  s->instances = pts_calloc(p->n_instances ? p->n_instances : 1, sizeof *s->instances);
  if (!s->instances) {
    free_scheduler(s);
    return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", p->model_name);
  }
  for (size_t i = 0; i < p->n_instances; i++) {
    s->n_instances = i + 1;
    enum pts_status st = create_instance(s, &s->instances[i], &p->instances[i], err);
    if (st != PTS_OK) {
      pts_scheduler_destroy(s);
      return st;
    }
  }
  *out = s;
  return PTS_OK;
}
