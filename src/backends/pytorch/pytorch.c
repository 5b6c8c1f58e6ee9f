/* backends/pytorch/pytorch.c — the "pytorch" backend: TorchScript models
 * (platform pytorch_libtorch) and AOTInductor packages (platform torch_aoti)
 * through torch_bridge.h.
 *
 * model_load reads the backend parameters, loads the module once to read
 * forward()'s signature (TorchScript) or the package's call specification
 * (AOTInductor; aoti.h completes and checks the config against it), and
 * fixes for good how config inputs map to forward() arguments or package
 * inputs and how returned values map to config outputs (Triton's
 * conventions, docs/pytorch-backend.md). instance_create chooses a device
 * (device.h) and gives the instance its own module. execute only wires
 * tensors: inputs go to LibTorch as views, outputs come back as buffers that
 * own the result tensors, so no tensor data is copied here. Both kinds of
 * model share all of it: batching, warmup, streams and CUDA graphs.
 *
 * Threading: as backend_api/backend.h. A model's state is read-only after
 * model_load; an instance's scratch space belongs to its execute thread.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend_api/backend.h"
#include "backends/pytorch/cuda_shm.h"
#include "backends/pytorch/aoti.h"
#include "backends/pytorch/callspec.h"
#include "backends/pytorch/device.h"
#include "backends/pytorch/intra.h"
#include "backends/pytorch/torch_bridge.h"
#include "config/model_config.h"
#include "core/alloc.h"
#include "core/log.h"
#include "core/pinned.h"
#include "tensor/tensor.h"
#include "trace/profile.h"

_Static_assert(PTS_TORCH_MAX_DIMS == PTS_TENSOR_MAX_DIMS, "bridge and tensor ranks must agree");
_Static_assert(PTS_TORCH_MEM_HOST == (int)PTS_MEM_HOST &&
                   PTS_TORCH_MEM_PINNED == (int)PTS_MEM_PINNED &&
                   PTS_TORCH_MEM_DEVICE == (int)PTS_MEM_DEVICE,
               "bridge and tensor memory kinds must agree");
_Static_assert((int)PTS_DEVICE_KIND_GPU == (int)INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU &&
                   (int)PTS_DEVICE_KIND_CPU ==
                       (int)INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU &&
                   (int)PTS_DEVICE_KIND_MODEL ==
                       (int)INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_MODEL,
               "device kinds must follow ModelInstanceGroup.Kind");

struct pt_model {
  char *name;
  const Inference__ModelConfig *cfg; /* borrowed until model_unload */
  char *path;
  bool inference_mode;
  bool optimized_execution;
  int intra_op_threads; /* INTRA_OP_THREAD_COUNT, 0 = not set */
  struct pts_intra_choice intra; /* what each instance thread uses (intra.h) */
  int inter_op_threads; /* process-global: applied once the model has loaded */
  bool dict_input;
  bool disable_cudnn;          /* DISABLE_CUDNN (process-global flag, gated in the bridge) */
  bool channels_last;          /* INPUT_MEMORY_FORMAT: channels_last */
  int64_t aoti_min_batch;      /* a package's smallest compiled batch when above 1
                                  (found by the load check, aoti_min_batch): smaller
                                  batches are padded; 0 = none. Load thread. */
  bool empty_cache;            /* ENABLE_CACHE_CLEANING */
  bool freeze;                 /* FREEZE_MODEL: torch::jit::freeze per instance */
  bool optimize_for_inference; /* OPTIMIZE_FOR_INFERENCE */
  double memory_fraction;      /* MEMORY_FRACTION; 0 = LibTorch's default */
  int64_t *graph_batch_sizes;  /* CUDA_GRAPH_BATCH_SIZES, captured per CUDA instance */
  int64_t *graph_min_batch;    /* per graph: smallest batch padded into it (= its size: none) */
  size_t n_graph_batch_sizes;
  int *input_slot;   /* config input i → forward() argument (package input) position */
  int *output_index; /* config output i → position in the returned tuple/list */
  struct pts_torch_module *spare; /* the module model_load read; given to the first instance
                                     on spare_device */
  struct pts_device spare_device;
  bool aoti;                        /* platform torch_aoti: an AOTInductor package */
  enum pts_aoti_device aoti_device; /* the device kind the package was compiled for */
  struct pts_callspec *callspec;    /* aoti: the names of the package's tensors */
  struct pts_aoti_io *io;           /* aoti: its ptserve.io record, or NULL */
  bool load_checked;                /* aoti: the first instance ran the load check */
};

struct pt_instance {
  struct pt_model *model;
  char *name;
  struct pts_device device;
  struct pts_torch_module *module;
  struct pts_torch_input *inputs; /* scratch, one per config input */
  struct pts_torch_dest *dests;   /* scratch, one per config output */
  struct pts_torch_part *parts;   /* scratch for pt_gather_device, parts_cap entries */
  size_t parts_cap;
  bool *graph_replay_logged;      /* per CUDA_GRAPH_BATCH_SIZES entry: first replay logged */
};

static struct pts_device_caps caps;
static pthread_once_t caps_once = PTHREAD_ONCE_INIT;

static void probe_once(void) {
  pts_torch_probe(&caps);
  PTS_LOG_INFO("PyTorch backend: LibTorch %s, CUDA %s (%d device(s)), MPS %s",
               pts_torch_version(), caps.built_with_cuda ? "built in" : "not built in",
               caps.cuda_device_count, caps.mps_available ? "available" : "not available");
  if (caps.mps_available)
    PTS_LOG_INFO("MPS (Metal Performance Shaders) is available on this system");
  if (caps.built_with_mps) PTS_LOG_INFO("PyTorch was built with MPS support");
}

/* ---- model ---------------------------------------------------------------- */

static void model_free(struct pt_model *m) {
  if (!m) return;
  pts_torch_free(m->spare);
  pts_callspec_free(m->callspec);
  pts_aoti_io_free(m->io);
  pts_free(m->graph_batch_sizes);
  pts_free(m->graph_min_batch);
  pts_free(m->input_slot);
  pts_free(m->output_index);
  pts_free(m->path);
  pts_free(m->name);
  pts_free(m);
}

/* Parameters Triton's pytorch backend reads but ptserve does not act on
 * (yet): parsed so a malformed value still fails the load. */
static const char *const noop_bool_params[] = {
    "ENABLE_WEIGHT_SHARING", "ENABLE_JIT_EXECUTOR", "ENABLE_JIT_PROFILING",
    "ENABLE_TENSOR_FUSER",
};

/* MEMORY_FRACTION: a share of the device's memory, (0, 1]. */
static enum pts_status read_fraction(struct pt_model *m, struct pts_error *err) {
  const char *v = pts_model_config_param(m->cfg, "MEMORY_FRACTION");
  if (!v) return PTS_OK;
  char *end = NULL;
  errno = 0;
  double f = strtod(v, &end);
  if (errno || end == v || *end || !(f > 0.0 && f <= 1.0))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': parameter MEMORY_FRACTION must be a number in (0, 1], got "
                         "'%s'",
                         m->name, v);
  m->memory_fraction = f;
  return PTS_OK;
}

/* CUDA_GRAPH_BATCH_SIZES: "1,8" — the batch sizes to capture; each in
 * 1..max_batch_size (just "1" for a model that does not batch). Also
 * honours Triton's optimization.cuda { graphs: true graph_spec [...] }.
 * CUDA_GRAPH_PAD_BATCHES (ptserve's own) pads every smaller batch up to
 * the smallest graph that holds it; Triton's graph_lower_bound pads the
 * batches from its batch_size up to its graph's. Padding is opt-in, as in
 * Triton: the model then computes rows nobody asked for, which is only
 * harmless when rows are independent (what batching assumes anyway). */
static enum pts_status read_graph_sizes(struct pt_model *m, struct pts_error *err) {
  const Inference__ModelConfig *cfg = m->cfg;
  const char *v = pts_model_config_param(cfg, "CUDA_GRAPH_BATCH_SIZES");
  const Inference__ModelOptimizationPolicy__Cuda *cuda =
      cfg->optimization ? cfg->optimization->cuda : NULL;
  size_t cap = 16;
  bool pad = false;
  enum pts_status st = pts_model_config_param_bool(cfg, "CUDA_GRAPH_PAD_BATCHES", false, &pad, err);
  if (st) return st;
  m->graph_batch_sizes = pts_calloc(cap, sizeof *m->graph_batch_sizes);
  m->graph_min_batch = pts_calloc(cap, sizeof *m->graph_min_batch);
  if (!m->graph_batch_sizes || !m->graph_min_batch)
    return pts_error_set(err, PTS_NOMEM, "out of memory");
  int64_t limit = cfg->max_batch_size > 0 ? cfg->max_batch_size : 1;
  if (v) {
    const char *p = v;
    while (*p) {
      char *end = NULL;
      errno = 0;
      long long b = strtoll(p, &end, 10);
      if (errno || end == p || b < 1 || b > limit || m->n_graph_batch_sizes == cap)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "model '%s': parameter CUDA_GRAPH_BATCH_SIZES must list up to %zu "
                             "batch sizes in 1..%lld separated by commas, got '%s'",
                             m->name, cap, (long long)limit, v);
      m->graph_batch_sizes[m->n_graph_batch_sizes++] = b;
      p = *end == ',' ? end + 1 : end;
      if (*end && *end != ',')
        return pts_error_set(err, PTS_INVALID_ARG,
                             "model '%s': parameter CUDA_GRAPH_BATCH_SIZES has '%c' in '%s'",
                             m->name, *end, v);
    }
  } else if (cuda && cuda->graphs) {
    for (size_t i = 0; i < cuda->n_graph_spec && m->n_graph_batch_sizes < cap; i++) {
      const Inference__ModelOptimizationPolicy__Cuda__GraphSpec *gs = cuda->graph_spec[i];
      int64_t b = gs->batch_size < 1 ? 1 : gs->batch_size;
      if (gs->graph_lower_bound && cfg->max_batch_size > 0) {
        int64_t lo = gs->graph_lower_bound->batch_size;
        if (lo < 1 || lo > b)
          return pts_error_set(err, PTS_INVALID_ARG,
                               "model '%s': graph_spec with batch_size %lld has a "
                               "graph_lower_bound batch_size of %lld; it must be in 1..%lld",
                               m->name, (long long)b, (long long)lo, (long long)b);
        m->graph_min_batch[m->n_graph_batch_sizes] = lo;
      }
      m->graph_batch_sizes[m->n_graph_batch_sizes++] = b;
    }
    if (m->n_graph_batch_sizes == 0) m->graph_batch_sizes[m->n_graph_batch_sizes++] = limit;
  }
  for (size_t g = 0; g < m->n_graph_batch_sizes; g++) {
    int64_t b = m->graph_batch_sizes[g];
    if (pad && cfg->max_batch_size > 0) m->graph_min_batch[g] = 1;
    else if (!m->graph_min_batch[g]) m->graph_min_batch[g] = b;
  }
  if (pad && (!m->n_graph_batch_sizes || cfg->max_batch_size <= 0))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': parameter CUDA_GRAPH_PAD_BATCHES needs CUDA graphs "
                         "(CUDA_GRAPH_BATCH_SIZES) and a model that batches (max_batch_size > 0)",
                         m->name);
  return PTS_OK;
}

