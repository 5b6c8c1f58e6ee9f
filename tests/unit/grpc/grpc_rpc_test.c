/* tests/unit/grpc/grpc_rpc_test.c — the unary rpcs of frontend/grpc/rpc.h
 * against a real server core (identity backend) on a temporary repository,
 * without sockets. Requests are packed and responses unpacked with
 * protobuf-c; expected values come from the configs written here and the
 * status table of protocol-facts §1.2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/log.h"
#include "frontend/grpc/rpc.h"
#include "grpc_service.pb-c.h"
#include "health.pb-c.h"
#include "server/fs_helpers.h"

struct fixture {
  char root[64];
  struct pts_server *s;
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  if (!f || !fs_tempdir(f->root, sizeof f->root)) return -1;
  if (fs_identity_model(f->root, "id", 8, NULL) || fs_mkdirs(f->root, "id/1") ||
      fs_identity_model(f->root, "nb", 0, NULL) || fs_mkdirs(f->root, "nb/1") ||
      fs_identity_model(f->root, "all", 4, "version_policy: { all {} }") ||
      fs_mkdirs(f->root, "all/1") || fs_mkdirs(f->root, "all/2") ||
      fs_mkdirs(f->root, "broken/1") ||
      fs_write(f->root, "broken/config.pbtxt", "max_batch_size: [\n"))
    return -1;
  struct pts_log_settings quiet = pts_log_get();
  quiet.info = quiet.warning = quiet.error = false;
  pts_log_set(&quiet);
  struct pts_server_options o;
  pts_server_options_default(&o);
  const char *repos[] = {f->root};
  o.model_repositories = repos;
  o.n_model_repositories = 1;
  o.exit_on_error = false;
  struct pts_error err;
  if (pts_server_create(&o, &f->s, &err) != PTS_OK) return -1;
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

/* The answer of an async rpc, waited for. */
struct answer {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  struct pts_grpc_reply reply;
  struct pts_error err;
};

