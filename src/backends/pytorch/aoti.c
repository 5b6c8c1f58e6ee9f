/* backends/pytorch/aoti.c — see aoti.h. */
#include "backends/pytorch/aoti.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"

static const char *const device_names[] = {"cpu", "cuda", "mps"};

static enum pts_status nomem(struct pts_error *err) {
  return pts_error_set(err, PTS_NOMEM, "out of memory reading the AOTInductor package");
}

/* ---- devices ---- */

enum pts_status pts_aoti_device_parse(const char *device_key, enum pts_aoti_device *out,
                                      struct pts_error *err) {
  if (!device_key || !*device_key)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the package's metadata has no AOTI_DEVICE_KEY (the device it was "
                         "compiled for)");
  for (int d = 0; d < 3; d++)
    if (strcmp(device_key, device_names[d]) == 0) {
      *out = (enum pts_aoti_device)d;
      return PTS_OK;
    }
  return pts_error_set(err, PTS_INVALID_ARG,
                       "the package was compiled for '%s'; ptserve runs packages compiled for "
                       "cpu, cuda or mps",
                       device_key);
}

enum pts_status pts_aoti_settle_groups(Inference__ModelConfig *cfg, enum pts_aoti_device dev,
                                       struct pts_error *err) {
  bool gpu_package = dev != PTS_AOTI_CPU;
  for (size_t i = 0; i < cfg->n_instance_group; i++) {
    Inference__ModelInstanceGroup *g = cfg->instance_group[i];
    switch (g->kind) {
      case INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO:
        if (gpu_package) {
          g->kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU;
        } else {
          g->kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU;
          pts_free(g->gpus); /* KIND_CPU lists no GPUs */
          g->gpus = NULL;
          g->n_gpus = 0;
        }
        break;
      case INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU:
        if (gpu_package)
          return pts_error_set(err, PTS_INVALID_ARG,
                               "the package was compiled for %s, but instance group '%s' is "
                               "KIND_CPU (cpu); serve it with KIND_GPU, or export the model "
                               "for the cpu",
                               device_names[dev], g->name);
        break;
      case INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU:
        if (!gpu_package)
          return pts_error_set(err, PTS_INVALID_ARG,
                               "the package was compiled for cpu, but instance group '%s' is "
                               "KIND_GPU (cuda or mps); serve it with KIND_CPU, or export the "
                               "model for the GPU",
                               g->name);
        break;
      default:
        return pts_error_set(err, PTS_INVALID_ARG,
                             "instance group '%s' has kind %d; AOTInductor packages run on "
                             "KIND_CPU or KIND_GPU instances",
                             g->name, (int)g->kind);
    }
  }
  return PTS_OK;
}

/* ---- the I/O record ---- */

static enum pts_status parse_entry(json_t *e, const char *side, size_t i, const char *name,
                                   struct pts_aoti_tensor *t, struct pts_error *err) {
  json_t *dtype = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape");
  if (!json_is_string(dtype) || !json_is_array(shape))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "metadata '%s': %s %zu (%s) needs a \"dtype\" string and a \"shape\" "
                         "array",
                         PTS_AOTI_IO_KEY, side, i, name);
  t->dtype = pts_dtype_from_config_name(json_string_value(dtype));
  if (t->dtype == PTS_DTYPE_INVALID || t->dtype == PTS_DTYPE_BYTES)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "metadata '%s': %s %zu (%s) has dtype '%s', not a tensor type of the "
                         "model configuration",
                         PTS_AOTI_IO_KEY, side, i, name, json_string_value(dtype));
  size_t nd = json_array_size(shape);
  if (nd > PTS_TENSOR_MAX_DIMS)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "metadata '%s': %s %zu (%s) has %zu dimensions, more than %d",
                         PTS_AOTI_IO_KEY, side, i, name, nd, PTS_TENSOR_MAX_DIMS);
  t->shape.ndim = (int)nd;
  for (size_t k = 0; k < nd; k++) {
    json_t *d = json_array_get(shape, k);
    if (!json_is_integer(d) || json_integer_value(d) < -1)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "metadata '%s': %s %zu (%s) has a shape entry that is not a size or "
                           "-1",
                           PTS_AOTI_IO_KEY, side, i, name);
    t->shape.dims[k] = json_integer_value(d);
  }
  json_t *lo = json_object_get(e, "min"), *hi = json_object_get(e, "max");
  if (!lo && !hi) return PTS_OK;
  if (!json_is_array(lo) || !json_is_array(hi) || json_array_size(lo) != nd ||
      json_array_size(hi) != nd)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "metadata '%s': %s %zu (%s) needs \"min\" and \"max\" arrays as long as "
                         "its shape",
                         PTS_AOTI_IO_KEY, side, i, name);
  for (size_t k = 0; k < nd; k++) {
    json_t *a = json_array_get(lo, k), *b = json_array_get(hi, k);
    if (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 ||
        json_integer_value(b) < -1 ||
        (json_integer_value(b) >= 0 && json_integer_value(b) < json_integer_value(a)))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "metadata '%s': %s %zu (%s) has a range for dimension %zu that is not "
                           "min <= max (max -1: unbounded)",
                           PTS_AOTI_IO_KEY, side, i, name, k);
    t->min[k] = json_integer_value(a);
    t->max[k] = json_integer_value(b);
  }
  t->ranged = true;
  return PTS_OK;
}