static enum pts_status read_params(struct pt_model *m, struct pts_error *err) {
  const Inference__ModelConfig *cfg = m->cfg;
  bool disable_opt = false;
  long intra = 0, inter = 0;
  enum pts_status st;
  if ((st = pts_model_config_param_bool(cfg, "INFERENCE_MODE", true, &m->inference_mode, err)) ||
      (st = pts_model_config_param_bool(cfg, "DISABLE_OPTIMIZED_EXECUTION", false, &disable_opt,
                                        err)) ||
      (st = pts_model_config_param_int(cfg, "INTRA_OP_THREAD_COUNT", 0, &intra, err)) ||
      (st = pts_model_config_param_int(cfg, "INTER_OP_THREAD_COUNT", 0, &inter, err)))
    return st;
  if (intra < 0 || intra > 4096 || inter < 0 || inter > 4096)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "parameter %s must be between 0 and 4096 (0 = the default, "
                         "docs/pytorch-backend.md)",
                         intra < 0 || intra > 4096 ? "INTRA_OP_THREAD_COUNT"
                                                   : "INTER_OP_THREAD_COUNT");
  for (size_t i = 0; i < sizeof noop_bool_params / sizeof noop_bool_params[0]; i++) {
    bool v;
    if ((st = pts_model_config_param_bool(cfg, noop_bool_params[i], false, &v, err))) return st;
    if (pts_model_config_param(cfg, noop_bool_params[i]))
      PTS_LOG_WARN("model '%s': parameter %s is accepted but has no effect in ptserve", m->name,
                   noop_bool_params[i]);
  }
  if ((st = pts_model_config_param_bool(cfg, "DISABLE_CUDNN", false, &m->disable_cudnn, err)) ||
      (st = pts_model_config_param_bool(cfg, "ENABLE_CACHE_CLEANING", false, &m->empty_cache,
                                        err)) ||
      (st = pts_model_config_param_bool(cfg, "FREEZE_MODEL", false, &m->freeze, err)) ||
      (st = pts_model_config_param_bool(cfg, "OPTIMIZE_FOR_INFERENCE", false,
                                        &m->optimize_for_inference, err)) ||
      (st = read_fraction(m, err)) || (st = read_graph_sizes(m, err)))
    return st;
  /* ptserve's own: the memory format 4-D floating-point inputs reach the
   * model in (torch_bridge.h). Triton's backend has no such parameter. */
  const char *format = pts_model_config_param(cfg, "INPUT_MEMORY_FORMAT");
  if (format && strcmp(format, "channels_last") != 0 && strcmp(format, "contiguous") != 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "parameter INPUT_MEMORY_FORMAT is '%s': it takes 'contiguous' (the "
                         "default) or 'channels_last'",
                         format);
  m->channels_last = format && strcmp(format, "channels_last") == 0;
  if (m->aoti) {
    /* The compiled package has no graph executor to tune or freeze, and
     * its kernels were compiled for the strides it was exported with. */
    static const char *const ts_only[] = {"DISABLE_OPTIMIZED_EXECUTION", "FREEZE_MODEL",
                                          "OPTIMIZE_FOR_INFERENCE", "INPUT_MEMORY_FORMAT"};
    for (size_t i = 0; i < sizeof ts_only / sizeof ts_only[0]; i++)
      if (pts_model_config_param(cfg, ts_only[i]))
        PTS_LOG_WARN("model '%s': parameter %s applies to TorchScript models; it has no effect "
                     "on an AOTInductor package",
                     m->name, ts_only[i]);
    m->freeze = m->optimize_for_inference = m->channels_last = false;
  }
  m->optimized_execution = !disable_opt;
  m->intra_op_threads = (int)intra;
  m->inter_op_threads = (int)inter;
  return PTS_OK;
}

static bool torch_supports(Inference__DataType t) {
  switch ((enum pts_dtype)t) {
    case PTS_DTYPE_UINT16:
    case PTS_DTYPE_UINT32:
    case PTS_DTYPE_UINT64:
    case PTS_DTYPE_INVALID:
      return false;
    default:
      return (int)t > 0 && (int)t < PTS_DTYPE_COUNT;
  }
}

/* Any rank is served for TYPE_STRING: PyTorch takes and gives strings as a
 * flat List[str] (row-major), and shape_strings() gives a returned list
 * its shape back. (Triton's backend refuses more than one dimension, batch
 * included, so its own QA's string models do not load there.) */
static enum pts_status check_tensor(const char *model, const char *what, const char *name,
                                    Inference__DataType t, struct pts_error *err) {
  if (!torch_supports(t))
    return pts_error_set(err, PTS_INVALID_ARG, "unsupported datatype %s for %s '%s' for model '%s'",
                         pts_dtype_config_name((enum pts_dtype)t), what, name, model);
  return PTS_OK;
}

static enum pts_status check_config(const struct pt_model *m, struct pts_error *err) {
  const Inference__ModelConfig *cfg = m->cfg;
  if (cfg->n_input == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': configuration must contain at least one input", m->name);
  if (cfg->n_output == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model configuration must contain at least one output, none were "
                         "specified (model '%s')",
                         m->name);
  enum pts_status st;
  for (size_t i = 0; i < cfg->n_input; i++) {
    const Inference__ModelInput *in = cfg->input[i];
    if ((st = check_tensor(m->name, "input", in->name, in->data_type, err))) return st;
  }
  for (size_t i = 0; i < cfg->n_output; i++) {
    const Inference__ModelOutput *out = cfg->output[i];
    if ((st = check_tensor(m->name, "output", out->name, out->data_type, err))) return st;
  }
  return PTS_OK;
}

/* The <index> of a "<name>__<index>" tensor name, or -1. */
static int named_index(const char *name) {
  const char *sep = NULL;
  for (const char *p = strstr(name, "__"); p; p = strstr(p + 1, "__")) sep = p;
  if (!sep || sep[2] == '\0' || strlen(sep + 2) > 9) return -1;
  for (const char *p = sep + 2; *p; p++)
    if (*p < '0' || *p > '9') return -1;
  return atoi(sep + 2);
}

/* Fills slots[i] with the "__<index>" of each name when every name has one
 * and they are distinct and < n. Returns false when the convention does not
 * apply; an index that is out of range or repeated is an error. */
static enum pts_status by_named_index(const char *model, const char *what, char *const *names,
                                      size_t count, size_t n, int *slots, bool *applies,
                                      struct pts_error *err) {
  *applies = false;
  for (size_t i = 0; i < count; i++)
    if (named_index(names[i]) < 0) return PTS_OK;
  *applies = true;
  for (size_t i = 0; i < count; i++) {
    int idx = named_index(names[i]);
    if ((size_t)idx >= n && n > 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "%s '%s' of model '%s' names index %d, but the model has %zu %ss",
                           what, names[i], model, idx, n, what);
    for (size_t j = 0; j < i; j++)
      if (slots[j] == idx)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "%ss '%s' and '%s' of model '%s' name the same index %d", what,
                             names[j], names[i], model, idx);
    slots[i] = idx;
  }
  return PTS_OK;
}

/* Config inputs → forward() arguments (triton-anchor §1.4). */
static enum pts_status map_inputs(struct pt_model *m, const struct pts_torch_module *mod,
                                  struct pts_error *err) {
  const Inference__ModelConfig *cfg = m->cfg;
  size_t n_args = pts_torch_arg_count(mod), n_dicts = 0;
  for (size_t j = 0; j < n_args; j++) {
    const struct pts_torch_arg *a = pts_torch_arg_at(mod, j);
    if (a->kind == PTS_TORCH_ARG_OTHER)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "unable to load model '%s': forward() argument '%s' has type '%s'; "
                           "only Tensor, Optional[Tensor], List[str] or a single "
                           "Dict[str, Tensor] are supported",
                           m->name, a->name, a->type);
    if (a->kind == PTS_TORCH_ARG_TENSOR_DICT) n_dicts++;
  }
  if (n_dicts > 0) {
    if (n_args != 1)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "unable to load model '%s': a Dict[str, Tensor] argument must be "
                           "forward()'s only argument (it has %zu)",
                           m->name, n_args);
    m->dict_input = true;
    for (size_t i = 0; i < cfg->n_input; i++) {
      if (cfg->input[i]->data_type == INFERENCE__DATA_TYPE__TYPE_STRING)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "unable to load model '%s': input '%s' is TYPE_STRING, but "
                             "forward() takes Dict[str, Tensor]",
                             m->name, cfg->input[i]->name);
      m->input_slot[i] = (int)i;
    }
    return PTS_OK;
  }
  if (n_args != cfg->n_input)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "unable to load model '%s', configuration expects %zu inputs, model "
                         "provides %zu",
                         m->name, cfg->n_input, n_args);

  bool by_name = true;
  for (size_t i = 0; i < cfg->n_input && by_name; i++) {
    by_name = false;
    for (size_t j = 0; j < n_args; j++)
      if (strcmp(cfg->input[i]->name, pts_torch_arg_at(mod, j)->name) == 0) {
        m->input_slot[i] = (int)j;
        by_name = true;
      }
  }
  if (!by_name) {
    char **names = pts_calloc(cfg->n_input, sizeof *names);
    if (!names) return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", m->name);
    for (size_t i = 0; i < cfg->n_input; i++) names[i] = cfg->input[i]->name;
    bool applies;
    enum pts_status st = by_named_index(m->name, "input", names, cfg->n_input, n_args,
                                        m->input_slot, &applies, err);
    pts_free(names);
    if (st) return st;
    if (!applies) {
      PTS_LOG_WARN("model '%s': input names match neither forward()'s argument names nor "
                   "<name>__<index>; inputs are passed in configuration order",
                   m->name);
      for (size_t i = 0; i < cfg->n_input; i++) m->input_slot[i] = (int)i;
    }
  }

  for (size_t i = 0; i < cfg->n_input; i++) {
    const Inference__ModelInput *ci = cfg->input[i];
    const struct pts_torch_arg *a = pts_torch_arg_at(mod, (size_t)m->input_slot[i]);
    bool is_string = ci->data_type == INFERENCE__DATA_TYPE__TYPE_STRING;
    if (is_string != (a->kind == PTS_TORCH_ARG_STRING_LIST))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "unable to load model '%s': input '%s' is %s, but it feeds forward() "
                           "argument '%s' of type '%s'",
                           m->name, ci->name, pts_dtype_config_name((enum pts_dtype)ci->data_type),
                           a->name, a->type);
    if (ci->optional && a->kind != PTS_TORCH_ARG_OPTIONAL_TENSOR)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "unable to load model '%s': input '%s' is optional, but forward() "
                           "argument '%s' has type '%s', not Optional[Tensor]",
                           m->name, ci->name, a->name, a->type);
  }
  return PTS_OK;
}

