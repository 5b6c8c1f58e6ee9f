/* tests/unit/torture/request_torture_test.c — every allocation of the request
 * path made to fail in turn: server start-up (repository scan, config
 * loading, backend and scheduler creation), the KServe v2 JSON decoder with a
 * binary tail, validation, queueing, the identity backend, the response and
 * its encoding. Each run must end in a clean error — returned synchronously,
 * or through `done` — and the run without a failure must give the right
 * answer (identity: the outputs are the inputs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "core/log.h"
#include "frontend/http/v2_json.h"
#include "server/fs_helpers.h"
#include "server/server.h"
#include "torture/torture.h"

/* Model "tm": INT32 [-1] and BYTES [2] in, the same out, batching up to 4. */
static const char CONFIG[] =
    "backend: \"identity\"\nmax_batch_size: 4\n"
    "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ -1 ] },\n"
    "        { name: \"S\" data_type: TYPE_STRING dims: [ 2 ] } ]\n"
    "output [ { name: \"A_OUT\" data_type: TYPE_INT32 dims: [ -1 ] },\n"
    "         { name: \"S_OUT\" data_type: TYPE_STRING dims: [ 2 ] } ]\n";

/* JSON INT32 data plus a binary BYTES tail ("hi", "") and one UINT64-sized
 * literal elsewhere would be refused by validation; keep the request valid. */
static const char HEADER[] =
    "{\"id\":\"r1\",\"inputs\":["
    "{\"name\":\"A\",\"datatype\":\"INT32\",\"shape\":[1,3],\"data\":[[7,-8,9]]},"
    "{\"name\":\"S\",\"datatype\":\"BYTES\",\"shape\":[1,2],"
    "\"parameters\":{\"binary_data_size\":10}}],"
    "\"outputs\":[{\"name\":\"A_OUT\"},{\"name\":\"S_OUT\",\"parameters\":{\"binary_data\":true}}]"
    "}";
static const unsigned char TAIL[10] = {2, 0, 0, 0, 'h', 'i', 0, 0, 0, 0};

struct fixture {
  char root[64];
  struct pts_server *s;
};

static void write_repo(struct fixture *f) {
  assert_non_null(fs_tempdir(f->root, sizeof f->root));
  assert_int_equal(fs_mkdirs(f->root, "tm/1"), 0);
  assert_int_equal(fs_write(f->root, "tm/config.pbtxt", CONFIG), 0);
}

static enum pts_status create_server(struct fixture *f, struct pts_server **out,
                                     struct pts_error *err) {
  struct pts_server_options o;
  pts_server_options_default(&o);
  const char *repos[] = {f->root};
  o.model_repositories = repos;
  o.n_model_repositories = 1;
  return pts_server_create(&o, out, err);
}

/* ------------------------------------------------------------ start-up */

static enum pts_status startup_step(void *arg, struct pts_error *err) {
  struct fixture *f = arg;
  struct pts_server *s = NULL;
  enum pts_status st = create_server(f, &s, err);
  if (st != PTS_OK) {
    assert_null(s);
    return st;
  }
  bool ready = pts_server_is_ready(s);
  pts_server_destroy(s);
  return ready ? PTS_OK : pts_error_set(err, PTS_UNAVAILABLE, "server not ready");
}

static void test_startup_walk(void **state) {
  struct fixture *f = *state;
  struct torture_result r = torture_walk(startup_step, f, 100000);
  torture_report("server start-up", &r);
  assert_true(r.runs > 50);
  assert_int_equal(r.bad_messages, 0);
  assert_int_equal(r.final_status, PTS_OK);
}

/* ----------------------------------------------------------- inference */

struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  struct pts_infer_request *req;
  struct pts_infer_response *resp;
  struct pts_error err;
};

