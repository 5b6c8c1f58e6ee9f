/* tests/unit/scheduler/scheduler_test.c — the reshape mapping, and the
 * scheduler end to end with a probe backend (records what it is given) and
 * with the identity backend: inputs in config order with reshape applied,
 * outputs mapped back, responses as zero-copy views, backend errors failing
 * only their own request. Expected shapes are worked out by hand from the
 * config (protocol-facts §4.4 reshape). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "core/copy.h"
#include "core/log.h"
#include "scheduler/reshape.h"
#include "scheduler/scheduler.h"
#include "shm/shm.h"

extern const struct pts_backend pts_identity_backend;

/* ------------------------------------------------------------ map_shape */

static void map(const int64_t *from, size_t nf, const int64_t *to, size_t nt, int nact,
                const int64_t *act, enum pts_status want, const char *want_shape) {
  struct pts_shape a = {.ndim = nact}, out;
  if (nact) memcpy(a.dims, act, (size_t)nact * sizeof *act);
  struct pts_error err;
  pts_error_clear(&err);
  assert_int_equal(pts_reshape_map(from, nf, to, nt, &a, &out, &err), want);
  if (want != PTS_OK) return;
  char got[128];
  pts_shape_format(&out, got, sizeof got);
  assert_string_equal(got, want_shape);
}

static void map_shape_cases(void **state) {
  (void)state;
  const int64_t d23[] = {2, 3}, d6[] = {6}, a23[] = {2, 3};
  map(d23, 2, d6, 1, 2, a23, PTS_OK, "[6]");
  /* dims [-1,4] → reshape [-1,2,2]: the -1 carries over by position. */
  const int64_t dv4[] = {-1, 4}, rv22[] = {-1, 2, 2}, a54[] = {5, 4};
  map(dv4, 2, rv22, 3, 2, a54, PTS_OK, "[5,2,2]");
  /* ...and back: [5,2,2] → [5,4]. */
  const int64_t a522[] = {5, 2, 2};
  map(rv22, 3, dv4, 2, 3, a522, PTS_OK, "[5,4]");
  /* dims [-1,-1] → reshape [-1]: one hole, filled from the element count 2×3. */
  const int64_t dvv[] = {-1, -1}, rv[] = {-1};
  map(dvv, 2, rv, 1, 2, a23, PTS_OK, "[6]");
  /* dims [-1,3] → reshape [-1]: same hole count, but position would lose
   * the 3; the element count decides: 2×3 = 6. */
  const int64_t dv3[] = {-1, 3};
  map(dv3, 2, rv, 1, 2, a23, PTS_OK, "[6]");
  /* Empty reshape of a [1] tensor, and back. */
  const int64_t d1[] = {1}, a1[] = {1};
  map(d1, 1, NULL, 0, 1, a1, PTS_OK, "[]");
  map(NULL, 0, d1, 1, 0, NULL, PTS_OK, "[1]");
  /* Zero elements through a hole. */
  const int64_t a03[] = {0, 3};
  map(dv3, 2, rv, 1, 2, a03, PTS_OK, "[0]");
  /* 4 elements can not become 3. */
  const int64_t d4[] = {4}, d3[] = {3}, a4[] = {4};
  map(d4, 1, d3, 1, 1, a4, PTS_INVALID_ARG, NULL);
  /* 7 elements do not split into rows of 2. */
  const int64_t d7[] = {7}, rv2[] = {-1, 2}, a7[] = {7};
  map(d7, 1, rv2, 2, 1, a7, PTS_INVALID_ARG, NULL);
}

/* -------------------------------------------------------- probe backend */

enum probe_mode { PROBE_ECHO, PROBE_FAIL, PROBE_WRONG_TYPE };

static struct {
  pthread_mutex_t lock;
  enum probe_mode mode;
  struct pts_shape seen[4];
  char seen_names[4][32];
  size_t n_seen;
  int64_t batch_size;
} probe = {.lock = PTHREAD_MUTEX_INITIALIZER};

static enum pts_status probe_load(const struct pts_backend_model_desc *d, void **st,
                                  struct pts_error *err) {
  (void)err;
  *st = (void *)d->config;
  return PTS_OK;
}
static void probe_unload(void *st) { (void)st; }
static enum pts_status probe_instance(void *ms, const struct pts_backend_instance_desc *d,
                                      void **is, struct pts_error *err) {
  (void)d;
  (void)err;
  *is = ms;
  return PTS_OK;
}
static void probe_instance_destroy(void *is) { (void)is; }

static enum pts_status probe_execute(void *is, struct pts_batch *b, struct pts_error *err) {
  const Inference__ModelConfig *cfg = is;
  pthread_mutex_lock(&probe.lock);
  probe.n_seen = b->n_inputs;
  probe.batch_size = b->batch_size;
  for (size_t i = 0; i < b->n_inputs && i < 4; i++) {
    probe.seen[i] = b->inputs[i].shape;
    snprintf(probe.seen_names[i], sizeof probe.seen_names[i], "%s", b->inputs[i].name);
  }
  enum probe_mode mode = probe.mode;
  pthread_mutex_unlock(&probe.lock);
  if (mode == PROBE_FAIL) return pts_error_set(err, PTS_INVALID_ARG, "probe: refused");
  for (size_t i = 0; i < b->n_outputs; i++) {
    struct pts_tensor *o = &b->outputs[i];
    o->name = pts_strdup(cfg->output[i]->name);
    o->dtype = mode == PROBE_WRONG_TYPE ? PTS_DTYPE_INT8 : b->inputs[i].dtype;
    o->shape = b->inputs[i].shape;
    o->data = b->inputs[i].data;
    o->byte_size = b->inputs[i].byte_size;
    o->buf = pts_buf_retain(b->inputs[i].buf);
  }
  return PTS_OK;
}

static const struct pts_backend probe_backend = {
    .name = "probe",
    .model_load = probe_load,
    .model_unload = probe_unload,
    .instance_create = probe_instance,
    .instance_destroy = probe_instance_destroy,
    .execute = probe_execute,
};

/* ------------------------------------------------------------ completion */

struct done_box {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int calls;
  struct pts_infer_request *req;
  struct pts_infer_response *resp;
  struct pts_error err;
};

static void on_done(struct pts_infer_request *req, struct pts_infer_response *resp,
                    const struct pts_error *err, void *ctx) {
  struct done_box *box = ctx;
  pthread_mutex_lock(&box->lock);
  box->calls++;
  /* Keep only the last one; the multi-request test checks counts only. */
  pts_infer_request_free(box->req);
  pts_infer_response_free(box->resp);
  box->req = req;
  box->resp = resp;
  if (err)
    box->err = *err;
  else
    pts_error_clear(&box->err);
  pthread_cond_broadcast(&box->cond);
  pthread_mutex_unlock(&box->lock);
}

static void box_init(struct done_box *box) {
  memset(box, 0, sizeof *box);
  pthread_mutex_init(&box->lock, NULL);
  pthread_cond_init(&box->cond, NULL);
}

static void box_wait(struct done_box *box, int calls) {
  pthread_mutex_lock(&box->lock);
  while (box->calls < calls) pthread_cond_wait(&box->cond, &box->lock);
  pthread_mutex_unlock(&box->lock);
}

static void box_clear(struct done_box *box) {
  pts_infer_request_free(box->req);
  pts_infer_response_free(box->resp);
  box->req = NULL;
  box->resp = NULL;
  pthread_cond_destroy(&box->cond);
  pthread_mutex_destroy(&box->lock);
}

/* A request with INT32 inputs of shape [b, 4] holding 0, 1, 2, ... in a
 * refcounted buffer, as a frontend would build it. */
