/* scheduler/warmup.c — see warmup.h. */
#include "scheduler/warmup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/log.h"
#include "scheduler/request.h"
#include "scheduler/reshape.h"
#include "tensor/bytes.h"
#include "tensor/tensor.h"

static const Inference__ModelWarmup__Input *find_sample(const Inference__ModelWarmup *w,
                                                         const char *name) {
  for (size_t i = 0; i < w->n_inputs; i++)
    if (w->inputs[i]->key && strcmp(w->inputs[i]->key, name) == 0) return w->inputs[i]->value;
  return NULL;
}

/* A small deterministic generator: warmup exists to exercise kernels, and
 * reproducible data makes a failing warmup reproducible too. */
static uint32_t next_random(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

/* Fills n elements of a fixed-size type with values every kernel accepts:
 * small non-negative integers, floats in [0.5, 1). */
static void fill_random(enum pts_dtype t, void *data, int64_t n, uint32_t *state) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t r = next_random(state);
    switch (t) {
      case PTS_DTYPE_BOOL: ((uint8_t *)data)[i] = r & 1; break;
      case PTS_DTYPE_UINT8: case PTS_DTYPE_INT8: ((uint8_t *)data)[i] = r % 8; break;
      case PTS_DTYPE_UINT16: case PTS_DTYPE_INT16: ((uint16_t *)data)[i] = r % 8; break;
      case PTS_DTYPE_UINT32: case PTS_DTYPE_INT32: ((uint32_t *)data)[i] = r % 8; break;
      case PTS_DTYPE_UINT64: case PTS_DTYPE_INT64: ((uint64_t *)data)[i] = r % 8; break;
      /* binary16 0x3800..0x3bff is [0.5, 1); bfloat16 0x3f00..0x3f7f likewise. */
      case PTS_DTYPE_FP16: ((uint16_t *)data)[i] = (uint16_t)(0x3800 | (r & 0x3ff)); break;
      case PTS_DTYPE_BF16: ((uint16_t *)data)[i] = (uint16_t)(0x3f00 | (r & 0x7f)); break;
      case PTS_DTYPE_FP32: ((float *)data)[i] = 0.5f + (float)(r & 0xffff) / 131072.0f; break;
      case PTS_DTYPE_FP64: ((double *)data)[i] = 0.5 + (double)(r & 0xffff) / 131072.0; break;
      default: break;
    }
  }
}

static enum pts_status read_file(const char *model_dir, const char *file, void **data,
                                 size_t *size, struct pts_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/warmup/%s", model_dir, file);
  FILE *f = fopen(path, "rb");
  if (!f)
    return pts_error_set(err, PTS_INVALID_ARG, "can not open warmup/%s: %s", file, strerror(errno));
  enum pts_status st = PTS_OK;
  long len = -1;
  if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
  if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
    st = pts_error_set(err, PTS_INVALID_ARG, "can not read warmup/%s", file);
  } else if (!(*data = pts_malloc((size_t)len))) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory reading warmup/%s", file);
  } else if (fread(*data, 1, (size_t)len, f) != (size_t)len) {
    pts_free(*data);
    *data = NULL;
    st = pts_error_set(err, PTS_INVALID_ARG, "short read of warmup/%s", file);
  }
  fclose(f);
  *size = (size_t)len;
  return st;
}

/* One sample of one input (without the batch dimension), in wire layout. */
static enum pts_status make_sample(const char *model_dir, const Inference__ModelInput *in,
                                   const Inference__ModelWarmup__Input *v, int64_t count,
                                   uint32_t *rng, void **data, size_t *size,
                                   struct pts_error *err) {
  enum pts_dtype t = (enum pts_dtype)in->data_type;
  *data = NULL;
  if (v->input_data_type_case == INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_INPUT_DATA_FILE) {
    enum pts_status st = read_file(model_dir, v->input_data_file, data, size, err);
    if (st) return st;
    if (t == PTS_DTYPE_BYTES)
      return pts_bytes_validate(*data, *size, count, NULL, in->name, err);
    size_t want = (size_t)count * pts_dtype_size(t);
    if (*size != want)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "warmup/%s holds %zu bytes, but %lld elements of %s need %zu",
                           v->input_data_file, *size, (long long)count, pts_dtype_name(t), want);
    return PTS_OK;
  }
  /* BYTES: empty strings, also for random_data (as Triton does). */
  *size = t == PTS_DTYPE_BYTES ? (size_t)count * 4 : (size_t)count * pts_dtype_size(t);
  *data = pts_calloc(1, *size ? *size : 1);
  if (!*data) return pts_error_set(err, PTS_NOMEM, "out of memory for warmup data");
  if (t != PTS_DTYPE_BYTES &&
      v->input_data_type_case == INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_RANDOM_DATA)
    fill_random(t, *data, count, rng);
  return PTS_OK;
}

/* Builds the backend's view of input `in` for one warmup: the sample
 * repeated `batch` times, shape [batch] + dims (reshaped when configured). */