/* Config outputs → positions in the returned tuple/list. A dict result is
 * matched by name at execute time instead. */
static enum pts_status map_outputs(struct pt_model *m, const struct pts_torch_module *mod,
                                   struct pts_error *err) {
  const Inference__ModelConfig *cfg = m->cfg;
  char **names = pts_calloc(cfg->n_output, sizeof *names);
  if (!names) return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", m->name);
  for (size_t i = 0; i < cfg->n_output; i++) names[i] = cfg->output[i]->name;
  bool applies;
  /* n = 0: the number of returned values is only known when the model runs. */
  enum pts_status st =
      by_named_index(m->name, "output", names, cfg->n_output, 0, m->output_index, &applies, err);
  pts_free(names);
  if (st) return st;
  if (!applies) {
    if (cfg->n_output > 1 && !pts_torch_returns_dict(mod))
      PTS_LOG_INFO("model '%s': output names do not follow <name>__<index>; outputs are taken "
                   "in configuration order",
                   m->name);
    for (size_t i = 0; i < cfg->n_output; i++) m->output_index[i] = (int)i;
  }
  return PTS_OK;
}

/* ---- custom operator libraries ------------------------------------------- */

/* One library named by the config, relative to the model directory. The
 * resolved path must stay inside that directory (no "..", no absolute path,
 * no symbolic link leading out), so a config can not load arbitrary code
 * from elsewhere on the host. */
static enum pts_status resolve_library(const char *model, const char *model_dir, const char *name,
                                       const char *field, char *out, struct pts_error *err) {
  if (name[0] == '/' || strcmp(name, "..") == 0 || strncmp(name, "../", 3) == 0 ||
      strstr(name, "/../") || (strlen(name) >= 3 && strcmp(name + strlen(name) - 3, "/..") == 0))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': custom operator library '%s' (%s) must be a path relative "
                         "to the model directory, without '..'",
                         model, name, field);
  char joined[PATH_MAX], dir[PATH_MAX];
  if (snprintf(joined, sizeof joined, "%s/%s", model_dir, name) >= (int)sizeof joined)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': custom operator library path '%s' is too long", model, name);
  if (!realpath(model_dir, dir))
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "model '%s': can not resolve the model directory '%s': %s", model,
                         model_dir, strerror(errno));
  if (!realpath(joined, out))
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "model '%s': custom operator library '%s' (%s) not found at '%s': %s",
                         model, name, field, joined, strerror(errno));
  size_t n = strlen(dir);
  if (strncmp(out, dir, n) != 0 || out[n] != '/')
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': custom operator library '%s' (%s) resolves to '%s', outside "
                         "the model directory",
                         model, name, field, out);
  return PTS_OK;
}

static enum pts_status open_library(const char *model, const char *path, struct pts_error *err);

/* Libraries loaded so far, by content. The same library copied into two
 * model directories must not be loaded twice: its TORCH_LIBRARY block would
 * register the namespace again, and LibTorch throws from inside dlopen,
 * which ends the process. Entries live as long as the process (so do the
 * libraries). */
struct loaded_lib {
  uint64_t hash;
  off_t size;
  char *path;
  struct loaded_lib *next;
};
static struct loaded_lib *loaded_libs;
static pthread_mutex_t loaded_mu = PTHREAD_MUTEX_INITIALIZER;

/* FNV-1a over the file: cheap, and libraries are small. */
static bool hash_file(const char *path, uint64_t *hash, off_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  uint64_t h = 1469598103934665603ull;
  unsigned char buf[65536];
  size_t n;
  off_t total = 0;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 1099511628211ull;
    total += (off_t)n;
  }
  bool ok = !ferror(f);
  fclose(f);
  *hash = h;
  *size = total;
  return ok;
}

/* The path of an already loaded library with the same content, or NULL. */
static const char *already_loaded(uint64_t hash, off_t size) {
  for (struct loaded_lib *l = loaded_libs; l; l = l->next)
    if (l->hash == hash && l->size == size) return l->path;
  return NULL;
}

/* dlopen with RTLD_GLOBAL: the library's static initialisers register its
 * operators (TORCH_LIBRARY) with LibTorch's dispatcher before the model is
 * loaded. Libraries are never closed: the registrations point into them. */
static enum pts_status load_library(const char *model, const char *model_dir, const char *name,
                                    const char *field, struct pts_error *err) {
  char path[PATH_MAX];
  enum pts_status st = resolve_library(model, model_dir, name, field, path, err);
  if (st != PTS_OK) return st;
  uint64_t hash;
  off_t size;
  if (!hash_file(path, &hash, &size))
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "model '%s': can not read custom operator library '%s': %s", model, path,
                         strerror(errno));
  pthread_mutex_lock(&loaded_mu);
  const char *same = already_loaded(hash, size);
  if (same) {
    PTS_LOG_INFO("model '%s': custom operator library '%s' is already loaded (from '%s')", model,
                 path, same);
    pthread_mutex_unlock(&loaded_mu);
    return PTS_OK;
  }
  st = open_library(model, path, err);
  struct loaded_lib *l = st == PTS_OK ? pts_calloc(1, sizeof *l) : NULL;
  if (l) l->path = pts_strdup(path);
  if (l && l->path) {
    l->hash = hash;
    l->size = size;
    l->next = loaded_libs;
    loaded_libs = l;
  } else if (l) {
    pts_free(l); /* only the duplicate check is lost */
  }
  pthread_mutex_unlock(&loaded_mu);
  return st;
}

static enum pts_status open_library(const char *model, const char *path, struct pts_error *err) {
  dlerror();
  if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL)) {
    const char *why = dlerror();
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "model '%s': failed to load custom operator library '%s': %s", model, path,
                         why ? why : "unknown dlopen error");
  }
  PTS_LOG_INFO("model '%s': loaded custom operator library '%s'", model, path);
  return PTS_OK;
}

/* CUSTOM_OP_LIBRARIES ("a.so,b.so") and Triton's
 * model_operations { op_library_filename: [...] }. */
static enum pts_status load_op_libraries(const struct pt_model *m, const char *model_dir,
                                         struct pts_error *err) {
  const Inference__ModelOperations *ops = m->cfg->model_operations;
  for (size_t i = 0; ops && i < ops->n_op_library_filename; i++) {
    enum pts_status st = load_library(m->name, model_dir, ops->op_library_filename[i],
                                      "model_operations.op_library_filename", err);
    if (st != PTS_OK) return st;
  }
  const char *list = pts_model_config_param(m->cfg, "CUSTOM_OP_LIBRARIES");
  if (!list) return PTS_OK;
  char *copy = pts_strdup(list);
  if (!copy) return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", m->name);
  enum pts_status st = PTS_OK;
  char *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok && st == PTS_OK;
       tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    size_t n = strlen(tok);
    while (n && tok[n - 1] == ' ') tok[--n] = '\0';
    if (n) st = load_library(m->name, model_dir, tok, "parameter CUSTOM_OP_LIBRARIES", err);
  }
  pts_free(copy);
  return st;
}

/* ---- AOTInductor packages ----------------------------------------------- */

static const char *const aoti_device_names[] = {"cpu", "cuda", "mps"};

/* Where model_load loads the package to read its call specification: the
 * device kind it was compiled for, on the first GPU a GPU group lists. A
 * host that can not run that kind is refused here, naming both devices. */
static enum pts_status aoti_spare_device(const struct pt_model *m, struct pts_device *dev,
                                         struct pts_error *err) {
  const Inference__ModelConfig *cfg = m->cfg;
  *dev = (struct pts_device){.type = PTS_DEVICE_CPU};
  const char *why = NULL;
  if (m->aoti_device == PTS_AOTI_CUDA) {
    if (!caps.built_with_cuda)
      why = "this LibTorch was built without CUDA";
    else if (!caps.cuda_available || caps.cuda_device_count < 1)
      why = "no CUDA device is available";
    dev->type = PTS_DEVICE_CUDA;
    for (size_t g = 0; g < cfg->n_instance_group; g++)
      if (cfg->instance_group[g]->n_gpus &&
          cfg->instance_group[g]->gpus[0] < caps.cuda_device_count) {
        dev->index = cfg->instance_group[g]->gpus[0];
        break;
      }
  } else if (m->aoti_device == PTS_AOTI_MPS) {
    if (!caps.mps_available)
      why = caps.built_with_mps ? "MPS is not available on this machine"
                                : "this LibTorch was built without MPS support";
    dev->type = PTS_DEVICE_MPS;
  }
  if (why)
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "unable to load model '%s': the package was compiled for %s, but %s, so "
                         "its instances would run on cpu",
                         m->name, aoti_device_names[m->aoti_device], why);
  return PTS_OK;
}

/* model_load of a package: its device, then its call specification, then
 * the config completed, bound and checked against both. */
