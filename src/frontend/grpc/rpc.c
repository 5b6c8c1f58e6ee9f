/* frontend/grpc/rpc.c — see rpc.h. */
#include "frontend/grpc/rpc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/log.h"
#include "frontend/grpc/shm_grpc.h"
#include "frontend/grpc/version.h"
#include "shm/shm.h"
#include "trace/trace.h"
#include "grpc_service.pb-c.h"
#include "health.pb-c.h"

/* The HTTP frontend's list (a test checks that it stays included);
 * cuda_shared_memory, last, only when this build has CUDA. */
const char *const PTS_GRPC_EXTENSIONS[] = {"classification",
                                           "sequence",
                                           "model_configuration",
                                           "binary_tensor_data",
                                           "model_repository",
                                           "model_repository(unload_dependents)",
                                           "schedule_policy",
                                           "statistics",
                                           "logging",
                                           "trace",
                                           "system_shared_memory",
                                           "cuda_shared_memory"};
const size_t PTS_GRPC_N_EXTENSIONS = sizeof PTS_GRPC_EXTENSIONS / sizeof PTS_GRPC_EXTENSIONS[0];

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static enum pts_status unpack(const ProtobufCMessageDescriptor *d, const struct pts_buf *in,
                              ProtobufCMessage **out, struct pts_error *err) {
  *out = pts_grpc_unpack(d, in->data, in->size, err);
  return *out ? PTS_OK : err->code;
}

static void unpacked_free(void *m) {
  if (m) protobuf_c_message_free_unpacked(m, pts_grpc_pb_allocator());
}

static void version_string(int64_t v, char out[24]) {
  if (v < 0)
    out[0] = '\0';
  else
    snprintf(out, 24, "%" PRId64, v);
}

/* ------------------------------------------------------------------ */
/* health                                                              */

static enum pts_status server_live(struct pts_server *s, const struct pts_buf *in,
                                   struct pts_grpc_reply *out, struct pts_error *err) {
  ProtobufCMessage *rq;
  enum pts_status ust = unpack(&inference__server_live_request__descriptor, in, &rq, err);
  if (ust != PTS_OK) return ust;
  unpacked_free(rq);
  Inference__ServerLiveResponse r;
  inference__server_live_response__init(&r);
  r.live = pts_server_is_live(s);
  return pts_grpc_pack(&r.base, out, err);
}

static enum pts_status server_ready(struct pts_server *s, const struct pts_buf *in,
                                    struct pts_grpc_reply *out, struct pts_error *err) {
  ProtobufCMessage *rq;
  enum pts_status ust = unpack(&inference__server_ready_request__descriptor, in, &rq, err);
  if (ust != PTS_OK) return ust;
  unpacked_free(rq);
  Inference__ServerReadyResponse r;
  inference__server_ready_response__init(&r);
  r.ready = pts_server_is_ready(s);
  return pts_grpc_pack(&r.base, out, err);
}

/* Known but not ready is ready=false with OK; an unknown model is the
 * lookup's error status (protocol-facts §2.4). */
static enum pts_status model_ready(struct pts_server *s, const struct pts_buf *in,
                                   struct pts_grpc_reply *out, struct pts_error *err) {
  Inference__ModelReadyRequest *rq;
  enum pts_status ust =
      unpack(&inference__model_ready_request__descriptor, in, (ProtobufCMessage **)&rq, err);
  if (ust != PTS_OK) return ust;
  int64_t version;
  bool ready = false;
  enum pts_status st = pts_grpc_parse_version(rq->version, rq->name, &version, err);
  if (st == PTS_OK) st = pts_server_model_ready(s, rq->name, version, &ready, err);
  unpacked_free(rq);
  /* tritonserver r25.07's core answers an unknown model or version with
   * ready=false and OK (InferenceServer::ModelIsReady), so tritonclient's
   * is_model_ready returns False instead of raising. */
  if (st == PTS_NOT_FOUND) {
    st = PTS_OK;
    ready = false;
  }
  if (st != PTS_OK) return st;
  Inference__ModelReadyResponse r;
  inference__model_ready_response__init(&r);
  r.ready = ready;
  return pts_grpc_pack(&r.base, out, err);
}

static enum pts_status health_check(struct pts_server *s, const struct pts_buf *in,
                                    struct pts_grpc_reply *out, struct pts_error *err) {
  ProtobufCMessage *rq;
  enum pts_status ust = unpack(&grpc__health__v1__health_check_request__descriptor, in, &rq, err);
  if (ust != PTS_OK) return ust;
  unpacked_free(rq);
  Grpc__Health__V1__HealthCheckResponse r;
  grpc__health__v1__health_check_response__init(&r);
  r.status = pts_server_is_ready(s)
                 ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                 : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
  return pts_grpc_pack(&r.base, out, err);
}

