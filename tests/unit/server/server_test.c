/* tests/unit/server/server_test.c — the server core without HTTP:
 * start-up table, exit-on-error, readiness, model lookup messages (Triton's
 * wording, protocol-facts §1.2/§1.3), the repository index, and inference
 * end to end through pts_server_infer_async with the identity backend, whose
 * expected output is its input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "core/alloc.h"
#include "core/log.h"
#include "server/fs_helpers.h"
#include "server/server.h"

struct fixture {
  char root[64];
  char log_path[128];
  struct pts_server *s;
};

/* A repository: "id" (batching, versions 1 and 2 of which the default
 * policy serves 2), "nb" (no batching), "all" (versions 1 2 3, policy all)
 * and, when `broken`, "broken" with a config syntax error. */
static void make_repo(const char *root, bool broken) {
  assert_int_equal(fs_identity_model(root, "id", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(root, "id/1"), 0);
  assert_int_equal(fs_mkdirs(root, "id/2"), 0);
  assert_int_equal(fs_identity_model(root, "nb", 0, NULL), 0);
  assert_int_equal(fs_mkdirs(root, "nb/1"), 0);
  assert_int_equal(fs_identity_model(root, "all", 4, "version_policy: { all {} }"), 0);
  for (int v = 1; v <= 3; v++) {
    char rel[32];
    snprintf(rel, sizeof rel, "all/%d", v);
    assert_int_equal(fs_mkdirs(root, rel), 0);
  }
  if (broken) {
    assert_int_equal(fs_mkdirs(root, "broken/1"), 0);
    assert_int_equal(fs_write(root, "broken/config.pbtxt", "max_batch_size: [\n"), 0);
  }
}

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  if (!f || !fs_tempdir(f->root, sizeof f->root)) return -1;
  snprintf(f->log_path, sizeof f->log_path, "%s.log", f->root);
  pts_log_set_file(f->log_path);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  pts_server_destroy(f->s);
  pts_log_set_file(NULL);
  fs_rmtree(f->root);
  remove(f->log_path);
  free(f);
  return 0;
}

static enum pts_status create(struct fixture *f, bool exit_on_error, bool strict,
                              struct pts_error *err) {
  struct pts_server_options o;
  pts_server_options_default(&o);
  const char *repos[] = {f->root};
  o.model_repositories = repos;
  o.n_model_repositories = 1;
  o.exit_on_error = exit_on_error;
  o.strict_readiness = strict;
  pts_error_clear(err);
  return pts_server_create(&o, &f->s, err);
}

/* ------------------------------------------------------------- start-up */

static char *read_log(struct fixture *f) {
  FILE *in = fopen(f->log_path, "r");
  assert_non_null(in);
  static char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, in);
  text[n] = '\0';
  fclose(in);
  return text;
}

/* The table lines of the log: tritonserver prints the table as one record
 * whose rows stand at the start of their own lines. */
static size_t table_lines(char *log, char lines[][256], size_t max) {
  size_t n = 0;
  for (char *line = strtok(log, "\n"); line && n < max; line = strtok(NULL, "\n")) {
    if (line[0] != '|' && line[0] != '+') continue;
    snprintf(lines[n++], 256, "%s", line);
  }
  return n;
}

static void startup_table(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, true);
  struct pts_error err;
  assert_int_equal(create(f, false, true, &err), PTS_OK);
  char lines[16][256];
  size_t n = table_lines(read_log(f), lines, 16);
  /* rule, header, rule, all 1..3, broken 1, id 2, nb 1, rule */
  assert_int_equal(n, 10);
  size_t width = strlen(lines[0]);
  for (size_t i = 0; i < n; i++) assert_int_equal(strlen(lines[i]), width);
  /* "Model" column: widest name is 6 ("broken"); "Version": the header. */
  assert_memory_equal(lines[0], "+--------+---------+-", 21);
  assert_memory_equal(lines[1], "| Model  | Version | Status ", 27);
  assert_memory_equal(lines[3], "| all    | 1       | READY ", 27);
  assert_memory_equal(lines[5], "| all    | 3       | READY ", 27);
  assert_memory_equal(lines[6], "| broken | 1       | UNAVAILABLE: Invalid argument: ", 51);
  assert_memory_equal(lines[7], "| id     | 2       | READY ", 27);
  assert_memory_equal(lines[8], "| nb     | 1       | READY ", 27);
  assert_string_equal(lines[9], lines[0]);
  assert_string_equal(lines[2], lines[0]);
  /* The longest status fits exactly: "| <status> |" at the end. */
  assert_string_equal(lines[6] + strlen(lines[6]) - 2, " |");
  assert_true(lines[6][strlen(lines[6]) - 3] != ' ');
}

