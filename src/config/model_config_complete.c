/* config/model_config_complete.c — Triton's core autofill, normalization and
 * validation of a ModelConfig (protocol-facts §4.1, §4.3, §4.4, §3.3), plus
 * the rejection of everything ptserve does not implement; see
 * pts_model_config_complete in model_config.h.
 *
 * Order matters and follows Triton: name, then backend/platform, then (ours)
 * the unsupported-feature check, then tensor validation, then the defaults
 * that depend on validated values, then the remaining checks.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config/model_config.h"
#include "config/model_config_sequence.h"
#include "core/alloc.h"
#include "core/name.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

/* Every message names the model first: it may be read far from the file,
 * in a repository-load response or a log line. */
static enum pts_status fail(struct pts_error *err, const Inference__ModelConfig *cfg,
                            const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static enum pts_status fail(struct pts_error *err, const Inference__ModelConfig *cfg,
                            const char *fmt, ...) {
  char what[PTS_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return pts_error_set(err, PTS_INVALID_ARG, "model '%s': %s", cfg->name, what);
}

static enum pts_status unsupported(struct pts_error *err, const Inference__ModelConfig *cfg,
                                   const char *field, const char *why) {
  return fail(err, cfg, "'%s' is not supported by ptserve: %s", field, why);
}

static enum pts_status nomem(struct pts_error *err, const Inference__ModelConfig *cfg) {
  return pts_error_set(err, PTS_NOMEM, "model '%s': out of memory completing the config",
                       cfg->name);
}

static bool is_empty(const char *s) { return !s || !s[0]; }

/* Replaces a string field (freeing the old value unless it is protobuf-c's
 * shared empty string). */
static bool set_string(char **field, const char *value) {
  char *copy = pts_strdup(value);
  if (!copy) return false;
  if (*field && *field != protobuf_c_empty_string) pts_free(*field);
  *field = copy;
  return true;
}

/* ---- name ---- */

static enum pts_status complete_name(Inference__ModelConfig *cfg, const char *model_name,
                                     struct pts_error *err) {
  if (is_empty(cfg->name)) {
    if (is_empty(model_name))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "model config has no 'name' and no model directory name was given");
    return set_string(&cfg->name, model_name) ? PTS_OK : nomem(err, cfg);
  }
  if (!is_empty(model_name) && strcmp(cfg->name, model_name) != 0)
    return pts_error_set(
        err, PTS_INVALID_ARG,
        "model '%s': config.pbtxt gives name '%s', which does not match the model directory name",
        model_name, cfg->name);
  return PTS_OK;
}

/* ---- backend and platform ---- */

static bool is_torchscript_platform(const char *p) {
  return strcmp(p, "pytorch_libtorch") == 0 || strcmp(p, "libtorch") == 0;
}

/* Triton probes the lexicographically first subdirectory of the model
 * (normally the lowest version) for a known model file. Returns the file
 * found ("model.pt" / "model.pt2") or NULL. */
static const char *probe_model_file(const char *model_dir) {
  DIR *d = model_dir ? opendir(model_dir) : NULL;
  if (!d) return NULL;
  char first[256] = "", path[4096];
  struct dirent *e;
  struct stat st;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof first) continue;
    if (first[0] && strcmp(e->d_name, first) >= 0) continue;
    snprintf(path, sizeof path, "%s/%s", model_dir, e->d_name);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(first, sizeof first, "%s", e->d_name);
  }
  closedir(d);
  if (!first[0]) return NULL;
  static const char *const files[] = {"model.pt", "model.pt2"};
  for (size_t i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s/%s", model_dir, first, files[i]);
    if (stat(path, &st) == 0) return files[i];
  }
  return NULL;
}

/* The file a pytorch model's platform loads by default (Triton's names). */
static const char *default_file(const char *platform) {
  return strcmp(platform, "torch_aoti") == 0 ? "model.pt2" : "model.pt";
}

/* Fills an empty backend from platform, default_model_filename or the
 * files present, as Triton's AutoCompleteBackendFields does for PyTorch:
 * TorchScript (model.pt) is platform pytorch_libtorch, an AOTInductor
 * package (model.pt2) platform torch_aoti; both are backend pytorch. */
static enum pts_status infer_backend(Inference__ModelConfig *cfg, const char *model_dir,
                                     struct pts_error *err) {
  const char *pf = cfg->platform, *file = cfg->default_model_filename;
  if (is_torchscript_platform(pf) || strcmp(pf, "torch_aoti") == 0)
    return set_string(&cfg->backend, "pytorch") ? PTS_OK : nomem(err, cfg);
  if (!is_empty(pf))
    return fail(err, cfg,
                "platform '%s' is not supported by ptserve, which serves PyTorch models "
                "(platform 'pytorch_libtorch' or 'torch_aoti', or backend 'pytorch')",
                pf);
  if (is_empty(file)) file = probe_model_file(model_dir);
  if (file && (strcmp(file, "model.pt") == 0 || strcmp(file, "model.pt2") == 0))
    return set_string(&cfg->backend, "pytorch") ? PTS_OK : nomem(err, cfg);
  return fail(err, cfg,
              "could not determine the backend: set backend: \"pytorch\" in config.pbtxt, "
              "or put the model at <version>/model.pt (TorchScript) or <version>/model.pt2 "
              "(AOTInductor)");
}

