/* backends/identity/identity.c — output i is input i.
 *
 * The protocol, validation and scheduling tests need a model that runs
 * without LibTorch and whose answer is known in advance. Outputs are views of
 * the inputs (same buffer, one more reference), so this also exercises the
 * zero-copy path end to end.
 *
 * Test hooks (config parameters; tests only): execute_delay_ms and
 * execute_delay_ms_per_item keep requests in flight; load_gate_file makes
 * model_load wait until that file exists (so a test can watch a model in
 * LOADING, or several loading at once, without timing anything);
 * fail_load_versions ("2,3") makes those versions fail to load;
 * fail_load_attempts ("2") makes the first two loads of each version in
 * this process fail (so --model-load-retry-count has something to retry);
 * pipelined ("true") makes instances pipelined (backend.h execute_begin:
 * begin wires the outputs, end sleeps the delay, as a device would take
 * its time), so the scheduler's pipeline runs in the real server;
 * parameters_output ("PARAMS") names a last, extra TYPE_STRING output with
 * dims [ -1 ] that carries the request parameters the backend received
 * (backend.h: a batch of one request's), one "<key>=<value>" element each
 * in the order given, so tests see what reaches a model (header
 * forwarding, ensembles passing them on).
 *
 * Threading: as backend.h; execute keeps no state, so instances of one model
 * may run concurrently.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_api/backend.h"
#include "config/model_config.h"
#include "core/alloc.h"
#include "tensor/bytes.h"

struct identity_model {
  char *name;
  const Inference__ModelConfig *config; /* borrowed until model_unload */
  long delay_ms; /* parameters.execute_delay_ms: lets tests keep requests in flight */
  long delay_per_item_ms; /* parameters.execute_delay_ms_per_item: × batch size, so
                             batches of different sizes finish out of order */
  bool pipelined; /* parameters.pipelined: execute_begin/execute_end (test hook) */
  bool params_output; /* parameters.parameters_output: the last output lists the parameters */
};

/* parameters.parameters_output must name the last output, a TYPE_STRING of
 * dims [ -1 ]; that output is then not an echo. */
static enum pts_status check_params_output(const char *name, const Inference__ModelConfig *cfg,
                                           bool *on, struct pts_error *err) {
  const char *want = pts_model_config_param(cfg, "parameters_output");
  *on = want && *want;
  if (!*on) return PTS_OK;
  const Inference__ModelOutput *last = cfg->n_output ? cfg->output[cfg->n_output - 1] : NULL;
  if (!last || strcmp(last->name, want) != 0 ||
      last->data_type != INFERENCE__DATA_TYPE__TYPE_STRING || last->n_dims != 1 ||
      last->dims[0] != -1)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "identity backend: model '%s': parameter parameters_output '%s' must "
                         "name the last output, a TYPE_STRING with dims [ -1 ]",
                         name, want);
  return PTS_OK;
}

static enum pts_status check_pairs(const char *name, const Inference__ModelConfig *cfg,
                                   bool params_output, struct pts_error *err) {
  Inference__ModelConfig paired = *cfg;
  if (params_output) paired.n_output--;
  cfg = &paired;
  if (cfg->n_input != cfg->n_output)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "identity backend: model '%s' has %zu inputs and %zu outputs; output i "
                         "echoes input i, so the counts must be equal",
                         name, cfg->n_input, cfg->n_output);
  for (size_t i = 0; i < cfg->n_input; i++) {
    const Inference__ModelInput *in = cfg->input[i];
    const Inference__ModelOutput *out = cfg->output[i];
    if (in->data_type != out->data_type)
      return pts_error_set(
          err, PTS_INVALID_ARG,
          "identity backend: output '%s' of model '%s' is %s but input '%s' is %s; output %zu "
          "echoes input %zu, so the data types must be equal",
          out->name, name, pts_dtype_config_name((enum pts_dtype)out->data_type), in->name,
          pts_dtype_config_name((enum pts_dtype)in->data_type), i, i);
  }
  return PTS_OK;
}

/* parameters.load_gate_file: wait (up to load_gate_timeout_ms, default a
 * minute) until the file exists. */
static enum pts_status wait_for_gate(const struct pts_backend_model_desc *desc,
                                     struct pts_error *err) {
  const char *gate = pts_model_config_param(desc->config, "load_gate_file");
  if (!gate || !*gate) return PTS_OK;
  long timeout_ms = 60000;
  enum pts_status st =
      pts_model_config_param_int(desc->config, "load_gate_timeout_ms", 60000, &timeout_ms, err);
  if (st != PTS_OK) return st;
  for (long waited = 0; access(gate, F_OK) != 0; waited += 5) {
    if (waited >= timeout_ms)
      return pts_error_set(err, PTS_UNAVAILABLE,
                           "identity backend: model '%s': load_gate_file '%s' did not appear "
                           "within %ld ms",
                           desc->name, gate, timeout_ms);
    struct timespec ts = {0, 5000000L};
    nanosleep(&ts, NULL);
  }
  return PTS_OK;
}