static void exit_on_error_fails_startup(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, true);
  struct pts_error err;
  assert_int_equal(create(f, true, true, &err), PTS_UNAVAILABLE);
  assert_null(f->s);
  assert_string_equal(err.msg, "failed to load all models");
  /* The table was printed first, naming the broken model. */
  assert_non_null(strstr(read_log(f), "| broken |"));
}

static void missing_repository_fails_startup(void **state) {
  struct fixture *f = *state;
  fs_rmtree(f->root);
  struct pts_error err;
  assert_int_equal(create(f, false, true, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, f->root));
}

static void readiness(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, true);
  struct pts_error err;
  assert_int_equal(create(f, false, true, &err), PTS_OK);
  assert_true(pts_server_is_live(f->s));
  assert_false(pts_server_is_ready(f->s)); /* strict: "broken" is not READY */
  pts_server_destroy(f->s);
  f->s = NULL;
  assert_int_equal(create(f, false, false, &err), PTS_OK);
  assert_true(pts_server_is_ready(f->s));
  pts_server_destroy(f->s);
  f->s = NULL;
  fs_rmtree(f->root);
  assert_int_equal(mkdir(f->root, 0755), 0);
  make_repo(f->root, false);
  assert_int_equal(create(f, true, true, &err), PTS_OK);
  assert_true(pts_server_is_ready(f->s));
  assert_string_equal(pts_server_version(), PTS_VERSION);
}

/* --------------------------------------------------------------- models */