/* Backend pytorch without a platform: an AOTInductor package when the
 * default file is one (*.pt2), or, with no default file, when the first
 * version holds model.pt2 and no model.pt (Triton would assume TorchScript
 * and fail to find model.pt); TorchScript otherwise. */
static const char *pytorch_platform(const Inference__ModelConfig *cfg, const char *model_dir) {
  const char *file = cfg->default_model_filename;
  if (is_empty(file)) file = probe_model_file(model_dir);
  size_t n = file ? strlen(file) : 0;
  return n >= 4 && strcmp(file + n - 4, ".pt2") == 0 ? "torch_aoti" : "pytorch_libtorch";
}

bool pts_model_config_is_ensemble(const Inference__ModelConfig *cfg) {
  return cfg && cfg->platform && strcmp(cfg->platform, "ensemble") == 0;
}

/* An ensemble (docs/ensembles.md) has no backend of its own and runs no
 * instances: Triton refuses a backend, instance groups and warmup on it,
 * and needs its steps. The graph of the steps (every tensor written once,
 * no cycle) is checked by the ensemble module (ensemble/ensemble.h); the
 * composing models when it loads. */
static enum pts_status complete_ensemble(Inference__ModelConfig *cfg, struct pts_error *err) {
  if (!is_empty(cfg->backend))
    return fail(err, cfg,
                "unexpected 'platform' and 'backend' pair: platform 'ensemble' with backend "
                "'%s' (an ensemble has no backend)",
                cfg->backend);
  if (cfg->scheduling_choice_case !=
          INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_ENSEMBLE_SCHEDULING ||
      cfg->ensemble_scheduling->n_step == 0)
    return fail(err, cfg,
                "must specify one or more 'step' in 'ensemble_scheduling' for ensemble '%s'",
                cfg->name);
  if (cfg->n_instance_group)
    return fail(err, cfg, "instance group should not be specified for ensemble '%s'", cfg->name);
  if (cfg->n_model_warmup)
    return fail(err, cfg, "model_warmup can not be specified for ensemble '%s'", cfg->name);
  if (cfg->n_input == 0 || cfg->n_output == 0)
    return fail(err, cfg, "ensemble '%s' must specify its 'input' and 'output' tensors", cfg->name);
  for (size_t i = 0; i < cfg->ensemble_scheduling->n_step; i++) {
    const Inference__ModelEnsembling__Step *st = cfg->ensemble_scheduling->step[i];
    if (is_empty(st->model_name))
      return fail(err, cfg, "must specify 'model_name' in step %zu of ensemble '%s'", i,
                  cfg->name);
    if (pts_name_check("model name", st->model_name, err) != PTS_OK) {
      pts_error_prefix(err, "model '%s': step %zu", cfg->name, i);
      return PTS_INVALID_ARG;
    }
    if (!is_empty(st->model_namespace))
      return fail(err, cfg,
                  "step %zu: 'model_namespace' is not supported by ptserve (there is no model "
                  "namespacing; model names are unique across the repositories)",
                  i);
    if (strcmp(st->model_name, cfg->name) == 0)
      return fail(err, cfg,
                  "step %zu of ensemble '%s' uses the ensemble itself: circular dependency", i,
                  cfg->name);
  }
  return PTS_OK;
}

static enum pts_status complete_backend(Inference__ModelConfig *cfg, const char *model_dir,
                                        struct pts_error *err) {
  enum pts_status s;
  if (pts_model_config_is_ensemble(cfg)) return complete_ensemble(cfg, err);
  if (cfg->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_ENSEMBLE_SCHEDULING)
    return fail(err, cfg,
                "ensemble scheduling cannot be set for model '%s' whose platform is not ensemble",
                cfg->name);
  if (is_empty(cfg->backend) && (s = infer_backend(cfg, model_dir, err))) return s;

  if (strcmp(cfg->backend, "pytorch") == 0) {
    if (is_empty(cfg->platform)) {
      if (!set_string(&cfg->platform, pytorch_platform(cfg, model_dir))) return nomem(err, cfg);
    } else if (!is_torchscript_platform(cfg->platform) &&
               strcmp(cfg->platform, "torch_aoti") != 0) {
      return fail(err, cfg,
                  "unexpected 'platform' and 'backend' pair: platform '%s' with backend 'pytorch'",
                  cfg->platform);
    }
    if (is_empty(cfg->default_model_filename) &&
        !set_string(&cfg->default_model_filename, default_file(cfg->platform)))
      return nomem(err, cfg);
  } else if (strcmp(cfg->backend, "identity") == 0) {
    if (!is_empty(cfg->platform))
      return fail(err, cfg,
                  "unexpected 'platform' and 'backend' pair: platform '%s' with backend 'identity'",
                  cfg->platform);
  } else {
    return fail(err, cfg,
                "backend '%s' is not supported by ptserve (supported backends: pytorch, identity)",
                cfg->backend);
  }
  /* `runtime` picks a backend shared library; ptserve's backends are built
   * in, so only the names of those very backends mean anything. */
  if (!is_empty(cfg->runtime)) {
    char lib[128];
    snprintf(lib, sizeof lib, "libtriton_%s.so", cfg->backend);
    if (strcmp(cfg->runtime, lib) != 0)
      return fail(err, cfg,
                  "'runtime' '%s' is not supported by ptserve (its backends are built in)",
                  cfg->runtime);
  }
  return PTS_OK;
}