static enum pts_status aoti_model_load(struct pt_model *m, Inference__ModelConfig *cfg,
                                       struct pts_error *err) {
  struct pts_torch_meta meta;
  struct pts_aoti_io *io = NULL; /* kept as m->io once the config fits it */
  enum pts_status st = pts_torch_aoti_metadata(m->path, &meta, err);
  if (st == PTS_OK && !pts_torch_meta_get(&meta, "AOTI_DEVICE_KEY")) {
    /* A LibTorch without the static metadata reader: load the package
     * where it says (a cpu device lets the loader choose) and ask it. */
    pts_torch_meta_free(&meta);
    struct pts_device any = {.type = PTS_DEVICE_CPU};
    st = pts_torch_load_aoti(m->path, &any, &m->spare, err);
    if (st == PTS_OK) st = pts_torch_module_metadata(m->spare, &meta, err);
  }
  if (st == PTS_OK)
    st = pts_aoti_device_parse(pts_torch_meta_get(&meta, "AOTI_DEVICE_KEY"), &m->aoti_device, err);
  if (st == PTS_OK) st = pts_aoti_settle_groups(cfg, m->aoti_device, err);
  if (st) {
    pts_error_prefix(err, "unable to load model '%s'", m->name);
    goto out;
  }
  if ((st = aoti_spare_device(m, &m->spare_device, err))) goto out;
  if (m->spare && m->aoti_device != PTS_AOTI_CPU) { /* loaded by the fallback above */
    pts_torch_free(m->spare);
    m->spare = NULL;
  }
  if (!m->spare && (st = pts_torch_load_aoti(m->path, &m->spare_device, &m->spare, err))) {
    pts_error_prefix(err, "unable to load model '%s'", m->name);
    goto out;
  }
  const char *io_json = pts_torch_meta_get(&meta, PTS_AOTI_IO_KEY);
  if ((st = pts_callspec_parse(pts_torch_call_spec(m->spare, 0), pts_torch_call_spec(m->spare, 1),
                               &m->callspec, err)) ||
      (io_json && (st = pts_aoti_io_parse(io_json, m->callspec, &io, err))) ||
      (st = pts_aoti_complete(cfg, m->callspec, io, err))) {
    pts_error_prefix(err, "unable to load model '%s'", m->name);
    goto out;
  }
  if ((st = check_config(m, err))) goto out;
  /* The binding arrays follow the (possibly completed) config. */
  pts_free(m->input_slot);
  pts_free(m->output_index);
  m->input_slot = pts_calloc(cfg->n_input, sizeof(int));
  m->output_index = pts_calloc(cfg->n_output, sizeof(int));
  if (!m->input_slot || !m->output_index) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", m->name);
    goto out;
  }
  if ((st = pts_aoti_bind(cfg, m->callspec, m->input_slot, m->output_index, err)) ||
      (io && (st = pts_aoti_check(cfg, m->callspec, io, m->input_slot, m->output_index, err)))) {
    pts_error_prefix(err, "unable to load model '%s'", m->name);
    goto out;
  }
  m->io = io;
  io = NULL;
out:
  pts_aoti_io_free(io);
  pts_torch_meta_free(&meta);
  return st;
}

/* Instances the model will have, as the repository plans them (Triton's
 * layout: `count` per listed GPU of a KIND_GPU group, else `count`): at
 * most this many forward() calls of the model run at once. */
static int count_instances(const Inference__ModelConfig *cfg) {
  long total = 0;
  for (size_t g = 0; g < cfg->n_instance_group; g++) {
    const Inference__ModelInstanceGroup *ig = cfg->instance_group[g];
    size_t per =
        ig->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU && ig->n_gpus ? ig->n_gpus : 1;
    if (ig->count > 0) total += (long)per * ig->count;
  }
  return total < 1 ? 1 : total > 4096 ? 4096 : (int)total;
}

static enum pts_status pt_model_load(const struct pts_backend_model_desc *desc, void **state,
                                     struct pts_error *err) {
  *state = NULL;
  pthread_once(&caps_once, probe_once);
  const Inference__ModelConfig *cfg = desc->config;
  struct pt_model *m = pts_calloc(1, sizeof *m);
  if (m) {
    m->cfg = cfg;
    m->name = pts_strdup(desc->name);
    m->path = pts_strdup(desc->model_path);
    m->input_slot = pts_calloc(cfg->n_input ? cfg->n_input : 1, sizeof(int));
    m->output_index = pts_calloc(cfg->n_output ? cfg->n_output : 1, sizeof(int));
  }
  if (!m || !m->name || !m->path || !m->input_slot || !m->output_index) {
    model_free(m);
    return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", desc->name);
  }

  enum pts_status st;
  struct stat sb;
  if (stat(m->path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    const char *why = S_ISDIR(sb.st_mode) ? "it is a directory" : "not a regular file";
    if (stat(m->path, &sb) != 0) why = strerror(errno);
    st = pts_error_set(err, PTS_UNAVAILABLE, "unable to find '%s' for model '%s': %s", m->path,
                       m->name, why);
    goto fail;
  }
  m->aoti = strcmp(cfg->platform, "torch_aoti") == 0;
  if ((st = read_params(m, err))) goto fail;
  /* Before the model: TorchScript resolves the operators it calls at load
   * (and a package's fallback kernels may call them). */
  if ((st = load_op_libraries(m, desc->model_dir, err))) goto fail;

  if (m->aoti) {
    if (!desc->completable) {
      st = pts_error_set(err, PTS_INTERNAL, "model '%s': no writable config to complete", m->name);
      goto fail;
    }
    if ((st = aoti_model_load(m, desc->completable, err))) goto fail;
  } else {
    if ((st = check_config(m, err))) goto fail;
    m->spare_device = (struct pts_device){.type = PTS_DEVICE_CPU};
    if ((st = pts_torch_load(m->path, &m->spare_device, &m->spare, err))) {
      pts_error_prefix(err, "unable to load model '%s'", m->name);
      goto fail;
    }
    if ((st = map_inputs(m, m->spare, err)) || (st = map_outputs(m, m->spare, err))) goto fail;
  }
  pts_torch_set_interop_threads(m->inter_op_threads, m->name);
  pts_intra_choose(m->intra_op_threads, pts_intra_cores(), count_instances(cfg),
                   pts_torch_default_intra_threads(), &m->intra);
  *state = m;
  return PTS_OK;

fail:
  model_free(m);
  return st;
}

static void pt_model_unload(void *state) { model_free(state); }

/* ---- instances ------------------------------------------------------------ */

static enum pts_status choose_device(const struct pt_model *m,
                                     const struct pts_backend_instance_desc *desc,
                                     struct pts_device *dev, struct pts_error *err) {
  const Inference__ModelOptimizationPolicy *opt = m->cfg->optimization;
  const Inference__ModelOptimizationPolicy__ExecutionAccelerators *acc =
      opt ? opt->execution_accelerators : NULL;
  size_t n = acc ? acc->n_gpu_execution_accelerator : 0;
  const char **names = pts_calloc(n ? n : 1, sizeof *names);
  if (!names) return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", m->name);
  for (size_t i = 0; i < n; i++) names[i] = acc->gpu_execution_accelerator[i]->name;
  struct pts_device_request req = {
      .kind = (enum pts_device_kind)desc->kind,
      .gpu_id = desc->device_id,
      .accelerators = names,
      .n_accelerators = n,
  };
  char warning[256];
  enum pts_status st = pts_device_choose(&caps, &req, dev, warning, sizeof warning, err);
  pts_free(names);
  if (st) {
    pts_error_prefix(err, "model '%s', instance '%s'", m->name, desc->name);
    return st;
  }
  if (warning[0])
    PTS_LOG_WARN("model '%s', instance '%s': %s", m->name, desc->name, warning);
  return PTS_OK;
}

static struct pts_torch_run_opts run_opts(const struct pt_model *m) {
  struct pts_torch_run_opts opts = {
      .inference_mode = m->inference_mode,
      .optimized_execution = m->optimized_execution,
      .intra_op_threads = m->intra.threads,
      .dict_input = m->dict_input,
      .disable_cudnn = m->disable_cudnn,
      .empty_cache = m->empty_cache,
      .channels_last = m->channels_last,
  };
  return opts;
}

/* Captures one CUDA graph per CUDA_GRAPH_BATCH_SIZES entry. Graphs replay
 * fixed shapes only, so every input needs fixed dims besides the batch. */
static enum pts_status capture_graphs(struct pt_instance *in, const char *dev,
                                      struct pts_error *err) {
  const struct pt_model *m = in->model;
  const Inference__ModelConfig *cfg = m->cfg;
  if (in->device.type != PTS_DEVICE_CUDA) {
    PTS_LOG_WARN("model '%s', instance '%s': CUDA graphs were asked for, but the instance runs "
                 "on %s; it runs eagerly",
                 m->name, in->name, dev);
    return PTS_OK;
  }
  int64_t (*dims)[PTS_TORCH_MAX_DIMS] = pts_calloc(cfg->n_input ? cfg->n_input : 1, sizeof *dims);
  if (!dims) return pts_error_set(err, PTS_NOMEM, "out of memory capturing CUDA graphs");
  enum pts_status st = PTS_OK;
  for (size_t g = 0; g < m->n_graph_batch_sizes && st == PTS_OK; g++) {
    int64_t b = m->graph_batch_sizes[g];
    for (size_t i = 0; i < cfg->n_input && st == PTS_OK; i++) {
      const Inference__ModelInput *ci = cfg->input[i];
      const int64_t *d = ci->reshape ? ci->reshape->shape : ci->dims;
      size_t nd = ci->reshape ? ci->reshape->n_shape : ci->n_dims;
      struct pts_torch_input *slot = &in->inputs[m->input_slot[i]];
      struct pts_shape shape;
      if (!pts_shape_set(&shape, d, nd) ||
          (cfg->max_batch_size > 0 && !pts_shape_prepend(&shape, b))) {
        st = pts_error_set(err, PTS_INVALID_ARG, "model '%s': input '%s' has too many dimensions",
                           m->name, ci->name);
        break;
      }
      for (size_t k = 0; k < nd; k++)
        if (d[k] < 0)
          st = pts_error_set(err, PTS_INVALID_ARG,
                             "model '%s': CUDA graphs need fixed dims, but input '%s' has a "
                             "variable (-1) dimension",
                             m->name, ci->name);
      memcpy(dims[i], shape.dims, sizeof dims[i]);
      *slot = (struct pts_torch_input){.name = ci->name,
                                       .dtype = (enum pts_dtype)ci->data_type,
                                       .ndim = shape.ndim,
                                       .dims = dims[i]};
    }
    struct pts_torch_run_opts opts = run_opts(m);
    if (st == PTS_OK)
      st = pts_torch_capture_graph(in->module, in->inputs, cfg->n_input, b,
                                   m->graph_min_batch[g], &opts, err);
    if (st == PTS_OK)
      PTS_LOG_INFO("model '%s', instance '%s': captured a CUDA graph for batch size %lld on %s%s",
                   m->name, in->name, (long long)b, dev,
                   m->graph_min_batch[g] < b ? " (smaller batches padded up to it)" : "");
    else
      pts_error_prefix(err, "model '%s', instance '%s', batch size %lld", m->name, in->name,
                       (long long)b);
  }
  pts_free(dims);
  return st;
}

static bool aoti_device_matches(const struct pt_model *m, const struct pts_device *dev) {
  switch (m->aoti_device) {
    case PTS_AOTI_CUDA: return dev->type == PTS_DEVICE_CUDA;
    case PTS_AOTI_MPS: return dev->type == PTS_DEVICE_MPS;
    default: return dev->type == PTS_DEVICE_CPU;
  }
}

static enum pts_status check_output(const struct pt_model *m, size_t i,
                                    const struct pts_torch_output *o, int64_t batch_size,
                                    struct pts_error *err);
static enum pts_status pick_output(const struct pt_model *m, size_t i,
                                   struct pts_torch_outputs *outs, struct pts_torch_output **o,
                                   struct pts_error *err);

/* A call specification leaf that is not a tensor (an int or None in
 * forward()'s arguments or result) looks like any other leaf (callspec.h);
 * only running the package shows it. Rewrites the two ways a run reports
 * one into what is wrong, and returns whether it did:
 *  - torch.export bakes a non-tensor argument into the program, so the
 *    package takes fewer tensors than its spec has inputs (its runner:
 *    "expected inputs vector size to be N, but got M");
 *  - a None result comes back as an undefined tensor, whose data type
 *    LibTorch calls UNKNOWN_SCALAR (the bridge: "output <i> of the model has
 *    data type UNKNOWN_SCALAR, ..."). */
static bool aoti_explain_leaf(const struct pt_model *m, struct pts_error *err) {
  const char *p = strstr(err->msg, "expected inputs vector size to be ");
  size_t n_in = pts_callspec_count(m->callspec, PTS_CALLSPEC_INPUTS);
  char names[256];
  if (p) {
    unsigned long takes = strtoul(p + strlen("expected inputs vector size to be "), NULL, 10);
    if (takes >= n_in) return false;
    pts_callspec_list(m->callspec, PTS_CALLSPEC_INPUTS, names, sizeof names);
    pts_error_set(err, PTS_INVALID_ARG,
                  "the package takes %lu input tensor(s), but its call specification has %zu "
                  "inputs (%s): %zu of them not a tensor (a number, string or None that "
                  "torch.export baked into the program); ptserve feeds tensors only: export a "
                  "forward() whose arguments are all tensors",
                  takes, n_in, names, n_in - (size_t)takes);
    return true;
  }
  static const char undefined[] = " of the model has data type UNKNOWN_SCALAR";
  if (!(p = strstr(err->msg, undefined))) return false;
  const char *digits = p;
  while (digits > err->msg && digits[-1] >= '0' && digits[-1] <= '9') digits--;
  if (digits == p || digits - err->msg < 7 || strncmp(digits - 7, "output ", 7) != 0) return false;
  unsigned long i = strtoul(digits, NULL, 10);
  if (i >= pts_callspec_count(m->callspec, PTS_CALLSPEC_OUTPUTS)) return false;
  pts_error_set(err, PTS_INVALID_ARG,
                "output %s (<name>__%lu) of the package is None, not a tensor; only tensors "
                "are supported at the leaves: export a forward() that returns tensors only",
                pts_callspec_name(m->callspec, PTS_CALLSPEC_OUTPUTS, i), i);
  return true;
}

/* One run of the load check at batch size b (0: the model does not batch)
 * on zeros shaped as the config says. *leaf: the failure is a non-tensor
 * leaf of the call specification (aoti_explain_leaf), not the config. */
static enum pts_status aoti_check_run(struct pt_instance *in, int64_t b,
                                      int64_t (*dims)[PTS_TORCH_MAX_DIMS], void **zeros,
                                      bool *leaf, struct pts_error *err) {
  const struct pt_model *m = in->model;
  const Inference__ModelConfig *cfg = m->cfg;
  for (size_t i = 0; i < cfg->n_input; i++) {
    const Inference__ModelInput *ci = cfg->input[i];
    const int64_t *d = ci->reshape ? ci->reshape->shape : ci->dims;
    size_t nd = ci->reshape ? ci->reshape->n_shape : ci->n_dims;
    struct pts_shape shape;
    if (!pts_shape_set(&shape, d, nd) || (b > 0 && !pts_shape_prepend(&shape, b)))
      return pts_error_set(err, PTS_INVALID_ARG, "model '%s': input '%s' has too many dimensions",
                           m->name, ci->name);
    int64_t bytes = pts_shape_byte_size((enum pts_dtype)ci->data_type, &shape);
    if (bytes < 0)
      return pts_error_set(err, PTS_INVALID_ARG, "model '%s': input '%s' is too large", m->name,
                           ci->name);
    /* Zeros, not garbage: a model may index with an input. */
    pts_free(zeros[i]);
    if (!(zeros[i] = pts_calloc(1, (size_t)bytes)))
      return pts_error_set(err, PTS_NOMEM, "out of memory for the load check of model '%s'",
                           m->name);
    memcpy(dims[i], shape.dims, sizeof dims[i]);
    in->inputs[m->input_slot[i]] = (struct pts_torch_input){.name = ci->name,
                                                            .dtype = (enum pts_dtype)ci->data_type,
                                                            .ndim = shape.ndim,
                                                            .dims = dims[i],
                                                            .data = zeros[i],
                                                            .byte_size = (size_t)bytes};
  }
  struct pts_torch_run_opts opts = run_opts(m);
  struct pts_torch_outputs outs;
  enum pts_status st = pts_torch_forward(in->module, in->inputs, cfg->n_input, &opts, &outs, err);
  if (st && st != PTS_NOMEM) *leaf = aoti_explain_leaf(m, err);
  size_t n_leaves = pts_callspec_count(m->callspec, PTS_CALLSPEC_OUTPUTS);
  if (st == PTS_OK && outs.count != n_leaves) {
    *leaf = true;
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "the package returned %zu tensors, but its call specification has %zu "
                       "outputs; only tensors are supported at the leaves",
                       outs.count, n_leaves);
  }
  for (size_t o = 0; st == PTS_OK && o < cfg->n_output; o++) {
    struct pts_torch_output *out = NULL;
    if ((st = pick_output(m, o, &outs, &out, err)) ||
        (st = check_output(m, o, out, b, err)))
      break;
    const Inference__ModelOutput *co = cfg->output[o];
    const int64_t *d = co->reshape ? co->reshape->shape : co->dims;
    size_t nd = co->reshape ? co->reshape->n_shape : co->n_dims;
    int skip = b > 0 ? 1 : 0;
    bool ok = (size_t)out->ndim == nd + (size_t)skip;
    for (size_t k = 0; ok && k < nd; k++) ok = d[k] == -1 || d[k] == out->dims[k + skip];
    if (!ok) {
      struct pts_shape got = {.ndim = out->ndim};
      memcpy(got.dims, out->dims, sizeof(int64_t) * (size_t)out->ndim);
      char shape[128];
      pts_shape_format(&got, shape, sizeof shape);
      st = pts_error_set(err, PTS_INVALID_ARG,
                         "output '%s' came back with the shape %s, which its dims in the "
                         "configuration do not allow",
                         co->name, shape);
    }
  }
  pts_torch_outputs_free(&outs);
  return st;
}