/* ------------------------------------------------------------------ */
/* metadata                                                            */

static enum pts_status server_metadata(struct pts_server *s, const struct pts_buf *in,
                                       struct pts_grpc_reply *out, struct pts_error *err) {
  ProtobufCMessage *rq;
  enum pts_status ust = unpack(&inference__server_metadata_request__descriptor, in, &rq, err);
  if (ust != PTS_OK) return ust;
  unpacked_free(rq);
  Inference__ServerMetadataResponse r;
  inference__server_metadata_response__init(&r);
  r.name = (char *)pts_server_id(s);
  r.version = (char *)pts_server_version();
  r.n_extensions = PTS_GRPC_N_EXTENSIONS - (pts_shm_cuda_available(pts_server_shm(s)) ? 0 : 1);
  r.extensions = (char **)PTS_GRPC_EXTENSIONS;
  return pts_grpc_pack(&r.base, out, err);
}

/* A ModelMetadataResponse borrowing from the config; shapes get a leading
 * -1 when the model batches (perf_analyzer depends on it). */
struct metadata {
  Inference__ModelMetadataResponse r;
  char (*versions)[24];
  char **version_ptrs;
  Inference__ModelMetadataResponse__TensorMetadata *tensors;
  Inference__ModelMetadataResponse__TensorMetadata **tensor_ptrs;
  int64_t *shapes;
};

static void metadata_clear(struct metadata *md) {
  pts_free(md->versions);
  pts_free(md->version_ptrs);
  pts_free(md->tensors);
  pts_free(md->tensor_ptrs);
  pts_free(md->shapes);
}

static void tensor_meta(Inference__ModelMetadataResponse__TensorMetadata *t, const char *name,
                        int data_type, const int64_t *dims, size_t n_dims, bool batched,
                        int64_t **shape_pool) {
  inference__model_metadata_response__tensor_metadata__init(t);
  t->name = (char *)(name ? name : "");
  t->datatype = (char *)pts_dtype_name((enum pts_dtype)data_type);
  int64_t *shape = *shape_pool;
  size_t k = 0;
  if (batched) shape[k++] = -1;
  for (size_t i = 0; i < n_dims; i++) shape[k++] = dims[i];
  t->shape = shape;
  t->n_shape = k;
  *shape_pool += k;
}

static enum pts_status build_metadata(const char *name, const int64_t *versions, size_t n_versions,
                                      const Inference__ModelConfig *cfg, struct metadata *md,
                                      struct pts_error *err) {
  inference__model_metadata_response__init(&md->r);
  size_t n_in = cfg ? cfg->n_input : 0, n_out = cfg ? cfg->n_output : 0, n_dims = 0;
  for (size_t i = 0; i < n_in; i++) n_dims += 1 + cfg->input[i]->n_dims;
  for (size_t i = 0; i < n_out; i++) n_dims += 1 + cfg->output[i]->n_dims;
  size_t n_t = n_in + n_out;
  md->versions = pts_calloc(n_versions + 1, sizeof *md->versions);
  md->version_ptrs = pts_calloc(n_versions + 1, sizeof *md->version_ptrs);
  md->tensors = pts_calloc(n_t + 1, sizeof *md->tensors);
  md->tensor_ptrs = pts_calloc(n_t + 1, sizeof *md->tensor_ptrs);
  md->shapes = pts_calloc(n_dims + 1, sizeof *md->shapes);
  if (!md->versions || !md->version_ptrs || !md->tensors || !md->tensor_ptrs || !md->shapes)
    return pts_error_set(err, PTS_NOMEM, "out of memory building the metadata of model '%s'", name);
  for (size_t i = 0; i < n_versions; i++) {
    version_string(versions[i], md->versions[i]);
    md->version_ptrs[i] = md->versions[i];
  }
  md->r.name = (char *)name;
  md->r.n_versions = n_versions;
  md->r.versions = md->version_ptrs;
  md->r.platform = "";
  if (cfg && cfg->platform && cfg->platform[0])
    md->r.platform = cfg->platform;
  else if (cfg && cfg->backend)
    md->r.platform = cfg->backend;
  bool batched = cfg && cfg->max_batch_size > 0;
  int64_t *pool = md->shapes;
  for (size_t i = 0; i < n_in; i++) {
    const Inference__ModelInput *x = cfg->input[i];
    tensor_meta(&md->tensors[i], x->name, x->data_type, x->dims, x->n_dims, batched, &pool);
    md->tensor_ptrs[i] = &md->tensors[i];
  }
  for (size_t i = 0; i < n_out; i++) {
    const Inference__ModelOutput *x = cfg->output[i];
    tensor_meta(&md->tensors[n_in + i], x->name, x->data_type, x->dims, x->n_dims, batched, &pool);
    md->tensor_ptrs[n_in + i] = &md->tensors[n_in + i];
  }
  md->r.n_inputs = n_in;
  md->r.inputs = md->tensor_ptrs;
  md->r.n_outputs = n_out;
  md->r.outputs = md->tensor_ptrs + n_in;
  return PTS_OK;
}