/* ---- what ptserve does not implement ---- */

static enum pts_status reject_tensor_flags(const Inference__ModelConfig *cfg,
                                           struct pts_error *err) {
  for (size_t i = 0; i < cfg->n_input; i++) {
    const Inference__ModelInput *in = cfg->input[i];
    /* `optional` is supported: an absent optional input reaches the backend
     * as a tensor without data (the pytorch backend passes None). */
    const char *flag = in->is_shape_tensor           ? "is_shape_tensor"
                       : in->allow_ragged_batch      ? "allow_ragged_batch"
                       : in->is_non_linear_format_io ? "is_non_linear_format_io"
                                                     : NULL;
    if (flag)
      return fail(err, cfg, "input '%s': '%s: true' is not supported by ptserve", in->name, flag);
  }
  for (size_t i = 0; i < cfg->n_output; i++) {
    const Inference__ModelOutput *o = cfg->output[i];
    const char *flag = o->is_shape_tensor           ? "is_shape_tensor"
                       : o->is_non_linear_format_io ? "is_non_linear_format_io"
                                                    : NULL;
    if (flag)
      return fail(err, cfg, "output '%s': '%s: true' is not supported by ptserve", o->name, flag);
  }
  return PTS_OK;
}

static enum pts_status reject_instance_groups(const Inference__ModelConfig *cfg,
                                              struct pts_error *err) {
  for (size_t i = 0; i < cfg->n_instance_group; i++) {
    const Inference__ModelInstanceGroup *g = cfg->instance_group[i];
    const char *field = g->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_MODEL
                            ? "kind: KIND_MODEL"
                        : g->n_secondary_devices ? "secondary_devices"
                        : g->passive             ? "passive: true"
                                                 : NULL;
    if (field)
      return fail(err, cfg, "instance_group %zu ('%s'): '%s' is not supported by ptserve", i,
                  is_empty(g->name) ? "" : g->name, field);
  }
  return PTS_OK;
}

static enum pts_status reject_accelerators(const Inference__ModelConfig *cfg,
                                           struct pts_error *err) {
  const Inference__ModelOptimizationPolicy__ExecutionAccelerators *ea =
      cfg->optimization ? cfg->optimization->execution_accelerators : NULL;
  if (!ea) return PTS_OK;
  for (size_t i = 0; i < ea->n_gpu_execution_accelerator; i++) {
    const char *name = ea->gpu_execution_accelerator[i]->name;
    if (strcmp(name, "mps") != 0 && strcmp(name, "cuda") != 0)
      return fail(
          err, cfg,
          "optimization.execution_accelerators.gpu_execution_accelerator '%s' is not supported by "
          "ptserve (supported: mps, cuda)",
          name);
  }
  if (ea->n_cpu_execution_accelerator)
    return fail(err, cfg,
                "optimization.execution_accelerators.cpu_execution_accelerator '%s' is not "
                "supported by ptserve",
                ea->cpu_execution_accelerator[0]->name);
  return PTS_OK;
}

/* UINT16/32/64 have no torch dtype (protocol-facts §4.2). */
static enum pts_status reject_pytorch_dtypes(const Inference__ModelConfig *cfg,
                                             struct pts_error *err) {
  if (strcmp(cfg->backend, "pytorch") != 0) return PTS_OK;
  for (int out = 0; out < 2; out++) {
    size_t n = out ? cfg->n_output : cfg->n_input;
    for (size_t i = 0; i < n; i++) {
      int t = out ? (int)cfg->output[i]->data_type : (int)cfg->input[i]->data_type;
      const char *name = out ? cfg->output[i]->name : cfg->input[i]->name;
      if (t == INFERENCE__DATA_TYPE__TYPE_UINT16 || t == INFERENCE__DATA_TYPE__TYPE_UINT32 ||
          t == INFERENCE__DATA_TYPE__TYPE_UINT64)
        return pts_error_set(
            err, PTS_INVALID_ARG, "unsupported datatype %s for %s '%s' for model '%s'",
            pts_dtype_config_name((enum pts_dtype)t), out ? "output" : "input", name, cfg->name);
    }
  }
  return PTS_OK;
}

