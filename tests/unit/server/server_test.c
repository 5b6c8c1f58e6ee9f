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
#include <sched.h>

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

  /* Triton's words, then the state (a 4xx either way: protocol-facts §1.2
   * has UNAVAILABLE for the second; ptserve names the state instead). */
  char reason[PTS_ERROR_MSG_MAX];
  assert_int_equal(pts_server_model_get(f->s, "broken", -1, false, &m, &err), PTS_NOT_FOUND);
  assert_non_null(strstr(err.msg, "Request for unknown model: 'broken' has no available versions "
                                  "(version 1 is UNAVAILABLE: Invalid argument: "));

  assert_int_equal(pts_server_model_get(f->s, "broken", 1, false, &m, &err), PTS_NOT_FOUND);
  assert_non_null(strstr(err.msg, "Request for unknown model: 'broken' version 1 is not at ready "
                                  "state (version 1 is UNAVAILABLE: Invalid argument: "));

  assert_int_equal(pts_server_model_get(f->s, "broken", -1, true, &m, &err), PTS_OK);
  assert_int_equal(pts_model_state(m), PTS_MODEL_UNAVAILABLE);
  assert_null(pts_model_config(m));
  pts_model_reason(m, reason, sizeof reason);
  assert_non_null(strstr(reason, "Invalid argument: "));
  pts_model_release(m);

  assert_int_equal(pts_server_model_get(f->s, "id", 1, false, &m, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'id' version 1 is not found");

  assert_int_equal(pts_server_model_get(f->s, "all", -1, false, &m, &err), PTS_OK);
  assert_string_equal(pts_model_name(m), "all");
  assert_int_equal(pts_model_version(m), 3);
  assert_string_equal(pts_model_state_name(pts_model_state(m)), "READY");
  pts_model_reason(m, reason, sizeof reason);
  assert_string_equal(reason, "");
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

/* -------------------------------------------------------- model control */

struct ctl_box {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int calls;
  enum pts_status code;
  char msg[PTS_ERROR_MSG_MAX];
  struct pts_index_entry *entries;
  size_t n;
};

static void on_ctl(const struct pts_error *err, void *ctx) {
  struct ctl_box *b = ctx;
  pthread_mutex_lock(&b->lock);
  b->calls++;
  b->code = err->code;
  snprintf(b->msg, sizeof b->msg, "%s", err->msg);
  pthread_cond_broadcast(&b->cond);
  pthread_mutex_unlock(&b->lock);
}

static void on_index(struct pts_index_entry *entries, size_t n, const struct pts_error *err,
                     void *ctx) {
  struct ctl_box *b = ctx;
  pthread_mutex_lock(&b->lock);
  b->calls++;
  b->code = err->code;
  pts_server_index_free(b->entries, b->n);
  b->entries = entries;
  b->n = n;
  pthread_cond_broadcast(&b->cond);
  pthread_mutex_unlock(&b->lock);
}

static void ctl_wait(struct ctl_box *b, int calls) {
  pthread_mutex_lock(&b->lock);
  while (b->calls < calls) pthread_cond_wait(&b->cond, &b->lock);
  pthread_mutex_unlock(&b->lock);
}

static enum pts_status create_mode(struct fixture *f, enum pts_model_control_mode mode,
                                   const char *const *load_models, size_t n_load, int threads,
                                   bool exit_on_error, struct pts_error *err) {
  struct pts_server_options o;
  pts_server_options_default(&o);
  const char *repos[] = {f->root};
  o.model_repositories = repos;
  o.n_model_repositories = 1;
  o.model_control_mode = mode;
  o.load_models = load_models;
  o.n_load_models = n_load;
  o.model_load_thread_count = threads;
  o.exit_on_error = exit_on_error;
  pts_error_clear(err);
  return pts_server_create(&o, &f->s, err);
}

/* "name:version:STATE" of every index entry, comma-separated. */
static void index_text(struct ctl_box *b, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < b->n; i++)
    used += (size_t)snprintf(out + used, size - used, "%s%s:%lld:%s", i ? "," : "",
                             b->entries[i].name, (long long)b->entries[i].version,
                             pts_model_state_name(b->entries[i].state));
}

static void explicit_mode_loads_what_it_is_asked(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, false);
  const char *startup[] = {"nb"};
  struct pts_error err;
  assert_int_equal(create_mode(f, PTS_MODEL_CONTROL_EXPLICIT, startup, 1, 2, true, &err), PTS_OK);
  assert_true(pts_server_is_ready(f->s)); /* models never loaded do not count */
  struct ctl_box b = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
  char text[512];
  /* The index lists every model of the repository, loaded or not. */
  assert_int_equal(pts_server_index_async(f->s, false, on_index, &b, &err), PTS_OK);
  ctl_wait(&b, 1);
  index_text(&b, text, sizeof text);
  assert_string_equal(text, "all:-1:UNKNOWN,id:-1:UNKNOWN,nb:1:READY");
  struct pts_model *m = NULL;
  assert_int_equal(pts_server_model_get(f->s, "id", -1, false, &m, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'id' is not found (it is in the model "
                               "repository but not loaded)");

  assert_int_equal(pts_server_model_load_async(f->s, "id", NULL, on_ctl, &b, &err), PTS_OK);
  ctl_wait(&b, 2);
  assert_int_equal(b.code, PTS_OK);
  assert_int_equal(pts_server_model_get(f->s, "id", -1, false, &m, &err), PTS_OK);
  assert_int_equal(pts_model_version(m), 2);
  pts_model_release(m);

  assert_int_equal(pts_server_model_unload_async(f->s, "id", false, on_ctl, &b, &err), PTS_OK);
  ctl_wait(&b, 3);
  assert_int_equal(b.code, PTS_OK);
  assert_int_equal(pts_server_model_get(f->s, "id", -1, false, &m, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'id' has no available versions "
                               "(version 2 is UNAVAILABLE: unloaded)");
  assert_true(pts_server_is_ready(f->s));

  /* A model added after start-up shows in the index and loads. */
  assert_int_equal(fs_identity_model(f->root, "late", 0, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "late/7"), 0);
  assert_int_equal(pts_server_index_async(f->s, true, on_index, &b, &err), PTS_OK);
  ctl_wait(&b, 4);
  index_text(&b, text, sizeof text);
  assert_string_equal(text, "nb:1:READY"); /* ready only */
  assert_int_equal(pts_server_index_async(f->s, false, on_index, &b, &err), PTS_OK);
  ctl_wait(&b, 5);
  index_text(&b, text, sizeof text);
  assert_string_equal(text, "all:-1:UNKNOWN,id:2:UNAVAILABLE,late:-1:UNKNOWN,nb:1:READY");
  assert_int_equal(pts_server_model_load_async(f->s, "late", NULL, on_ctl, &b, &err), PTS_OK);
  ctl_wait(&b, 6);
  assert_int_equal(b.code, PTS_OK);

  /* Errors: at once for a bad request, through done for a failed load. */
  assert_int_equal(pts_server_model_load_async(f->s, "ghost", NULL, on_ctl, &b, &err), PTS_OK);
  ctl_wait(&b, 7);
  assert_int_equal(b.code, PTS_NOT_FOUND);
  assert_string_equal(b.msg, "failed to load 'ghost', failed to poll from model repository: no "
                             "model repository holds a model named 'ghost'");
  assert_int_equal(pts_server_model_load_async(f->s, "../x", NULL, on_ctl, &b, &err),
                   PTS_INVALID_ARG);
  struct pts_load_params p = {0};
  assert_int_equal(pts_load_params_add_file(&p, "1/model.pt", pts_malloc(1), 1, &err), PTS_OK);
  assert_int_equal(pts_server_model_load_async(f->s, "id", &p, on_ctl, &b, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "file overrides ('file:' parameters) need the 'config' "
                                  "parameter too"));
  assert_int_equal(p.n_files, 0); /* taken, whatever the result */
  assert_int_equal(b.calls, 7);
  pts_server_index_free(b.entries, b.n);
}

static void explicit_startup_models(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, false);
  const char *all[] = {"*"}, *ghost[] = {"ghost", "nb"};
  struct pts_error err;
  assert_int_equal(create_mode(f, PTS_MODEL_CONTROL_EXPLICIT, all, 1, 4, true, &err), PTS_OK);
  struct pts_model *m = NULL;
  assert_int_equal(pts_server_model_get(f->s, "all", 3, false, &m, &err), PTS_OK);
  pts_model_release(m);
  pts_server_destroy(f->s);
  f->s = NULL;
  /* An unknown start-up model is a failed load: start-up fails with
   * --exit-on-error, and goes on without it. */
  assert_int_equal(create_mode(f, PTS_MODEL_CONTROL_EXPLICIT, ghost, 2, 4, true, &err),
                   PTS_UNAVAILABLE);
  assert_string_equal(err.msg, "failed to load all models");
  assert_non_null(strstr(read_log(f), "failed to load 'ghost', failed to poll from model "
                                      "repository: no model repository holds"));
  assert_int_equal(create_mode(f, PTS_MODEL_CONTROL_EXPLICIT, ghost, 2, 4, false, &err), PTS_OK);
  assert_int_equal(pts_server_model_get(f->s, "nb", -1, false, &m, &err), PTS_OK);
  pts_model_release(m);
}

static void none_and_poll_refuse_load_and_unload(void **state) {
  struct fixture *f = *state;
  make_repo(f->root, false);
  struct pts_error err;
  struct ctl_box b = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
  for (int mode = 0; mode < 2; mode++) {
    assert_int_equal(create_mode(f, mode ? PTS_MODEL_CONTROL_POLL : PTS_MODEL_CONTROL_NONE, NULL,
                                 0, 1, true, &err),
                     PTS_OK);
    /* tritonserver's code and text (protocol-facts §1.12), then how to fix it. */
    assert_int_equal(pts_server_model_load_async(f->s, "id", NULL, on_ctl, &b, &err),
                     PTS_UNAVAILABLE);
    assert_non_null(strstr(err.msg, "explicit model load / unload is not allowed if polling is "
                                    "enabled"));
    assert_non_null(strstr(err.msg, mode ? "mode is POLL" : "mode is NONE"));
    assert_int_equal(pts_server_model_unload_async(f->s, "id", true, on_ctl, &b, &err),
                     PTS_UNAVAILABLE);
    /* Every model loaded at start-up; the index still works. */
    assert_int_equal(pts_server_index_async(f->s, false, on_index, &b, &err), PTS_OK);
    ctl_wait(&b, 1 + mode);
    char text[512];
    index_text(&b, text, sizeof text);
    assert_string_equal(text, "all:1:READY,all:2:READY,all:3:READY,id:2:READY,nb:1:READY");
    pts_server_destroy(f->s);
    f->s = NULL;
  }
  pts_server_index_free(b.entries, b.n);
}

/* Two models whose loads wait for one gate file can both be LOADING only
 * when two load threads run them at once. */
static void models_load_in_parallel(void **state) {
  struct fixture *f = *state;
  char gate[128], extra[512];
  snprintf(gate, sizeof gate, "%s.gate", f->root);
  snprintf(extra, sizeof extra,
           "parameters { key: \"load_gate_file\" value { string_value: \"%s\" } }", gate);
  assert_int_equal(fs_identity_model(f->root, "g1", 0, extra), 0);
  assert_int_equal(fs_mkdirs(f->root, "g1/1"), 0);
  assert_int_equal(fs_identity_model(f->root, "g2", 0, extra), 0);
  assert_int_equal(fs_mkdirs(f->root, "g2/1"), 0);
  struct pts_error err;
  assert_int_equal(create_mode(f, PTS_MODEL_CONTROL_EXPLICIT, NULL, 0, 2, true, &err), PTS_OK);
  struct ctl_box b = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
  assert_int_equal(pts_server_model_load_async(f->s, "g1", NULL, on_ctl, &b, &err), PTS_OK);
  assert_int_equal(pts_server_model_load_async(f->s, "g2", NULL, on_ctl, &b, &err), PTS_OK);
  for (;;) {
    struct pts_index_entry *e;
    size_t n;
    assert_int_equal(pts_server_index(f->s, false, &e, &n, &err), PTS_OK);
    int loading = 0;
    for (size_t i = 0; i < n; i++) loading += e[i].state == PTS_MODEL_LOADING;
    pts_server_index_free(e, n);
    if (loading == 2) break;
    sched_yield();
  }
  assert_false(pts_server_is_ready(f->s)); /* a first load in progress */
  FILE *g = fopen(gate, "w");
  assert_non_null(g);
  fclose(g);
  ctl_wait(&b, 2);
  assert_int_equal(b.code, PTS_OK);
  assert_true(pts_server_is_ready(f->s));
  remove(gate);
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
      cmocka_unit_test_setup_teardown(explicit_mode_loads_what_it_is_asked, setup, teardown),
      cmocka_unit_test_setup_teardown(explicit_startup_models, setup, teardown),
      cmocka_unit_test_setup_teardown(none_and_poll_refuse_load_and_unload, setup, teardown),
      cmocka_unit_test_setup_teardown(models_load_in_parallel, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