static enum pts_status parse_side(json_t *root, const char *key, const struct pts_callspec *cs,
                                  enum pts_callspec_side side, size_t *n,
                                  struct pts_aoti_tensor **out, struct pts_error *err) {
  json_t *arr = json_object_get(root, key);
  size_t want = pts_callspec_count(cs, side);
  if (!json_is_array(arr) || json_array_size(arr) != want)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "metadata '%s' records %zu %s, but the call specification has %zu",
                         PTS_AOTI_IO_KEY, json_array_size(arr), key, want);
  if (!(*out = pts_calloc(want ? want : 1, sizeof **out))) return nomem(err);
  *n = want;
  for (size_t i = 0; i < want; i++) {
    enum pts_status st = parse_entry(json_array_get(arr, i), side ? "output" : "input", i,
                                     pts_callspec_name(cs, side, i), &(*out)[i], err);
    if (st) return st;
  }
  return PTS_OK;
}

enum pts_status pts_aoti_io_parse(const char *json, const struct pts_callspec *cs,
                                  struct pts_aoti_io **out, struct pts_error *err) {
  *out = NULL;
  json_error_t jerr;
  json_t *root = json_loads(json, 0, &jerr);
  if (!json_is_object(root)) {
    json_decref(root);
    return pts_error_set(err, PTS_INVALID_ARG, "metadata '%s' is not a JSON object (%s)",
                         PTS_AOTI_IO_KEY, root ? "another JSON value" : jerr.text);
  }
  struct pts_aoti_io *io = pts_calloc(1, sizeof *io);
  enum pts_status st = io ? PTS_OK : nomem(err);
  if (st == PTS_OK)
    st = parse_side(root, "inputs", cs, PTS_CALLSPEC_INPUTS, &io->n_inputs, &io->inputs, err);
  if (st == PTS_OK)
    st = parse_side(root, "outputs", cs, PTS_CALLSPEC_OUTPUTS, &io->n_outputs, &io->outputs, err);
  json_decref(root);
  if (st) {
    pts_aoti_io_free(io);
    return st;
  }
  *out = io;
  return PTS_OK;
}

void pts_aoti_io_free(struct pts_aoti_io *io) {
  if (!io) return;
  pts_free(io->inputs);
  pts_free(io->outputs);
  pts_free(io);
}

/* ---- auto-complete ---- */

/* The first dimension of a batching model's tensor must be dynamic. */
static enum pts_status static_batch(const Inference__ModelConfig *cfg, const char *what,
                                    const char *name, const struct pts_shape *s,
                                    struct pts_error *err) {
  char shape[128];
  pts_shape_format(s, shape, sizeof shape);
  return pts_error_set(err, PTS_INVALID_ARG,
                       "max_batch_size is %d, but %s '%s' of the package has the static shape %s "
                       "(no dynamic first dimension to batch along): export it with a dynamic "
                       "batch dimension (torch.export.Dim), or serve it with max_batch_size: 0",
                       (int)cfg->max_batch_size, what, name, shape);
}

/* Config dims for a recorded shape: without the batch dimension when the
 * model batches. */