static enum pts_status reject_unsupported(const Inference__ModelConfig *cfg,
                                          struct pts_error *err) {
  enum pts_status s;
  if (cfg->n_batch_input)
    return unsupported(err, cfg, "batch_input", "batch inputs are not generated");
  if (cfg->n_batch_output)
    return unsupported(err, cfg, "batch_output", "batch outputs are not scattered");
  if (cfg->n_cc_model_filenames)
    return unsupported(err, cfg, "cc_model_filenames", "use default_model_filename");
  if (cfg->model_repository_agents && cfg->model_repository_agents->n_agents)
    return unsupported(err, cfg, "model_repository_agents", "there are no repository agents");
  /* The response cache (cache/cache.h) answers a request from an earlier
   * one's outputs: not for a sequence, whose answers depend on the
   * requests before them (Triton refuses it too), nor for an ensemble,
   * whose composing models may cache their own. */
  if (cfg->response_cache && cfg->response_cache->enable &&
      cfg->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING)
    return unsupported(err, cfg, "response_cache.enable with sequence_batching",
                       "a sequence's answers depend on its earlier requests");
  if (cfg->response_cache && cfg->response_cache->enable && pts_model_config_is_ensemble(cfg))
    return unsupported(err, cfg, "response_cache.enable on an ensemble",
                       "enable it on the composing models");
  if (cfg->model_transaction_policy && cfg->model_transaction_policy->decoupled)
    return unsupported(err, cfg, "model_transaction_policy.decoupled",
                       "every request gets exactly one response");
  if (cfg->model_metrics && cfg->model_metrics->n_metric_control)
    return unsupported(err, cfg, "model_metrics",
                       "per-model histogram buckets are not configurable");
  if ((s = reject_tensor_flags(cfg, err))) return s;
  if ((s = reject_instance_groups(cfg, err))) return s;
  if ((s = reject_accelerators(cfg, err))) return s;
  return reject_pytorch_dtypes(cfg, err);
}

/* ---- tensors (§4.1, §4.4) ---- */

/* Splits dims into element counts between -1 entries, as Triton compares
 * dims with reshape: [2,-1,3,4] → {2, 12}. False on overflow. */
static bool segment_counts(const int64_t *dims, size_t n, int64_t *counts, size_t *n_counts) {
  int64_t cur = 1;
  *n_counts = 0;
  for (size_t i = 0; i < n; i++) {
    if (dims[i] == -1) {
      counts[(*n_counts)++] = cur;
      cur = 1;
    } else if (dims[i] > 0 && cur > INT64_MAX / dims[i]) {
      return false;
    } else {
      cur *= dims[i];
    }
  }
  counts[(*n_counts)++] = cur;
  return true;
}

static bool dims_valid(const int64_t *dims, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (dims[i] < 1 && dims[i] != -1) return false;
  return true;
}

static enum pts_status check_reshape(const Inference__ModelConfig *cfg, const char *io,
                                     const char *name, const int64_t *dims, size_t n_dims,
                                     const Inference__ModelTensorReshape *r,
                                     struct pts_error *err) {
  if (!dims_valid(r->shape, r->n_shape))
    return fail(
        err, cfg,
        "model %s '%s' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size "
        "dimension",
        io, name);
  int64_t *a = pts_malloc(sizeof(int64_t) * (n_dims + 1)),
          *b = pts_malloc(sizeof(int64_t) * (r->n_shape + 1));
  size_t na, nb;
  enum pts_status s = PTS_OK;
  if (!a || !b) {
    s = nomem(err, cfg);
  } else if (!segment_counts(dims, n_dims, a, &na) ||
             !segment_counts(r->shape, r->n_shape, b, &nb)) {
    s = fail(err, cfg, "model %s '%s' has too many elements in dims or reshape", io, name);
  } else if (r->n_shape == 0 && (cfg->max_batch_size == 0 || na != 1 || a[0] != 1)) {
    s = fail(err, cfg,
             "model %s '%s' may have an empty reshape only when max_batch_size > 0 and dims hold "
             "one element",
             io, name);
  } else if (na != nb) {
    s = fail(err, cfg,
             "model %s '%s' has different number of variable-size dimensions for dims and reshape",
             io, name);
  } else {
    for (size_t i = 0; i < na && !s; i++)
      if (a[i] != b[i])
        s = fail(err, cfg, "model %s '%s' has different size for dims and reshape", io, name);
  }
  pts_free(a);
  pts_free(b);
  return s;
}