/* The smallest batch in 2..max that the package accepts, given that it
 * refused 1: PyTorch's documented export, a torch.export.Dim("batch",
 * min=1, max=N) with an example batch of 2, compiles a range that starts
 * at 2 (torch specializes sizes 0 and 1 unless told otherwise), and
 * PyTorch in process runs the exported program at batch 1 all the same.
 * The range is an interval, so a binary search over [2, max] finds its
 * start in at most log2(max) runs on zeros. 0 when max is refused too (the
 * refusal is not about the batch). */
static int64_t aoti_min_batch(struct pt_instance *in, int64_t max,
                              int64_t (*dims)[PTS_TORCH_MAX_DIMS], void **zeros) {
  struct pts_error probe;
  bool leaf = false;
  if (aoti_check_run(in, max, dims, zeros, &leaf, &probe) != PTS_OK) return 0;
  int64_t lo = 2, hi = max; /* hi is accepted */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (aoti_check_run(in, mid, dims, zeros, &leaf, &probe) == PTS_OK)
      hi = mid;
    else
      lo = mid + 1;
  }
  return hi;
}

/* The load check of a package: it runs once on zeros shaped as the config
 * says — at batch sizes 1 and max_batch_size for a batching model — so a
 * config that does not fit the package (a static batch dimension, wrong
 * dims or types, outputs that are not tensors) fails the load with the
 * package's own words rather than the first requests. Skipped when an
 * input has a variable (-1) dimension besides the batch: there is no size
 * the package is sure to accept. */