static enum pts_status model_metadata(struct pts_server *s, const struct pts_buf *in,
                                      struct pts_grpc_reply *out, struct pts_error *err) {
  Inference__ModelMetadataRequest *rq;
  enum pts_status ust =
      unpack(&inference__model_metadata_request__descriptor, in, (ProtobufCMessage **)&rq, err);
  if (ust != PTS_OK) return ust;
  int64_t version, one = -1, *versions = NULL;
  size_t n = 1;
  struct pts_model *m = NULL;
  struct metadata md;
  memset(&md, 0, sizeof md);
  enum pts_status st = pts_grpc_parse_version(rq->version, rq->name, &version, err);
  if (st == PTS_OK) st = pts_server_model_get(s, rq->name, version, false, &m, err);
  if (st == PTS_OK) {
    one = pts_model_version(m);
    if (version < 0) st = pts_server_model_versions(s, rq->name, &versions, &n, err);
  }
  if (st == PTS_OK)
    st = build_metadata(rq->name, versions ? versions : &one, n, pts_model_config(m), &md, err);
  if (st == PTS_OK) st = pts_grpc_pack(&md.r.base, out, err);
  metadata_clear(&md);
  pts_free(versions);
  pts_model_release(m);
  unpacked_free(rq);
  return st;
}

static enum pts_status model_config(struct pts_server *s, const struct pts_buf *in,
                                    struct pts_grpc_reply *out, struct pts_error *err) {
  Inference__ModelConfigRequest *rq;
  enum pts_status ust =
      unpack(&inference__model_config_request__descriptor, in, (ProtobufCMessage **)&rq, err);
  if (ust != PTS_OK) return ust;
  int64_t version;
  struct pts_model *m = NULL;
  enum pts_status st = pts_grpc_parse_version(rq->version, rq->name, &version, err);
  if (st == PTS_OK) st = pts_server_model_get(s, rq->name, version, false, &m, err);
  unpacked_free(rq);
  if (st != PTS_OK) return st;
  const Inference__ModelConfig *cfg = pts_model_config(m);
  if (!cfg) {
    st = pts_error_set(err, PTS_INTERNAL, "model '%s' has no configuration", pts_model_name(m));
  } else {
    /* The completed config, packed as is: empty sub-messages that are
     * present (dynamic_batching {}) stay present on the wire. */
    Inference__ModelConfigResponse r;
    inference__model_config_response__init(&r);
    r.config = (Inference__ModelConfig *)cfg;
    st = pts_grpc_pack(&r.base, out, err);
  }
  pts_model_release(m);
  return st;
}

/* ------------------------------------------------------------------ */
/* repository                                                          */

/* An async repository rpc between its handler and the server's answer. */
struct pending {
  pts_grpc_async_done done;
  void *call;
};

static struct pending *pending_new(pts_grpc_async_done done, void *call, struct pts_error *err) {
  struct pending *p = pts_malloc(sizeof *p);
  if (!p) {
    pts_error_set(err, PTS_NOMEM, "out of memory accepting a repository request");
    return NULL;
  }
  p->done = done;
  p->call = call;
  return p;
}

static enum pts_status pack_index(const struct pts_index_entry *entries, size_t n,
                                  struct pts_grpc_reply *out, struct pts_error *err) {
  Inference__RepositoryIndexResponse__ModelIndex *models = pts_calloc(n + 1, sizeof *models);
  Inference__RepositoryIndexResponse__ModelIndex **ptrs = pts_calloc(n + 1, sizeof *ptrs);
  char(*versions)[24] = pts_calloc(n + 1, sizeof *versions);
  enum pts_status st;
  if (!models || !ptrs || !versions) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory building the repository index");
  } else {
    for (size_t i = 0; i < n; i++) {
      inference__repository_index_response__model_index__init(&models[i]);
      models[i].name = entries[i].name ? entries[i].name : "";
      version_string(entries[i].version, versions[i]);
      models[i].version = versions[i];
      /* A model found on disk but never loaded has no state, as over HTTP. */
      bool known = entries[i].version >= 0 || entries[i].state != PTS_MODEL_UNKNOWN;
      models[i].state = known ? (char *)pts_model_state_name(entries[i].state) : "";
      models[i].reason = entries[i].reason ? entries[i].reason : "";
      ptrs[i] = &models[i];
    }
    Inference__RepositoryIndexResponse r;
    inference__repository_index_response__init(&r);
    r.n_models = n;
    r.models = ptrs;
    st = pts_grpc_pack(&r.base, out, err);
  }
  pts_free(models);
  pts_free(ptrs);
  pts_free(versions);
  return st;
}