static enum pts_status check_tensor(const Inference__ModelConfig *cfg, const char *io,
                                    const char *name, int data_type, const int64_t *dims,
                                    size_t n_dims, const Inference__ModelTensorReshape *reshape,
                                    struct pts_error *err) {
  if (is_empty(name)) return fail(err, cfg, "model %s must specify 'name'", io);
  if (data_type == INFERENCE__DATA_TYPE__TYPE_INVALID)
    return fail(err, cfg, "model %s '%s' must specify 'data_type'", io, name);
  if (data_type < 0 || data_type >= PTS_DTYPE_COUNT)
    return fail(err, cfg, "model %s '%s' has invalid 'data_type' %d", io, name, data_type);
  if (n_dims == 0)
    return fail(err, cfg,
                "model %s '%s' must specify 'dims' with at least one dimension "
                "(for a scalar use dims: [ 1 ] with reshape: { shape: [ ] })",
                io, name);
  if (!dims_valid(dims, n_dims))
    return fail(
        err, cfg,
        "model %s '%s' dimension must be integer >= 1, or -1 to indicate a variable-size dimension",
        io, name);
  /* Every shape made from these dims (a request's, the backend's load check,
   * a warmup sample) has the batch dimension in front when the model
   * batches, and must fit a struct pts_shape. Triton has no such limit;
   * PyTorch kernels rarely go past a dozen dims. */
  size_t lead = cfg->max_batch_size > 0 ? 1 : 0;
  size_t most = reshape && reshape->n_shape > n_dims ? reshape->n_shape : n_dims;
  if (most + lead > PTS_TENSOR_MAX_DIMS)
    return fail(err, cfg,
                "model %s '%s' has %zu dimensions%s, more than the %d ptserve supports", io, name,
                most + lead, lead ? " with the batch dimension" : "", PTS_TENSOR_MAX_DIMS);
  return reshape ? check_reshape(cfg, io, name, dims, n_dims, reshape, err) : PTS_OK;
}

static enum pts_status validate_tensors(const Inference__ModelConfig *cfg, struct pts_error *err) {
  enum pts_status s;
  if (cfg->max_batch_size < 0) return fail(err, cfg, "'max_batch_size' must be non-negative value");
  for (size_t i = 0; i < cfg->n_input; i++) {
    const Inference__ModelInput *in = cfg->input[i];
    if ((s = check_tensor(cfg, "input", in->name, in->data_type, in->dims, in->n_dims, in->reshape,
                          err)))
      return s;
    for (size_t j = 0; j < i; j++)
      if (strcmp(cfg->input[j]->name, in->name) == 0)
        return fail(err, cfg, "duplicate input name '%s'", in->name);
  }
  for (size_t i = 0; i < cfg->n_output; i++) {
    const Inference__ModelOutput *o = cfg->output[i];
    if ((s = check_tensor(cfg, "output", o->name, o->data_type, o->dims, o->n_dims, o->reshape,
                          err)))
      return s;
    for (size_t j = 0; j < i; j++)
      if (strcmp(cfg->output[j]->name, o->name) == 0)
        return fail(err, cfg, "duplicate output name '%s'", o->name);
  }
  return PTS_OK;
}

/* ---- normalization defaults (§4.3) ---- */

static enum pts_status default_version_policy(Inference__ModelConfig *cfg, struct pts_error *err) {
  Inference__ModelVersionPolicy *vp = cfg->version_policy;
  if (vp && vp->policy_choice_case != INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE__NOT_SET)
    return PTS_OK;
  if (!vp) {
    if (!(vp = pts_malloc(sizeof *vp))) return nomem(err, cfg);
    inference__model_version_policy__init(vp);
    cfg->version_policy = vp;
  }
  Inference__ModelVersionPolicy__Latest *latest = pts_malloc(sizeof *latest);
  if (!latest) return nomem(err, cfg);
  inference__model_version_policy__latest__init(latest);
  latest->num_versions = 1;
  vp->latest = latest;
  vp->policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST;
  return PTS_OK;
}

static enum pts_status default_preferred_batch(Inference__ModelConfig *cfg, struct pts_error *err) {
  if (cfg->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING)
    return PTS_OK;
  Inference__ModelDynamicBatching *db = cfg->dynamic_batching;
  if (db->n_preferred_batch_size || cfg->max_batch_size <= 0) return PTS_OK;
  if (!(db->preferred_batch_size = pts_malloc(sizeof(int32_t)))) return nomem(err, cfg);
  db->preferred_batch_size[0] = cfg->max_batch_size;
  db->n_preferred_batch_size = 1;
  return PTS_OK;
}

static bool default_pinned(Inference__ModelOptimizationPolicy__PinnedMemoryBuffer **slot) {
  if (*slot) return true;
  if (!(*slot = pts_malloc(sizeof **slot))) return false;
  inference__model_optimization_policy__pinned_memory_buffer__init(*slot);
  (*slot)->enable = 1;
  return true;
}