static enum pts_status aoti_load_check(struct pt_instance *in, struct pts_error *err) {
  const struct pt_model *m = in->model;
  const Inference__ModelConfig *cfg = m->cfg;
  for (size_t i = 0; i < cfg->n_input; i++) {
    const Inference__ModelInput *ci = cfg->input[i];
    const int64_t *d = ci->reshape ? ci->reshape->shape : ci->dims;
    size_t nd = ci->reshape ? ci->reshape->n_shape : ci->n_dims;
    for (size_t k = 0; k < nd; k++)
      if (d[k] < 0) {
        PTS_LOG_INFO("model '%s': input '%s' has a variable dimension; the package is not run at "
                     "load (its own input checks guard each request)",
                     m->name, ci->name);
        return PTS_OK;
      }
  }
  int64_t sizes[2] = {0, 0};
  size_t n_sizes = 1;
  if (cfg->max_batch_size > 0) {
    sizes[0] = 1;
    if (cfg->max_batch_size > 1) sizes[n_sizes++] = cfg->max_batch_size;
  }
  size_t n = cfg->n_input ? cfg->n_input : 1;
  int64_t (*dims)[PTS_TORCH_MAX_DIMS] = pts_calloc(n, sizeof *dims);
  void **zeros = pts_calloc(n, sizeof *zeros);
  enum pts_status st = dims && zeros ? PTS_OK
                                     : pts_error_set(err, PTS_NOMEM,
                                                     "out of memory for the load check of model "
                                                     "'%s'",
                                                     m->name);
  for (size_t k = 0; k < n_sizes && st == PTS_OK; k++) {
    bool leaf = false;
    if ((st = aoti_check_run(in, sizes[k], dims, zeros, &leaf, err)) == PTS_OK) continue;
    /* Batch 1 refused: a compiled range that starts above 1 is served by
     * padding (the bridge's min_batch), checked here at batch 1 again. */
    int64_t lo = 0;
    if (sizes[k] == 1 && cfg->max_batch_size > 1 && !leaf && st != PTS_NOMEM &&
        (lo = aoti_min_batch(in, cfg->max_batch_size, dims, zeros)) > 1) {
      pts_torch_set_min_batch(in->module, lo);
      if ((st = aoti_check_run(in, 1, dims, zeros, &leaf, err)) == PTS_OK) {
        PTS_LOG_WARN("model '%s': the package's compiled batch range starts at %lld, not 1 "
                     "(torch.export specialized the batch Dim's lower bound to the "
                     "example's batch): batches of fewer rows are padded with zero rows up "
                     "to %lld and only their own rows are returned; export with "
                     "backed_size_oblivious (examples/export_aoti.py) to serve batch 1 "
                     "without padding",
                     m->name, (long long)lo, (long long)lo);
        in->model->aoti_min_batch = lo; /* the load thread: instances one at a time */
        continue;
      }
      pts_torch_set_min_batch(in->module, 0);
    }
    char why[PTS_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s", err->msg);
    if (st != PTS_NOMEM) st = PTS_INVALID_ARG; /* the config does not fit the package */
    if (leaf) /* the package, not the config */
      pts_error_set(err, st, "unable to load model '%s': %s", m->name, why);
    else if (sizes[k] == 0)
      pts_error_set(err, st,
                    "unable to load model '%s': the package refused inputs shaped as its "
                    "configuration says: %s",
                    m->name, why);
    else
      pts_error_set(err, st,
                    "unable to load model '%s': max_batch_size is %d, but the package refused "
                    "batch size %lld: %s (a package that batches needs a dynamic first dimension "
                    "from 1 to max_batch_size: torch.export.Dim, exported with "
                    "backed_size_oblivious so that 1 is in range)",
                    m->name, (int)cfg->max_batch_size, (long long)sizes[k], why);
  }
  for (size_t i = 0; zeros && i < n; i++) pts_free(zeros[i]);
  pts_free(zeros);
  pts_free(dims);
  if (st == PTS_OK)
    PTS_LOG_INFO("model '%s': the package ran at load on zeros shaped as configured%s", m->name,
                 cfg->max_batch_size > 0 ? " (batch sizes 1 and max_batch_size)" : "");
  return st;
}

static void instance_free(struct pt_instance *in) {
  if (!in) return;
  pts_torch_free(in->module);
  pts_free(in->graph_replay_logged);
  pts_free(in->inputs);
  pts_free(in->dests);
  pts_free(in->parts);
  pts_free(in->name);
  pts_free(in);
}

/* Large request bodies are read into pinned memory from the first CUDA
 * instance on (core/pinned.h), so that a batch of one goes to its device
 * with no staging copy. LibTorch's caching host allocator recycles the
 * blocks; a body holds its block until its request is answered, after the
 * device finished reading it. */
static const struct pts_pinned_allocator pinned_bodies = {
    .alloc = pts_torch_pinned_alloc,
    .release = pts_torch_pinned_release,
};

static bool pt_pipelined(void *state);

static void install_pinned_bodies(void) {
  if (pts_pinned_enabled()) return;
  pts_pinned_install(&pinned_bodies);
  PTS_LOG_INFO("Request bodies of %zu KiB and more are read into pinned host memory (a model "
               "runs on a CUDA device)",
               PTS_PINNED_MIN_BYTES / 1024);
}

/* Input k's bytes in a batch of `rows` (the config's dims, with the batch
 * dim where the model batches), or -1 where they are not known before
 * requests come (a variable dim, BYTES). */
static int64_t input_bytes(const Inference__ModelConfig *cfg, size_t k, int64_t rows) {
  const Inference__ModelInput *ci = cfg->input[k];
  struct pts_shape s;
  if (!pts_shape_set(&s, ci->dims, ci->n_dims) ||
      (cfg->max_batch_size > 0 && !pts_shape_prepend(&s, rows)))
    return -1;
  return pts_shape_byte_size((enum pts_dtype)ci->data_type, &s);
}

/* A request body's bytes besides its tensors: HTTP's JSON header (154
 * bytes for one input from ptperf) or gRPC's message fields. An estimate:
 * LibTorch's host allocator rounds every block up to a power of two, so a
 * reserved block serves any body of the same rounding. */
#define BODY_HEADER_BYTES 1024

/* The pinned body pool (--pinned-memory-pool-byte-size, core/pinned.h),
 * reserved as blocks of this model's one-request body: every input's
 * bytes at batch 1 plus a header, rounded up to the power of two LibTorch's
 * allocator makes of it (so the pool counts the memory pinned). A model
 * with an input of variable dims or BYTES has no one size, and reserves
 * none. */
static void reserve_bodies(struct pt_instance *in) {
  const Inference__ModelConfig *cfg = in->model->cfg;
  uint64_t body = BODY_HEADER_BYTES;
  for (size_t k = 0; k < cfg->n_input; k++) {
    int64_t n = input_bytes(cfg, k, 1);
    if (n <= 0 || (uint64_t)n > SIZE_MAX - body) return;
    body += (uint64_t)n;
  }
  uint64_t block = 1;
  while (block < body && block <= SIZE_MAX / 2) block <<= 1;
  if (block < body) return;
  size_t made = pts_pinned_reserve((size_t)block);
  if (made)
    PTS_LOG_INFO("Reserved %zu pinned request bodies of %llu bytes (blocks of %llu) for model "
                 "instance '%s' (--pinned-memory-pool-byte-size)",
                 made, (unsigned long long)body, (unsigned long long)block, in->name);
}

/* The most input bytes a CUDA instance reserves staging for at load (its
 * power of two is at most this too): Triton's default pinned pool
 * (--pinned-memory-pool-byte-size, 256 MB) for a whole server. Beyond it
 * the buffer grows as batches need it. */
#define STAGING_RESERVE_MAX ((size_t)256 << 20)

/* Pinned staging for the largest batch (max_batch_size rows of every input
 * of fixed dims), reserved at load, so that no batch pins memory in its
 * input phase, as CUDA graphs are captured at load rather than by the first
 * batch of their size. Grown at run time, each batch larger than any before
 * pins a new buffer there (cudaHostAlloc maps and locks every page, up to
 * 128 MiB for a FP32 ResNet-50 batch of 128), in the first batches a load
 * higher than any before forms: a candidate cause of the p99 jump of such
 * first runs on an H100 (docs/experiments/gpu-http-tail, "The first run at
 * a new peak"). Batch set 0 only: the one every batch uses unless the
 * scheduler pipelines the instance (PTSERVE_PIPELINE=1, off by default),
 * whose second set then grows as before. A failed reserve only warns. */
static void reserve_staging(struct pt_instance *in) {
  const Inference__ModelConfig *cfg = in->model->cfg;
  if (in->device.type != PTS_DEVICE_CUDA || in->device.keep_placement || cfg->max_batch_size <= 0)
    return;
  uint64_t total = 0; /* each term below 2^63: no overflow before the cap stops it */
  for (size_t k = 0; k < cfg->n_input && total <= STAGING_RESERVE_MAX; k++) {
    int64_t n = input_bytes(cfg, k, cfg->max_batch_size);
    total += n > 0 ? (uint64_t)n : 0;
  }
  if (total == 0) return;
  if (total > STAGING_RESERVE_MAX) {
    PTS_LOG_INFO("Pinned staging of model instance '%s' grows as batches need it: its largest "
                 "batch needs more than the %zu MiB reserved at load at most",
                 in->name, STAGING_RESERVE_MAX >> 20);
    return;
  }
  /* The loading thread may ask for staging here: no batch has run, and the
   * thread that will run them starts after this returns. */
  struct pts_error err = {0};
  size_t reserved = 0;
  for (size_t k = 0; k < cfg->n_input; k++) {
    int64_t n = input_bytes(cfg, k, cfg->max_batch_size);
    void *at;
    size_t grown;
    if (n <= 0) continue;
    if (pts_torch_staging(in->module, 0, k, (size_t)n, &at, &grown, &err) != PTS_OK) {
      PTS_LOG_WARN("model instance '%s': %s; its pinned staging grows as batches need it",
                   in->name, err.msg);
      return;
    }
    reserved += grown;
  }
  if (reserved)
    PTS_LOG_INFO("Reserved %.1f MiB of pinned staging for model instance '%s' (max_batch_size "
                 "%d)",
                 (double)reserved / (1 << 20), in->name, (int)cfg->max_batch_size);
}

static enum pts_status pt_instance_create(void *model_state,
                                          const struct pts_backend_instance_desc *desc,
                                          void **state, struct pts_error *err) {
  struct pt_model *m = model_state;
  *state = NULL;
  struct pt_instance *in = pts_calloc(1, sizeof *in);
  if (in) {
    in->model = m;
    in->name = pts_strdup(desc->name);
    in->inputs = pts_calloc(m->cfg->n_input ? m->cfg->n_input : 1, sizeof *in->inputs);
    in->dests = pts_calloc(m->cfg->n_output ? m->cfg->n_output : 1, sizeof *in->dests);
    in->graph_replay_logged = pts_calloc(m->n_graph_batch_sizes + 1, sizeof(bool));
  }
  if (!in || !in->name || !in->inputs || !in->dests || !in->graph_replay_logged) {
    instance_free(in);
    return pts_error_set(err, PTS_NOMEM, "out of memory creating instance '%s' of model '%s'",
                         desc->name, m->name);
  }

  enum pts_status st = choose_device(m, desc, &in->device, err);
  if (st) goto fail;
  char dev[32];
  pts_device_format(&in->device, dev, sizeof dev);
  /* Before the weights arrive, so they count against the limit too. */
  if (m->memory_fraction > 0 &&
      (st = pts_torch_set_memory_fraction(&in->device, m->memory_fraction, m->name, err)))
    goto fail;
  if (m->aoti && !aoti_device_matches(m, &in->device)) {
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "unable to load model '%s': the package was compiled for %s, but instance "
                       "'%s' runs on %s",
                       m->name, aoti_device_names[m->aoti_device], in->name, dev);
    goto fail;
  }
  if (m->spare && !in->device.keep_placement && in->device.type == m->spare_device.type &&
      in->device.index == m->spare_device.index) {
    in->module = m->spare; /* the load model_load already did */
    m->spare = NULL;
  } else {
    if (!m->aoti) {
      pts_torch_free(m->spare); /* not a cpu model: don't keep a host copy */
      m->spare = NULL;
    }
    st = m->aoti ? pts_torch_load_aoti(m->path, &in->device, &in->module, err)
                 : pts_torch_load(m->path, &in->device, &in->module, err);
    if (st) {
      pts_error_prefix(err, "unable to load model '%s'", m->name);
      goto fail;
    }
  }
  if ((m->freeze || m->optimize_for_inference) &&
      (st = pts_torch_optimize(in->module, m->freeze, m->optimize_for_inference, err))) {
    pts_error_prefix(err, "model '%s'", m->name);
    goto fail;
  }
  /* Under InferenceMode only: torch_bridge.h says why and why not else. */
  if (m->inference_mode && !m->aoti) {
    size_t converted = 0;
    if ((st = pts_torch_inference_tensors(in->module, &converted, err))) {
      pts_error_prefix(err, "model '%s'", m->name);
      goto fail;
    }
    PTS_LOG_VERBOSE(1, "model instance '%s': %zu parameters and buffers made inference tensors",
                    in->name, converted);
  }
  PTS_LOG_INFO("Loaded %s from: %s on device: %s",
               m->aoti ? "AOTInductor package" : "PyTorch model", m->path,
               in->device.keep_placement ? "model" : dev);
  /* Once per model, on the load thread: instances are created one by one. */
  if (m->aoti && !m->load_checked) {
    if ((st = aoti_load_check(in, err))) goto fail;
    m->load_checked = true;
  } else if (m->aoti_min_batch) {
    /* The first instance's check found the package's range to start above
     * 1: this instance's module pads the same way. */
    pts_torch_set_min_batch(in->module, m->aoti_min_batch);
  }
  if (m->n_graph_batch_sizes && (st = capture_graphs(in, dev, err))) goto fail;
  PTS_LOG_INFO("Inference Mode is %s for model instance '%s'",
               m->inference_mode ? "enabled" : "disabled", in->name);
  if (!m->aoti) /* a compiled package has no graph executor */
    PTS_LOG_INFO("Optimized execution is %s for model instance '%s'",
                 m->optimized_execution ? "enabled" : "disabled", in->name);
  if (m->intra.configured)
    PTS_LOG_INFO("Intra-op threads for model instance '%s': %d (INTRA_OP_THREAD_COUNT)", in->name,
                 m->intra.threads);
  else
    PTS_LOG_INFO("Intra-op threads for model instance '%s': %d (default: %d cores / %d instances, "
                 "at most LibTorch's %d; set INTRA_OP_THREAD_COUNT to choose)",
                 in->name, m->intra.threads, m->intra.cores, m->intra.instances,
                 m->intra.libtorch_default);
  PTS_LOG_INFO("PyTorch instance initialized on device: %s", dev);
  if (pt_pipelined(in)) {
    install_pinned_bodies();
    reserve_bodies(in);
  }
  reserve_staging(in);
  *state = in;
  return PTS_OK;

fail:
  instance_free(in);
  return st;
}

