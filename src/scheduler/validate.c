/* scheduler/validate.c — see validate.h. The order of the checks follows
 * Triton's request normalization, so that a request with several problems
 * reports the same one first: outputs, input names, batch dimension, batch
 * size, then each input's data type, shape and size. */
#include "scheduler/validate.h"

#include <stdio.h>
#include <string.h>

#include "config/model_config.h"
#include "scheduler/classify.h"
#include "tensor/bytes.h"

static const char batch_note[] =
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension "
    "to be prepended to each input shape. If you want to specify the full shape including the "
    "batch dim in your input dims config, try setting max_batch_size to zero. See the model "
    "configuration docs for more info on max_batch_size.";

static const char *safe_name(const char *s) { return s ? s : ""; }

static enum pts_status check_outputs(const Inference__ModelConfig *cfg, const char *model,
                                     const struct pts_infer_request *req, struct pts_error *err) {
  for (size_t i = 0; i < req->n_outputs; i++) {
    const char *name = safe_name(req->outputs[i].name);
    const Inference__ModelOutput *o = pts_model_config_output(cfg, name);
    if (!o)
      return pts_error_set(err, PTS_INVALID_ARG, "unexpected inference output '%s' for model '%s'",
                           name, model);
    /* Classification (§1.9) ranks numbers: not BOOL, FP16, BF16 or BYTES. */
    enum pts_dtype dt = (enum pts_dtype)o->data_type;
    if (req->outputs[i].classification > 0 && !pts_classify_supported(dt))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "output '%s' of model '%s': classification is not supported for "
                           "datatype %s",
                           name, model, pts_dtype_name(dt));
    for (size_t j = 0; j < i; j++)
      if (strcmp(safe_name(req->outputs[j].name), name) == 0)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "inference output '%s' is requested more than once for model '%s'",
                             name, model);
  }
  return PTS_OK;
}

static bool request_has_input(const struct pts_infer_request *req, const char *name) {
  for (size_t i = 0; i < req->n_inputs; i++)
    if (strcmp(safe_name(req->inputs[i].name), name) == 0) return true;
  return false;
}

/* Appends "'a','b'" style lists, as Triton's message does. */
static void append_name(char *out, size_t size, size_t *used, const char *name) {
  if (*used >= size) return;
  int n = snprintf(out + *used, size - *used, "%s'%s'", *used > 1 ? "," : "", name);
  if (n > 0) *used += (size_t)n;
}

static enum pts_status missing_inputs(const Inference__ModelConfig *cfg, const char *model,
                                      const struct pts_infer_request *req, struct pts_error *err) {
  size_t required = 0;
  bool missing = false;
  for (size_t i = 0; i < cfg->n_input; i++) {
    if (cfg->input[i]->optional) continue;
    required++;
    if (!request_has_input(req, cfg->input[i]->name)) missing = true;
  }
  if (!missing) return PTS_OK;

  char got[160] = "[", want[160] = "[";
  size_t got_used = 1, want_used = 1;
  for (size_t i = 0; i < req->n_inputs; i++)
    append_name(got, sizeof got - 1, &got_used, safe_name(req->inputs[i].name));
  for (size_t i = 0; i < cfg->n_input; i++)
    if (!cfg->input[i]->optional && !request_has_input(req, cfg->input[i]->name))
      append_name(want, sizeof want - 1, &want_used, cfg->input[i]->name);
  strncat(got, "]", sizeof got - strlen(got) - 1);
  strncat(want, "]", sizeof want - strlen(want) - 1);

  char expected[64];
  if (required == cfg->n_input)
    snprintf(expected, sizeof expected, "%zu inputs", required);
  else
    snprintf(expected, sizeof expected, "number of inputs between %zu and %zu", required,
             cfg->n_input);
  return pts_error_set(err, PTS_INVALID_ARG,
                       "expected %s but got %zu inputs for model '%s'. Got input(s) %s, "
                       "but missing required input(s) %s. Please provide all required input(s).",
                       expected, req->n_inputs, model, got, want);
}

static enum pts_status check_input_names(const Inference__ModelConfig *cfg, const char *model,
                                         const struct pts_infer_request *req,
                                         struct pts_error *err) {
  for (size_t i = 0; i < req->n_inputs; i++) {
    const char *name = safe_name(req->inputs[i].name);
    for (size_t j = 0; j < i; j++)
      if (strcmp(safe_name(req->inputs[j].name), name) == 0)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "inference input '%s' is given more than once for model '%s'", name,
                             model);
    if (!pts_model_config_input(cfg, name))
      return pts_error_set(err, PTS_INVALID_ARG, "unexpected inference input '%s' for model '%s'",
                           name, model);
  }
  return missing_inputs(cfg, model, req, err);
}

static enum pts_status check_dims_specified(const char *model, const struct pts_infer_request *req,
                                            struct pts_error *err) {
  for (size_t i = 0; i < req->n_inputs; i++) {
    const struct pts_tensor *t = &req->inputs[i];
    for (int d = 0; d < t->shape.ndim; d++) {
      if (t->shape.dims[d] >= 0) continue;
      char shape[256];
      pts_shape_format(&t->shape, shape, sizeof shape);
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s' for model '%s' has shape %s: all input dimensions should "
                           "be specified (no negative values)",
                           safe_name(t->name), model, shape);
    }
  }
  return PTS_OK;
}