/* parameters.fail_load_versions: a comma-separated list of versions. */
static enum pts_status check_fail_versions(const struct pts_backend_model_desc *desc,
                                           struct pts_error *err) {
  const char *list = pts_model_config_param(desc->config, "fail_load_versions");
  for (const char *p = list; p && *p;) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "identity backend: model '%s': parameter fail_load_versions must be "
                           "a comma-separated list of versions, got '%s'",
                           desc->name, list);
    if (v == (long long)desc->version)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "identity backend: model '%s' version %lld fails to load, as "
                           "parameters.fail_load_versions asks",
                           desc->name, v);
    p = *end == ',' ? end + 1 : end;
  }
  return PTS_OK;
}

/* parameters.fail_load_attempts: how many loads of each version have
 * failed so far, per process. Loads run on several threads at once. */
static pthread_mutex_t attempts_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char key[160]; /* "<model>:<version>" */
  long failed;
} attempts[32];

static enum pts_status check_fail_attempts(const struct pts_backend_model_desc *desc,
                                           struct pts_error *err) {
  long want = 0;
  enum pts_status st =
      pts_model_config_param_int(desc->config, "fail_load_attempts", 0, &want, err);
  if (st != PTS_OK || want <= 0) return st;
  char key[sizeof attempts[0].key];
  snprintf(key, sizeof key, "%s:%lld", desc->name, (long long)desc->version);
  long failed = -1;
  pthread_mutex_lock(&attempts_mu);
  for (size_t i = 0; i < sizeof attempts / sizeof attempts[0] && failed < 0; i++) {
    if (attempts[i].key[0] && strcmp(attempts[i].key, key) != 0) continue;
    if (!attempts[i].key[0]) snprintf(attempts[i].key, sizeof attempts[i].key, "%s", key);
    failed = attempts[i].failed < want ? attempts[i].failed++ : want;
  }
  pthread_mutex_unlock(&attempts_mu);
  if (failed >= 0 && failed < want)
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "identity backend: model '%s' version %lld: load attempt %ld fails, as "
                         "parameters.fail_load_attempts (%ld) asks",
                         desc->name, (long long)desc->version, failed + 1, want);
  return PTS_OK;
}

static enum pts_status identity_model_load(const struct pts_backend_model_desc *desc,
                                           void **model_state, struct pts_error *err) {
  bool params_output = false;
  enum pts_status st = check_params_output(desc->name, desc->config, &params_output, err);
  if (st == PTS_OK) st = check_pairs(desc->name, desc->config, params_output, err);
  if (st == PTS_OK) st = wait_for_gate(desc, err);
  if (st == PTS_OK) st = check_fail_versions(desc, err);
  if (st == PTS_OK) st = check_fail_attempts(desc, err);
  if (st != PTS_OK) return st;
  long delay_ms = 0;
  st = pts_model_config_param_int(desc->config, "execute_delay_ms", 0, &delay_ms, err);
  if (st != PTS_OK) return st;
  if (delay_ms < 0 || delay_ms > 600000)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "identity backend: model '%s': parameter execute_delay_ms must be in "
                         "0..600000, got %ld",
                         desc->name, delay_ms);
  long per_item_ms = 0;
  st = pts_model_config_param_int(desc->config, "execute_delay_ms_per_item", 0, &per_item_ms, err);
  if (st != PTS_OK) return st;
  if (per_item_ms < 0 || per_item_ms > 60000)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "identity backend: model '%s': parameter execute_delay_ms_per_item must "
                         "be in 0..60000, got %ld",
                         desc->name, per_item_ms);
  const char *pipelined = pts_model_config_param(desc->config, "pipelined");
  struct identity_model *m = pts_calloc(1, sizeof *m);
  if (!m || !(m->name = pts_strdup(desc->name))) {
    pts_free(m);
    return pts_error_set(err, PTS_NOMEM, "identity backend: out of memory loading '%s'",
                         desc->name);
  }
  m->config = desc->config;
  m->delay_ms = delay_ms;
  m->delay_per_item_ms = per_item_ms;
  m->pipelined = pipelined && strcmp(pipelined, "true") == 0;
  m->params_output = params_output;
  *model_state = m;
  return PTS_OK;
}

static void identity_model_unload(void *model_state) {
  struct identity_model *m = model_state;
  if (!m) return;
  pts_free(m->name);
  pts_free(m);
}

static enum pts_status identity_instance_create(void *model_state,
                                                const struct pts_backend_instance_desc *desc,
                                                void **instance_state, struct pts_error *err) {
  (void)desc;
  (void)err;
  *instance_state = model_state; /* nothing per instance */
  return PTS_OK;
}