static void on_index(struct pts_index_entry *entries, size_t n, const struct pts_error *err,
                     void *arg) {
  struct pending *p = arg;
  struct pts_grpc_reply reply = {0, NULL, 0};
  struct pts_error packed = *err;
  if (err->code == PTS_OK) pack_index(entries, n, &reply, &packed);
  pts_server_index_free(entries, n);
  p->done(&reply, &packed, p->call);
  pts_free(p);
}

/* The repository name is ignored, as Triton's index ignores it. */
static enum pts_status repository_index(struct pts_server *s, const struct pts_buf *in,
                                        pts_grpc_async_done done, void *call,
                                        struct pts_error *err) {
  Inference__RepositoryIndexRequest *rq;
  enum pts_status st =
      unpack(&inference__repository_index_request__descriptor, in, (ProtobufCMessage **)&rq, err);
  if (st != PTS_OK) return st;
  bool ready = rq->ready;
  unpacked_free(rq);
  struct pending *p = pending_new(done, call, err);
  if (!p) return err->code;
  st = pts_server_index_async(s, ready, on_index, p, err);
  if (st != PTS_OK) pts_free(p);
  return st;
}

/* Load and unload answer an empty response message. */
static void on_control(const struct pts_error *err, void *arg) {
  struct pending *p = arg;
  struct pts_grpc_reply reply = {0, NULL, 0};
  struct pts_error packed = *err;
  if (err->code == PTS_OK) {
    Inference__RepositoryModelLoadResponse r; /* as empty as the unload response */
    inference__repository_model_load_response__init(&r);
    pts_grpc_pack(&r.base, &reply, &packed);
  }
  p->done(&reply, &packed, p->call);
  pts_free(p);
}

typedef Inference__ModelRepositoryParameter RepoParam;

static const char *param_kind(const RepoParam *v) {
  switch (v ? v->parameter_choice_case
            : INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE__NOT_SET) {
    case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
      return "bool_param";
    case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
      return "int64_param";
    case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM:
      return "string_param";
    case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BYTES_PARAM:
      return "bytes_param";
    default:
      return "no value";
  }
}

/* protocol-facts §2 (repository): `config` is a string_param, each
 * `file:<version>/<name>` a bytes_param holding the raw file; anything else
 * is refused. */