static enum pts_status default_optimization(Inference__ModelConfig *cfg, struct pts_error *err) {
  if (!cfg->optimization) {
    if (!(cfg->optimization = pts_malloc(sizeof *cfg->optimization))) return nomem(err, cfg);
    inference__model_optimization_policy__init(cfg->optimization);
  }
  if (!default_pinned(&cfg->optimization->input_pinned_memory) ||
      !default_pinned(&cfg->optimization->output_pinned_memory))
    return nomem(err, cfg);
  return PTS_OK;
}

/* One group when none is given; then each group gets a name and a count.
 * The added group is KIND_AUTO, as in Triton; what it resolves to depends
 * on the GPUs the backend can use, so pts_model_config_resolve_devices
 * settles it once the repository knows the backend. */
static enum pts_status default_instance_groups(Inference__ModelConfig *cfg, struct pts_error *err) {
  if (cfg->n_instance_group == 0) {
    Inference__ModelInstanceGroup *g = pts_malloc(sizeof *g);
    Inference__ModelInstanceGroup **arr = pts_malloc(sizeof *arr);
    if (!g || !arr) {
      pts_free(g);
      pts_free(arr);
      return nomem(err, cfg);
    }
    inference__model_instance_group__init(g);
    g->kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO;
    arr[0] = g;
    pts_free(cfg->instance_group);
    cfg->instance_group = arr;
    cfg->n_instance_group = 1;
  }
  for (size_t i = 0; i < cfg->n_instance_group; i++) {
    Inference__ModelInstanceGroup *g = cfg->instance_group[i];
    if (is_empty(g->name)) {
      char name[512];
      snprintf(name, sizeof name, "%s_%zu", cfg->name, i);
      if (!set_string(&g->name, name)) return nomem(err, cfg);
    }
    if (g->count < 1) g->count = 1;
  }
  return PTS_OK;
}

/* ---- remaining checks ---- */

static enum pts_status validate_version_policy(const Inference__ModelConfig *cfg,
                                               struct pts_error *err) {
  const Inference__ModelVersionPolicy *vp = cfg->version_policy;
  if (vp->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST &&
      vp->latest->num_versions == 0)
    return fail(err, cfg, "version_policy.latest.num_versions must be at least 1");
  return PTS_OK;
}

static bool delays_when_ordered(const Inference__ModelQueuePolicy *p) {
  return p && p->default_timeout_microseconds != 0 &&
         p->timeout_action == INFERENCE__MODEL_QUEUE_POLICY__TIMEOUT_ACTION__DELAY;
}

static enum pts_status validate_priorities(const Inference__ModelConfig *cfg,
                                           const Inference__ModelDynamicBatching *db,
                                           struct pts_error *err) {
  uint64_t levels = db->priority_levels;
  if (levels == 0 && db->n_priority_queue_policy)
    return fail(
        err, cfg,
        "dynamic_batching.priority_queue_policy needs dynamic_batching.priority_levels > 0");
  if (levels != 0 && (db->default_priority_level == 0 || db->default_priority_level > levels))
    return fail(err, cfg, "default priority level must be in range [1, %" PRIu64 "]", levels);
  for (size_t i = 0; i < db->n_priority_queue_policy; i++) {
    uint64_t key = db->priority_queue_policy[i]->key;
    if (key == 0 || key > levels)
      return fail(err, cfg,
                  "priority queue policy must have priority level in range [1, %" PRIu64 "]",
                  levels);
  }
  if (!db->preserve_ordering) return PTS_OK;
  if (levels > 1)
    return fail(err, cfg, "Only one priority level is allowed when 'preserve_ordering' is true");
  bool delay = delays_when_ordered(db->default_queue_policy);
  for (size_t i = 0; i < db->n_priority_queue_policy; i++)
    delay = delay || delays_when_ordered(db->priority_queue_policy[i]->value);
  if (delay)
    return fail(
        err, cfg,
        "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true");
  return PTS_OK;
}

static enum pts_status validate_dynamic_batching(const Inference__ModelConfig *cfg,
                                                 struct pts_error *err) {
  if (cfg->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING)
    return PTS_OK;
  const Inference__ModelDynamicBatching *db = cfg->dynamic_batching;
  for (size_t i = 0; i < db->n_preferred_batch_size; i++) {
    int32_t size = db->preferred_batch_size[i];
    if (size <= 0)
      return fail(err, cfg, "dynamic batching preferred size must be positive (got %d)", (int)size);
    if (size > cfg->max_batch_size)
      return fail(
          err, cfg,
          "dynamic batching preferred size must be <= max batch size (got %d, max_batch_size %d)",
          (int)size, (int)cfg->max_batch_size);
  }
  return validate_priorities(cfg, db, err);
}