static enum pts_status config_dims(const Inference__ModelConfig *cfg, const char *what,
                                   const char *name, const struct pts_aoti_tensor *t,
                                   int64_t **dims, size_t *n_dims, struct pts_error *err) {
  int skip = cfg->max_batch_size > 0 ? 1 : 0;
  if (skip && (t->shape.ndim == 0 || t->shape.dims[0] != -1))
    return static_batch(cfg, what, name, &t->shape, err);
  *n_dims = (size_t)(t->shape.ndim - skip);
  if (*n_dims == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s '%s' of the package is a scalar%s; write it in config.pbtxt with "
                         "dims: [ 1 ] and reshape: { shape: [ ] }",
                         what, name, skip ? " per batch entry" : "");
  if (!(*dims = pts_malloc(*n_dims * sizeof **dims))) return nomem(err);
  memcpy(*dims, t->shape.dims + skip, *n_dims * sizeof **dims);
  return PTS_OK;
}

static enum pts_status fill_inputs(Inference__ModelConfig *cfg, const struct pts_callspec *cs,
                                   const struct pts_aoti_io *io, struct pts_error *err) {
  size_t n = pts_callspec_count(cs, PTS_CALLSPEC_INPUTS);
  if (!(cfg->input = pts_calloc(n ? n : 1, sizeof *cfg->input))) return nomem(err);
  for (size_t i = 0; i < n; i++) {
    Inference__ModelInput *in = pts_malloc(sizeof *in);
    if (!in) return nomem(err);
    inference__model_input__init(in);
    cfg->input[cfg->n_input++] = in;
    const char *name = pts_callspec_name(cs, PTS_CALLSPEC_INPUTS, i);
    if (!(in->name = pts_strdup(name))) return nomem(err);
    in->data_type = (Inference__DataType)io->inputs[i].dtype;
    enum pts_status st =
        config_dims(cfg, "input", name, &io->inputs[i], &in->dims, &in->n_dims, err);
    if (st) return st;
  }
  return PTS_OK;
}

static enum pts_status fill_outputs(Inference__ModelConfig *cfg, const struct pts_callspec *cs,
                                    const struct pts_aoti_io *io, struct pts_error *err) {
  size_t n = pts_callspec_count(cs, PTS_CALLSPEC_OUTPUTS);
  if (!(cfg->output = pts_calloc(n ? n : 1, sizeof *cfg->output))) return nomem(err);
  for (size_t i = 0; i < n; i++) {
    Inference__ModelOutput *o = pts_malloc(sizeof *o);
    if (!o) return nomem(err);
    inference__model_output__init(o);
    cfg->output[cfg->n_output++] = o;
    const char *name = pts_callspec_name(cs, PTS_CALLSPEC_OUTPUTS, i);
    if (!(o->name = pts_strdup(name))) return nomem(err);
    o->data_type = (Inference__DataType)io->outputs[i].dtype;
    enum pts_status st =
        config_dims(cfg, "output", name, &io->outputs[i], &o->dims, &o->n_dims, err);
    if (st) return st;
  }
  return PTS_OK;
}

enum pts_status pts_aoti_complete(Inference__ModelConfig *cfg, const struct pts_callspec *cs,
                                  const struct pts_aoti_io *io, struct pts_error *err) {
  bool need_in = cfg->n_input == 0, need_out = cfg->n_output == 0;
  if (!need_in && !need_out) return PTS_OK;
  if (!io || !pts_model_config_autofill()) {
    char in[200], out[200];
    pts_callspec_list(cs, PTS_CALLSPEC_INPUTS, in, sizeof in);
    pts_callspec_list(cs, PTS_CALLSPEC_OUTPUTS, out, sizeof out);
    const char *what = need_in ? (need_out ? "inputs or outputs" : "inputs") : "outputs";
    if (!pts_model_config_autofill())
      return pts_error_set(err, PTS_INVALID_ARG,
                           "the configuration lists no %s, and auto-complete is disabled "
                           "(--disable-auto-complete-config); list them in config.pbtxt: "
                           "inputs %s; outputs %s",
                           what, in, out);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the configuration lists no %s, and the package does not record their "
                         "data types and shapes (metadata '%s', written by "
                         "examples/export_aoti.py); list them in config.pbtxt: inputs %s; "
                         "outputs %s",
                         what, PTS_AOTI_IO_KEY, in, out);
  }
  /* Built in place: on an error the partly filled lists stay in cfg, which
   * the caller frees with the model. */
  enum pts_status st = PTS_OK;
  if (need_in) st = fill_inputs(cfg, cs, io, err);
  if (st == PTS_OK && need_out) st = fill_outputs(cfg, cs, io, err);
  return st;
}

/* ---- binding ---- */