static void model_lookup_messages(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, true);
  struct pts_error err;
  assert_int_equal(create(f, false, true, &err), PTS_OK);
  struct pts_model *m = NULL;

  assert_int_equal(pts_server_model_get(f->s, "nope", -1, false, &m, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'nope' is not found");
  assert_null(m);

  assert_int_equal(pts_server_model_get(f->s, "broken", -1, false, &m, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'broken' has no available versions");

  assert_int_equal(pts_server_model_get(f->s, "broken", 1, false, &m, &err), PTS_UNAVAILABLE);
  assert_string_equal(err.msg,
                      "Request for unknown model: 'broken' version 1 is not at ready state");

  assert_int_equal(pts_server_model_get(f->s, "broken", -1, true, &m, &err), PTS_OK);
  assert_int_equal(pts_model_state(m), PTS_MODEL_UNAVAILABLE);
  assert_null(pts_model_config(m));
  assert_non_null(strstr(pts_model_reason(m), "Invalid argument: "));
  pts_model_release(m);

  assert_int_equal(pts_server_model_get(f->s, "id", 1, false, &m, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'id' version 1 is not found");

  assert_int_equal(pts_server_model_get(f->s, "all", -1, false, &m, &err), PTS_OK);
  assert_string_equal(pts_model_name(m), "all");
  assert_int_equal(pts_model_version(m), 3);
  assert_string_equal(pts_model_state_name(pts_model_state(m)), "READY");
  assert_string_equal(pts_model_reason(m), "");
  assert_int_equal(pts_model_config(m)->max_batch_size, 4);
  pts_model_release(m);

  int64_t *versions;
  size_t n;
  assert_int_equal(pts_server_model_versions(f->s, "all", &versions, &n, &err), PTS_OK);
  assert_int_equal(n, 3);
  assert_int_equal(versions[0], 1);
  assert_int_equal(versions[2], 3);
  pts_free(versions);
  assert_int_equal(pts_server_model_versions(f->s, "broken", &versions, &n, &err), PTS_OK);
  assert_int_equal(n, 0);
  pts_free(versions);
}

static void repository_index(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, true);
  struct pts_error err;
  assert_int_equal(create(f, false, true, &err), PTS_OK);
  struct pts_index_entry *e;
  size_t n;
  assert_int_equal(pts_server_index(f->s, false, &e, &n, &err), PTS_OK);
  /* all 1, all 2, all 3, broken 1, id 2, nb 1 */
  assert_int_equal(n, 6);
  assert_string_equal(e[3].name, "broken");
  assert_int_equal(e[3].version, 1);
  assert_int_equal(e[3].state, PTS_MODEL_UNAVAILABLE);
  assert_non_null(strstr(e[3].reason, "Invalid argument: "));
  assert_string_equal(e[4].name, "id");
  assert_int_equal(e[4].version, 2);
  assert_int_equal(e[4].state, PTS_MODEL_READY);
  assert_string_equal(e[4].reason, "");
  pts_server_index_free(e, n);
  assert_int_equal(pts_server_index(f->s, true, &e, &n, &err), PTS_OK);
  assert_int_equal(n, 5);
  for (size_t i = 0; i < n; i++) assert_int_equal(e[i].state, PTS_MODEL_READY);
  pts_server_index_free(e, n);
}

/* ------------------------------------------------------------ inference */

struct done_box {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int calls;
  struct pts_infer_request *req;
  struct pts_infer_response *resp;
  enum pts_status code;
};

static void on_done(struct pts_infer_request *req, struct pts_infer_response *resp,
                    const struct pts_error *err, void *ctx) {
  struct done_box *box = ctx;
  pthread_mutex_lock(&box->lock);
  box->calls++;
  pts_infer_request_free(box->req);
  pts_infer_response_free(box->resp);
  box->req = req;
  box->resp = resp;
  box->code = err ? err->code : PTS_OK;
  pthread_cond_broadcast(&box->cond);
  pthread_mutex_unlock(&box->lock);
}

static void box_wait(struct done_box *box, int calls) {
  pthread_mutex_lock(&box->lock);
  while (box->calls < calls) pthread_cond_wait(&box->cond, &box->lock);
  pthread_mutex_unlock(&box->lock);
}

static void box_free(struct done_box *box) {
  pts_infer_request_free(box->req);
  pts_infer_response_free(box->resp);
}

/* INPUT0 INT32 of `shape` holding 7, 8, 9, ... */
static struct pts_infer_request *request(struct done_box *box, const char *model, int ndim,
                                         const int64_t *dims) {
  struct pts_infer_request *req = pts_infer_request_new();
  req->model_name = pts_strdup(model);
  req->inputs = pts_calloc(1, sizeof *req->inputs);
  req->n_inputs = 1;
  struct pts_tensor *t = &req->inputs[0];
  t->name = pts_strdup("INPUT0");
  t->dtype = PTS_DTYPE_INT32;
  t->shape.ndim = ndim;
  memcpy(t->shape.dims, dims, (size_t)ndim * sizeof *dims);
  int64_t count = pts_shape_count(&t->shape);
  t->byte_size = (size_t)count * 4;
  t->buf = pts_buf_new(t->byte_size ? t->byte_size : 1);
  for (int64_t i = 0; i < count; i++) ((int32_t *)t->buf->data)[i] = (int32_t)(7 + i);
  t->data = t->buf->data;
  req->done = on_done;
  req->done_ctx = box;
  return req;
}

static void infer_identity_round_trip(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, false);
  struct pts_error err;
  assert_int_equal(create(f, true, true, &err), PTS_OK);
  struct done_box box = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

  const int64_t shape[] = {3, 2};
  struct pts_infer_request *req = request(&box, "id", 2, shape);
  req->id = pts_strdup("abc");
  assert_int_equal(pts_server_infer_async(f->s, req, &err), PTS_OK);
  box_wait(&box, 1);
  assert_int_equal(box.code, PTS_OK);
  struct pts_infer_response *resp = box.resp;
  assert_string_equal(resp->model_name, "id");
  assert_int_equal(resp->model_version, 2);
  assert_string_equal(resp->id, "abc");
  assert_int_equal(resp->n_outputs, 1);
  assert_string_equal(resp->outputs[0].name, "OUTPUT0");
  assert_int_equal(resp->outputs[0].dtype, PTS_DTYPE_INT32);
  assert_int_equal(resp->outputs[0].shape.ndim, 2);
  assert_int_equal(resp->outputs[0].shape.dims[0], 3);
  assert_int_equal(resp->outputs[0].shape.dims[1], 2);
  assert_int_equal(resp->outputs[0].byte_size, 24);
  for (int i = 0; i < 6; i++) assert_int_equal(((const int32_t *)resp->outputs[0].data)[i], 7 + i);

  /* An explicit version of a non-batching model. */
  const int64_t flat[] = {2};
  req = request(&box, "nb", 1, flat);
  req->model_version = 1;
  assert_int_equal(pts_server_infer_async(f->s, req, &err), PTS_OK);
  box_wait(&box, 2);
  assert_int_equal(box.code, PTS_OK);
  assert_int_equal(box.resp->outputs[0].shape.ndim, 1);
  assert_int_equal(((const int32_t *)box.resp->outputs[0].data)[1], 8);
  box_free(&box);
}

static void infer_errors_are_synchronous(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, false);
  struct pts_error err;
  assert_int_equal(create(f, true, true, &err), PTS_OK);
  struct done_box box = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

  const int64_t batch9[] = {9, 2};
  struct pts_infer_request *req = request(&box, "id", 2, batch9);
  assert_int_equal(pts_server_infer_async(f->s, req, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg, "inference request batch-size must be <= 8 for 'id'");
  pts_infer_request_free(req); /* still ours */

  const int64_t shape[] = {1, 2};
  req = request(&box, "ghost", 2, shape);
  assert_int_equal(pts_server_infer_async(f->s, req, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'ghost' is not found");
  pts_infer_request_free(req);

  req = request(&box, "id", 2, shape);
  req->model_version = 1; /* on disk, but not selected by the policy */
  assert_int_equal(pts_server_infer_async(f->s, req, &err), PTS_NOT_FOUND);
  pts_infer_request_free(req);
  assert_int_equal(box.calls, 0);
}

static void destroy_answers_in_flight_requests(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, false);
  struct pts_error err;
  assert_int_equal(create(f, true, true, &err), PTS_OK);
  struct done_box box = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
  const int64_t shape[] = {1, 2};
  for (int i = 0; i < 20; i++)
    assert_int_equal(pts_server_infer_async(f->s, request(&box, "id", 2, shape), &err), PTS_OK);
  /* Holding a model across destroy keeps it readable. */
  struct pts_model *m;
  assert_int_equal(pts_server_model_get(f->s, "id", -1, false, &m, &err), PTS_OK);
  pts_server_destroy(f->s);
  f->s = NULL;
  assert_int_equal(box.calls, 20);
  assert_string_equal(pts_model_name(m), "id");
  assert_int_equal(pts_model_state(m), PTS_MODEL_UNAVAILABLE);
  pts_model_release(m);
  box_free(&box);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(startup_table, setup, teardown),
      cmocka_unit_test_setup_teardown(exit_on_error_fails_startup, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_repository_fails_startup, setup, teardown),
      cmocka_unit_test_setup_teardown(readiness, setup, teardown),
      cmocka_unit_test_setup_teardown(model_lookup_messages, setup, teardown),
      cmocka_unit_test_setup_teardown(repository_index, setup, teardown),
      cmocka_unit_test_setup_teardown(infer_identity_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(infer_errors_are_synchronous, setup, teardown),
      cmocka_unit_test_setup_teardown(destroy_answers_in_flight_requests, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