static void on_answer(struct pts_grpc_reply *reply, const struct pts_error *err, void *call) {
  struct answer *a = call;
  pthread_mutex_lock(&a->mu);
  a->reply = *reply;
  memset(reply, 0, sizeof *reply);
  a->err = *err;
  a->done = true;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

/* Runs an rpc of either kind to its answer. */
static enum pts_status run_rpc(struct pts_server *s, const struct pts_grpc_rpc *r,
                               const struct pts_buf *in, struct pts_grpc_reply *reply,
                               struct pts_error *err) {
  if (r->kind == PTS_GRPC_UNARY) return r->fn(s, in, reply, err);
  assert_int_equal(r->kind, PTS_GRPC_ASYNC);
  struct answer a = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  enum pts_status st = r->start(s, in, on_answer, &a, err);
  if (st != PTS_OK) return st;
  pthread_mutex_lock(&a.mu);
  while (!a.done) pthread_cond_wait(&a.cv, &a.mu);
  pthread_mutex_unlock(&a.mu);
  *reply = a.reply;
  *err = a.err;
  return a.err.code;
}

/* Calls `rpc` with the packed `msg`; on OK returns the flattened response. */
static enum pts_status call(struct pts_server *s, const char *rpc, const ProtobufCMessage *msg,
                            uint8_t **out, size_t *out_len, struct pts_error *err) {
  char path[128];
  int n = strncmp(rpc, "/", 1) == 0
              ? snprintf(path, sizeof path, "%s", rpc)
              : snprintf(path, sizeof path, "/inference.GRPCInferenceService/%s", rpc);
  const struct pts_grpc_rpc *r = pts_grpc_rpc_find(path, (size_t)n);
  assert_non_null(r);
  size_t len = protobuf_c_message_get_packed_size(msg);
  struct pts_buf *in = pts_buf_new(len ? len : 1);
  protobuf_c_message_pack(msg, in->data);
  in->size = len;
  struct pts_grpc_reply reply = {0, NULL, 0};
  pts_error_clear(err);
  enum pts_status st = run_rpc(s, r, in, &reply, err);
  pts_buf_release(in);
  *out = NULL;
  if (st == PTS_OK) {
    assert_int_equal(reply.n_pieces, 1);
    *out = pts_malloc(reply.size ? reply.size : 1);
    memcpy(*out, reply.pieces[0].data, reply.size);
    *out_len = reply.size;
  }
  pts_grpc_reply_clear(&reply);
  return st;
}

static void health(void **state) {
  struct fixture *f = *state;
  uint8_t *out;
  size_t len;
  struct pts_error err;
  Inference__ServerLiveRequest live = INFERENCE__SERVER_LIVE_REQUEST__INIT;
  assert_int_equal(call(f->s, "ServerLive", &live.base, &out, &len, &err), PTS_OK);
  Inference__ServerLiveResponse *lr = inference__server_live_response__unpack(NULL, len, out);
  assert_true(lr->live);
  inference__server_live_response__free_unpacked(lr, NULL);
  pts_free(out);
  /* "broken" failed to load: with strict readiness the server is not ready. */
  Inference__ServerReadyRequest ready = INFERENCE__SERVER_READY_REQUEST__INIT;
  assert_int_equal(call(f->s, "ServerReady", &ready.base, &out, &len, &err), PTS_OK);
  Inference__ServerReadyResponse *rr = inference__server_ready_response__unpack(NULL, len, out);
  assert_false(rr->ready);
  inference__server_ready_response__free_unpacked(rr, NULL);
  pts_free(out);
  Grpc__Health__V1__HealthCheckRequest hc = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  assert_int_equal(call(f->s, "/grpc.health.v1.Health/Check", &hc.base, &out, &len, &err), PTS_OK);
  Grpc__Health__V1__HealthCheckResponse *h =
      grpc__health__v1__health_check_response__unpack(NULL, len, out);
  assert_int_equal(h->status, 2); /* NOT_SERVING */
  grpc__health__v1__health_check_response__free_unpacked(h, NULL);
  pts_free(out);
}

static bool model_ready(struct fixture *f, const char *name, const char *version,
                        enum pts_status want) {
  Inference__ModelReadyRequest rq = INFERENCE__MODEL_READY_REQUEST__INIT;
  rq.name = (char *)name;
  rq.version = (char *)version;
  uint8_t *out;
  size_t len;
  struct pts_error err;
  assert_int_equal(call(f->s, "ModelReady", &rq.base, &out, &len, &err), want);
  if (want != PTS_OK) return false;
  Inference__ModelReadyResponse *r = inference__model_ready_response__unpack(NULL, len, out);
  bool ready = r->ready;
  inference__model_ready_response__free_unpacked(r, NULL);
  pts_free(out);
  return ready;
}

static void ready_per_model(void **state) {
  struct fixture *f = *state;
  assert_true(model_ready(f, "id", "", PTS_OK));
  assert_true(model_ready(f, "all", "2", PTS_OK));
  assert_false(model_ready(f, "broken", "", PTS_OK)); /* known, not ready: ready=false, OK */
  /* Unknown model or version: ready=false, OK (tritonserver r25.07). */
  assert_false(model_ready(f, "nope", "", PTS_OK));
  assert_false(model_ready(f, "id", "9", PTS_OK));
  model_ready(f, "id", "v1", PTS_INVALID_ARG);
}

static void metadata_and_config(void **state) {
  struct fixture *f = *state;
  uint8_t *out;
  size_t len;
  struct pts_error err;
  Inference__ModelMetadataRequest mq = INFERENCE__MODEL_METADATA_REQUEST__INIT;
  mq.name = "all";
  assert_int_equal(call(f->s, "ModelMetadata", &mq.base, &out, &len, &err), PTS_OK);
  Inference__ModelMetadataResponse *m = inference__model_metadata_response__unpack(NULL, len, out);
  assert_string_equal(m->name, "all");
  assert_int_equal(m->n_versions, 2);
  assert_string_equal(m->versions[0], "1");
  assert_string_equal(m->versions[1], "2");
  assert_string_equal(m->platform, "identity");
  assert_int_equal(m->n_inputs, 1);
  assert_string_equal(m->inputs[0]->datatype, "INT32");
  assert_int_equal(m->inputs[0]->n_shape, 2); /* -1 for the batch, then dims [2] */
  assert_int_equal(m->inputs[0]->shape[0], -1);
  assert_int_equal(m->inputs[0]->shape[1], 2);
  assert_string_equal(m->outputs[0]->name, "OUTPUT0");
  inference__model_metadata_response__free_unpacked(m, NULL);
  pts_free(out);

  mq.name = "nb";
  assert_int_equal(call(f->s, "ModelMetadata", &mq.base, &out, &len, &err), PTS_OK);
  m = inference__model_metadata_response__unpack(NULL, len, out);
  assert_int_equal(m->inputs[0]->n_shape, 1); /* no batching: no -1 */
  inference__model_metadata_response__free_unpacked(m, NULL);
  pts_free(out);

  Inference__ModelConfigRequest cq = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
  cq.name = "all";
  assert_int_equal(call(f->s, "ModelConfig", &cq.base, &out, &len, &err), PTS_OK);
  Inference__ModelConfigResponse *c = inference__model_config_response__unpack(NULL, len, out);
  assert_string_equal(c->config->name, "all");
  assert_int_equal(c->config->max_batch_size, 4);
  assert_non_null(c->config->version_policy);
  assert_int_equal(c->config->version_policy->policy_choice_case,
                   INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL);
  inference__model_config_response__free_unpacked(c, NULL);
  pts_free(out);
  cq.name = "nope";
  assert_int_equal(call(f->s, "ModelConfig", &cq.base, &out, &len, &err), PTS_NOT_FOUND);
  assert_non_null(strstr(err.msg, "nope"));
}

static void index_and_control(void **state) {
  struct fixture *f = *state;
  uint8_t *out;
  size_t len;
  struct pts_error err;
  Inference__RepositoryIndexRequest iq = INFERENCE__REPOSITORY_INDEX_REQUEST__INIT;
  assert_int_equal(call(f->s, "RepositoryIndex", &iq.base, &out, &len, &err), PTS_OK);
  Inference__RepositoryIndexResponse *r =
      inference__repository_index_response__unpack(NULL, len, out);
  int ready = 0, unavailable = 0;
  for (size_t i = 0; i < r->n_models; i++) {
    if (strcmp(r->models[i]->state, "READY") == 0) ready++;
    if (strcmp(r->models[i]->name, "broken") == 0) {
      assert_string_equal(r->models[i]->state, "UNAVAILABLE");
      assert_true(r->models[i]->reason[0] != '\0');
      unavailable++;
    }
  }
  assert_int_equal(ready, 4); /* id 1, nb 1, all 1 and 2 */
  assert_int_equal(unavailable, 1);
  inference__repository_index_response__free_unpacked(r, NULL);
  pts_free(out);

  Inference__RepositoryModelLoadRequest lq = INFERENCE__REPOSITORY_MODEL_LOAD_REQUEST__INIT;
  lq.model_name = "id";
  /* In NONE mode, tritonserver's refusal: UNAVAILABLE (protocol-facts §1.12). */
  assert_int_equal(call(f->s, "RepositoryModelLoad", &lq.base, &out, &len, &err), PTS_UNAVAILABLE);
  assert_non_null(strstr(err.msg, "explicit model load / unload is not allowed"));
  assert_non_null(strstr(err.msg, "NONE"));
  assert_int_equal(pts_status_grpc(err.code), 14); /* UNAVAILABLE */
  lq.repository_name = "elsewhere"; /* a named repository: UNIMPLEMENTED */
  assert_int_equal(call(f->s, "RepositoryModelLoad", &lq.base, &out, &len, &err), PTS_UNSUPPORTED);
  assert_int_equal(pts_status_grpc(err.code), 12);
  lq.repository_name = "";
  /* TraceSetting reads the settings (Triton's defaults: level OFF, rate
   * 1000, count -1, log_frequency 0); an unknown model is refused. */
  Inference__TraceSettingRequest tq = INFERENCE__TRACE_SETTING_REQUEST__INIT;
  assert_int_equal(call(f->s, "TraceSetting", &tq.base, &out, &len, &err), PTS_OK);
  Inference__TraceSettingResponse *tr = inference__trace_setting_response__unpack(NULL, len, out);
  assert_non_null(tr);
  int seen = 0;
  for (size_t i = 0; i < tr->n_settings; i++) {
    const char *k = tr->settings[i]->key, *v = tr->settings[i]->value->value[0];
    if (strcmp(k, "trace_level") == 0) seen++, assert_string_equal(v, "OFF");
    if (strcmp(k, "trace_rate") == 0) seen++, assert_string_equal(v, "1000");
    if (strcmp(k, "trace_count") == 0) seen++, assert_string_equal(v, "-1");
    if (strcmp(k, "log_frequency") == 0) seen++, assert_string_equal(v, "0");
  }
  assert_int_equal(seen, 4);
  inference__trace_setting_response__free_unpacked(tr, NULL);
  pts_free(out);
  tq.model_name = "nope";
  assert_int_equal(call(f->s, "TraceSetting", &tq.base, &out, &len, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "Request for unknown model : nope"));
  /* Shared memory: status answers (no regions); registering needs
   * --allow-client-shm, which this server was not given. */
  Inference__SystemSharedMemoryStatusRequest sq =
      INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_REQUEST__INIT;
  assert_int_equal(call(f->s, "SystemSharedMemoryStatus", &sq.base, &out, &len, &err), PTS_OK);
  Inference__SystemSharedMemoryStatusResponse *ss =
      inference__system_shared_memory_status_response__unpack(NULL, len, out);
  assert_non_null(ss);
  assert_int_equal(ss->n_regions, 0);
  inference__system_shared_memory_status_response__free_unpacked(ss, NULL);
  pts_free(out);
  Inference__SystemSharedMemoryRegisterRequest rq =
      INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_REQUEST__INIT;
  rq.name = "r";
  rq.key = "/k";
  rq.byte_size = 8;
  assert_int_equal(call(f->s, "SystemSharedMemoryRegister", &rq.base, &out, &len, &err),
                   PTS_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "--allow-client-shm=true"));
}