static struct pts_infer_request *int_request(struct done_box *box, int64_t b, size_t n_inputs,
                                             const char *const *names) {
  struct pts_infer_request *req = pts_infer_request_new();
  req->model_name = pts_strdup("m");
  req->id = pts_strdup("req-1");
  req->inputs = pts_calloc(n_inputs, sizeof *req->inputs);
  req->n_inputs = n_inputs;
  for (size_t i = 0; i < n_inputs; i++) {
    struct pts_tensor *t = &req->inputs[i];
    t->name = pts_strdup(names[i]);
    t->dtype = PTS_DTYPE_INT32;
    t->shape.ndim = 2;
    t->shape.dims[0] = b;
    t->shape.dims[1] = 4;
    t->byte_size = (size_t)b * 4 * sizeof(int32_t);
    t->buf = pts_buf_new(t->byte_size);
    int32_t *v = t->buf->data;
    for (int64_t k = 0; k < b * 4; k++) v[k] = (int32_t)(k + 100 * (int64_t)i);
    t->data = t->buf->data;
  }
  req->done = on_done;
  req->done_ctx = box;
  return req;
}

static Inference__ModelConfig *parse(const char *text) {
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  assert_int_equal(pts_model_config_parse(text, strlen(text), "test", &cfg, &err), PTS_OK);
  return cfg;
}

struct sched_fixture {
  Inference__ModelConfig *cfg;
  void *model_state;
  const struct pts_backend *backend;
  struct pts_scheduler *s;
};

/* The fixture's scheduler over `be`, with n_instances instances of `kind`. */
static void start_kind(struct sched_fixture *f, const struct pts_backend *be,
                       const char *cfg_text, size_t n_instances, Inference__ModelInstanceGroup__Kind kind) {
  f->cfg = parse(cfg_text);
  f->backend = be;
  struct pts_error err;
  pts_error_clear(&err);
  struct pts_backend_model_desc md = {.name = "m", .version = 1, .config = f->cfg};
  assert_int_equal(be->model_load(&md, &f->model_state, &err), PTS_OK);
  struct pts_backend_instance_desc inst[4];
  for (size_t i = 0; i < n_instances; i++)
    inst[i] =
        (struct pts_backend_instance_desc){.name = "m_0",
                                           .kind = kind,
                                           .device_id = -1,
                                           .index = (int)i};
  struct pts_scheduler_params p = {.model_name = "m",
                                   .version = 3,
                                   .config = f->cfg,
                                   .backend = be,
                                   .model_state = f->model_state,
                                   .n_instances = n_instances,
                                   .instances = inst};
  assert_int_equal(pts_scheduler_create(&p, &f->s, &err), PTS_OK);
}