static enum pts_status validate_instance_groups(const Inference__ModelConfig *cfg,
                                                struct pts_error *err) {
  for (size_t i = 0; i < cfg->n_instance_group; i++) {
    const Inference__ModelInstanceGroup *g = cfg->instance_group[i];
    if (g->kind != INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO &&
        g->kind != INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU &&
        g->kind != INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU)
      return fail(err, cfg, "instance group '%s' has invalid kind %d", g->name, (int)g->kind);
    if (g->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU && g->n_gpus)
      return fail(err, cfg, "instance group '%s' has kind KIND_CPU but specifies one or more GPUs",
                  g->name);
    for (size_t k = 0; k < g->n_gpus; k++)
      if (g->gpus[k] < 0)
        return fail(err, cfg, "instance group '%s' specifies invalid or unsupported gpu id %d",
                    g->name, (int)g->gpus[k]);
  }
  return PTS_OK;
}

/* The lookups of model_config.h live here, not in model_config.c, because
 * completion uses them and model_config.c calls completion: this file stays
 * below it. */
const Inference__ModelInput *pts_model_config_input(const Inference__ModelConfig *cfg,
                                                    const char *name) {
  for (size_t i = 0; i < cfg->n_input; i++)
    if (cfg->input[i]->name && strcmp(cfg->input[i]->name, name) == 0) return cfg->input[i];
  return NULL;
}

const Inference__ModelOutput *pts_model_config_output(const Inference__ModelConfig *cfg,
                                                      const char *name) {
  for (size_t i = 0; i < cfg->n_output; i++)
    if (cfg->output[i]->name && strcmp(cfg->output[i]->name, name) == 0) return cfg->output[i];
  return NULL;
}

static const Inference__ModelWarmup__InputsEntry *find_warmup_input(const Inference__ModelWarmup *w,
                                                                    const char *name) {
  for (size_t i = 0; i < w->n_inputs; i++)
    if (strcmp(w->inputs[i]->key, name) == 0) return w->inputs[i];
  return NULL;
}

/* Warmup data files are read from <model>/warmup/; a name may not leave it. */
static bool safe_file_name(const char *f) {
  return f[0] && f[0] != '/' && strcmp(f, "..") != 0 && strncmp(f, "../", 3) != 0 &&
         !strstr(f, "/../") && !(strlen(f) >= 3 && strcmp(f + strlen(f) - 3, "/..") == 0);
}

static enum pts_status validate_warmup_input(const Inference__ModelConfig *cfg, const char *w,
                                             const Inference__ModelWarmup__InputsEntry *e,
                                             struct pts_error *err) {
  const Inference__ModelInput *in = pts_model_config_input(cfg, e->key);
  const Inference__ModelWarmup__Input *v = e->value;
  if (!in) return fail(err, cfg, "model_warmup '%s': '%s' is not an input of the model", w, e->key);
  if (!v) return fail(err, cfg, "model_warmup '%s': input '%s' has no value", w, e->key);
  if (v->data_type != in->data_type)
    return fail(err, cfg,
                "model_warmup '%s': input '%s' has data_type %s, but the model input is %s", w,
                e->key, pts_dtype_config_name((enum pts_dtype)v->data_type),
                pts_dtype_config_name((enum pts_dtype)in->data_type));
  for (size_t k = 0; k < v->n_dims; k++)
    if (v->dims[k] < 0)
      return fail(err, cfg,
                  "model_warmup '%s': input '%s' must give every dimension (>= 0) in 'dims'", w,
                  e->key);
  if (v->input_data_type_case == INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE__NOT_SET)
    return fail(
        err, cfg,
        "model_warmup '%s': input '%s' must set one of zero_data, random_data or input_data_file",
        w, e->key);
  if (v->input_data_type_case == INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_INPUT_DATA_FILE &&
      !safe_file_name(v->input_data_file))
    return fail(
        err, cfg,
        "model_warmup '%s': input '%s': input_data_file '%s' must name a file under warmup/", w,
        e->key, v->input_data_file);
  return PTS_OK;
}

/* before_backend: no inputs yet means the backend may still complete them
 * from the model file; the warmups are checked then
 * (pts_model_config_check_completed). */