static void pt_instance_destroy(void *state) { instance_free(state); }

/* ---- execute -------------------------------------------------------------- */

static struct pts_torch_output *find_keyed(struct pts_torch_outputs *outs, const char *name) {
  for (size_t i = 0; i < outs->count; i++)
    if (outs->items[i].key && strcmp(outs->items[i].key, name) == 0) return &outs->items[i];
  return NULL;
}

static enum pts_status pick_output(const struct pt_model *m, size_t i,
                                   struct pts_torch_outputs *outs, struct pts_torch_output **o,
                                   struct pts_error *err) {
  const char *name = m->cfg->output[i]->name;
  if (outs->keyed) {
    *o = find_keyed(outs, name);
    if (!*o)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "output '%s' of model '%s' is not a key of the dict the model "
                           "returned (%zu keys)",
                           name, m->name, outs->count);
    return PTS_OK;
  }
  size_t idx = (size_t)m->output_index[i];
  if (idx >= outs->count)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "The output %s in the model configuration refers to an output index "
                         "which doesn't exist. This model has %zu outputs",
                         name, outs->count);
  *o = &outs->items[idx];
  return PTS_OK;
}

static enum pts_status check_output(const struct pt_model *m, size_t i,
                                    const struct pts_torch_output *o, int64_t batch_size,
                                    struct pts_error *err) {
  const Inference__ModelOutput *cfg_out = m->cfg->output[i];
  enum pts_dtype want = (enum pts_dtype)cfg_out->data_type;
  if (!o->release)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': output '%s' refers to a value already used by another "
                         "output",
                         m->name, cfg_out->name);
  if (o->dtype != want)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "configuration expects datatype %s for output '%s', model provides %s",
                         pts_dtype_config_name(want), cfg_out->name,
                         pts_dtype_config_name(o->dtype));
  if (o->ndim == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "output '%s' of model '%s' is a scalar which is not supported",
                         cfg_out->name, m->name);
  if (m->cfg->max_batch_size > 0 && o->dims[0] != batch_size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "output '%s' of model '%s' has %lld in its first (batch) dimension, but "
                         "the batch size is %lld",
                         cfg_out->name, m->name, (long long)o->dims[0], (long long)batch_size);
  return PTS_OK;
}

/* Moves a bridge output into a batch output tensor (no copy of the data). */
static enum pts_status adopt_output(const char *name, struct pts_torch_output *o,
                                    struct pts_tensor *t, struct pts_error *err) {
  t->name = pts_strdup(name);
  struct pts_buf *buf = t->name ? pts_buf_wrap(o->data, o->byte_size, o->release, o->release_ctx)
                                : NULL;
  if (!buf) {
    pts_tensor_clear(t);
    return pts_error_set(err, PTS_NOMEM, "out of memory for output '%s'", name);
  }
  o->release = NULL; /* the buffer owns the result now */
  t->buf = buf;
  t->data = o->data;
  t->byte_size = o->byte_size;
  t->dtype = o->dtype;
  t->shape.ndim = o->ndim;
  memcpy(t->shape.dims, o->dims, sizeof(int64_t) * (size_t)o->ndim);
  return PTS_OK;
}

/* Once per captured batch size, so the log shows the graphs are in use
 * without a line per request. */
static void log_first_replay(struct pt_instance *in, int64_t b) {
  const struct pt_model *m = in->model;
  for (size_t g = 0; g < m->n_graph_batch_sizes; g++) {
    if (m->graph_batch_sizes[g] != b || in->graph_replay_logged[g]) continue;
    in->graph_replay_logged[g] = true;
    PTS_LOG_INFO("model '%s', instance '%s': replaying the CUDA graph for batch size %lld",
                 m->name, in->name, (long long)b);
  }
}

/* The operator profiler around one forward() (trace/profile.h). A profiler
 * that fails to start or stop costs the report, never the request. */
static bool profile_start(struct pt_instance *in, struct pts_profile_ticket *ticket) {
  struct pts_error perr;
  if (pts_torch_profile_start(in->module, &perr) == PTS_OK) return true;
  PTS_LOG_WARN("model '%s', instance '%s': %s", in->model->name, in->name, perr.msg);
  pts_profile_note(ticket, perr.msg);
  return false;
}

static void profile_stop(struct pt_instance *in, struct pts_profile_ticket *ticket) {
  struct pts_torch_profile prof;
  struct pts_error perr;
  if (pts_torch_profile_stop(in->module, &prof, &perr) != PTS_OK) {
    PTS_LOG_WARN("model '%s', instance '%s': %s", in->model->name, in->name, perr.msg);
    pts_profile_note(ticket, perr.msg);
    pts_torch_profile_free(&prof);
    return;
  }
  struct pts_profile_op *ops = pts_calloc(prof.count ? prof.count : 1, sizeof *ops);
  for (size_t i = 0; ops && i < prof.count; i++) {
    const struct pts_torch_op *o = &prof.ops[i];
    ops[i] = (struct pts_profile_op){.name = o->name,
                                     .shapes = o->shapes,
                                     .dtypes = o->dtypes,
                                     .start_ns = o->start_ns,
                                     .cpu_ns = o->cpu_ns,
                                     .device_ns = o->device_ns,
                                     .on_device = o->on_device};
  }
  if (ops) pts_profile_add(ticket, ops, prof.count);
  pts_profile_note(ticket, ops ? prof.note : "out of memory copying the profiler's events");
  pts_free(ops);
  pts_torch_profile_free(&prof);
}

/* The places the scheduler would like outputs written (pts_batch.
 * output_dest), as the bridge names returned values: by key for a dict
 * result, else by position. BYTES outputs are left out (their size is
 * known only once serialized). */
static void set_dests(struct pt_instance *in, const struct pts_batch *batch,
                      struct pts_torch_run_opts *opts) {
  const struct pt_model *m = in->model;
  size_t n = 0;
  for (size_t i = 0; batch->output_dest && i < m->cfg->n_output; i++) {
    const struct pts_output_dest *d = &batch->output_dest[i];
    if (!d->data || m->cfg->output[i]->data_type == INFERENCE__DATA_TYPE__TYPE_STRING) continue;
    bool keyed = pts_torch_returns_dict(in->module);
    in->dests[n++] = (struct pts_torch_dest){
        .index = keyed ? 0 : (size_t)m->output_index[i],
        .key = keyed ? m->cfg->output[i]->name : NULL,
        .data = d->data,
        .size = d->size,
        .mem = (int)d->mem,
        .device = d->device,
    };
  }
  opts->dests = n ? in->dests : NULL;
  opts->n_dests = n;
}

/* backend.h input_staging: a CUDA instance's pinned staging buffers, one
 * per input and batch set. */
static enum pts_status pt_input_staging(void *state, unsigned set, size_t input,
                                        size_t byte_size, void **data, enum pts_mem *mem,
                                        struct pts_error *err) {
  struct pt_instance *in = state;
  *data = NULL;
  if (in->device.type != PTS_DEVICE_CUDA || in->device.keep_placement) return PTS_OK;
  size_t grown;
  enum pts_status st = pts_torch_staging(in->module, set, input, byte_size, data, &grown, err);
  if (st != PTS_OK) pts_error_prefix(err, "model '%s', instance '%s'", in->model->name, in->name);
  /* Said because it costs this batch: pinning tens of MB takes ms, inside
   * its input phase (what reserve_staging spares the largest batch). */
  if (grown)
    PTS_LOG_INFO("Pinned staging of model instance '%s' grew to %.1f MiB for a batch of %zu "
                 "bytes of input '%s' (pinned in the batch's input phase)",
                 in->name, (double)grown / (1 << 20), byte_size,
                 in->model->cfg->input[input]->name);
  *mem = PTS_MEM_PINNED;
  return st;
}

/* backend.h gather_device: a CUDA instance gathers a batch of CUDA
 * shared-memory inputs into its own device memory (device-to-device
 * copies on its stream); other instances decline (the scheduler reads the
 * parts to the host, as the bridge would for them anyway). */
static enum pts_status pt_gather_device(void *state, unsigned set, size_t input,
                                        const struct pts_device_part *parts, size_t n,
                                        size_t total, void **data, int *device,
                                        struct pts_error *err) {
  struct pt_instance *in = state;
  *data = NULL;
  if (in->device.type != PTS_DEVICE_CUDA || in->device.keep_placement) return PTS_OK;
  if (n > in->parts_cap) {
    struct pts_torch_part *grown = pts_realloc(in->parts, n * sizeof *grown);
    if (!grown)
      return pts_error_set(err, PTS_NOMEM, "model '%s', instance '%s': out of memory gathering",
                           in->model->name, in->name);
    in->parts = grown;
    in->parts_cap = n;
  }
  for (size_t i = 0; i < n; i++)
    in->parts[i] = (struct pts_torch_part){parts[i].data, parts[i].byte_size, parts[i].device};
  enum pts_status st =
      pts_torch_gather_device(in->module, set, input, in->parts, n, total, data, err);
  if (st != PTS_OK) {
    pts_error_prefix(err, "model '%s', instance '%s'", in->model->name, in->name);
    return st;
  }
  *device = in->device.index;
  return PTS_OK;
}