static enum pts_status check_batch(const Inference__ModelConfig *cfg, const char *model,
                                   const struct pts_infer_request *req, int64_t *batch_size,
                                   struct pts_error *err) {
  *batch_size = 0;
  if (cfg->max_batch_size <= 0) return PTS_OK;
  bool have = false;
  int64_t b = 0;
  for (size_t i = 0; i < req->n_inputs; i++) {
    const struct pts_tensor *t = &req->inputs[i];
    if (t->shape.ndim == 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s' has no shape but model requires batch dimension for '%s'",
                           safe_name(t->name), model);
    if (!have) {
      b = t->shape.dims[0];
      have = true;
    } else if (t->shape.dims[0] != b) {
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s' batch size does not match other inputs for '%s'",
                           safe_name(t->name), model);
    }
  }
  if (have && b < 1)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "inference request batch-size must be >= 1 for '%s', got %lld", model,
                         (long long)b);
  if (b > cfg->max_batch_size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "inference request batch-size must be <= %d for '%s'",
                         (int)cfg->max_batch_size, model);
  *batch_size = b;
  return PTS_OK;
}

static bool shape_matches(const Inference__ModelInput *in, const struct pts_shape *s, int skip) {
  if ((size_t)(s->ndim - skip) != in->n_dims) return false;
  for (size_t d = 0; d < in->n_dims; d++)
    if (in->dims[d] != -1 && in->dims[d] != s->dims[skip + (int)d]) return false;
  return true;
}

static enum pts_status shape_error(const Inference__ModelConfig *cfg, const char *model,
                                   const Inference__ModelInput *in, const struct pts_tensor *t,
                                   struct pts_error *err) {
  struct pts_shape full;
  char want[192], got[192];
  if (pts_shape_set(&full, in->dims, in->n_dims) &&
      (cfg->max_batch_size == 0 || pts_shape_prepend(&full, -1)))
    pts_shape_format(&full, want, sizeof want);
  else
    snprintf(want, sizeof want, "(more dims than ptserve supports)");
  pts_shape_format(&t->shape, got, sizeof got);
  if (cfg->max_batch_size > 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "unexpected shape for input '%s' for model '%s'. Expected %s, got %s. %s",
                         in->name, model, want, got, batch_note);
  return pts_error_set(err, PTS_INVALID_ARG,
                       "unexpected shape for input '%s' for model '%s'. Expected %s, got %s",
                       in->name, model, want, got);
}

static enum pts_status check_size(const char *model, const struct pts_tensor *t,
                                  struct pts_error *err) {
  const char *name = safe_name(t->name);
  if (!t->data && t->byte_size > 0)
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s' for model '%s' has no data", name,
                         model);
  int64_t count = pts_shape_count(&t->shape);
  if (count < 0)
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s' for model '%s' has too many elements",
                         name, model);
  if (t->dtype == PTS_DTYPE_BYTES) {
    int64_t got = 0;
    if (pts_bytes_validate(t->data, t->byte_size, -1, &got, name, err) != PTS_OK) {
      pts_error_prefix(err, "model '%s'", model);
      return err ? err->code : PTS_INVALID_ARG;
    }
    if (got != count)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "expected %lld string elements for inference input '%s' for model "
                           "'%s', got %lld",
                           (long long)count, name, model, (long long)got);
    return PTS_OK;
  }
  int64_t want = pts_shape_byte_size(t->dtype, &t->shape);
  if (want < 0)
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s' for model '%s' is too large", name,
                         model);
  if ((uint64_t)want != (uint64_t)t->byte_size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input byte size mismatch for input '%s' for model '%s'. Expected "
                         "%lld, got %zu",
                         name, model, (long long)want, t->byte_size);
  return PTS_OK;
}

static enum pts_status check_inputs(const Inference__ModelConfig *cfg, const char *model,
                                    const struct pts_infer_request *req, struct pts_error *err) {
  int skip = cfg->max_batch_size > 0 ? 1 : 0;
  for (size_t i = 0; i < req->n_inputs; i++) {
    const struct pts_tensor *t = &req->inputs[i];
    const Inference__ModelInput *in = pts_model_config_input(cfg, safe_name(t->name));
    enum pts_dtype want = (enum pts_dtype)in->data_type;
    if (t->dtype != want)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "inference input '%s' data-type is '%s', but model '%s' expects '%s'",
                           in->name, pts_dtype_name(t->dtype), model, pts_dtype_name(want));
    if (!shape_matches(in, &t->shape, skip)) return shape_error(cfg, model, in, t, err);
    enum pts_status st = check_size(model, t, err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

enum pts_status pts_validate_request(const Inference__ModelConfig *cfg, const char *model_name,
                                     const struct pts_infer_request *req, int64_t *batch_size,
                                     struct pts_error *err) {
  const char *model = safe_name(model_name);
  int64_t b = 0;
  enum pts_status st = check_outputs(cfg, model, req, err);
  if (st == PTS_OK) st = check_input_names(cfg, model, req, err);
  if (st == PTS_OK) st = check_dims_specified(model, req, err);
  if (st == PTS_OK) st = check_batch(cfg, model, req, &b, err);
  if (st == PTS_OK) st = check_inputs(cfg, model, req, err);
  if (st == PTS_OK && batch_size) *batch_size = b;
  return st;
}
