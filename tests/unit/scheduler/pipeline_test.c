/* tests/unit/scheduler/pipeline_test.c — pipelined instances (backend.h
 * execute_begin/execute_end; docs/internals/scheduler.md, "Pipelined
 * instances") with a fake backend that behaves like a CUDA stream: begin
 * only notes the batch, end computes its outputs (input + 1) from the
 * inputs, which lie in the staging set the batch was gathered into. So a
 * scheduler that gathered the next batch into the set still in flight
 * would hand out wrong answers, and one that waited for a batch to form
 * while another is in flight would never answer a lone request. The fake
 * also logs every call and flags calls that break the contract (more than
 * two batches begun, a set begun twice, execute with a batch in flight,
 * ends out of order). */
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
#include <unistd.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "core/log.h"
#include "scheduler/scheduler.h"
#include "trace/profile.h"
#include "trace/trace.h"

/* --------------------------------------------------------- fake backend */

enum call { CALL_BEGIN, CALL_END, CALL_EXECUTE };

#define MAX_CALLS 512
#define STAGE_BYTES 4096

/* One instance's state: its two staging sets and what is in flight. */
struct fake_instance {
  const Inference__ModelConfig *cfg; /* borrowed: the model's state */
  unsigned char staging[2][2][STAGE_BYTES]; /* [set][input] */
  bool begun[2];                            /* per set */
  long begun_id[2];                         /* the batch begun on each set */
  int in_flight;
};