/* backend.h pipelined: a CUDA instance whose module queues its work on a
 * stream (not KIND_MODEL, whose inputs stay on the host and are never
 * staged). */
static bool pt_pipelined(void *state) {
  const struct pt_instance *in = state;
  return in->device.type == PTS_DEVICE_CUDA && !in->device.keep_placement &&
         pts_torch_async(in->module);
}

/* backend.h lendable: a CUDA instance may run on an event loop's thread,
 * since every bridge call sets the module's device and stream for its own
 * duration (CUDAStreamGuard) and the staging and gather buffers belong to
 * the instance, not a thread; so may one that fell back to the CPU. Not
 * KIND_MODEL, whose model places its own work on devices the server does
 * not know, nor MPS, which has not been measured that way. */
static bool pt_lendable(void *state) {
  const struct pt_instance *in = state;
  if (in->device.keep_placement) return false;
  return in->device.type == PTS_DEVICE_CUDA || in->device.type == PTS_DEVICE_CPU;
}

/* Starts the batch on its set: the inputs as bridge inputs (views, in
 * forward() argument order), the destinations, then the bridge's first
 * half. The scratch arrays are read by the bridge during the call only. */
static enum pts_status pt_begin(struct pt_instance *in, const struct pts_batch *batch,
                                struct pts_error *err) {
  const struct pt_model *m = in->model;
  const Inference__ModelConfig *cfg = m->cfg;
  if (batch->n_inputs != cfg->n_input || batch->n_outputs != cfg->n_output)
    return pts_error_set(err, PTS_INTERNAL,
                         "model '%s': batch has %zu inputs and %zu outputs, configuration %zu "
                         "and %zu",
                         m->name, batch->n_inputs, batch->n_outputs, cfg->n_input, cfg->n_output);

  for (size_t i = 0; i < cfg->n_input; i++) {
    const struct pts_tensor *t = &batch->inputs[i];
    struct pts_torch_input *slot = &in->inputs[m->input_slot[i]];
    enum pts_status cst =
        m->aoti ? pts_aoti_check_shape(m->io, (size_t)m->input_slot[i], cfg->input[i]->name,
                                       &t->shape, err)
                : PTS_OK;
    if (cst) {
      pts_error_prefix(err, "model '%s'", m->name);
      return cst;
    }
    slot->absent = t->data == NULL && t->shape.ndim == 0; /* a left-out optional input */
    slot->name = cfg->input[i]->name;
    slot->dtype = t->dtype;
    slot->ndim = t->shape.ndim;
    slot->dims = t->shape.dims;
    slot->data = t->data;
    slot->byte_size = t->byte_size;
    slot->mem = (int)t->mem;
    slot->device = t->device;
  }
  struct pts_torch_run_opts opts = run_opts(m);
  set_dests(in, batch, &opts);
  enum pts_status st =
      pts_torch_forward_begin(in->module, in->inputs, cfg->n_input, &opts, batch->set, err);
  if (st) pts_error_prefix(err, "model '%s'", m->name);
  return st;
}

/* A List[str] comes back flat: its length is all PyTorch says of its
 * shape. The client gets the configuration's shape (batch first, in the
 * model's terms when there is a reshape) with its one variable dimension
 * deduced from the length, as a raw binary request's is; where the
 * configuration leaves more than one open, the shape of the first BYTES
 * input that holds as many strings and fits it (identity and per-element
 * models, the usual kinds). Triton's backend has no such step: it refuses
 * a BYTES input of more than one dimension at load. */
static enum pts_status shape_strings(const struct pt_model *m, size_t i,
                                     struct pts_torch_output *o, const struct pts_batch *batch,
                                     struct pts_error *err) {
  const Inference__ModelOutput *co = m->cfg->output[i];
  const int64_t *d = co->reshape ? co->reshape->shape : co->dims;
  size_t nd = co->reshape ? co->reshape->n_shape : co->n_dims;
  struct pts_shape want;
  if (!pts_shape_set(&want, d, nd) ||
      (m->cfg->max_batch_size > 0 && !pts_shape_prepend(&want, batch->batch_size)))
    return pts_error_set(err, PTS_INVALID_ARG, "output '%s' of model '%s' has too many dimensions",
                         co->name, m->name);
  int64_t n = o->dims[0], known = 1;
  int open = -1, n_open = 0;
  for (int k = 0; k < want.ndim; k++) {
    if (want.dims[k] < 0) {
      open = k;
      n_open++;
    } else {
      known *= want.dims[k];
    }
  }
  if (n_open == 1 && known > 0 && n % known == 0) {
    want.dims[open] = n / known;
  } else if (n_open > 1) {
    bool found = false;
    /* The input at the output's own position first (output k of an
     * identity model is input k, and two inputs may hold as many strings
     * in different shapes: [1,1,0] and [1,0,1]), then the others in order. */
    for (size_t k = 0; !found && k <= batch->n_inputs; k++) {
      size_t j = k == 0 ? i : k - 1;
      if (j >= batch->n_inputs || (k > 0 && j == i)) continue;
      const struct pts_tensor *t = &batch->inputs[j];
      if (t->dtype != PTS_DTYPE_BYTES || t->shape.ndim != want.ndim ||
          pts_shape_count(&t->shape) != n)
        continue;
      found = true;
      for (int x = 0; x < want.ndim; x++)
        found = found && (want.dims[x] < 0 || want.dims[x] == t->shape.dims[x]);
      if (found) want = t->shape;
    }
    if (!found)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "output '%s' of model '%s' returned %lld strings, and no input of as "
                           "many strings tells their shape: give the output's dims at most one -1",
                           co->name, m->name, (long long)n);
  } else if (!(n_open == 0 && known == n)) {
    char shape[128];
    pts_shape_format(&want, shape, sizeof shape);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "output '%s' of model '%s' returned %lld strings, which do not fill its "
                         "shape %s",
                         co->name, m->name, (long long)n, shape);
  }
  o->ndim = want.ndim;
  memcpy(o->dims, want.dims, sizeof(int64_t) * (size_t)want.ndim);
  return PTS_OK;
}

/* Moves the bridge's outputs into the batch: times, then one output per
 * config output (no copy). Frees `outs` either way. */
static enum pts_status adopt_outputs(struct pt_instance *in, struct pts_batch *batch,
                                     struct pts_torch_outputs *outs, struct pts_error *err) {
  const struct pt_model *m = in->model;
  const Inference__ModelConfig *cfg = m->cfg;
  if (outs->graph_batch) log_first_replay(in, outs->graph_batch);
  batch->device_timed = outs->device_timed;
  batch->device_input_ns = outs->input_ns;
  batch->device_infer_ns = outs->infer_ns;
  batch->device_output_ns = outs->output_ns;

  enum pts_status st = PTS_OK;
  for (size_t i = 0; i < cfg->n_output && st == PTS_OK; i++) {
    struct pts_torch_output *o = NULL;
    if ((st = pick_output(m, i, outs, &o, err))) break;
    if (o->dtype == PTS_DTYPE_BYTES && o->ndim == 1 &&
        cfg->output[i]->data_type == INFERENCE__DATA_TYPE__TYPE_STRING &&
        (st = shape_strings(m, i, o, batch, err)))
      break;
    if ((st = check_output(m, i, o, batch->batch_size, err))) break;
    st = adopt_output(cfg->output[i]->name, o, &batch->outputs[i], err);
    const struct pts_output_dest *d = batch->output_dest ? &batch->output_dest[i] : NULL;
    if (st == PTS_OK && d && d->data && batch->outputs[i].data == d->data) {
      batch->outputs[i].mem = d->mem; /* written straight into the request's region */
      batch->outputs[i].device = d->device;
    }
  }
  if (st)
    for (size_t i = 0; i < cfg->n_output; i++) pts_tensor_clear(&batch->outputs[i]);
  pts_torch_outputs_free(outs);
  return st;
}

/* The bridge's second half for the batch's set, then its outputs. */
static enum pts_status pt_end(struct pt_instance *in, struct pts_batch *batch,
                              struct pts_error *err) {
  struct pts_torch_outputs outs;
  enum pts_status st = pts_torch_forward_end(in->module, batch->set, &outs, err);
  if (st) {
    pts_error_prefix(err, "model '%s'", in->model->name);
    return st;
  }
  return adopt_outputs(in, batch, &outs, err);
}

static enum pts_status pt_execute(void *state, struct pts_batch *batch, struct pts_error *err) {
  struct pt_instance *in = state;
  /* The profiler brackets both halves: on CUDA, the kernels it records
   * run between them. */
  bool profiling = batch->profile && profile_start(in, batch->profile);
  struct pts_torch_outputs outs;
  enum pts_status st = pt_begin(in, batch, err); /* its errors name the model already */
  bool begun = st == PTS_OK;
  if (begun) st = pts_torch_forward_end(in->module, batch->set, &outs, err);
  if (profiling) profile_stop(in, batch->profile);
  if (st) {
    if (begun) pts_error_prefix(err, "model '%s'", in->model->name);
    return st;
  }
  return adopt_outputs(in, batch, &outs, err);
}

/* backend.h execute_begin: never given a profiled batch (the scheduler
 * runs those with execute). */
static enum pts_status pt_execute_begin(void *state, struct pts_batch *batch,
                                        struct pts_error *err) {
  return pt_begin(state, batch, err);
}

static enum pts_status pt_execute_end(void *state, struct pts_batch *batch,
                                      struct pts_error *err) {
  return pt_end(state, batch, err);
}

static int pt_gpu_count(void) {
  pthread_once(&caps_once, probe_once);
  if (caps.cuda_available) return caps.cuda_device_count;
  return caps.mps_available ? 1 : 0;
}

const struct pts_backend pts_pytorch_backend = {
    .name = "pytorch",
    .model_load = pt_model_load,
    .model_unload = pt_model_unload,
    .instance_create = pt_instance_create,
    .instance_destroy = pt_instance_destroy,
    .execute = pt_execute,
    .gpu_count = pt_gpu_count,
    /* The bridge reads CUDA shared-memory inputs where they are (only a
     * CUDA build ever gets them). */
    .device_inputs = true,
    .cuda_shm_ops = pts_pytorch_cuda_shm_ops,
    .input_staging = pt_input_staging,
    .pipelined = pt_pipelined,
    .lendable = pt_lendable,
    .execute_begin = pt_execute_begin,
    .execute_end = pt_execute_end,
    .gather_device = pt_gather_device,
};