enum pts_status pts_aoti_bind(const Inference__ModelConfig *cfg, const struct pts_callspec *cs,
                              int *input_slot, int *output_index, struct pts_error *err) {
  size_t n_in = pts_callspec_count(cs, PTS_CALLSPEC_INPUTS);
  enum pts_status st;
  for (size_t i = 0; i < cfg->n_input; i++) {
    const Inference__ModelInput *in = cfg->input[i];
    if (in->optional)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s' is optional, but a compiled package takes every input",
                           in->name);
    if (in->data_type == INFERENCE__DATA_TYPE__TYPE_STRING)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s' is TYPE_STRING; AOTInductor packages take tensors",
                           in->name);
    size_t k;
    if ((st = pts_callspec_resolve(cs, PTS_CALLSPEC_INPUTS, in->name, &k, err))) return st;
    for (size_t j = 0; j < i; j++)
      if (input_slot[j] == (int)k)
        return pts_error_set(err, PTS_INVALID_ARG, "inputs '%s' and '%s' both name %s",
                             cfg->input[j]->name, in->name,
                             pts_callspec_name(cs, PTS_CALLSPEC_INPUTS, k));
    input_slot[i] = (int)k;
  }
  if (cfg->n_input != n_in) {
    /* Name the first package input nothing feeds. */
    size_t missing = 0;
    for (bool bound = true; missing < n_in && bound; missing += bound) {
      bound = false;
      for (size_t i = 0; i < cfg->n_input; i++) bound = bound || input_slot[i] == (int)missing;
    }
    char names[256];
    pts_callspec_list(cs, PTS_CALLSPEC_INPUTS, names, sizeof names);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "configuration expects %zu inputs, the package takes %zu (%s); nothing "
                         "feeds %s",
                         cfg->n_input, n_in, names,
                         pts_callspec_name(cs, PTS_CALLSPEC_INPUTS, missing));
  }
  for (size_t o = 0; o < cfg->n_output; o++) {
    size_t k;
    if (cfg->output[o]->data_type == INFERENCE__DATA_TYPE__TYPE_STRING)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "output '%s' is TYPE_STRING; AOTInductor packages return tensors",
                           cfg->output[o]->name);
    if ((st = pts_callspec_resolve(cs, PTS_CALLSPEC_OUTPUTS, cfg->output[o]->name, &k, err)))
      return st;
    for (size_t j = 0; j < o; j++)
      if (output_index[j] == (int)k)
        return pts_error_set(err, PTS_INVALID_ARG, "outputs '%s' and '%s' both name %s",
                             cfg->output[j]->name, cfg->output[o]->name,
                             pts_callspec_name(cs, PTS_CALLSPEC_OUTPUTS, k));
    output_index[o] = (int)k;
  }
  return PTS_OK;
}

/* ---- checking a written config against the record ---- */

static enum pts_status check_one(const Inference__ModelConfig *cfg, const char *what,
                                 const char *cfg_name, const char *pkg_name, int data_type,
                                 const int64_t *dims, size_t n_dims,
                                 const Inference__ModelTensorReshape *reshape,
                                 const struct pts_aoti_tensor *rec, struct pts_error *err) {
  if ((int)rec->dtype != data_type)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s '%s' is %s in the configuration, but the package's %s is %s", what,
                         cfg_name, pts_dtype_config_name((enum pts_dtype)data_type), pkg_name,
                         pts_dtype_config_name(rec->dtype));
  if (cfg->max_batch_size > 0 && (rec->shape.ndim == 0 || rec->shape.dims[0] != -1))
    return static_batch(cfg, what, pkg_name, &rec->shape, err);
  /* The shape the package sees: the batch dimension, then reshape or dims. */
  struct pts_shape want;
  if (!pts_shape_set(&want, reshape ? reshape->shape : dims, reshape ? reshape->n_shape : n_dims) ||
      (cfg->max_batch_size > 0 && !pts_shape_prepend(&want, -1)))
    return pts_error_set(err, PTS_INVALID_ARG, "%s '%s' has too many dimensions", what, cfg_name);
  bool ok = want.ndim == rec->shape.ndim;
  for (int k = 0; ok && k < want.ndim; k++)
    ok = rec->shape.dims[k] == -1 || rec->shape.dims[k] == want.dims[k];
  if (ok) return PTS_OK;
  char a[128], b[128];
  pts_shape_format(&want, a, sizeof a);
  pts_shape_format(&rec->shape, b, sizeof b);
  return pts_error_set(err, PTS_INVALID_ARG,
                       "%s '%s' has the shape %s in the configuration (batch dimension "
                       "included as -1), but the package's %s has %s (-1: dynamic)",
                       what, cfg_name, a, pkg_name, b);
}