static enum pts_status validate_warmup(const Inference__ModelConfig *cfg, bool before_backend,
                                       struct pts_error *err) {
  enum pts_status s;
  if (before_backend && cfg->n_input == 0) return PTS_OK;
  for (size_t i = 0; i < cfg->n_model_warmup; i++) {
    const Inference__ModelWarmup *w = cfg->model_warmup[i];
    char label[128];
    if (is_empty(w->name))
      snprintf(label, sizeof label, "#%zu", i);
    else
      snprintf(label, sizeof label, "%.100s", w->name);
    if (w->batch_size < 1)
      return fail(err, cfg, "model_warmup '%s': batch_size must be >= 1", label);
    if (cfg->max_batch_size == 0 && w->batch_size != 1)
      return fail(err, cfg,
                  "model_warmup '%s': batch_size must be 1 for a model that does not batch "
                  "(max_batch_size 0), got %u",
                  label, (unsigned)w->batch_size);
    if (cfg->max_batch_size > 0 && w->batch_size > (uint32_t)cfg->max_batch_size)
      return fail(err, cfg, "model_warmup '%s': batch_size %u is more than max_batch_size %d",
                  label, (unsigned)w->batch_size, (int)cfg->max_batch_size);
    for (size_t k = 0; k < w->n_inputs; k++)
      if ((s = validate_warmup_input(cfg, label, w->inputs[k], err))) return s;
    for (size_t k = 0; k < cfg->n_input; k++)
      if (!find_warmup_input(w, cfg->input[k]->name))
        return fail(err, cfg, "model_warmup '%s': no data for model input '%s'", label,
                    cfg->input[k]->name);
  }
  return PTS_OK;
}

/* The model file is joined to the version directory: a name with '/' or
 * '..' would load a file from elsewhere. */
static enum pts_status check_file_name(const Inference__ModelConfig *cfg, struct pts_error *err) {
  const char *f = cfg->default_model_filename;
  if (is_empty(f) || pts_name_is_safe(f)) return PTS_OK;
  return fail(err, cfg,
              "default_model_filename '%.100s' must be a file name inside the version "
              "directory: it can not contain '/', '\\', '..' or control characters",
              f);
}

enum pts_status pts_model_config_complete(Inference__ModelConfig *cfg, const char *model_dir,
                                          const char *model_name, struct pts_error *err) {
  enum pts_status s;
  if ((s = complete_name(cfg, model_name, err))) return s;
  if ((s = complete_backend(cfg, model_dir, err))) return s;
  if ((s = check_file_name(cfg, err))) return s;
  if ((s = reject_unsupported(cfg, err))) return s;
  if ((s = validate_tensors(cfg, err))) return s;
  if ((s = default_version_policy(cfg, err))) return s;
  if ((s = default_preferred_batch(cfg, err))) return s;
  /* Triton's pinned-memory defaults and instance groups are for models
   * that run on instances; an ensemble has neither. */
  if (!pts_model_config_is_ensemble(cfg) && (s = default_optimization(cfg, err))) return s;
  if (!pts_model_config_is_ensemble(cfg) && (s = default_instance_groups(cfg, err))) return s;
  if ((s = validate_version_policy(cfg, err))) return s;
  if ((s = validate_dynamic_batching(cfg, err))) return s;
  if ((s = pts_model_config_sequence_complete(cfg, err))) return s;
  if ((s = validate_instance_groups(cfg, err))) return s;
  return validate_warmup(cfg, true, err);
}

enum pts_status pts_model_config_check_completed(const Inference__ModelConfig *cfg,
                                                 struct pts_error *err) {
  enum pts_status s;
  if ((s = reject_tensor_flags(cfg, err))) return s;
  if ((s = reject_pytorch_dtypes(cfg, err))) return s;
  if ((s = validate_tensors(cfg, err))) return s;
  return validate_warmup(cfg, false, err);
}

/* ---- devices, once the backend is known ---- */

static bool gpus_exist(const Inference__ModelInstanceGroup *g, int gpu_count) {
  if (gpu_count <= 0) return false;
  for (size_t i = 0; i < g->n_gpus; i++)
    if (g->gpus[i] < 0 || g->gpus[i] >= gpu_count) return false;
  return true;
}

static bool fill_all_gpus(Inference__ModelInstanceGroup *g, int gpu_count) {
  int32_t *ids = pts_malloc((size_t)gpu_count * sizeof *ids);
  if (!ids) return false;
  for (int i = 0; i < gpu_count; i++) ids[i] = i;
  pts_free(g->gpus);
  g->gpus = ids;
  g->n_gpus = (size_t)gpu_count;
  return true;
}

enum pts_status pts_model_config_resolve_devices(Inference__ModelConfig *cfg, int gpu_count,
                                                 struct pts_error *err) {
  for (size_t i = 0; i < cfg->n_instance_group; i++) {
    Inference__ModelInstanceGroup *g = cfg->instance_group[i];
    if (g->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO) {
      if (gpus_exist(g, gpu_count)) {
        g->kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU;
      } else {
        g->kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU;
        pts_free(g->gpus); /* KIND_CPU lists no GPUs */
        g->gpus = NULL;
        g->n_gpus = 0;
      }
    }
    /* Triton: a GPU group without `gpus` runs `count` instances on every GPU. */
    if (g->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU && g->n_gpus == 0 &&
        gpu_count > 0 && !fill_all_gpus(g, gpu_count))
      return nomem(err, cfg);
  }
  return PTS_OK;
}