static enum pts_status make_input(const Inference__ModelConfig *cfg, const char *model_dir,
                                  const Inference__ModelInput *in,
                                  const Inference__ModelWarmup__Input *v, int64_t batch,
                                  uint32_t *rng, struct pts_tensor *out, struct pts_error *err) {
  struct pts_shape sample;
  if (!pts_shape_set(&sample, v->dims, v->n_dims))
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s' has too many dims", in->name);
  int64_t count = pts_shape_count(&sample);
  if (count < 0) return pts_error_set(err, PTS_INVALID_ARG, "input '%s': bad dims", in->name);

  struct pts_shape shape = sample;
  if (in->reshape) {
    enum pts_status st = pts_reshape_map(in->dims, in->n_dims, in->reshape->shape,
                                                 in->reshape->n_shape, &sample, &shape, err);
    if (st) return st;
  }
  if (cfg->max_batch_size > 0) {
    if (!pts_shape_prepend(&shape, batch))
      return pts_error_set(err, PTS_INVALID_ARG, "input '%s' has too many dims", in->name);
  } else {
    batch = 1;
  }

  void *one = NULL;
  size_t one_size = 0;
  enum pts_status st = make_sample(model_dir, in, v, count, rng, &one, &one_size, err);
  if (st) {
    pts_free(one);
    return st;
  }
  struct pts_buf *buf = pts_buf_new(one_size * (size_t)batch);
  if (!buf) {
    pts_free(one);
    return pts_error_set(err, PTS_NOMEM, "out of memory for warmup data");
  }
  for (int64_t b = 0; b < batch; b++)
    memcpy((char *)buf->data + (size_t)b * one_size, one, one_size);
  pts_free(one);
  *out = (struct pts_tensor){.name = pts_strdup(in->name),
                             .dtype = (enum pts_dtype)in->data_type,
                             .shape = shape,
                             .data = buf->data,
                             .byte_size = buf->size,
                             .buf = buf};
  if (!out->name) {
    pts_tensor_clear(out);
    return pts_error_set(err, PTS_NOMEM, "out of memory for warmup data");
  }
  return PTS_OK;
}

static enum pts_status run_one(const Inference__ModelConfig *cfg, const char *model_dir,
                               const Inference__ModelWarmup *w, const struct pts_backend *backend,
                               void *instance_state, struct pts_error *err) {
  size_t n_in = cfg->n_input, n_out = cfg->n_output;
  struct pts_tensor *inputs = pts_calloc(n_in ? n_in : 1, sizeof *inputs);
  struct pts_tensor *outputs = pts_calloc(n_out ? n_out : 1, sizeof *outputs);
  enum pts_status st = PTS_OK;
  if (!inputs || !outputs) st = pts_error_set(err, PTS_NOMEM, "out of memory for warmup");
  int64_t batch = w->batch_size ? w->batch_size : 1;
  uint32_t rng = 12345;
  for (size_t i = 0; i < n_in && st == PTS_OK; i++) {
    const Inference__ModelWarmup__Input *v = find_sample(w, cfg->input[i]->name);
    if (!v) {
      st = pts_error_set(err, PTS_INVALID_ARG, "no data for input '%s'", cfg->input[i]->name);
      break;
    }
    st = make_input(cfg, model_dir, cfg->input[i], v, batch, &rng, &inputs[i], err);
    if (st) pts_error_prefix(err, "input '%s'", cfg->input[i]->name);
  }
  uint32_t runs = w->count ? w->count : 1;
  for (uint32_t r = 0; r < runs && st == PTS_OK; r++) {
    struct pts_batch b = {.batch_size = cfg->max_batch_size > 0 ? batch : 0,
                          .n_inputs = n_in,
                          .inputs = inputs,
                          .n_outputs = n_out,
                          .outputs = outputs};
    st = backend->execute(instance_state, &b, err);
    if (st != PTS_OK && err && err->code == PTS_OK) pts_error_set(err, st, "execute failed");
    for (size_t k = 0; k < n_out; k++) pts_tensor_clear(&outputs[k]);
  }
  for (size_t i = 0; inputs && i < n_in; i++) pts_tensor_clear(&inputs[i]);
  pts_free(inputs);
  pts_free(outputs);
  return st;
}

enum pts_status pts_warmup_run(const Inference__ModelConfig *cfg, const char *model_name,
                               const char *model_dir, const struct pts_backend *backend,
                               void *instance_state, const char *instance_name,
                               struct pts_error *err) {
  for (size_t i = 0; i < cfg->n_model_warmup; i++) {
    const Inference__ModelWarmup *w = cfg->model_warmup[i];
    uint64_t start = pts_now_ns();
    enum pts_status st = run_one(cfg, model_dir, w, backend, instance_state, err);
    if (st) {
      pts_error_prefix(err, "model '%s', instance '%s': warmup '%s' failed", model_name,
                       instance_name, w->name ? w->name : "");
      return st;
    }
    PTS_LOG_INFO("model '%s', instance '%s': warmup '%s' ran %u time(s) at batch size %u in "
                 "%.3f ms",
                 model_name, instance_name, w->name ? w->name : "", w->count ? w->count : 1,
                 w->batch_size ? w->batch_size : 1, (double)(pts_now_ns() - start) / 1e6);
  }
  return PTS_OK;
}