/* "1 to 16", "2 or more" */
static void format_range(int64_t lo, int64_t hi, char *out, size_t n) {
  if (hi < 0)
    snprintf(out, n, "%lld or more", (long long)lo);
  else
    snprintf(out, n, "%lld to %lld", (long long)lo, (long long)hi);
}

/* The recorded ranges of an input against a batching config and its fixed
 * sizes. */
static enum pts_status check_ranges(const Inference__ModelConfig *cfg, const char *cfg_name,
                                    const char *pkg_name, const int64_t *dims, size_t n_dims,
                                    const Inference__ModelTensorReshape *reshape,
                                    const struct pts_aoti_tensor *rec, struct pts_error *err) {
  if (!rec->ranged) return PTS_OK;
  char range[64];
  int skip = 0;
  if (cfg->max_batch_size > 0) {
    skip = 1;
    format_range(rec->min[0], rec->max[0], range, sizeof range);
    if (rec->min[0] > 1 || (rec->max[0] >= 0 && rec->max[0] < cfg->max_batch_size))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "max_batch_size is %d, but the package takes batch sizes %s (its input "
                           "%s): export it with a batch dimension from 1 to at least %d",
                           (int)cfg->max_batch_size, range, pkg_name, (int)cfg->max_batch_size);
  }
  const int64_t *d = reshape ? reshape->shape : dims;
  size_t nd = reshape ? reshape->n_shape : n_dims;
  for (size_t k = 0; k < nd && (int)k + skip < rec->shape.ndim; k++) {
    int64_t lo = rec->min[k + skip], hi = rec->max[k + skip];
    if (d[k] < 0 || (d[k] >= lo && (hi < 0 || d[k] <= hi))) continue;
    format_range(lo, hi, range, sizeof range);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s' has size %lld in dimension %zu of the configuration, but the "
                         "package's %s takes %s there",
                         cfg_name, (long long)d[k], k, pkg_name, range);
  }
  return PTS_OK;
}

enum pts_status pts_aoti_check(const Inference__ModelConfig *cfg, const struct pts_callspec *cs,
                               const struct pts_aoti_io *io, const int *input_slot,
                               const int *output_index, struct pts_error *err) {
  enum pts_status st;
  for (size_t i = 0; i < cfg->n_input; i++) {
    const Inference__ModelInput *in = cfg->input[i];
    size_t k = (size_t)input_slot[i];
    const char *pkg_name = pts_callspec_name(cs, PTS_CALLSPEC_INPUTS, k);
    if ((st = check_one(cfg, "input", in->name, pkg_name, (int)in->data_type, in->dims, in->n_dims,
                        in->reshape, &io->inputs[k], err)) ||
        (st = check_ranges(cfg, in->name, pkg_name, in->dims, in->n_dims, in->reshape,
                           &io->inputs[k], err)))
      return st;
  }
  for (size_t o = 0; o < cfg->n_output; o++) {
    const Inference__ModelOutput *out = cfg->output[o];
    size_t k = (size_t)output_index[o];
    if ((st = check_one(cfg, "output", out->name, pts_callspec_name(cs, PTS_CALLSPEC_OUTPUTS, k),
                        (int)out->data_type, out->dims, out->n_dims, out->reshape,
                        &io->outputs[k], err)))
      return st;
  }
  return PTS_OK;
}

enum pts_status pts_aoti_check_shape(const struct pts_aoti_io *io, size_t k, const char *name,
                                     const struct pts_shape *shape, struct pts_error *err) {
  if (!io || k >= io->n_inputs || !io->inputs[k].ranged) return PTS_OK;
  const struct pts_aoti_tensor *rec = &io->inputs[k];
  if (shape->ndim != rec->shape.ndim) {
    char a[128], b[128];
    pts_shape_format(shape, a, sizeof a);
    pts_shape_format(&rec->shape, b, sizeof b);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s' reaches the package with the shape %s, but it takes %s", name,
                         a, b);
  }
  for (int d = 0; d < shape->ndim; d++) {
    int64_t v = shape->dims[d], lo = rec->min[d], hi = rec->max[d];
    if (v >= lo && (hi < 0 || v <= hi)) continue;
    char range[64];
    format_range(lo, hi, range, sizeof range);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s' has size %lld in dimension %d, but the compiled package "
                         "takes %s there",
                         name, (long long)v, d, range);
  }
  return PTS_OK;
}