static void on_done(struct pts_infer_request *req, struct pts_infer_response *resp,
                    const struct pts_error *err, void *ctx) {
  struct waiter *w = ctx;
  pthread_mutex_lock(&w->mu);
  w->req = req;
  w->resp = resp;
  if (err && err->code != PTS_OK)
    w->err = *err;
  else
    pts_error_clear(&w->err);
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* Checks the encoded identity answer against the request, by hand: the
 * JSON output holds the INT32 values, the binary chunk is the BYTES tail. */
static void check_reply(const struct pts_v2_reply *r) {
  assert_non_null(strstr(r->json, "\"id\":\"r1\""));
  assert_non_null(strstr(r->json, "\"name\":\"A_OUT\",\"datatype\":\"INT32\",\"shape\":[1,3]"));
  assert_non_null(strstr(r->json, "\"data\":[7,-8,9]"));
  assert_non_null(strstr(r->json, "\"binary_data_size\":10"));
  assert_int_equal(r->n_chunks, 1);
  assert_int_equal(r->chunks[0].size, sizeof TAIL);
  assert_memory_equal(r->chunks[0].data, TAIL, sizeof TAIL);
}

/* Frontend work after the core answered: encode, check, free. */
static enum pts_status encode_answer(struct waiter *w, struct pts_error *err) {
  if (w->err.code != PTS_OK) {
    *err = w->err;
    return err->code;
  }
  struct pts_v2_reply r;
  enum pts_status st = pts_v2_encode_infer(w->req, w->resp, &r, err);
  if (st != PTS_OK) return st;
  check_reply(&r);
  pts_v2_reply_clear(&r);
  return PTS_OK;
}

static enum pts_status infer_step(void *arg, struct pts_error *err) {
  struct fixture *f = arg;
  size_t hlen = sizeof HEADER - 1;
  struct pts_buf *body = pts_buf_new(hlen + sizeof TAIL);
  struct pts_infer_request *req = pts_infer_request_new();
  char *name = pts_strdup("tm");
  if (!body || !req || !name) {
    pts_buf_release(body);
    pts_infer_request_free(req);
    pts_free(name);
    return pts_error_set(err, PTS_NOMEM, "out of memory building the request");
  }
  memcpy(body->data, HEADER, hlen);
  memcpy((char *)body->data + hlen, TAIL, sizeof TAIL);
  req->model_name = name;
  struct waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  req->done = on_done;
  req->done_ctx = &w;
  enum pts_status st = pts_v2_decode_infer(body, hlen, req, err);
  pts_buf_release(body); /* the binary input holds its own reference */
  if (st == PTS_OK) st = pts_server_infer_async(f->s, req, err);
  if (st != PTS_OK) {
    pts_infer_request_free(req); /* done is never called: still ours */
    return st;
  }
  pthread_mutex_lock(&w.mu);
  while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  st = encode_answer(&w, err);
  pts_infer_request_free(w.req);
  pts_infer_response_free(w.resp);
  return st;
}

static void test_infer_walk(void **state) {
  struct fixture *f = *state;
  struct pts_error err;
  assert_int_equal(create_server(f, &f->s, &err), PTS_OK);
  assert_int_equal(infer_step(f, &err), PTS_OK); /* the reference answer */
  struct torture_result r = torture_walk(infer_step, f, 100000);
  torture_report("decode + infer + encode", &r);
  assert_true(r.runs > 20);
  assert_int_equal(r.bad_messages, 0);
  assert_int_equal(r.final_status, PTS_OK);
  /* The server is still whole after all of it. */
  assert_int_equal(infer_step(f, &err), PTS_OK);
}

/* ------------------------------------------------- invalid request path */

/* A request the core refuses (unknown input): the refusal itself must
 * survive every allocation failure. */
static enum pts_status refused_step(void *arg, struct pts_error *err) {
  struct fixture *f = arg;
  static const char json[] =
      "{\"inputs\":[{\"name\":\"NOPE\",\"datatype\":\"INT32\",\"shape\":[1,1],\"data\":[1]}]}";
  struct pts_buf *body = pts_buf_new(sizeof json - 1);
  struct pts_infer_request *req = pts_infer_request_new();
  char *name = pts_strdup("tm");
  enum pts_status st;
  if (!body || !req || !name) {
    pts_free(name);
    st = pts_error_set(err, PTS_NOMEM, "out of memory building the request");
  } else {
    memcpy(body->data, json, sizeof json - 1);
    req->model_name = name;
    req->done = on_done;
    st = pts_v2_decode_infer(body, body->size, req, err);
    if (st == PTS_OK) st = pts_server_infer_async(f->s, req, err);
    assert_int_not_equal(st, PTS_OK); /* never accepted, so done never runs */
  }
  pts_buf_release(body);
  pts_infer_request_free(req);
  return st;
}

static void test_refused_walk(void **state) {
  struct fixture *f = *state;
  struct pts_error err;
  assert_int_equal(create_server(f, &f->s, &err), PTS_OK);
  struct torture_result r = torture_walk(refused_step, f, 100000);
  torture_report("refused request", &r);
  assert_true(r.runs > 5);
  assert_int_equal(r.bad_messages, 0);
  assert_int_equal(r.final_status, PTS_INVALID_ARG);
}

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  write_repo(f);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  pts_server_destroy(f->s);
  fs_rmtree(f->root);
  free(f);
  return 0;
}

int main(void) {
  (void)fs_identity_model; /* shared helper this test has no use for */
  struct pts_log_settings quiet = pts_log_get();
  quiet.info = quiet.warning = quiet.error = false;
  pts_log_set(&quiet);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_startup_walk, setup, teardown),
      cmocka_unit_test_setup_teardown(test_infer_walk, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refused_walk, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