/* Everything the tests read, under one lock. */
static struct {
  pthread_mutex_t lock;
  bool pipelined; /* what pipelined() answers */
  bool lendable;  /* what lendable() answers */
  long next_id;
  size_t n_calls;
  enum call calls[MAX_CALLS];
  long ids[MAX_CALLS];     /* batch id of each call */
  unsigned sets[MAX_CALLS];
  int max_in_flight;
  int violations; /* contract broken; see fake_violation */
  char violation[160];
  bool profiled_alone; /* every profiled batch came through execute, nothing in flight */
  size_t profiled;
  useconds_t end_delay_us; /* the "device" time end waits */
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void fake_reset(bool pipelined, useconds_t end_delay_us) {
  pthread_mutex_lock(&fake.lock);
  fake.pipelined = pipelined;
  fake.lendable = false;
  fake.next_id = 0;
  fake.n_calls = 0;
  fake.max_in_flight = 0;
  fake.violations = 0;
  fake.violation[0] = '\0';
  fake.profiled_alone = true;
  fake.profiled = 0;
  fake.end_delay_us = end_delay_us;
  pthread_mutex_unlock(&fake.lock);
}

/* Lock held. */
static void fake_violation(const char *what) {
  if (fake.violations++ == 0) snprintf(fake.violation, sizeof fake.violation, "%s", what);
}

/* Lock held. */
static void fake_log(enum call c, long id, unsigned set) {
  if (fake.n_calls >= MAX_CALLS) return;
  fake.calls[fake.n_calls] = c;
  fake.ids[fake.n_calls] = id;
  fake.sets[fake.n_calls] = set;
  fake.n_calls++;
}

static enum pts_status fake_load(const struct pts_backend_model_desc *d, void **st,
                                 struct pts_error *err) {
  (void)err;
  *st = (void *)d->config;
  return PTS_OK;
}
static void fake_unload(void *st) { (void)st; }
static enum pts_status fake_instance_create(void *ms, const struct pts_backend_instance_desc *d,
                                            void **is, struct pts_error *err) {
  (void)d;
  struct fake_instance *in = pts_calloc(1, sizeof *in);
  if (!in) return pts_error_set(err, PTS_NOMEM, "fake: out of memory");
  in->cfg = ms;
  *is = in;
  return PTS_OK;
}
static void fake_instance_destroy(void *is) {
  struct fake_instance *in = is;
  pthread_mutex_lock(&fake.lock);
  if (in->in_flight) fake_violation("instance destroyed with a batch begun");
  pthread_mutex_unlock(&fake.lock);
  pts_free(in);
}
static bool fake_pipelined(void *is) {
  (void)is;
  pthread_mutex_lock(&fake.lock);
  bool on = fake.pipelined;
  pthread_mutex_unlock(&fake.lock);
  return on;
}

static bool fake_lendable(void *is) {
  (void)is;
  pthread_mutex_lock(&fake.lock);
  bool yes = fake.lendable;
  pthread_mutex_unlock(&fake.lock);
  return yes;
}

static enum pts_status fake_staging(void *is, unsigned set, size_t input, size_t byte_size,
                                    void **data, enum pts_mem *mem, struct pts_error *err) {
  struct fake_instance *in = is;
  if (set > 1 || input > 1 || byte_size > STAGE_BYTES)
    return pts_error_set(err, PTS_INTERNAL, "fake: staging set %u input %zu %zu bytes", set,
                         input, byte_size);
  pthread_mutex_lock(&fake.lock);
  if (in->begun[set]) fake_violation("staging asked for a set still in flight");
  pthread_mutex_unlock(&fake.lock);
  *data = in->staging[set][input];
  *mem = PTS_MEM_PINNED;
  return PTS_OK;
}

/* What the "device" computes: each output is its input + 1, read from the
 * batch's inputs now (at end, for a begun batch). */
static enum pts_status fake_compute(const Inference__ModelConfig *cfg, struct pts_batch *b,
                                    struct pts_error *err) {
  for (size_t i = 0; i < b->n_outputs; i++) {
    const struct pts_tensor *in = &b->inputs[i];
    struct pts_tensor *o = &b->outputs[i];
    o->name = pts_strdup(cfg->output[i]->name);
    o->dtype = in->dtype;
    o->shape = in->shape;
    o->byte_size = in->byte_size;
    o->buf = pts_buf_new(in->byte_size ? in->byte_size : 1);
    if (!o->name || !o->buf) return pts_error_set(err, PTS_NOMEM, "fake: out of memory");
    const int32_t *v = in->data;
    int32_t *out = o->buf->data;
    for (size_t k = 0; k < in->byte_size / 4; k++) out[k] = v[k] + 1;
    o->data = out;
  }
  /* As a CUDA instance reports its event timings. */
  b->device_timed = true;
  b->device_input_ns = 1000;
  b->device_infer_ns = 2000;
  b->device_output_ns = 1000;
  return PTS_OK;
}

static enum pts_status fake_begin(void *is, struct pts_batch *b, struct pts_error *err) {
  struct fake_instance *in = is;
  (void)err;
  pthread_mutex_lock(&fake.lock);
  unsigned set = b->set;
  if (set > 1 || in->begun[set]) fake_violation("begin on a set already in flight");
  if (b->profile) fake_violation("begin given a profiled batch");
  long id = fake.next_id++;
  in->begun[set & 1] = true;
  in->begun_id[set & 1] = id;
  if (++in->in_flight > fake.max_in_flight) fake.max_in_flight = in->in_flight;
  if (in->in_flight > 2) fake_violation("more than two batches begun");
  fake_log(CALL_BEGIN, id, set);
  pthread_mutex_unlock(&fake.lock);
  return PTS_OK;
}

static enum pts_status fake_end(void *is, struct pts_batch *b, struct pts_error *err) {
  struct fake_instance *in = is;
  pthread_mutex_lock(&fake.lock);
  unsigned set = b->set & 1;
  useconds_t delay = fake.end_delay_us;
  if (!in->begun[set]) fake_violation("end of a set not begun");
  /* Ends come in the order of their begins: the other set, if begun,
   * must have been begun later. */
  if (in->begun[!set] && in->begun_id[!set] < in->begun_id[set])
    fake_violation("ends out of order");
  long id = in->begun_id[set];
  pthread_mutex_unlock(&fake.lock);
  if (delay) usleep(delay); /* the device finishing the batch */
  enum pts_status st = fake_compute(in->cfg, b, err);
  pthread_mutex_lock(&fake.lock);
  in->begun[set] = false;
  in->in_flight--;
  fake_log(CALL_END, id, set);
  pthread_mutex_unlock(&fake.lock);
  return st;
}

static enum pts_status fake_execute(void *is, struct pts_batch *b, struct pts_error *err) {
  struct fake_instance *in = is;
  pthread_mutex_lock(&fake.lock);
  if (in->in_flight) fake_violation("execute with a batch in flight");
  if (b->profile) {
    fake.profiled++;
    if (in->in_flight) fake.profiled_alone = false;
  }
  fake_log(CALL_EXECUTE, fake.next_id++, b->set);
  pthread_mutex_unlock(&fake.lock);
  return fake_compute(in->cfg, b, err);
}

static const struct pts_backend fake_backend = {
    .name = "fake",
    .model_load = fake_load,
    .model_unload = fake_unload,
    .instance_create = fake_instance_create,
    .instance_destroy = fake_instance_destroy,
    .execute = fake_execute,
    .input_staging = fake_staging,
    .pipelined = fake_pipelined,
    .lendable = fake_lendable,
    .execute_begin = fake_begin,
    .execute_end = fake_end,
};

/* ------------------------------------------------------------- requests */

#define MAX_REQS 400

/* Every answer by request index (the request id), and the order they came. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int calls;
  int order[MAX_REQS];
  struct pts_infer_request *req[MAX_REQS];
  struct pts_infer_response *resp[MAX_REQS];
  enum pts_status code[MAX_REQS];
} ans = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void on_done(struct pts_infer_request *req, struct pts_infer_response *resp,
                    const struct pts_error *err, void *ctx) {
  (void)ctx;
  int i = atoi(req->id);
  pthread_mutex_lock(&ans.lock);
  ans.order[ans.calls++] = i;
  ans.req[i] = req;
  ans.resp[i] = resp;
  ans.code[i] = err ? err->code : PTS_OK;
  pthread_cond_broadcast(&ans.cond);
  pthread_mutex_unlock(&ans.lock);
}

static void ans_reset(void) {
  pthread_mutex_lock(&ans.lock);
  for (int i = 0; i < MAX_REQS; i++) {
    pts_infer_request_free(ans.req[i]);
    pts_infer_response_free(ans.resp[i]);
    ans.req[i] = NULL;
    ans.resp[i] = NULL;
    ans.code[i] = PTS_OK;
  }
  ans.calls = 0;
  pthread_mutex_unlock(&ans.lock);
}

/* Waits up to `ms` for `calls` answers; whether they came. */
static bool ans_wait(int calls, uint64_t ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)(ms / 1000);
  until.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&ans.lock);
  int rc = 0;
  while (ans.calls < calls && rc == 0) rc = pthread_cond_timedwait(&ans.cond, &ans.lock, &until);
  bool ok = ans.calls >= calls;
  pthread_mutex_unlock(&ans.lock);
  return ok;
}