static void start(struct sched_fixture *f, const struct pts_backend *be, const char *cfg_text,
                  size_t n_instances) {
  start_kind(f, be, cfg_text, n_instances, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
}

static void stop(struct sched_fixture *f) {
  pts_scheduler_destroy(f->s);
  f->backend->model_unload(f->model_state);
  pts_model_config_free(f->cfg);
}

static const char reshape_cfg[] =
    "max_batch_size: 8\n"
    "input [ { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "        { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]\n"
    "output [ { name: \"OB\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "         { name: \"OA\" data_type: TYPE_INT32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]\n";

static void inputs_in_config_order_reshaped(void **state) {
  (void)state;
  struct sched_fixture f;
  start(&f, &probe_backend, reshape_cfg, 1);
  probe.mode = PROBE_ECHO;
  struct done_box box;
  box_init(&box);
  const char *names[] = {"A", "B"}; /* request order differs from config order */
  struct pts_infer_request *req = int_request(&box, 3, 2, names);
  const void *a_data = req->inputs[0].data;
  struct pts_error err;
  assert_int_equal(pts_scheduler_enqueue(f.s, req, 3, NULL, &err), PTS_OK);
  box_wait(&box, 1);
  assert_int_equal(box.err.code, PTS_OK);
  /* The backend saw B then A; A as [3,2,2], B untouched as [3,4]. */
  char shape[64];
  assert_int_equal(probe.n_seen, 2);
  assert_int_equal(probe.batch_size, 3);
  assert_string_equal(probe.seen_names[0], "B");
  assert_string_equal(probe.seen_names[1], "A");
  pts_shape_format(&probe.seen[0], shape, sizeof shape);
  assert_string_equal(shape, "[3,4]");
  pts_shape_format(&probe.seen[1], shape, sizeof shape);
  assert_string_equal(shape, "[3,2,2]");
  /* All outputs in config order, OA mapped back to [3,4], sharing A's bytes. */
  struct pts_infer_response *resp = box.resp;
  assert_non_null(resp);
  assert_string_equal(resp->model_name, "m");
  assert_int_equal(resp->model_version, 3);
  assert_string_equal(resp->id, "req-1");
  assert_int_equal(resp->n_outputs, 2);
  assert_string_equal(resp->outputs[0].name, "OB");
  assert_string_equal(resp->outputs[1].name, "OA");
  pts_shape_format(&resp->outputs[1].shape, shape, sizeof shape);
  assert_string_equal(shape, "[3,4]");
  assert_ptr_equal(resp->outputs[1].data, a_data);
  assert_int_equal(resp->outputs[1].byte_size, 48);
  /* The frontend may free the request first: the response keeps the bytes. */
  pts_infer_request_free(box.req);
  box.req = NULL;
  const int32_t *v = resp->outputs[1].data;
  for (int k = 0; k < 12; k++) assert_int_equal(v[k], k);
  v = resp->outputs[0].data;
  for (int k = 0; k < 12; k++) assert_int_equal(v[k], 100 + k);
  box_clear(&box);
  stop(&f);
}

static void requested_outputs_in_request_order(void **state) {
  (void)state;
  struct sched_fixture f;
  start(&f, &pts_identity_backend, reshape_cfg, 1);
  struct done_box box;
  box_init(&box);
  const char *names[] = {"B", "A"};
  struct pts_infer_request *req = int_request(&box, 1, 2, names);
  req->outputs = pts_calloc(1, sizeof *req->outputs);
  req->outputs[0].name = pts_strdup("OA");
  req->n_outputs = 1;
  struct pts_error err;
  assert_int_equal(pts_scheduler_enqueue(f.s, req, 1, NULL, &err), PTS_OK);
  box_wait(&box, 1);
  assert_int_equal(box.err.code, PTS_OK);
  assert_int_equal(box.resp->n_outputs, 1);
  assert_string_equal(box.resp->outputs[0].name, "OA");
  /* OA echoes A, the request's second input: values 100..103. */
  const int32_t *v = box.resp->outputs[0].data;
  for (int k = 0; k < 4; k++) assert_int_equal(v[k], 100 + k);
  box_clear(&box);
  stop(&f);
}

static void backend_errors_fail_only_their_request(void **state) {
  (void)state;
  struct sched_fixture f;
  start(&f, &probe_backend, reshape_cfg, 1);
  struct done_box box;
  box_init(&box);
  const char *names[] = {"A", "B"};
  struct pts_error err;

  probe.mode = PROBE_FAIL;
  assert_int_equal(pts_scheduler_enqueue(f.s, int_request(&box, 1, 2, names), 1, NULL, &err),
                   PTS_OK);
  box_wait(&box, 1);
  assert_int_equal(box.err.code, PTS_INVALID_ARG);
  assert_string_equal(box.err.msg, "probe: refused");
  assert_null(box.resp);

  probe.mode = PROBE_WRONG_TYPE;
  assert_int_equal(pts_scheduler_enqueue(f.s, int_request(&box, 1, 2, names), 1, NULL, &err),
                   PTS_OK);
  box_wait(&box, 2);
  assert_int_equal(box.err.code, PTS_INTERNAL);
  assert_non_null(strstr(box.err.msg, "data type 'INT8', but the config says 'INT32'"));

  probe.mode = PROBE_ECHO;
  assert_int_equal(pts_scheduler_enqueue(f.s, int_request(&box, 2, 2, names), 2, NULL, &err),
                   PTS_OK);
  box_wait(&box, 3);
  assert_int_equal(box.err.code, PTS_OK);
  assert_int_equal(box.resp->n_outputs, 2);
  box_clear(&box);
  stop(&f);
}

static void many_requests_many_instances(void **state) {
  (void)state;
  struct sched_fixture f;
  start(&f, &pts_identity_backend, reshape_cfg, 3);
  struct done_box box;
  box_init(&box);
  const char *names[] = {"A", "B"};
  struct pts_error err;
  for (int i = 0; i < 50; i++)
    assert_int_equal(
        pts_scheduler_enqueue(f.s, int_request(&box, 1 + i % 8, 2, names), 1 + i % 8, NULL, &err),
        PTS_OK);
  assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
  assert_int_equal(box.calls, 50);
  box_clear(&box);
  stop(&f);
}

/* ------------------------------------------------------ run to completion */

/* Where and when done ran, for the run-to-completion tests. */
struct where_box {
  struct done_box box;
  pthread_t thread; /* of the last done call */
};

static void on_done_where(struct pts_infer_request *req, struct pts_infer_response *resp,
                          const struct pts_error *err, void *ctx) {
  struct where_box *w = ctx;
  pthread_mutex_lock(&w->box.lock);
  w->thread = pthread_self();
  pthread_mutex_unlock(&w->box.lock);
  on_done(req, resp, err, &w->box);
}

/* Enqueues one request of batch size 1 and waits for its answer; says
 * whether done had run, on this thread, by the time enqueue returned. */
static bool one_request_ran_here(struct sched_fixture *f, struct where_box *w) {
  const char *names[] = {"A", "B"};
  struct pts_infer_request *req = int_request(&w->box, 1, 2, names);
  req->done = on_done_where;
  req->done_ctx = w;
  pthread_mutex_lock(&w->box.lock);
  int before = w->box.calls;
  pthread_mutex_unlock(&w->box.lock);
  struct pts_error err;
  assert_int_equal(pts_scheduler_enqueue(f->s, req, 1, NULL, &err), PTS_OK);
  pthread_mutex_lock(&w->box.lock);
  bool here = w->box.calls == before + 1 && pthread_equal(w->thread, pthread_self());
  pthread_mutex_unlock(&w->box.lock);
  box_wait(&w->box, before + 1);
  assert_int_equal(w->box.err.code, PTS_OK);
  /* The answer is the request's own: OA echoes A (0, 1, 2, 3). */
  const int32_t *v = w->box.resp->outputs[1].data;
  for (int k = 0; k < 4; k++) assert_int_equal(v[k], k);
  return here;
}

static uint64_t deadline_in(uint64_t ms) { return pts_now_ns() + ms * 1000000u; }

/* A CPU model with an idle instance and nothing queued runs the request on
 * the enqueuing thread: done has run when enqueue returns. The first
 * request always goes through the instance thread (its execute time is not
 * known yet); the instance thread needs a moment to become idle again, so
 * later requests are tried until one runs here (deadline: a loaded machine
 * may keep the instance thread from its wait for a while). */
static void idle_instance_runs_on_the_enqueuing_thread(void **state) {
  (void)state;
  struct sched_fixture f;
  start(&f, &pts_identity_backend, reshape_cfg, 1);
  struct where_box w;
  memset(&w, 0, sizeof w);
  box_init(&w.box);
  assert_false(one_request_ran_here(&f, &w));
  bool seen = false;
  for (uint64_t until = deadline_in(10000); !seen && pts_now_ns() < until;)
    seen = one_request_ran_here(&f, &w);
  assert_true(seen);
  /* The statistics count it like any other request. */
  struct pts_model_stats st;
  struct pts_error err;
  assert_int_equal(pts_scheduler_stats(f.s, &st, &err), PTS_OK);
  assert_int_equal(st.success.count, (uint64_t)w.box.calls);
  assert_int_equal(st.execution_count, (uint64_t)w.box.calls);
  pts_model_stats_clear(&st);
  box_clear(&w.box);
  stop(&f);
}

/* Whether a request ran on this thread once the instance thread was idle:
 * 50 requests 1 ms apart (each waits for its answer, then the pause lets
 * the instance thread reach its wait), then, with `keep_trying`, more
 * until one does or 10 s have passed (a loaded machine may keep the
 * instance thread from its wait for a while). */
static bool runs_here_once_idle(struct sched_fixture *f, bool keep_trying) {
  struct where_box w;
  memset(&w, 0, sizeof w);
  box_init(&w.box);
  bool seen = false;
  for (int i = 0; i < 50 && !seen; i++) {
    seen = one_request_ran_here(f, &w);
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  for (uint64_t until = deadline_in(10000); !seen && keep_trying && pts_now_ns() < until;)
    seen = one_request_ran_here(f, &w);
  box_clear(&w.box);
  return seen;
}

/* PTSERVE_INLINE_MAX_US, read when the scheduler is created: 0 keeps every
 * request on the instance threads, even once the instance thread is idle
 * (each request waits for its answer, then 1 ms, the pause after which the
 * test above sees it run here); a value that is not a number keeps the
 * 1 ms default, so requests run here again. */
static void inline_limit_from_the_environment(void **state) {
  (void)state;
  static const char *const values[] = {"0", "12x"};
  for (size_t v = 0; v < 2; v++) {
    setenv("PTSERVE_INLINE_MAX_US", values[v], 1);
    struct sched_fixture f;
    start(&f, &pts_identity_backend, reshape_cfg, 1);
    unsetenv("PTSERVE_INLINE_MAX_US");
    if (v == 0) assert_false(runs_here_once_idle(&f, false));
    if (v == 1) assert_true(runs_here_once_idle(&f, true));
    stop(&f);
  }
}

static bool lendable_yes(void *instance_state) {
  (void)instance_state;
  return true;
}

static bool lendable_no(void *instance_state) {
  (void)instance_state;
  return false;
}

/* A KIND_GPU instance is lent to the enqueuing thread only when its
 * backend says it keeps nothing on its own thread (backend.h lendable):
 * the identity backend as it is (no lendable) and one whose lendable says
 * no keep every request on the instance thread, even once it is idle
 * (50 requests 1 ms apart); one whose lendable says yes runs them here. */
static void gpu_instances_are_lent_only_when_the_backend_allows(void **state) {
  (void)state;
  struct pts_backend no_hook = pts_identity_backend, says_no = pts_identity_backend,
                     says_yes = pts_identity_backend;
  no_hook.lendable = NULL;
  says_no.lendable = lendable_no;
  says_yes.lendable = lendable_yes;
  const struct pts_backend *backends[] = {&no_hook, &says_no, &says_yes};
  for (size_t b = 0; b < 3; b++) {
    struct sched_fixture f;
    start_kind(&f, backends[b], reshape_cfg, 1, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
    if (b < 2) assert_false(runs_here_once_idle(&f, false));
    if (b == 2) assert_true(runs_here_once_idle(&f, true));
    stop(&f);
  }
}

/* Where the instance threads must keep the request: preserve_ordering (a
 * request may wait for an earlier one), and a dynamic batcher that waits
 * for more requests (max_queue_delay, batch below the preferred size). */
static void ordering_and_queue_delay_stay_on_instance_threads(void **state) {
  (void)state;
  static const char *const cfgs[] = {
      "max_batch_size: 8\n"
      "input [ { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] },"
      "        { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
      "output [ { name: \"OB\" data_type: TYPE_INT32 dims: [ 4 ] },"
      "         { name: \"OA\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
      "dynamic_batching { preserve_ordering: true }\n",
      "max_batch_size: 8\n"
      "input [ { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] },"
      "        { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
      "output [ { name: \"OB\" data_type: TYPE_INT32 dims: [ 4 ] },"
      "         { name: \"OA\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
      "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 2000 }\n",
  };
  for (size_t c = 0; c < 2; c++) {
    struct sched_fixture f;
    start(&f, &pts_identity_backend, cfgs[c], 1);
    struct where_box w;
    memset(&w, 0, sizeof w);
    box_init(&w.box);
    for (int i = 0; i < 20; i++) assert_false(one_request_ran_here(&f, &w));
    box_clear(&w.box);
    stop(&f);
  }
}

/* A gate in front of the identity backend's execute: a batch waits there
 * while the test holds the gate closed. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool closed;
  int entered; /* batches that reached the gate */
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};

static enum pts_status gate_execute(void *is, struct pts_batch *b, struct pts_error *err) {
  pthread_mutex_lock(&gate.lock);
  gate.entered++;
  pthread_cond_broadcast(&gate.cond);
  while (gate.closed) pthread_cond_wait(&gate.cond, &gate.lock);
  pthread_mutex_unlock(&gate.lock);
  return pts_identity_backend.execute(is, b, err);
}

static void gate_set(bool closed) {
  pthread_mutex_lock(&gate.lock);
  gate.closed = closed;
  pthread_cond_broadcast(&gate.cond);
  pthread_mutex_unlock(&gate.lock);
}

struct lender {
  struct sched_fixture *f;
  struct where_box *w;
  pthread_t self;
};

/* A frontend thread whose request runs to completion (it blocks at the
 * gate, with the instance lent). */
static void *lend_one(void *arg) {
  struct lender *l = arg;
  l->self = pthread_self();
  const char *names[] = {"A", "B"};
  struct pts_infer_request *req = int_request(&l->w->box, 1, 2, names);
  req->done = on_done_where;
  req->done_ctx = l->w;
  struct pts_error err;
  assert_int_equal(pts_scheduler_enqueue(l->f->s, req, 1, NULL, &err), PTS_OK);
  return NULL;
}

/* A request queued while another frontend thread has the only instance
 * lent runs on that thread once its own batch is done, not on the instance
 * thread (which would cost the instance thread's wake-up): both answers
 * come from the lender's thread, the second only after the first batch
 * ended. The limit is raised so that the time at the gate does not count
 * against it. */
static void queued_while_lent_runs_on_the_lender(void **state) {
  (void)state;
  struct pts_backend gate_backend = pts_identity_backend;
  gate_backend.execute = gate_execute;
  setenv("PTSERVE_INLINE_MAX_US", "100000000", 1);
  struct sched_fixture f;
  start(&f, &gate_backend, reshape_cfg, 1);
  unsetenv("PTSERVE_INLINE_MAX_US");
  struct where_box w1, w2;
  memset(&w1, 0, sizeof w1);
  memset(&w2, 0, sizeof w2);
  box_init(&w1.box);
  box_init(&w2.box);
  bool seen = false;
  for (uint64_t until = deadline_in(10000); !seen && pts_now_ns() < until;)
    seen = one_request_ran_here(&f, &w1);
  assert_true(seen);
  int before = w1.box.calls;

  gate_set(true);
  pthread_mutex_lock(&gate.lock);
  int entered = gate.entered;
  pthread_mutex_unlock(&gate.lock);
  struct lender l = {.f = &f, .w = &w1};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, lend_one, &l), 0);
  pthread_mutex_lock(&gate.lock);
  while (gate.entered == entered) pthread_cond_wait(&gate.cond, &gate.lock);
  pthread_mutex_unlock(&gate.lock);

  const char *names[] = {"A", "B"};
  struct pts_infer_request *req = int_request(&w2.box, 1, 2, names);
  req->done = on_done_where;
  req->done_ctx = &w2;
  struct pts_error err;
  assert_int_equal(pts_scheduler_enqueue(f.s, req, 1, NULL, &err), PTS_OK);
  pthread_mutex_lock(&w2.box.lock);
  assert_int_equal(w2.box.calls, 0); /* queued behind the lent instance */
  pthread_mutex_unlock(&w2.box.lock);

  gate_set(false);
  assert_int_equal(pthread_join(t, NULL), 0);
  box_wait(&w1.box, before + 1);
  box_wait(&w2.box, 1);
  assert_true(pthread_equal(w1.thread, l.self));
  assert_true(pthread_equal(w2.thread, l.self));
  assert_int_equal(w2.box.err.code, PTS_OK);
  const int32_t *v = w2.box.resp->outputs[1].data; /* OA echoes A: 0, 1, 2, 3 */
  for (int k = 0; k < 4; k++) assert_int_equal(v[k], k);
  struct pts_model_stats st;
  assert_int_equal(pts_scheduler_stats(f.s, &st, &err), PTS_OK);
  assert_int_equal(st.success.count, (uint64_t)(w1.box.calls + w2.box.calls));
  assert_int_equal(st.execution_count, (uint64_t)(w1.box.calls + w2.box.calls));
  pts_model_stats_clear(&st);
  box_clear(&w1.box);
  box_clear(&w2.box);
  stop(&f);
}

static void destroy_answers_queued_requests(void **state) {
  (void)state;
  struct sched_fixture f;
  start(&f, &pts_identity_backend, reshape_cfg, 1);
  struct done_box box;
  box_init(&box);
  const char *names[] = {"A", "B"};
  struct pts_error err;
  for (int i = 0; i < 10; i++)
    assert_int_equal(pts_scheduler_enqueue(f.s, int_request(&box, 1, 2, names), 1, NULL, &err),
                     PTS_OK);
  stop(&f); /* every queued request is still answered */
  assert_int_equal(box.calls, 10);
  box_clear(&box);
}

/* Each done call keeps its own response, by request id. */
struct id_box {
  pthread_mutex_t lock;
  int calls;
  struct pts_infer_response *resp[4];
  struct pts_infer_request *req[4];
};

/* Keeps a done call's request and response under its id. */
static void box_put(struct id_box *box, struct pts_infer_request *req,
                    struct pts_infer_response *resp) {
  int i = req->id[0] - '0';
  pthread_mutex_lock(&box->lock);
  box->resp[i] = resp;
  box->req[i] = req;
  box->calls++;
  pthread_mutex_unlock(&box->lock);
}

static void on_done_by_id(struct pts_infer_request *req, struct pts_infer_response *resp,
                          const struct pts_error *err, void *ctx) {
  assert_true(!err || err->code == PTS_OK);
  box_put(ctx, req, resp);
}

/* Request number r (id "r", r < 10) of a batch test: int_request's inputs
 * A and B with `rows` rows, each value raised by 1000 r so that every
 * request's rows can be told apart; answered to `done` with `box`. */
static struct pts_infer_request *numbered_request(int r, int64_t rows, pts_infer_done_fn done,
                                                  struct id_box *box) {
  const char *names[] = {"A", "B"};
  struct pts_infer_request *req = int_request(NULL, rows, 2, names);
  req->done = done;
  req->done_ctx = box;
  pts_free(req->id);
  char id[2] = {(char)('0' + r), 0};
  req->id = pts_strdup(id);
  for (size_t i = 0; i < 2; i++) {
    int32_t *v = req->inputs[i].buf->data;
    for (int64_t k = 0; k < rows * 4; k++) v[k] += 1000 * r;
  }
  return req;
}

static const char batching_cfg[] =
    "max_batch_size: 8\n"
    "input [ { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "        { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]\n"
    "output [ { name: \"OB\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "         { name: \"OA\" data_type: TYPE_INT32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]\n"
    "dynamic_batching { }\n";

/* Three requests (batch 1, 2, 1) held by the test hook until all are queued
 * run as one batch of 4: the backend sees [4,4] and [4,2,2], and each request
 * gets back its own rows, as views of the one batch output. */
static void dynamic_batch_gathers_and_splits(void **state) {
  (void)state;
  setenv("PTSERVE_DELAY_SCHEDULER", "3", 1);
  struct sched_fixture f;
  start(&f, &probe_backend, batching_cfg, 1);
  unsetenv("PTSERVE_DELAY_SCHEDULER");
  probe.mode = PROBE_ECHO;
  struct id_box box;
  memset(&box, 0, sizeof box);
  pthread_mutex_init(&box.lock, NULL);
  const int64_t sizes[] = {1, 2, 1};
  struct pts_error err;
  for (int r = 0; r < 3; r++) {
    struct pts_infer_request *req = numbered_request(r, sizes[r], on_done_by_id, &box);
    assert_int_equal(pts_scheduler_enqueue(f.s, req, sizes[r], NULL, &err), PTS_OK);
  }
  assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
  assert_int_equal(box.calls, 3);
  char shape[64];
  assert_int_equal(probe.batch_size, 4);
  pts_shape_format(&probe.seen[0], shape, sizeof shape);
  assert_string_equal(shape, "[4,4]");
  pts_shape_format(&probe.seen[1], shape, sizeof shape);
  assert_string_equal(shape, "[4,2,2]");
  const void *base = box.resp[0]->outputs[1].data;
  size_t offset = 0;
  for (int r = 0; r < 3; r++) {
    struct pts_infer_response *resp = box.resp[r];
    assert_int_equal(resp->n_outputs, 2);
    pts_shape_format(&resp->outputs[1].shape, shape, sizeof shape);
    assert_string_equal(shape, r == 1 ? "[2,4]" : "[1,4]");
    /* OA is request r's A (values k + 1000 r), OB its B (100 + k + 1000 r). */
    const int32_t *oa = resp->outputs[1].data, *ob = resp->outputs[0].data;
    for (int64_t k = 0; k < sizes[r] * 4; k++) {
      assert_int_equal(oa[k], k + 1000 * r);
      assert_int_equal(ob[k], 100 + k + 1000 * r);
    }
    /* Slices of one buffer, back to back: zero copy on the way out. */
    assert_ptr_equal(resp->outputs[1].data, (const char *)base + offset);
    assert_ptr_equal(resp->outputs[1].buf, box.resp[0]->outputs[1].buf);
    offset += resp->outputs[1].byte_size;
  }
  struct pts_model_stats st;
  assert_int_equal(pts_scheduler_stats(f.s, &st, &err), PTS_OK);
  assert_int_equal(st.execution_count, 1);
  assert_int_equal(st.inference_count, 4);
  assert_int_equal(st.success.count, 3);
  assert_int_equal(st.n_batch_stats, 1);
  assert_int_equal(st.batch_stats[0].batch_size, 4);
  assert_int_equal(st.version, 3);
  pts_model_stats_clear(&st);
  for (int r = 0; r < 3; r++) {
    pts_infer_request_free(box.req[r]);
    pts_infer_response_free(box.resp[r]);
  }
  pthread_mutex_destroy(&box.lock);
  stop(&f);
}

/* ------------------------------------------- staging and destinations */

/* A backend that offers pinned-like staging memory (input_staging) and
 * writes outputs into the destinations a batch of one names (output_dest),
 * as the pytorch backend does on CUDA. Its outputs are fresh copies of its
 * inputs plus 1, so nothing aliases the reused staging memory. */
static struct {
  pthread_mutex_t lock;
  unsigned char staging[2][4096];
  size_t staged_calls, staged_bytes[2];
  const void *seen_data[2];
  enum pts_mem seen_mem[2];
  bool got_dest;
} stage = {.lock = PTHREAD_MUTEX_INITIALIZER};

static enum pts_status stage_input(void *is, unsigned set, size_t input, size_t byte_size,
                                   void **data, enum pts_mem *mem, struct pts_error *err) {
  (void)is;
  assert_int_equal(set, 0); /* stage does not pipeline */
  if (byte_size > sizeof stage.staging[0])
    return pts_error_set(err, PTS_INTERNAL, "stage: %zu bytes is too much", byte_size);
  pthread_mutex_lock(&stage.lock);
  stage.staged_calls++;
  stage.staged_bytes[input] = byte_size;
  pthread_mutex_unlock(&stage.lock);
  *data = stage.staging[input];
  *mem = PTS_MEM_PINNED;
  return PTS_OK;
}

static enum pts_status stage_execute(void *is, struct pts_batch *b, struct pts_error *err) {
  const Inference__ModelConfig *cfg = is;
  pthread_mutex_lock(&stage.lock);
  for (size_t i = 0; i < b->n_inputs && i < 2; i++) {
    stage.seen_data[i] = b->inputs[i].data;
    stage.seen_mem[i] = b->inputs[i].mem;
  }
  stage.got_dest = b->output_dest != NULL;
  pthread_mutex_unlock(&stage.lock);
  for (size_t i = 0; i < b->n_outputs; i++) {
    const struct pts_tensor *in = &b->inputs[i];
    struct pts_tensor *o = &b->outputs[i];
    const struct pts_output_dest *d = b->output_dest ? &b->output_dest[i] : NULL;
    o->name = pts_strdup(cfg->output[i]->name);
    o->dtype = in->dtype;
    o->shape = in->shape;
    o->byte_size = in->byte_size;
    int32_t *out;
    if (d && d->data && d->size >= in->byte_size) {
      out = d->data; /* straight into the request's place */
      o->mem = d->mem;
    } else {
      o->buf = pts_buf_new(in->byte_size);
      if (!o->buf) return pts_error_set(err, PTS_NOMEM, "stage: out of memory");
      out = o->buf->data;
    }
    const int32_t *v = in->data;
    for (size_t k = 0; k < in->byte_size / 4; k++) out[k] = v[k] + 1;
    o->data = out;
  }
  return PTS_OK;
}

static const struct pts_backend stage_backend = {
    .name = "stage",
    .model_load = probe_load,
    .model_unload = probe_unload,
    .instance_create = probe_instance,
    .instance_destroy = probe_instance_destroy,
    .execute = stage_execute,
    .input_staging = stage_input,
};

/* Three requests form one batch: each input is gathered straight into the
 * backend's staging memory (one copy, no intermediate buffer), and every
 * request gets its own rows back. */
static void batch_gathers_into_backend_staging(void **state) {
  (void)state;
  setenv("PTSERVE_DELAY_SCHEDULER", "3", 1);
  struct sched_fixture f;
  start(&f, &stage_backend, batching_cfg, 1);
  unsetenv("PTSERVE_DELAY_SCHEDULER");
  memset(stage.staged_bytes, 0, sizeof stage.staged_bytes);
  stage.staged_calls = 0;
  struct id_box box;
  memset(&box, 0, sizeof box);
  pthread_mutex_init(&box.lock, NULL);
  const int64_t sizes[] = {1, 2, 1};
  struct pts_error err;
  for (int r = 0; r < 3; r++) {
    struct pts_infer_request *req = numbered_request(r, sizes[r], on_done_by_id, &box);
    assert_int_equal(pts_scheduler_enqueue(f.s, req, sizes[r], NULL, &err), PTS_OK);
  }
  assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
  assert_int_equal(box.calls, 3);
  /* config order: B is input 0, A input 1; 4 rows of 4 INT32 each */
  assert_int_equal(stage.staged_calls, 2);
  assert_int_equal(stage.staged_bytes[0], 64);
  assert_int_equal(stage.staged_bytes[1], 64);
  assert_ptr_equal(stage.seen_data[0], stage.staging[0]);
  assert_ptr_equal(stage.seen_data[1], stage.staging[1]);
  assert_int_equal(stage.seen_mem[0], PTS_MEM_PINNED);
  for (int r = 0; r < 3; r++) {
    const int32_t *oa = box.resp[r]->outputs[1].data, *ob = box.resp[r]->outputs[0].data;
    for (int64_t k = 0; k < sizes[r] * 4; k++) {
      assert_int_equal(oa[k], k + 1000 * r + 1);
      assert_int_equal(ob[k], 100 + k + 1000 * r + 1);
    }
    pts_infer_request_free(box.req[r]);
    pts_infer_response_free(box.resp[r]);
  }
  pthread_mutex_destroy(&box.lock);
  stop(&f);
}

/* One request: host bytes are staged (the copy the device needs anyway);
 * bytes already in pinned memory (a registered shared-memory region) are
 * handed over as they are. */
static void single_request_stages_only_host_memory(void **state) {
  (void)state;
  struct sched_fixture f;
  start(&f, &stage_backend, reshape_cfg, 1);
  const char *names[] = {"A", "B"};
  struct done_box box;
  box_init(&box);
  struct pts_infer_request *req = int_request(&box, 1, 2, names);
  req->inputs[1].mem = PTS_MEM_PINNED; /* B */
  const void *b_data = req->inputs[1].data;
  stage.staged_calls = 0;
  struct pts_error err;
  assert_int_equal(pts_scheduler_enqueue(f.s, req, 1, NULL, &err), PTS_OK);
  box_wait(&box, 1);
  assert_int_equal(box.err.code, PTS_OK);
  assert_int_equal(stage.staged_calls, 1);           /* A only */
  assert_ptr_equal(stage.seen_data[0], b_data);      /* B: the request's own bytes */
  assert_int_equal(stage.seen_mem[0], PTS_MEM_PINNED);
  assert_ptr_equal(stage.seen_data[1], stage.staging[1]);
  const int32_t *ob = box.resp->outputs[0].data;
  for (int k = 0; k < 4; k++) assert_int_equal(ob[k], 100 + k + 1);
  box_clear(&box);
  stop(&f);
}

/* Outputs placed in shared memory: a backend that honours output_dest
 * writes there itself; one that does not (identity) has its output copied
 * there by the scheduler. Either way the response names the output but
 * carries no bytes, and a place too small is the request's error. */
static void shm_outputs_are_written_to_their_place(void **state) {
  (void)state;
  const struct pts_backend *backends[] = {&stage_backend, &pts_identity_backend};
  for (int b = 0; b < 2; b++) {
    struct sched_fixture f;
    start(&f, backends[b], reshape_cfg, 1);
    const char *names[] = {"A", "B"};
    struct done_box box;
    box_init(&box);
    struct pts_infer_request *req = int_request(&box, 1, 2, names);
    req->outputs = pts_calloc(2, sizeof *req->outputs);
    req->n_outputs = 2;
    req->outputs[0].name = pts_strdup("OA");
    req->outputs[0].shm.region = pts_strdup("r");
    req->outputs[0].shm_target = pts_buf_new(32);
    memset(req->outputs[0].shm_target->data, 0, 32);
    req->outputs[1].name = pts_strdup("OB");
    struct pts_buf *place = pts_buf_retain(req->outputs[0].shm_target);
    struct pts_error err;
    assert_int_equal(pts_scheduler_enqueue(f.s, req, 1, NULL, &err), PTS_OK);
    box_wait(&box, 1);
    assert_int_equal(box.err.code, PTS_OK);
    int add = b == 0 ? 1 : 0; /* stage adds 1, identity echoes */
    const int32_t *v = place->data;
    for (int k = 0; k < 4; k++) assert_int_equal(v[k], k + add); /* A (values 0..3) */
    for (int k = 4; k < 8; k++) assert_int_equal(v[k], 0);             /* the rest untouched */
    if (b == 0) assert_true(stage.got_dest);
    assert_string_equal(box.resp->outputs[0].name, "OA");
    assert_int_equal(box.resp->outputs[0].shape.dims[1], 4);
    assert_null(box.resp->outputs[0].data);
    assert_int_equal(box.resp->outputs[0].byte_size, 0);
    assert_int_equal(box.resp->outputs[1].byte_size, 16); /* OB normally */
    pts_buf_release(place);

    /* too small a place */
    req = int_request(&box, 1, 2, names);
    req->outputs = pts_calloc(1, sizeof *req->outputs);
    req->n_outputs = 1;
    req->outputs[0].name = pts_strdup("OB");
    req->outputs[0].shm.region = pts_strdup("r");
    req->outputs[0].shm_target = pts_buf_new(8);
    assert_int_equal(pts_scheduler_enqueue(f.s, req, 1, NULL, &err), PTS_OK);
    box_wait(&box, 2);
    assert_int_equal(box.err.code, PTS_INVALID_ARG);
    assert_non_null(strstr(box.err.msg, "output 'OB' (8 bytes) should be at least 16 bytes"));
    box_clear(&box);
    stop(&f);
  }
}

/* ------------------------------------------------------ device gather */

/* stage_backend plus gather_device, as the pytorch backend's CUDA instances
 * do: "device memory" is host memory flagged PTS_MEM_DEVICE (nothing here
 * reads it but the fake, which gathers with memcpy into its own buffer and
 * records what it was given). `decline` plays an instance not on a GPU. */
static struct {
  pthread_mutex_t lock;
  bool decline;
  _Alignas(16) unsigned char buffer[2][4096]; /* read as int32_t by stage_execute */
  size_t calls, n[2], total[2];
  unsigned set[2];
  struct pts_device_part parts[2][4];
  size_t executes;
  int64_t batch_sizes[8];
  int seen_device[2];
} devg = {.lock = PTHREAD_MUTEX_INITIALIZER};

static enum pts_status devg_gather(void *is, unsigned set, size_t input,
                                   const struct pts_device_part *parts, size_t n, size_t total,
                                   void **data, int *device, struct pts_error *err) {
  (void)is;
  *data = NULL;
  if (input > 1 || n > 4 || total > sizeof devg.buffer[0])
    return pts_error_set(err, PTS_INTERNAL, "devg: input %zu, %zu parts, %zu bytes", input, n,
                         total);
  pthread_mutex_lock(&devg.lock);
  devg.calls++;
  devg.set[input] = set;
  devg.n[input] = n;
  devg.total[input] = total;
  memcpy(devg.parts[input], parts, n * sizeof *parts);
  bool decline = devg.decline;
  pthread_mutex_unlock(&devg.lock);
  if (decline) return PTS_OK;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    memcpy(devg.buffer[input] + at, parts[i].data, parts[i].byte_size);
    at += parts[i].byte_size;
  }
  *data = devg.buffer[input];
  *device = parts[0].device;
  return PTS_OK;
}

static enum pts_status devg_execute(void *is, struct pts_batch *b, struct pts_error *err) {
  pthread_mutex_lock(&devg.lock);
  if (devg.executes < 8) devg.batch_sizes[devg.executes] = b->batch_size;
  devg.executes++;
  for (size_t i = 0; i < b->n_inputs && i < 2; i++) devg.seen_device[i] = b->inputs[i].device;
  pthread_mutex_unlock(&devg.lock);
  return stage_execute(is, b, err);
}

static const struct pts_backend devg_backend = {
    .name = "devg",
    .model_load = probe_load,
    .model_unload = probe_unload,
    .instance_create = probe_instance,
    .instance_destroy = probe_instance_destroy,
    .execute = devg_execute,
    .input_staging = stage_input,
    .gather_device = devg_gather,
    .device_inputs = true,
};

static void devg_reset(bool decline) {
  pthread_mutex_lock(&devg.lock);
  devg.decline = decline;
  devg.calls = devg.executes = 0;
  memset(devg.batch_sizes, 0, sizeof devg.batch_sizes);
  pthread_mutex_unlock(&devg.lock);
  stage.staged_calls = 0;
}

/* Enqueues len(sizes) requests "0", "1", ... with inputs A and B whose
 * values are shifted by 1000 per request; in device memory of `device`
 * where device_mask has the request's bit. Waits until all are answered. */
static void run_requests(struct sched_fixture *f, struct id_box *box, const int64_t *sizes,
                         int n, unsigned device_mask, int device, const void *data[][2]) {
  memset(box, 0, sizeof *box);
  pthread_mutex_init(&box->lock, NULL);
  struct pts_error err;
  for (int r = 0; r < n; r++) {
    struct pts_infer_request *req = numbered_request(r, sizes[r], on_done_by_id, box);
    for (size_t i = 0; i < 2; i++) {
      if (device_mask & (1u << r)) {
        req->inputs[i].mem = PTS_MEM_DEVICE;
        req->inputs[i].device = device;
      }
      if (data) data[r][i] = req->inputs[i].data;
    }
    assert_int_equal(pts_scheduler_enqueue(f->s, req, sizes[r], NULL, &err), PTS_OK);
  }
  assert_int_equal(pts_scheduler_wait_idle(f->s, 0), 0);
  assert_int_equal(box->calls, n);
}

/* Every request got its own rows back, plus the 1 the backend adds. */
static void check_answers(struct id_box *box, const int64_t *sizes, int n) {
  for (int r = 0; r < n; r++) {
    const int32_t *oa = box->resp[r]->outputs[1].data, *ob = box->resp[r]->outputs[0].data;
    for (int64_t k = 0; k < sizes[r] * 4; k++) {
      assert_int_equal(oa[k], k + 1000 * r + 1);
      assert_int_equal(ob[k], 100 + k + 1000 * r + 1);
    }
    pts_infer_request_free(box->req[r]);
    pts_infer_response_free(box->resp[r]);
  }
  pthread_mutex_destroy(&box->lock);
}

/* Three requests in device memory form one batch: each input is gathered
 * by the backend on the device (its parts in order, at their offsets, set
 * 0), no host staging and no host copy, and each request gets its rows. */
static void device_requests_batch_on_the_device(void **state) {
  (void)state;
  setenv("PTSERVE_DELAY_SCHEDULER", "3", 1);
  struct sched_fixture f;
  start(&f, &devg_backend, batching_cfg, 1);
  unsetenv("PTSERVE_DELAY_SCHEDULER");
  devg_reset(false);
  uint64_t copied = pts_copy_bytes_total();
  const int64_t sizes[] = {1, 2, 1};
  const void *data[3][2];
  struct id_box box;
  run_requests(&f, &box, sizes, 3, 7u, 1, data);
  assert_int_equal(devg.executes, 1);
  assert_int_equal(devg.batch_sizes[0], 4);
  assert_int_equal(devg.calls, 2);
  assert_int_equal(stage.staged_calls, 0);
  /* config order: B is input 0 (the request's input 1), A input 1 */
  for (size_t k = 0; k < 2; k++) {
    assert_int_equal(devg.set[k], 0);
    assert_int_equal(devg.n[k], 3);
    assert_int_equal(devg.total[k], 64);
    for (int r = 0; r < 3; r++) {
      assert_ptr_equal(devg.parts[k][r].data, data[r][1 - k]);
      assert_int_equal(devg.parts[k][r].byte_size, (size_t)sizes[r] * 16);
      assert_int_equal(devg.parts[k][r].device, 1);
    }
    assert_ptr_equal(stage.seen_data[k], devg.buffer[k]);
    assert_int_equal(stage.seen_mem[k], PTS_MEM_DEVICE);
    assert_int_equal(devg.seen_device[k], 1);
  }
  assert_int_equal(pts_copy_bytes_total(), copied);
  check_answers(&box, sizes, 3);
  stop(&f);
}

/* Host and device requests never share a batch, nor do device requests of
 * different devices; a single device request is handed over as it is. */
static void device_and_host_requests_do_not_batch(void **state) {
  (void)state;
  setenv("PTSERVE_DELAY_SCHEDULER", "2", 1);
  struct sched_fixture f;
  start(&f, &devg_backend, batching_cfg, 1);
  unsetenv("PTSERVE_DELAY_SCHEDULER");
  devg_reset(false);
  const int64_t sizes[] = {1, 2};
  const void *data[2][2];
  struct id_box box;
  run_requests(&f, &box, sizes, 2, 2u, 0, data); /* request 1 in device memory */
  assert_int_equal(devg.executes, 2);
  assert_int_equal(devg.calls, 0);
  /* the device request ran last, alone: its own bytes, no copy */
  assert_int_equal(devg.batch_sizes[1], 2);
  assert_ptr_equal(stage.seen_data[0], data[1][1]);
  assert_int_equal(stage.seen_mem[0], PTS_MEM_DEVICE);
  check_answers(&box, sizes, 2);
  stop(&f);
}

/* A backend without gather_device keeps device requests apart, each a
 * batch of one handed over as it is. */
static void device_requests_without_the_op_run_alone(void **state) {
  (void)state;
  setenv("PTSERVE_DELAY_SCHEDULER", "2", 1);
  struct sched_fixture f;
  start(&f, &stage_backend, batching_cfg, 1);
  unsetenv("PTSERVE_DELAY_SCHEDULER");
  devg_reset(false);
  const int64_t sizes[] = {1, 2};
  const void *data[2][2];
  struct id_box box;
  run_requests(&f, &box, sizes, 2, 3u, 0, data);
  assert_int_equal(stage.staged_calls, 0);
  assert_ptr_equal(stage.seen_data[0], data[1][1]); /* the last request's own bytes */
  assert_int_equal(stage.seen_mem[0], PTS_MEM_DEVICE);
  check_answers(&box, sizes, 2);
  stop(&f);
}

/* ---- a CUDA shared-memory registry over host memory, for the fallback */

static enum pts_status fake_open(const void *handle, int device, uint64_t byte_size,
                                 void **dev_ptr, struct pts_error *err) {
  (void)handle;
  (void)device;
  *dev_ptr = pts_calloc(1, byte_size);
  return *dev_ptr ? PTS_OK : pts_error_set(err, PTS_NOMEM, "fake: out of memory");
}
static void fake_close(void *dev_ptr, int device) {
  (void)device;
  pts_free(dev_ptr);
}
static enum pts_status fake_copy(void *dst, const void *src, size_t n, int device,
                                 struct pts_error *err) {
  (void)device;
  (void)err;
  memcpy(dst, src, n);
  return PTS_OK;
}
static const struct pts_shm_cuda_ops fake_cuda = {
    .open = fake_open, .close = fake_close, .to_device = fake_copy, .to_host = fake_copy};

/* An instance that declines (not on a GPU) still runs the batch: the
 * scheduler reads each request's device bytes into one host buffer. */
static void declined_device_gather_reads_to_host(void **state) {
  (void)state;
  struct pts_shm_registry *reg = pts_shm_registry_new(true, &fake_cuda);
  assert_non_null(reg);
  struct pts_error err;
  unsigned char handle[PTS_SHM_CUDA_HANDLE_SIZE] = {0};
  assert_int_equal(pts_shm_register_cuda(reg, "r", handle, sizeof handle, 0, 256, &err), PTS_OK);
  setenv("PTSERVE_DELAY_SCHEDULER", "2", 1);
  struct sched_fixture f;
  start(&f, &devg_backend, batching_cfg, 1);
  unsetenv("PTSERVE_DELAY_SCHEDULER");
  devg_reset(true);
  struct id_box box;
  memset(&box, 0, sizeof box);
  pthread_mutex_init(&box.lock, NULL);
  const int64_t sizes[] = {1, 2};
  uint64_t offset = 0;
  for (int r = 0; r < 2; r++) {
    struct pts_infer_request *req = numbered_request(r, sizes[r], on_done_by_id, &box);
    for (size_t i = 0; i < 2; i++) {
      struct pts_tensor *t = &req->inputs[i];
      struct pts_buf *view;
      enum pts_mem mem;
      int device;
      assert_int_equal(pts_shm_acquire(reg, "r", offset, t->byte_size, "input", &view, &mem,
                                       &device, &err),
                       PTS_OK);
      memcpy(view->data, t->data, t->byte_size);
      offset += t->byte_size;
      pts_buf_release(t->buf);
      t->buf = view;
      t->data = view->data;
      t->mem = mem;
      t->device = device;
    }
    assert_int_equal(pts_scheduler_enqueue(f.s, req, sizes[r], NULL, &err), PTS_OK);
  }
  assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
  assert_int_equal(box.calls, 2);
  assert_int_equal(devg.executes, 1);
  assert_int_equal(devg.calls, 2);
  assert_int_equal(stage.seen_mem[0], PTS_MEM_HOST);
  check_answers(&box, sizes, 2);
  stop(&f);
  pts_shm_registry_free(reg);
}

/* ---- a batch's answers written into CUDA regions: one batch, one wait */

static struct {
  pthread_mutex_t lock;
  int batches, batched_copies, syncs, syncs_seen_by_done[4], errors;
  bool fail_sync;
  char first_error[sizeof((struct pts_error *)0)->msg];
} cw = {.lock = PTHREAD_MUTEX_INITIALIZER};

static enum pts_status cw_copy_batch(void *const *dsts, const void *const *srcs,
                                     const size_t *sizes, size_t count, int device,
                                     struct pts_error *err) {
  (void)device;
  (void)err;
  for (size_t i = 0; i < count; i++) memcpy(dsts[i], srcs[i], sizes[i]);
  pthread_mutex_lock(&cw.lock);
  cw.batches++;
  cw.batched_copies += (int)count;
  pthread_mutex_unlock(&cw.lock);
  return PTS_OK;
}
static enum pts_status cw_sync(int device, struct pts_error *err) {
  (void)device;
  pthread_mutex_lock(&cw.lock);
  cw.syncs++;
  bool fail = cw.fail_sync;
  pthread_mutex_unlock(&cw.lock);
  return fail ? pts_error_set(err, PTS_INTERNAL, "fake: the copies failed") : PTS_OK;
}
static const struct pts_shm_cuda_ops cw_cuda = {.open = fake_open,
                                                .close = fake_close,
                                                .to_device = fake_copy,
                                                .to_host = fake_copy,
                                                .to_device_batch = cw_copy_batch,
                                                .sync = cw_sync};

/* Each answer notes how many waits had happened when it was delivered. */
static void cw_done(struct pts_infer_request *req, struct pts_infer_response *resp,
                    const struct pts_error *err, void *ctx) {
  int i = req->id[0] - '0';
  pthread_mutex_lock(&cw.lock);
  cw.syncs_seen_by_done[i] = cw.syncs;
  if (err && err->code != PTS_OK && cw.errors++ == 0)
    snprintf(cw.first_error, sizeof cw.first_error, "%s", err->msg);
  pthread_mutex_unlock(&cw.lock);
  box_put(ctx, req, resp);
}

/* Three requests (batch 1, 2, 1) that want OB in a CUDA region run as one
 * batch: the three copies go to the device in one batch, the device is
 * waited for once, and no answer leaves before that wait. When the wait fails, every request of
 * the batch fails, saying so. */
static void batch_answers_to_cuda_regions_wait_once(void **state) {
  (void)state;
  for (int failing = 0; failing < 2; failing++) {
    pthread_mutex_lock(&cw.lock);
    cw.batches = cw.batched_copies = cw.syncs = cw.errors = 0;
    cw.fail_sync = failing;
    cw.first_error[0] = '\0';
    pthread_mutex_unlock(&cw.lock);
    struct pts_shm_registry *reg = pts_shm_registry_new(true, &cw_cuda);
    assert_non_null(reg);
    struct pts_error err;
    unsigned char handle[PTS_SHM_CUDA_HANDLE_SIZE] = {0};
    assert_int_equal(pts_shm_register_cuda(reg, "c", handle, sizeof handle, 0, 256, &err),
                     PTS_OK);
    setenv("PTSERVE_DELAY_SCHEDULER", "3", 1);
    struct sched_fixture f;
    start(&f, &probe_backend, batching_cfg, 1);
    unsetenv("PTSERVE_DELAY_SCHEDULER");
    probe.mode = PROBE_ECHO;
    struct id_box box;
    memset(&box, 0, sizeof box);
    pthread_mutex_init(&box.lock, NULL);
    const int64_t sizes[] = {1, 2, 1};
    struct pts_buf *places[3];
    for (int r = 0; r < 3; r++) {
      struct pts_infer_request *req = numbered_request(r, sizes[r], cw_done, &box);
      req->outputs = pts_calloc(1, sizeof *req->outputs);
      req->n_outputs = 1;
      req->outputs[0].name = pts_strdup("OB");
      req->outputs[0].shm.region = pts_strdup("c");
      enum pts_mem mem;
      int device;
      assert_int_equal(pts_shm_acquire(reg, "c", 64 * (uint64_t)r, 64, "output 'OB'",
                                       &req->outputs[0].shm_target, &mem, &device, &err),
                       PTS_OK);
      req->outputs[0].shm_mem = mem;
      req->outputs[0].shm_device = device;
      places[r] = pts_buf_retain(req->outputs[0].shm_target);
      assert_int_equal(pts_scheduler_enqueue(f.s, req, sizes[r], NULL, &err), PTS_OK);
    }
    assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
    assert_int_equal(box.calls, 3);
    assert_int_equal(probe.batch_size, 4); /* one batch */
    assert_int_equal(cw.batches, 1);
    assert_int_equal(cw.batched_copies, 3);
    assert_int_equal(cw.syncs, 1);
    for (int r = 0; r < 3; r++) {
      assert_int_equal(cw.syncs_seen_by_done[r], 1); /* answered after the wait */
      if (failing) {
        assert_null(box.resp[r]);
        continue;
      }
      const int32_t *v = places[r]->data; /* B's values echoed: k + 100 + 1000 r */
      for (int64_t k = 0; k < sizes[r] * 4; k++) assert_int_equal(v[k], k + 100 + 1000 * r);
      assert_non_null(box.resp[r]);
      assert_null(box.resp[r]->outputs[0].data); /* the region has it, not the response */
    }
    if (failing) {
      assert_int_equal(cw.errors, 3);
      assert_non_null(strstr(cw.first_error, "writing the outputs of model"));
      assert_non_null(strstr(cw.first_error, "to CUDA shared memory"));
      assert_non_null(strstr(cw.first_error, "fake: the copies failed"));
    }
    for (int r = 0; r < 3; r++) {
      pts_infer_response_free(box.resp[r]);
      pts_infer_request_free(box.req[r]);
      pts_buf_release(places[r]);
    }
    pthread_mutex_destroy(&box.lock);
    stop(&f);
    pts_shm_registry_free(reg);
  }
}

int main(void) {
  struct pts_log_settings quiet = {false, false, false, 0, PTS_LOG_FORMAT_DEFAULT};
  pts_log_set(&quiet);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(map_shape_cases),
      cmocka_unit_test(inputs_in_config_order_reshaped),
      cmocka_unit_test(requested_outputs_in_request_order),
      cmocka_unit_test(backend_errors_fail_only_their_request),
      cmocka_unit_test(many_requests_many_instances),
      cmocka_unit_test(destroy_answers_queued_requests),
      cmocka_unit_test(idle_instance_runs_on_the_enqueuing_thread),
      cmocka_unit_test(inline_limit_from_the_environment),
      cmocka_unit_test(gpu_instances_are_lent_only_when_the_backend_allows),
      cmocka_unit_test(ordering_and_queue_delay_stay_on_instance_threads),
      cmocka_unit_test(queued_while_lent_runs_on_the_lender),
      cmocka_unit_test(dynamic_batch_gathers_and_splits),
      cmocka_unit_test(batch_gathers_into_backend_staging),
      cmocka_unit_test(single_request_stages_only_host_memory),
      cmocka_unit_test(shm_outputs_are_written_to_their_place),
      cmocka_unit_test(batch_answers_to_cuda_regions_wait_once),
      cmocka_unit_test(device_requests_batch_on_the_device),
      cmocka_unit_test(device_and_host_requests_do_not_batch),
      cmocka_unit_test(device_requests_without_the_op_run_alone),
      cmocka_unit_test(declined_device_gather_reads_to_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