static void identity_instance_destroy(void *instance_state) { (void)instance_state; }

/* The test hooks' delay for this batch. */
static void delay(const struct identity_model *m, const struct pts_batch *batch) {
  long items = batch->batch_size > 0 ? (long)batch->batch_size : 1;
  long delay_ms = m->delay_ms + m->delay_per_item_ms * items;
  if (delay_ms > 0) {
    struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
}

/* The parameters_output hook: one BYTES element "<key>=<value>" per
 * parameter of the batch, the same list in each row of a batching model. */
static enum pts_status params_tensor(const struct identity_model *m, const struct pts_batch *b,
                                     struct pts_tensor *out, struct pts_error *err) {
  int64_t rows = b->batch_size > 0 ? b->batch_size : 1;
  size_t row = 0;
  for (size_t k = 0; k < b->n_params; k++)
    row += 4 + (size_t)pts_request_param_format(&b->params[k], NULL, 0);
  out->name = pts_strdup(m->config->output[m->config->n_output - 1]->name);
  out->buf = pts_buf_new(row * (size_t)rows + 1);
  if (!out->name || !out->buf)
    return pts_error_set(err, PTS_NOMEM, "identity backend: out of memory in model '%s'",
                         m->name);
  size_t used = 0;
  for (int64_t r = 0; r < rows; r++) {
    for (size_t k = 0; k < b->n_params; k++) {
      char text[1024];
      int n = pts_request_param_format(&b->params[k], text, sizeof text);
      uint32_t len = n < (int)sizeof text ? (uint32_t)n : (uint32_t)sizeof text - 1;
      pts_bytes_put(out->buf->data, out->buf->size, &used, text, len);
    }
  }
  out->dtype = PTS_DTYPE_BYTES;
  out->data = out->buf->data;
  out->byte_size = used;
  out->shape.ndim = b->batch_size > 0 ? 2 : 1;
  out->shape.dims[0] = b->batch_size > 0 ? rows : (int64_t)b->n_params;
  out->shape.dims[1] = (int64_t)b->n_params;
  return PTS_OK;
}

/* Output i as a view of input i. */
static enum pts_status echo(const struct identity_model *m, struct pts_batch *batch,
                            struct pts_error *err) {
  const Inference__ModelConfig *cfg = m->config;
  if (batch->n_inputs != cfg->n_input || batch->n_outputs != cfg->n_output)
    return pts_error_set(err, PTS_INTERNAL,
                         "identity backend: model '%s' got %zu inputs and %zu "
                         "output slots, expected %zu and %zu",
                         m->name, batch->n_inputs, batch->n_outputs, cfg->n_input, cfg->n_output);
  for (size_t i = 0; i < batch->n_outputs; i++) {
    if (m->params_output && i + 1 == batch->n_outputs)
      return params_tensor(m, batch, &batch->outputs[i], err);
    const struct pts_tensor *in = &batch->inputs[i];
    if (!in->data && in->byte_size == 0 && in->shape.ndim == 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "identity backend: model '%s' needs input '%s' to produce output "
                           "'%s'",
                           m->name, cfg->input[i]->name, cfg->output[i]->name);
    struct pts_tensor *out = &batch->outputs[i];
    out->name = pts_strdup(cfg->output[i]->name);
    if (!out->name)
      return pts_error_set(err, PTS_NOMEM, "identity backend: out of memory in model '%s'",
                           m->name);
    out->dtype = in->dtype;
    out->shape = in->shape;
    out->data = in->data;
    out->byte_size = in->byte_size;
    out->buf = pts_buf_retain(in->buf);
  }
  return PTS_OK;
}

static enum pts_status identity_execute(void *instance_state, struct pts_batch *batch,
                                        struct pts_error *err) {
  const struct identity_model *m = instance_state;
  delay(m, batch);
  return echo(m, batch, err);
}

static bool identity_pipelined(void *instance_state) {
  const struct identity_model *m = instance_state;
  return m->pipelined;
}

/* Outputs wired by a begin that fails halfway are cleared by the scheduler,
 * as after a failed execute. */
static enum pts_status identity_begin(void *instance_state, struct pts_batch *batch,
                                      struct pts_error *err) {
  return echo(instance_state, batch, err);
}

static enum pts_status identity_end(void *instance_state, struct pts_batch *batch,
                                    struct pts_error *err) {
  (void)err;
  delay(instance_state, batch);
  return PTS_OK;
}

const struct pts_backend pts_identity_backend = {
    .name = "identity",
    .model_load = identity_model_load,
    .model_unload = identity_model_unload,
    .instance_create = identity_instance_create,
    .instance_destroy = identity_instance_destroy,
    .execute = identity_execute,
    .pipelined = identity_pipelined,
    .execute_begin = identity_begin,
    .execute_end = identity_end,
};