/* Request r: A = [r*1000 + k], B = [r*1000 + 100 + k], k = 0..3, in host
 * memory (so even a batch of one is gathered into staging). */
static struct pts_infer_request *request(int r) {
  static const char *const names[] = {"A", "B"};
  struct pts_infer_request *req = pts_infer_request_new();
  char id[16];
  snprintf(id, sizeof id, "%d", r);
  req->model_name = pts_strdup("m");
  req->id = pts_strdup(id);
  req->inputs = pts_calloc(2, sizeof *req->inputs);
  req->n_inputs = 2;
  for (size_t i = 0; i < 2; i++) {
    struct pts_tensor *t = &req->inputs[i];
    t->name = pts_strdup(names[i]);
    t->dtype = PTS_DTYPE_INT32;
    t->shape.ndim = 2;
    t->shape.dims[0] = 1;
    t->shape.dims[1] = 4;
    t->byte_size = 16;
    t->buf = pts_buf_new(16);
    int32_t *v = t->buf->data;
    for (int k = 0; k < 4; k++) v[k] = r * 1000 + (int)i * 100 + k;
    t->data = t->buf->data;
  }
  req->done = on_done;
  return req;
}

static void enqueue(struct pts_scheduler *s, int r) {
  struct pts_error err;
  assert_int_equal(pts_scheduler_enqueue(s, request(r), 1, NULL, &err), PTS_OK);
}

/* Requests 0..n-1 were answered, each with its own input + 1. */
static void check_answers(int n) {
  pthread_mutex_lock(&ans.lock);
  assert_int_equal(ans.calls, n);
  for (int r = 0; r < n; r++) {
    assert_int_equal(ans.code[r], PTS_OK);
    struct pts_infer_response *resp = ans.resp[r];
    assert_non_null(resp);
    assert_int_equal(resp->n_outputs, 2);
    for (size_t i = 0; i < 2; i++) {
      const int32_t *v = resp->outputs[i].data;
      assert_int_equal(resp->outputs[i].byte_size, 16);
      for (int k = 0; k < 4; k++) assert_int_equal(v[k], r * 1000 + (int)i * 100 + k + 1);
    }
  }
  pthread_mutex_unlock(&ans.lock);
}