static enum pts_status load_params(const Inference__RepositoryModelLoadRequest *rq,
                                   struct pts_load_params *p, struct pts_error *err) {
  for (size_t i = 0; i < rq->n_parameters; i++) {
    const char *key = rq->parameters[i]->key ? rq->parameters[i]->key : "";
    const RepoParam *v = rq->parameters[i]->value;
    bool file = strncmp(key, "file:", 5) == 0;
    if (!file && strcmp(key, "config") != 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "unknown parameter '%.60s' in the load request of model '%s': "
                           "expected 'config' or 'file:<version>/<name>'",
                           key, rq->model_name);
    if (!file) {
      if (!v || v->parameter_choice_case !=
                    INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "parameter 'config' of the load request of model '%s' must be a "
                             "string_param, got %s",
                             rq->model_name, param_kind(v));
      pts_free(p->config);
      p->config_len = strlen(v->string_param);
      if (!(p->config = pts_strdup(v->string_param)))
        return pts_error_set(err, PTS_NOMEM, "out of memory reading a load request");
      continue;
    }
    if (!v || v->parameter_choice_case !=
                  INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BYTES_PARAM)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "parameter '%.60s' of the load request of model '%s' must be a "
                           "bytes_param, got %s",
                           key, rq->model_name, param_kind(v));
    uint8_t *data = pts_malloc(v->bytes_param.len + 1);
    if (!data) return pts_error_set(err, PTS_NOMEM, "out of memory reading a load request");
    if (v->bytes_param.len) memcpy(data, v->bytes_param.data, v->bytes_param.len);
    enum pts_status st = pts_load_params_add_file(p, key + 5, data, v->bytes_param.len, err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

static enum pts_status check_repository_name(const char *what, const char *repo,
                                             const char *model, struct pts_error *err) {
  if (repo && repo[0])
    return pts_error_set(err, PTS_UNSUPPORTED,
                         "failed to %s '%s': repository_name '%s' is not supported", what, model,
                         repo);
  return PTS_OK;
}

static enum pts_status model_load(struct pts_server *s, const struct pts_buf *in,
                                  pts_grpc_async_done done, void *call, struct pts_error *err) {
  Inference__RepositoryModelLoadRequest *rq;
  enum pts_status st = unpack(&inference__repository_model_load_request__descriptor, in,
                              (ProtobufCMessage **)&rq, err);
  if (st != PTS_OK) return st;
  struct pts_load_params params;
  memset(&params, 0, sizeof params);
  st = check_repository_name("load", rq->repository_name, rq->model_name, err);
  if (st == PTS_OK) st = load_params(rq, &params, err);
  struct pending *p = st == PTS_OK ? pending_new(done, call, err) : NULL;
  if (p) {
    st = pts_server_model_load_async(s, rq->model_name, &params, on_control, p, err);
    if (st != PTS_OK) pts_free(p);
  } else if (st == PTS_OK) {
    st = err->code;
  }
  pts_load_params_clear(&params);
  unpacked_free(rq);
  return st;
}

static enum pts_status model_unload(struct pts_server *s, const struct pts_buf *in,
                                    pts_grpc_async_done done, void *call,
                                    struct pts_error *err) {
  Inference__RepositoryModelUnloadRequest *rq;
  enum pts_status st = unpack(&inference__repository_model_unload_request__descriptor, in,
                              (ProtobufCMessage **)&rq, err);
  if (st != PTS_OK) return st;
  bool dependents = false;
  st = check_repository_name("unload", rq->repository_name, rq->model_name, err);
  for (size_t i = 0; st == PTS_OK && i < rq->n_parameters; i++) {
    const char *key = rq->parameters[i]->key ? rq->parameters[i]->key : "";
    const RepoParam *v = rq->parameters[i]->value;
    if (strcmp(key, "unload_dependents") != 0)
      st = pts_error_set(err, PTS_INVALID_ARG,
                         "unknown parameter '%.60s' in the unload request of model '%s': "
                         "expected 'unload_dependents'",
                         key, rq->model_name);
    else if (!v || v->parameter_choice_case !=
                       INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
      st = pts_error_set(err, PTS_INVALID_ARG,
                         "parameter 'unload_dependents' of the unload request of model '%s' "
                         "must be a bool_param, got %s",
                         rq->model_name, param_kind(v));
    else
      dependents = v->bool_param;
  }
  struct pending *p = st == PTS_OK ? pending_new(done, call, err) : NULL;
  if (p) {
    st = pts_server_model_unload_async(s, rq->model_name, dependents, on_control, p, err);
    if (st != PTS_OK) pts_free(p);
  } else if (st == PTS_OK) {
    st = err->code;
  }
  unpacked_free(rq);
  return st;
}

/* ------------------------------------------------------------------ */
/* statistics                                                          */

static void duration(Inference__StatisticDuration *d, const struct pts_stat_duration *v) {
  inference__statistic_duration__init(d);
  d->count = v->count;
  d->ns = v->ns;
}

/* The protobuf-c side of one model's statistics; borrows from the snapshot. */
struct stats_msg {
  Inference__ModelStatistics m;
  Inference__InferStatistics infer;
  Inference__StatisticDuration d[8];
  Inference__InferBatchStatistics *batches;
  Inference__InferBatchStatistics **batch_ptrs;
  Inference__StatisticDuration *batch_d;
  char version[24];
};

static bool stats_msg_build(const struct pts_model_stats *st, struct stats_msg *x) {
  inference__model_statistics__init(&x->m);
  inference__infer_statistics__init(&x->infer);
  version_string(st->version, x->version);
  x->m.name = st->name ? st->name : "";
  x->m.version = x->version;
  x->m.last_inference = st->last_inference_ms;
  x->m.inference_count = st->inference_count;
  x->m.execution_count = st->execution_count;
  const struct pts_stat_duration *src[8] = {
      &st->success,       &st->fail,           &st->queue,     &st->compute_input,
      &st->compute_infer, &st->compute_output, &st->cache_hit, &st->cache_miss};
  Inference__StatisticDuration **dst[8] = {&x->infer.success,       &x->infer.fail,
                                           &x->infer.queue,         &x->infer.compute_input,
                                           &x->infer.compute_infer, &x->infer.compute_output,
                                           &x->infer.cache_hit,     &x->infer.cache_miss};
  for (int i = 0; i < 8; i++) {
    duration(&x->d[i], src[i]);
    *dst[i] = &x->d[i];
  }
  x->m.inference_stats = &x->infer;
  size_t nb = st->n_batch_stats;
  x->batches = pts_calloc(nb + 1, sizeof *x->batches);
  x->batch_ptrs = pts_calloc(nb + 1, sizeof *x->batch_ptrs);
  x->batch_d = pts_calloc(3 * nb + 1, sizeof *x->batch_d);
  if (!x->batches || !x->batch_ptrs || !x->batch_d) return false;
  for (size_t i = 0; i < nb; i++) {
    const struct pts_batch_stat *b = &st->batch_stats[i];
    Inference__InferBatchStatistics *o = &x->batches[i];
    inference__infer_batch_statistics__init(o);
    o->batch_size = b->batch_size;
    duration(&x->batch_d[3 * i], &b->compute_input);
    duration(&x->batch_d[3 * i + 1], &b->compute_infer);
    duration(&x->batch_d[3 * i + 2], &b->compute_output);
    o->compute_input = &x->batch_d[3 * i];
    o->compute_infer = &x->batch_d[3 * i + 1];
    o->compute_output = &x->batch_d[3 * i + 2];
    x->batch_ptrs[i] = o;
  }
  x->m.n_batch_stats = nb;
  x->m.batch_stats = x->batch_ptrs;
  return true;
}

static void stats_msg_clear(struct stats_msg *x) {
  pts_free(x->batches);
  pts_free(x->batch_ptrs);
  pts_free(x->batch_d);
}

static enum pts_status stats_pack(const struct pts_model_stats *st, size_t n,
                                  struct pts_grpc_reply *out, struct pts_error *err) {
  struct stats_msg *x = pts_calloc(n + 1, sizeof *x);
  Inference__ModelStatistics **ptrs = pts_calloc(n + 1, sizeof *ptrs);
  enum pts_status rc = PTS_OK;
  if (!x || !ptrs) rc = pts_error_set(err, PTS_NOMEM, "out of memory rendering statistics");
  for (size_t i = 0; rc == PTS_OK && i < n; i++) {
    if (!stats_msg_build(&st[i], &x[i]))
      rc = pts_error_set(err, PTS_NOMEM, "out of memory rendering statistics");
    ptrs[i] = &x[i].m;
  }
  if (rc == PTS_OK) {
    Inference__ModelStatisticsResponse r;
    inference__model_statistics_response__init(&r);
    r.n_model_stats = n;
    r.model_stats = ptrs;
    rc = pts_grpc_pack(&r.base, out, err);
  }
  for (size_t i = 0; x && i < n; i++) stats_msg_clear(&x[i]);
  pts_free(x);
  pts_free(ptrs);
  return rc;
}

static enum pts_status model_statistics(struct pts_server *s, const struct pts_buf *in,
                                        struct pts_grpc_reply *out, struct pts_error *err) {
  Inference__ModelStatisticsRequest *rq;
  enum pts_status ust =
      unpack(&inference__model_statistics_request__descriptor, in, (ProtobufCMessage **)&rq, err);
  if (ust != PTS_OK) return ust;
  int64_t version = -1;
  struct pts_model_stats *st = NULL;
  size_t n = 0;
  enum pts_status rc = pts_grpc_parse_version(rq->version, rq->name, &version, err);
  if (rc == PTS_OK)
    rc = pts_server_model_stats(s, rq->name[0] ? rq->name : NULL, version, &st, &n, err);
  unpacked_free(rq);
  if (rc == PTS_OK) rc = stats_pack(st, n, out, err);
  pts_server_model_stats_free(st, n);
  return rc;
}

/* ------------------------------------------------------------------ */
/* trace                                                               */

/* Settings as the HTTP trace extension renders them (trace/trace.h), each
 * value a list of strings. */
static enum pts_status trace_reply(const char *model, struct pts_grpc_reply *out,
                                   struct pts_error *err) {
  struct pts_trace_settings *ts = pts_malloc(sizeof *ts);
  if (!ts) return pts_error_set(err, PTS_NOMEM, "out of memory rendering the trace settings");
  pts_trace_get(model, ts);
  Inference__TraceSettingResponse__SettingsEntry e[PTS_TRACE_MAX_KEYS], *ep[PTS_TRACE_MAX_KEYS];
  Inference__TraceSettingResponse__SettingValue v[PTS_TRACE_MAX_KEYS];
  for (size_t i = 0; i < ts->n; i++) {
    inference__trace_setting_response__settings_entry__init(&e[i]);
    inference__trace_setting_response__setting_value__init(&v[i]);
    v[i].n_value = ts->kv[i].n_values;
    v[i].value = (char **)ts->kv[i].values;
    e[i].key = (char *)ts->kv[i].key;
    e[i].value = &v[i];
    ep[i] = &e[i];
  }
  Inference__TraceSettingResponse r;
  inference__trace_setting_response__init(&r);
  r.n_settings = ts->n;
  r.settings = ep;
  enum pts_status st = pts_grpc_pack(&r.base, out, err);
  pts_free(ts);
  return st;
}

/* An empty settings map reads; otherwise the keys are applied (all or
 * none). A key with no values clears it (back to the global value). */
static enum pts_status trace_setting(struct pts_server *s, const struct pts_buf *in,
                                     struct pts_grpc_reply *out, struct pts_error *err) {
  Inference__TraceSettingRequest *rq;
  enum pts_status st =
      unpack(&inference__trace_setting_request__descriptor, in, (ProtobufCMessage **)&rq, err);
  if (st != PTS_OK) return st;
  char *model = NULL;
  if (rq->model_name && rq->model_name[0]) {
    struct pts_model *m = NULL;
    struct pts_error ignored;
    if (pts_server_model_get(s, rq->model_name, -1, false, &m, &ignored) != PTS_OK)
      st = pts_error_set(err, PTS_INVALID_ARG, "Request for unknown model : %s", rq->model_name);
    pts_model_release(m);
    model = rq->model_name;
  }
  struct pts_trace_update *u = NULL;
  if (st == PTS_OK && rq->n_settings) {
    u = pts_calloc(rq->n_settings, sizeof *u);
    if (!u) st = pts_error_set(err, PTS_NOMEM, "out of memory updating the trace settings");
  }
  for (size_t i = 0; st == PTS_OK && i < rq->n_settings; i++) {
    const Inference__TraceSettingRequest__SettingValue *val = rq->settings[i]->value;
    u[i].key = rq->settings[i]->key;
    u[i].values = val ? (const char *const *)val->value : NULL;
    u[i].n_values = val ? val->n_value : 0;
    u[i].clear = u[i].n_values == 0;
  }
  if (st == PTS_OK && rq->n_settings) st = pts_trace_update(model, u, rq->n_settings, err);
  if (st == PTS_OK) st = trace_reply(model, out, err);
  pts_free(u);
  unpacked_free(rq);
  return st;
}

/* ------------------------------------------------------------------ */
/* logging                                                             */

typedef Inference__LogSettingsRequest__SettingValue LogValue;

static const char *log_kind(const LogValue *v) {
  switch (v ? v->parameter_choice_case
            : INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE__NOT_SET) {
    case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM:
      return "bool_param";
    case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM:
      return "uint32_param";
    case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM:
      return "string_param";
    default:
      return "no value";
  }
}

static enum pts_status log_bool(const char *key, const LogValue *v, bool *out,
                                struct pts_error *err) {
  if (!v || v->parameter_choice_case !=
                INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM)
    return pts_error_set(err, PTS_INVALID_ARG, "log setting '%s' must be a bool_param, got %s", key,
                         log_kind(v));
  *out = v->bool_param;
  return PTS_OK;
}

/* Applies one setting to `ls` (validated all before any takes effect). */
static enum pts_status log_apply(const char *key, const LogValue *v, struct pts_log_settings *ls,
                                 struct pts_error *err) {
  if (strcmp(key, "log_info") == 0) return log_bool(key, v, &ls->info, err);
  if (strcmp(key, "log_warning") == 0) return log_bool(key, v, &ls->warning, err);
  if (strcmp(key, "log_error") == 0) return log_bool(key, v, &ls->error, err);
  if (strcmp(key, "log_verbose_level") == 0) {
    if (!v ||
        v->parameter_choice_case !=
            INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM ||
        v->uint32_param > INT32_MAX)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "log setting 'log_verbose_level' must be a uint32_param up to %d, "
                           "got %s",
                           INT32_MAX, log_kind(v));
    ls->verbose_level = (int)v->uint32_param;
    return PTS_OK;
  }
  if (strcmp(key, "log_format") == 0) {
    if (!v || v->parameter_choice_case !=
                  INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "log setting 'log_format' must be a string_param, got %s", log_kind(v));
    if (strcmp(v->string_param, "default") == 0)
      ls->format = PTS_LOG_FORMAT_DEFAULT;
    else if (strcmp(v->string_param, "ISO8601") == 0)
      ls->format = PTS_LOG_FORMAT_ISO8601;
    else
      return pts_error_set(err, PTS_INVALID_ARG,
                           "log setting 'log_format' must be 'default' or 'ISO8601', got '%.40s'",
                           v->string_param);
    return PTS_OK;
  }
  if (strcmp(key, "log_file") == 0)
    return pts_error_set(err, PTS_UNSUPPORTED,
                         "log setting 'log_file' can not be changed over the network; use "
                         "--log-file");
  return pts_error_set(err, PTS_INVALID_ARG,
                       "unknown log setting '%.60s': expected log_file, log_info, log_warning, "
                       "log_error, log_verbose_level or log_format",
                       key);
}

typedef Inference__LogSettingsResponse__SettingValue LogOut;
typedef Inference__LogSettingsResponse__SettingsEntry LogEntry;

static void log_out_bool(LogEntry *e, LogOut *v, const char *key, bool b) {
  inference__log_settings_response__settings_entry__init(e);
  inference__log_settings_response__setting_value__init(v);
  v->parameter_choice_case =
      INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM;
  v->bool_param = b;
  e->key = (char *)key;
  e->value = v;
}

static void log_out_string(LogEntry *e, LogOut *v, const char *key, const char *s) {
  inference__log_settings_response__settings_entry__init(e);
  inference__log_settings_response__setting_value__init(v);
  v->parameter_choice_case =
      INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM;
  v->string_param = (char *)s;
  e->key = (char *)key;
  e->value = v;
}

static enum pts_status log_settings(struct pts_server *s, const struct pts_buf *in,
                                    struct pts_grpc_reply *out, struct pts_error *err) {
  (void)s;
  Inference__LogSettingsRequest *rq;
  enum pts_status ust =
      unpack(&inference__log_settings_request__descriptor, in, (ProtobufCMessage **)&rq, err);
  if (ust != PTS_OK) return ust;
  struct pts_log_settings ls = pts_log_get();
  enum pts_status st = PTS_OK;
  for (size_t i = 0; i < rq->n_settings && st == PTS_OK; i++)
    st = log_apply(rq->settings[i]->key, rq->settings[i]->value, &ls, err);
  bool changed = rq->n_settings > 0;
  unpacked_free(rq);
  if (st != PTS_OK) return st;
  if (changed) pts_log_set(&ls);

  /* The current settings, as the HTTP logging extension renders them. */
  LogEntry e[6], *ep[6];
  LogOut v[6];
  char log_file[4096];
  pts_log_get_file(log_file, sizeof log_file);
  log_out_string(&e[0], &v[0], "log_file", log_file);
  log_out_bool(&e[1], &v[1], "log_info", ls.info);
  log_out_bool(&e[2], &v[2], "log_warning", ls.warning);
  log_out_bool(&e[3], &v[3], "log_error", ls.error);
  inference__log_settings_response__settings_entry__init(&e[4]);
  inference__log_settings_response__setting_value__init(&v[4]);
  v[4].parameter_choice_case =
      INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM;
  v[4].uint32_param = (uint32_t)ls.verbose_level;
  e[4].key = "log_verbose_level";
  e[4].value = &v[4];
  log_out_string(&e[5], &v[5], "log_format",
                 ls.format == PTS_LOG_FORMAT_ISO8601 ? "ISO8601" : "default");
  for (int i = 0; i < 6; i++) ep[i] = &e[i];
  Inference__LogSettingsResponse r;
  inference__log_settings_response__init(&r);
  r.n_settings = 6;
  r.settings = ep;
  return pts_grpc_pack(&r.base, out, err);
}

/* ------------------------------------------------------------------ */
/* the table                                                           */

#define SVC "/inference.GRPCInferenceService/"

static const struct pts_grpc_rpc RPCS[] = {
    {SVC "ServerLive", PTS_GRPC_UNARY, server_live, NULL},
    {SVC "ServerReady", PTS_GRPC_UNARY, server_ready, NULL},
    {SVC "ModelReady", PTS_GRPC_UNARY, model_ready, NULL},
    {SVC "ServerMetadata", PTS_GRPC_UNARY, server_metadata, NULL},
    {SVC "ModelMetadata", PTS_GRPC_UNARY, model_metadata, NULL},
    {PTS_GRPC_INFER_PATH, PTS_GRPC_INFER, NULL, NULL},
    {SVC "ModelStreamInfer", PTS_GRPC_STREAM, NULL, NULL},
    {SVC "ModelConfig", PTS_GRPC_UNARY, model_config, NULL},
    {SVC "ModelStatistics", PTS_GRPC_UNARY, model_statistics, NULL},
    {SVC "RepositoryIndex", PTS_GRPC_ASYNC, NULL, repository_index},
    {SVC "RepositoryModelLoad", PTS_GRPC_ASYNC, NULL, model_load},
    {SVC "RepositoryModelUnload", PTS_GRPC_ASYNC, NULL, model_unload},
    {SVC "SystemSharedMemoryStatus", PTS_GRPC_UNARY, pts_grpc_system_shm_status, NULL},
    {SVC "SystemSharedMemoryRegister", PTS_GRPC_UNARY, pts_grpc_system_shm_register, NULL},
    {SVC "SystemSharedMemoryUnregister", PTS_GRPC_UNARY, pts_grpc_system_shm_unregister, NULL},
    {SVC "CudaSharedMemoryStatus", PTS_GRPC_UNARY, pts_grpc_cuda_shm_status, NULL},
    {SVC "CudaSharedMemoryRegister", PTS_GRPC_UNARY, pts_grpc_cuda_shm_register, NULL},
    {SVC "CudaSharedMemoryUnregister", PTS_GRPC_UNARY, pts_grpc_cuda_shm_unregister, NULL},
    {SVC "TraceSetting", PTS_GRPC_UNARY, trace_setting, NULL},
    {SVC "LogSettings", PTS_GRPC_UNARY, log_settings, NULL},
    {"/grpc.health.v1.Health/Check", PTS_GRPC_UNARY, health_check, NULL},
};

const struct pts_grpc_rpc *pts_grpc_rpc_find(const char *path, size_t len) {
  for (size_t i = 0; i < sizeof RPCS / sizeof RPCS[0]; i++)
    if (strlen(RPCS[i].path) == len && memcmp(RPCS[i].path, path, len) == 0) return &RPCS[i];
  return NULL;
}