static void statistics(void **state) {
  struct fixture *f = *state;
  uint8_t *out;
  size_t len;
  struct pts_error err;
  Inference__ModelStatisticsRequest q = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
  q.name = "all";
  assert_int_equal(call(f->s, "ModelStatistics", &q.base, &out, &len, &err), PTS_OK);
  Inference__ModelStatisticsResponse *r =
      inference__model_statistics_response__unpack(NULL, len, out);
  assert_int_equal(r->n_model_stats, 2);
  assert_string_equal(r->model_stats[0]->version, "1");
  assert_string_equal(r->model_stats[1]->version, "2");
  /* Every InferStatistics member present, as perf_analyzer requires. */
  assert_non_null(r->model_stats[0]->inference_stats);
  assert_non_null(r->model_stats[0]->inference_stats->cache_miss);
  assert_int_equal(r->model_stats[0]->inference_stats->success->count, 0);
  inference__model_statistics_response__free_unpacked(r, NULL);
  pts_free(out);
  q.name = "nope";
  assert_int_equal(call(f->s, "ModelStatistics", &q.base, &out, &len, &err), PTS_INVALID_ARG);
}

static void log_settings(void **state) {
  struct fixture *f = *state;
  struct pts_log_settings saved = pts_log_get();
  uint8_t *out;
  size_t len;
  struct pts_error err;
  Inference__LogSettingsRequest q = INFERENCE__LOG_SETTINGS_REQUEST__INIT;
  Inference__LogSettingsRequest__SettingsEntry
      e = INFERENCE__LOG_SETTINGS_REQUEST__SETTINGS_ENTRY__INIT,
      *ep[] = {&e};
  Inference__LogSettingsRequest__SettingValue v =
      INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__INIT;
  e.key = "log_format";
  e.value = &v;
  v.parameter_choice_case =
      INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM;
  v.string_param = "ISO8601";
  q.settings = ep;
  q.n_settings = 1;
  assert_int_equal(call(f->s, "LogSettings", &q.base, &out, &len, &err), PTS_OK);
  assert_int_equal(pts_log_get().format, PTS_LOG_FORMAT_ISO8601);
  Inference__LogSettingsResponse *r = inference__log_settings_response__unpack(NULL, len, out);
  assert_int_equal(r->n_settings, 6);
  bool found = false;
  for (size_t i = 0; i < r->n_settings; i++)
    if (strcmp(r->settings[i]->key, "log_format") == 0) {
      assert_string_equal(r->settings[i]->value->string_param, "ISO8601");
      found = true;
    }
  assert_true(found);
  inference__log_settings_response__free_unpacked(r, NULL);
  pts_free(out);
  v.string_param = "json";
  assert_int_equal(call(f->s, "LogSettings", &q.base, &out, &len, &err), PTS_INVALID_ARG);
  assert_int_equal(pts_log_get().format, PTS_LOG_FORMAT_ISO8601); /* unchanged */
  pts_log_set(&saved);
}