static void check_no_violation(void) {
  pthread_mutex_lock(&fake.lock);
  if (fake.violations) fprintf(stderr, "fake backend: %s\n", fake.violation);
  assert_int_equal(fake.violations, 0);
  pthread_mutex_unlock(&fake.lock);
}

static size_t count_calls(enum call c) {
  size_t n = 0;
  pthread_mutex_lock(&fake.lock);
  for (size_t i = 0; i < fake.n_calls; i++) n += fake.calls[i] == c;
  pthread_mutex_unlock(&fake.lock);
  return n;
}

/* ------------------------------------------------------------- fixture */

static const char batch2_cfg[] =
    "max_batch_size: 2\n"
    "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "        { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
    "output [ { name: \"OA\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "         { name: \"OB\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
    "dynamic_batching { }\n";

static const char ordered_cfg[] =
    "max_batch_size: 2\n"
    "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "        { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
    "output [ { name: \"OA\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "         { name: \"OB\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
    "dynamic_batching { preserve_ordering: true }\n";

static const char batch4_cfg[] =
    "max_batch_size: 4\n"
    "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "        { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
    "output [ { name: \"OA\" data_type: TYPE_INT32 dims: [ 4 ] },"
    "         { name: \"OB\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
    "dynamic_batching { }\n";

struct fixture {
  Inference__ModelConfig *cfg;
  void *model_state;
  struct pts_scheduler *s;
};

/* `hold` > 0: the delay hook queues that many requests before any batch
 * forms, so the batches are known in advance. KIND_GPU instances, as a
 * pipelined instance is in the server (no run to completion); `cpu` makes
 * them KIND_CPU, which lets the enqueuing thread borrow an idle one. */
static void start(struct fixture *f, const char *cfg_text, size_t n_instances, int hold,
                  bool cpu) {
  char n[16];
  snprintf(n, sizeof n, "%d", hold);
  if (hold) setenv("PTSERVE_DELAY_SCHEDULER", n, 1);
  /* Pipelining is opt-in (PTSERVE_PIPELINE=1); a test that wants it off
   * sets "0" before it starts. */
  bool pipeline_default = !getenv("PTSERVE_PIPELINE");
  if (pipeline_default) setenv("PTSERVE_PIPELINE", "1", 1);
  struct pts_error err;
  pts_error_clear(&err);
  assert_int_equal(pts_model_config_parse(cfg_text, strlen(cfg_text), "test", &f->cfg, &err),
                   PTS_OK);
  struct pts_backend_model_desc md = {.name = "m", .version = 1, .config = f->cfg};
  assert_int_equal(fake_backend.model_load(&md, &f->model_state, &err), PTS_OK);
  struct pts_backend_instance_desc inst[4];
  for (size_t i = 0; i < n_instances; i++)
    inst[i] = (struct pts_backend_instance_desc){
        .name = i ? "m_1" : "m_0",
        .kind = cpu ? INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU
                    : INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU,
        .device_id = cpu ? -1 : 0,
        .index = (int)i};
  struct pts_scheduler_params p = {.model_name = "m",
                                   .version = 1,
                                   .config = f->cfg,
                                   .backend = &fake_backend,
                                   .model_state = f->model_state,
                                   .n_instances = n_instances,
                                   .instances = inst};
  assert_int_equal(pts_scheduler_create(&p, &f->s, &err), PTS_OK);
  unsetenv("PTSERVE_DELAY_SCHEDULER");
  if (pipeline_default) unsetenv("PTSERVE_PIPELINE");
}

static void stop(struct fixture *f) {
  pts_scheduler_destroy(f->s);
  fake_backend.model_unload(f->model_state);
  pts_model_config_free(f->cfg);
}

/* --------------------------------------------------------------- tests */

/* Twelve requests queued before the instance starts: six batches of two.
 * Each next batch is gathered into the other set and begun before the one
 * ahead of it ends (B0 B1 E0 B2 E1 ... B5 E4 E5), the sets alternate,
 * every request gets its own answer, in order, and the statistics count
 * six executions with the device's times. */
static void deep_queue_begins_next_before_ending(void **state) {
  (void)state;
  fake_reset(true, 1000);
  ans_reset();
  struct fixture f;
  start(&f, batch2_cfg, 1, 12, false);
  for (int r = 0; r < 12; r++) enqueue(f.s, r);
  assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
  check_answers(12);
  check_no_violation();
  for (int i = 0; i < 12; i++) assert_int_equal(ans.order[i], i);
  static const enum call want[] = {CALL_BEGIN, CALL_BEGIN, CALL_END,   CALL_BEGIN,
                                   CALL_END,   CALL_BEGIN, CALL_END,   CALL_BEGIN,
                                   CALL_END,   CALL_BEGIN, CALL_END,   CALL_END};
  static const long want_id[] = {0, 1, 0, 2, 1, 3, 2, 4, 3, 5, 4, 5};
  pthread_mutex_lock(&fake.lock);
  assert_int_equal(fake.n_calls, 12);
  for (size_t i = 0; i < 12; i++) {
    assert_int_equal(fake.calls[i], want[i]);
    assert_int_equal(fake.ids[i], want_id[i]);
    assert_int_equal(fake.sets[i], (unsigned)(want_id[i] % 2));
  }
  assert_int_equal(fake.max_in_flight, 2);
  pthread_mutex_unlock(&fake.lock);
  struct pts_model_stats st;
  struct pts_error err;
  assert_int_equal(pts_scheduler_stats(f.s, &st, &err), PTS_OK);
  assert_int_equal(st.execution_count, 6);
  assert_int_equal(st.inference_count, 12);
  assert_int_equal(st.success.count, 12);
  assert_int_equal(st.queue.count, 12);
  assert_int_equal(st.compute_infer.count, 12);
  assert_int_equal(st.compute_infer.ns, 12 * 2000); /* the device's time, not the host's */
  assert_int_equal(st.n_batch_stats, 1);
  assert_int_equal(st.batch_stats[0].batch_size, 2);
  assert_int_equal(st.batch_stats[0].compute_infer.count, 6);
  pts_model_stats_clear(&st);
  stop(&f);
  ans_reset();
}

/* Six requests queued, batches of up to four: the first batch is full and
 * begins; the two left are not a full batch, so they are not taken while
 * it is in flight (that would shrink the batches of a saturated model:
 * take_next_batch) but formed once it ended: B0 E0 B1 E1. */
static void only_a_full_batch_is_taken_early(void **state) {
  (void)state;
  fake_reset(true, 1000);
  ans_reset();
  struct fixture f;
  start(&f, batch4_cfg, 1, 6, false);
  for (int r = 0; r < 6; r++) enqueue(f.s, r);
  assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
  check_answers(6);
  check_no_violation();
  static const enum call want[] = {CALL_BEGIN, CALL_END, CALL_BEGIN, CALL_END};
  static const long want_id[] = {0, 0, 1, 1};
  pthread_mutex_lock(&fake.lock);
  assert_int_equal(fake.n_calls, 4);
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(fake.calls[i], want[i]);
    assert_int_equal(fake.ids[i], want_id[i]);
  }
  assert_int_equal(fake.max_in_flight, 1);
  pthread_mutex_unlock(&fake.lock);
  struct pts_model_stats st;
  struct pts_error err;
  assert_int_equal(pts_scheduler_stats(f.s, &st, &err), PTS_OK);
  assert_int_equal(st.execution_count, 2);
  assert_int_equal(st.inference_count, 6);
  pts_model_stats_clear(&st);
  stop(&f);
  ans_reset();
}

/* One request at a time: each batch ends right after it began (nothing to
 * overlap with), and no answer waits for a batch that is not coming. */
static void concurrency_one_waits_for_nothing(void **state) {
  (void)state;
  fake_reset(true, 0);
  ans_reset();
  struct fixture f;
  start(&f, batch2_cfg, 1, 0, false);
  for (int r = 0; r < 20; r++) {
    uint64_t t0 = pts_now_ns();
    enqueue(f.s, r);
    assert_true(ans_wait(r + 1, 5000));
    /* Generous for a loaded machine; a pipeline that waited for a next
     * batch would not answer at all. */
    assert_true(pts_now_ns() - t0 < 1000000000u);
  }
  assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
  check_answers(20);
  check_no_violation();
  pthread_mutex_lock(&fake.lock);
  assert_int_equal(fake.n_calls, 40);
  for (size_t i = 0; i < 40; i += 2) {
    assert_int_equal(fake.calls[i], CALL_BEGIN);
    assert_int_equal(fake.calls[i + 1], CALL_END);
    assert_int_equal(fake.ids[i], fake.ids[i + 1]);
  }
  assert_int_equal(fake.max_in_flight, 1);
  pthread_mutex_unlock(&fake.lock);
  stop(&f);
  ans_reset();
}

/* A pipelined instance is never lent, even when its backend says it could
 * be (lendable): its thread may hold a batch begun while it waits for the
 * next. One request at a time, so the instance thread is idle whenever one
 * arrives: every batch still goes through begin and end on that thread,
 * none through execute on the enqueuing one. */
static void pipelined_instances_are_not_lent(void **state) {
  (void)state;
  fake_reset(true, 0);
  pthread_mutex_lock(&fake.lock);
  fake.lendable = true;
  pthread_mutex_unlock(&fake.lock);
  ans_reset();
  struct fixture f;
  start(&f, batch2_cfg, 1, 0, false);
  for (int r = 0; r < 20; r++) {
    enqueue(f.s, r);
    assert_true(ans_wait(r + 1, 5000));
    usleep(1000); /* the instance thread reaches its wait: idle */
  }
  assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
  check_answers(20);
  check_no_violation();
  assert_int_equal(count_calls(CALL_EXECUTE), 0);
  assert_int_equal(count_calls(CALL_BEGIN), 20);
  assert_int_equal(count_calls(CALL_END), 20);
  stop(&f);
  ans_reset();
}

/* Destroying the scheduler with batches queued and one in flight: every
 * request is still answered, every begun batch ended before the instance
 * goes. */
static void shutdown_ends_the_batch_in_flight(void **state) {
  (void)state;
  fake_reset(true, 2000);
  ans_reset();
  struct fixture f;
  start(&f, batch2_cfg, 1, 12, false);
  for (int r = 0; r < 12; r++) enqueue(f.s, r);
  /* Let the first batch begin, so that one is in flight at the stop. */
  for (uint64_t until = pts_now_ns() + 5000000000u;
       count_calls(CALL_BEGIN) == 0 && pts_now_ns() < until;)
    usleep(100);
  stop(&f);
  check_answers(12);
  check_no_violation();
  assert_int_equal(count_calls(CALL_BEGIN), count_calls(CALL_END));
  assert_true(count_calls(CALL_BEGIN) >= 1);
  ans_reset();
}

/* Armed from inside the first begin, so the next batch, gathered while the
 * first is in flight, carries a profile ticket: the first ends, then the
 * profiled one runs with execute, alone; the pipeline goes on after it. */
static char profile_dir[64];
static bool arm_at_first_begin;

static enum pts_status arming_begin(void *is, struct pts_batch *b, struct pts_error *err) {
  enum pts_status st = fake_begin(is, b, err);
  if (arm_at_first_begin) {
    arm_at_first_begin = false;
    assert_int_equal(pts_profile_arm("m", 1, err), PTS_OK);
  }
  return st;
}

static void profiled_batch_runs_alone(void **state) {
  (void)state;
  snprintf(profile_dir, sizeof profile_dir, "/tmp/pts_pipeline_test_XXXXXX");
  assert_non_null(mkdtemp(profile_dir));
  struct pts_trace_options o = {.profile_dir = profile_dir};
  struct pts_error err;
  assert_int_equal(pts_trace_init(&o, &err), PTS_OK);
  struct pts_backend arming = fake_backend;
  arming.execute_begin = arming_begin;
  arm_at_first_begin = true;
  fake_reset(true, 1000);
  ans_reset();
  /* start() with the arming backend */
  struct fixture f;
  setenv("PTSERVE_DELAY_SCHEDULER", "8", 1);
  assert_int_equal(pts_model_config_parse(batch2_cfg, strlen(batch2_cfg), "test", &f.cfg, &err),
                   PTS_OK);
  struct pts_backend_model_desc md = {.name = "m", .version = 1, .config = f.cfg};
  assert_int_equal(arming.model_load(&md, &f.model_state, &err), PTS_OK);
  struct pts_backend_instance_desc inst = {.name = "m_0",
                                           .kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU,
                                           .device_id = 0};
  struct pts_scheduler_params p = {.model_name = "m",
                                   .version = 1,
                                   .config = f.cfg,
                                   .backend = &arming,
                                   .model_state = f.model_state,
                                   .n_instances = 1,
                                   .instances = &inst};
  setenv("PTSERVE_PIPELINE", "1", 1);
  assert_int_equal(pts_scheduler_create(&p, &f.s, &err), PTS_OK);
  unsetenv("PTSERVE_DELAY_SCHEDULER");
  unsetenv("PTSERVE_PIPELINE");
  for (int r = 0; r < 8; r++) enqueue(f.s, r);
  assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
  check_answers(8);
  check_no_violation();
  /* B0 E0 X1 (profiled, alone) B2 B3 E2 E3 */
  static const enum call want[] = {CALL_BEGIN, CALL_END,   CALL_EXECUTE, CALL_BEGIN,
                                   CALL_BEGIN, CALL_END,   CALL_END};
  pthread_mutex_lock(&fake.lock);
  assert_int_equal(fake.n_calls, 7);
  for (size_t i = 0; i < 7; i++) assert_int_equal(fake.calls[i], want[i]);
  assert_int_equal(fake.sets[2], 1); /* gathered into the free set while B0 flew */
  assert_int_equal(fake.profiled, 1);
  assert_true(fake.profiled_alone);
  pthread_mutex_unlock(&fake.lock);
  for (int i = 0; i < 8; i++) assert_int_equal(ans.order[i], i);
  pts_scheduler_destroy(f.s);
  arming.model_unload(f.model_state);
  pts_model_config_free(f.cfg);
  ans_reset();
  pts_trace_shutdown();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", profile_dir);
  assert_int_equal(system(cmd), 0);
}

/* PTSERVE_PIPELINE=0, or a backend instance that says it does not
 * pipeline: every batch runs whole through execute, one at a time. */
static void switched_off_runs_one_at_a_time(void **state) {
  (void)state;
  for (int c = 0; c < 2; c++) {
    if (c == 0) setenv("PTSERVE_PIPELINE", "0", 1);
    fake_reset(c == 1 ? false : true, 500);
    ans_reset();
    struct fixture f;
    start(&f, batch2_cfg, 1, 12, false);
    unsetenv("PTSERVE_PIPELINE");
    for (int r = 0; r < 12; r++) enqueue(f.s, r);
    assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
    check_answers(12);
    check_no_violation();
    assert_int_equal(count_calls(CALL_BEGIN), 0);
    assert_int_equal(count_calls(CALL_EXECUTE), 6);
    assert_int_equal(fake.max_in_flight, 0);
    stop(&f);
    ans_reset();
  }
}

/* Many requests from this thread with no hold: CPU instances, so idle ones
 * are also borrowed by the enqueuing thread (run to completion). An
 * instance with a batch in flight is never borrowed (the fake flags an
 * execute while one is begun), and with two instances neither takes a
 * batch another idle one could start. With preserve_ordering (GPU
 * instances) the answers come in request order. */
static void busy_instances_are_never_lent(void **state) {
  (void)state;
  for (int c = 0; c < 2; c++) {
    fake_reset(true, 200);
    ans_reset();
    struct fixture f;
    int n = 300;
    start(&f, c == 0 ? batch2_cfg : ordered_cfg, 2, 0, c == 0);
    for (int r = 0; r < n; r++) {
      enqueue(f.s, r);
      if (r % 7 == 0) usleep(300); /* now and then an instance goes idle */
    }
    assert_int_equal(pts_scheduler_wait_idle(f.s, 0), 0);
    check_answers(n);
    check_no_violation();
    assert_int_equal(count_calls(CALL_BEGIN), count_calls(CALL_END));
    if (c == 1)
      for (int i = 0; i < n; i++) assert_int_equal(ans.order[i], i);
    stop(&f);
    ans_reset();
  }
}

int main(void) {
  struct pts_log_settings quiet = {false, false, false, 0, PTS_LOG_FORMAT_DEFAULT};
  pts_log_set(&quiet);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(deep_queue_begins_next_before_ending),
      cmocka_unit_test(only_a_full_batch_is_taken_early),
      cmocka_unit_test(concurrency_one_waits_for_nothing),
      cmocka_unit_test(pipelined_instances_are_not_lent),
      cmocka_unit_test(shutdown_ends_the_batch_in_flight),
      cmocka_unit_test(profiled_batch_runs_alone),
      cmocka_unit_test(switched_off_runs_one_at_a_time),
      cmocka_unit_test(busy_instances_are_never_lent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