static void garbage_requests(void **state) {
  struct fixture *f = *state;
  static const uint8_t junk[] = {0x0a, 0x09, 'x'}; /* a string longer than the message */
  const char *rpcs[] = {"ServerLive",      "ModelReady",  "ModelMetadata",  "ModelConfig",
                        "RepositoryIndex", "LogSettings", "ModelStatistics"};
  for (size_t i = 0; i < sizeof rpcs / sizeof rpcs[0]; i++) {
    char path[128];
    int n = snprintf(path, sizeof path, "/inference.GRPCInferenceService/%s", rpcs[i]);
    const struct pts_grpc_rpc *r = pts_grpc_rpc_find(path, (size_t)n);
    struct pts_buf *in = pts_buf_new(sizeof junk);
    memcpy(in->data, junk, sizeof junk);
    struct pts_grpc_reply reply = {0, NULL, 0};
    struct pts_error err;
    if (run_rpc(f->s, r, in, &reply, &err) != PTS_INVALID_ARG)
      fail_msg("%s accepted junk", rpcs[i]);
    assert_non_null(strstr(err.msg, "parse"));
    pts_buf_release(in);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(health),
      cmocka_unit_test(ready_per_model),
      cmocka_unit_test(metadata_and_config),
      cmocka_unit_test(index_and_control),
      cmocka_unit_test(statistics),
      cmocka_unit_test(log_settings),
      cmocka_unit_test(garbage_requests),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
