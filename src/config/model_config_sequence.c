/* config/model_config_sequence.c — see model_config_sequence.h. */
#include "config/model_config_sequence.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "core/name.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

typedef Inference__ModelSequenceBatching Seq;
typedef Inference__ModelSequenceBatching__Control Control;
typedef Inference__ModelSequenceBatching__State State;

static enum pts_status fail(struct pts_error *err, const Inference__ModelConfig *cfg,
                            const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return pts_error_set(err, PTS_INVALID_ARG, "model '%s': %s", cfg->name, what);
}

static enum pts_status nomem(struct pts_error *err, const Inference__ModelConfig *cfg) {
  return pts_error_set(err, PTS_NOMEM, "model '%s': out of memory completing sequence_batching",
                       cfg->name);
}

static const char *kind_name(Inference__ModelSequenceBatching__Control__Kind k) {
  switch (k) {
    case INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_START:
      return "CONTROL_SEQUENCE_START";
    case INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_READY:
      return "CONTROL_SEQUENCE_READY";
    case INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_END:
      return "CONTROL_SEQUENCE_END";
    case INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_CORRID:
      return "CONTROL_SEQUENCE_CORRID";
    default:
      return "unknown kind";
  }
}

Inference__DataType pts_model_config_control_type(const Control *c) {
  if (c->kind == INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_CORRID)
    return c->data_type;
  if (c->n_int32_false_true) return INFERENCE__DATA_TYPE__TYPE_INT32;
  if (c->n_fp32_false_true) return INFERENCE__DATA_TYPE__TYPE_FP32;
  return INFERENCE__DATA_TYPE__TYPE_BOOL;
}

/* ---- completion ---- */

static enum pts_status defaults(Inference__ModelConfig *cfg, Seq *sb, struct pts_error *err) {
  if (sb->max_sequence_idle_microseconds == 0) sb->max_sequence_idle_microseconds = 1000000;
  if (sb->strategy_choice_case == INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE__NOT_SET) {
    Inference__ModelSequenceBatching__StrategyDirect *d = pts_malloc(sizeof *d);
    if (!d) return nomem(err, cfg);
    inference__model_sequence_batching__strategy_direct__init(d);
    sb->direct = d;
    sb->strategy_choice_case = INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE_DIRECT;
  }
  if (sb->strategy_choice_case == INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE_OLDEST &&
      sb->oldest->n_preferred_batch_size == 0 && cfg->max_batch_size > 0) {
    if (!(sb->oldest->preferred_batch_size = pts_malloc(sizeof(int32_t)))) return nomem(err, cfg);
    sb->oldest->preferred_batch_size[0] = cfg->max_batch_size;
    sb->oldest->n_preferred_batch_size = 1;
  }
  return PTS_OK;
}

/* A name the model already uses for an input or output, or for an earlier
 * control input or state. */
static bool name_taken(const Inference__ModelConfig *cfg, const char *name, size_t n_controls,
                       size_t n_states, bool output) {
  const Seq *sb = cfg->sequence_batching;
  if (!output) {
    for (size_t i = 0; i < cfg->n_input; i++)
      if (strcmp(cfg->input[i]->name, name) == 0) return true;
    for (size_t i = 0; i < n_controls; i++)
      if (strcmp(sb->control_input[i]->name, name) == 0) return true;
    for (size_t i = 0; i < n_states; i++)
      if (strcmp(sb->state[i]->input_name, name) == 0) return true;
    return false;
  }
  for (size_t i = 0; i < cfg->n_output; i++)
    if (strcmp(cfg->output[i]->name, name) == 0) return true;
  for (size_t i = 0; i < n_states; i++)
    if (strcmp(sb->state[i]->output_name, name) == 0) return true;
  return false;
}

static enum pts_status check_control(const Inference__ModelConfig *cfg, const char *name,
                                     const Control *c, struct pts_error *err) {
  const char *kind = kind_name(c->kind);
  if (c->kind == INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_CORRID) {
    Inference__DataType t = c->data_type;
    if (t != INFERENCE__DATA_TYPE__TYPE_INT32 && t != INFERENCE__DATA_TYPE__TYPE_INT64 &&
        t != INFERENCE__DATA_TYPE__TYPE_UINT32 && t != INFERENCE__DATA_TYPE__TYPE_UINT64 &&
        t != INFERENCE__DATA_TYPE__TYPE_STRING)
      return fail(err, cfg,
                  "sequence_batching control input '%s': %s must have data_type TYPE_INT32, "
                  "TYPE_INT64, TYPE_UINT32, TYPE_UINT64 or TYPE_STRING",
                  name, kind);
    if (c->n_int32_false_true || c->n_fp32_false_true || c->n_bool_false_true)
      return fail(err, cfg,
                  "sequence_batching control input '%s': %s takes data_type, not a false/true "
                  "list",
                  name, kind);
    return PTS_OK;
  }
  int lists = (c->n_int32_false_true > 0) + (c->n_fp32_false_true > 0) +
              (c->n_bool_false_true > 0);
  size_t n = c->n_int32_false_true + c->n_fp32_false_true + c->n_bool_false_true;
  if (lists != 1 || n != 2)
    return fail(err, cfg,
                "sequence_batching control input '%s': %s must have exactly one of "
                "int32_false_true, fp32_false_true or bool_false_true, with two values (false, "
                "true)",
                name, kind);
  if (c->data_type != INFERENCE__DATA_TYPE__TYPE_INVALID)
    return fail(err, cfg,
                "sequence_batching control input '%s': data_type is only for "
                "CONTROL_SEQUENCE_CORRID",
                name);
  return PTS_OK;
}

static enum pts_status check_controls(const Inference__ModelConfig *cfg, struct pts_error *err) {
  const Seq *sb = cfg->sequence_batching;
  bool seen[4] = {false};
  for (size_t i = 0; i < sb->n_control_input; i++) {
    const Inference__ModelSequenceBatching__ControlInput *ci = sb->control_input[i];
    if (!ci->name || !ci->name[0])
      return fail(err, cfg, "sequence_batching control input %zu has no name", i);
    if (name_taken(cfg, ci->name, i, 0, false))
      return fail(err, cfg,
                  "sequence_batching control input '%s' has the name of another input or "
                  "control input",
                  ci->name);
    if (ci->n_control != 1)
      return fail(err, cfg,
                  "sequence_batching control input '%s' must have exactly one control, has %zu",
                  ci->name, ci->n_control);
    const Control *c = ci->control[0];
    if ((unsigned)c->kind > 3u)
      return fail(err, cfg, "sequence_batching control input '%s' has an unknown kind %d",
                  ci->name, (int)c->kind);
    if (seen[c->kind])
      return fail(err, cfg, "sequence_batching has more than one %s control", kind_name(c->kind));
    seen[c->kind] = true;
    enum pts_status st = check_control(cfg, ci->name, c, err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

static bool same_dims(const int64_t *a, size_t na, const int64_t *b, size_t nb) {
  if (na != nb) return false;
  for (size_t i = 0; i < na; i++)
    if (a[i] != b[i]) return false;
  return true;
}

static enum pts_status check_initial_state(const Inference__ModelConfig *cfg, const State *st,
                                           struct pts_error *err) {
  if (st->n_initial_state == 0) return PTS_OK;
  if (st->n_initial_state > 1)
    return fail(err, cfg, "sequence_batching state '%s' has %zu initial_state entries; at most one",
                st->input_name, st->n_initial_state);
  const Inference__ModelSequenceBatching__InitialState *is = st->initial_state[0];
  if (is->data_type != st->data_type)
    return fail(err, cfg,
                "sequence_batching state '%s': initial_state data_type %s differs from the "
                "state's %s",
                st->input_name, pts_dtype_config_name((enum pts_dtype)is->data_type),
                pts_dtype_config_name((enum pts_dtype)st->data_type));
  if (!same_dims(is->dims, is->n_dims, st->dims, st->n_dims))
    return fail(err, cfg,
                "sequence_batching state '%s': initial_state dims must equal the state's dims",
                st->input_name);
  switch (is->state_data_case) {
    case INFERENCE__MODEL_SEQUENCE_BATCHING__INITIAL_STATE__STATE_DATA_ZERO_DATA:
      return PTS_OK;
    case INFERENCE__MODEL_SEQUENCE_BATCHING__INITIAL_STATE__STATE_DATA_DATA_FILE:
      if (!is->data_file || !pts_name_is_safe(is->data_file))
        return fail(err, cfg,
                    "sequence_batching state '%s': initial_state data_file '%.100s' must be a "
                    "file name inside the model's initial_state directory",
                    st->input_name, is->data_file ? is->data_file : "");
      return PTS_OK;
    default:
      return fail(err, cfg,
                  "sequence_batching state '%s': initial_state needs zero_data or data_file",
                  st->input_name);
  }
}

static enum pts_status check_states(const Inference__ModelConfig *cfg, struct pts_error *err) {
  const Seq *sb = cfg->sequence_batching;
  for (size_t i = 0; i < sb->n_state; i++) {
    const State *st = sb->state[i];
    if (!st->input_name || !st->input_name[0] || !st->output_name || !st->output_name[0])
      return fail(err, cfg, "sequence_batching state %zu needs input_name and output_name", i);
    if (name_taken(cfg, st->input_name, sb->n_control_input, i, false))
      return fail(err, cfg,
                  "sequence_batching state input '%s' has the name of another input, control "
                  "input or state",
                  st->input_name);
    if (name_taken(cfg, st->output_name, 0, i, true))
      return fail(err, cfg,
                  "sequence_batching state output '%s' has the name of another output or state",
                  st->output_name);
    if (st->data_type == INFERENCE__DATA_TYPE__TYPE_INVALID ||
        !pts_dtype_config_name((enum pts_dtype)st->data_type))
      return fail(err, cfg, "sequence_batching state '%s' needs a data_type", st->input_name);
    if (st->data_type == INFERENCE__DATA_TYPE__TYPE_STRING)
      return fail(err, cfg,
                  "'sequence_batching.state' of TYPE_STRING is not supported by ptserve: "
                  "state '%s' must have a numeric data type",
                  st->input_name);
    if (st->n_dims == 0)
      return fail(err, cfg, "sequence_batching state '%s' needs dims", st->input_name);
    for (size_t d = 0; d < st->n_dims; d++)
      if (st->dims[d] <= 0)
        return fail(err, cfg,
                    "'sequence_batching.state' with variable-size dims is not supported by "
                    "ptserve: state '%s' has dimension %lld; give every dimension a size",
                    st->input_name, (long long)st->dims[d]);
    /* The state's tensor in a batch: max_batch_size rows of it (one row
     * without batching), a shape that must fit and a size that must not
     * overflow (scheduler/sequence.c builds both). */
    struct pts_shape rows;
    bool lead = cfg->max_batch_size > 0;
    if (!pts_shape_set(&rows, st->dims, st->n_dims) ||
        (lead && !pts_shape_prepend(&rows, cfg->max_batch_size)))
      return fail(err, cfg,
                  "sequence_batching state '%s' has %zu dimensions%s, more than the %d ptserve "
                  "supports",
                  st->input_name, st->n_dims + lead, lead ? " with the batch dimension" : "",
                  PTS_TENSOR_MAX_DIMS);
    if (pts_shape_byte_size((enum pts_dtype)st->data_type, &rows) < 0)
      return fail(err, cfg, "sequence_batching state '%s' is too large: its dims overflow",
                  st->input_name);
    enum pts_status s = check_initial_state(cfg, st, err);
    if (s != PTS_OK) return s;
  }
  return PTS_OK;
}

static enum pts_status check_strategy(const Inference__ModelConfig *cfg, struct pts_error *err) {
  const Seq *sb = cfg->sequence_batching;
  if (sb->strategy_choice_case == INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE_DIRECT) {
    if (sb->direct->minimum_slot_utilization != 0.0f)
      return fail(err, cfg,
                  "'sequence_batching.direct.minimum_slot_utilization' is not supported by "
                  "ptserve: a direct batch waits max_queue_delay_microseconds for every active "
                  "slot");
    return PTS_OK;
  }
  const Inference__ModelSequenceBatching__StrategyOldest *o = sb->oldest;
  if (o->max_candidate_sequences <= 0)
    return fail(err, cfg,
                "sequence_batching oldest: max_candidate_sequences must be > 0, got %d",
                (int)o->max_candidate_sequences);
  for (size_t i = 0; i < o->n_preferred_batch_size; i++) {
    int32_t p = o->preferred_batch_size[i];
    if (p <= 0 || (cfg->max_batch_size > 0 && p > cfg->max_batch_size) ||
        (cfg->max_batch_size <= 0 && p != 1))
      return fail(err, cfg,
                  "sequence_batching oldest: preferred batch size %d must be in 1..%d "
                  "(max_batch_size)",
                  (int)p, cfg->max_batch_size > 0 ? (int)cfg->max_batch_size : 1);
  }
  return PTS_OK;
}

enum pts_status pts_model_config_sequence_complete(Inference__ModelConfig *cfg,
                                                   struct pts_error *err) {
  if (cfg->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING)
    return PTS_OK;
  Seq *sb = cfg->sequence_batching;
  if (sb->iterative_sequence)
    return fail(err, cfg,
                "'sequence_batching.iterative_sequence' is not supported by ptserve: every "
                "request gets exactly one response");
  if (cfg->n_model_warmup)
    return fail(err, cfg,
                "'model_warmup' with sequence_batching is not supported by ptserve: warmup "
                "samples carry no control inputs or states");
  enum pts_status st = defaults(cfg, sb, err);
  if (st == PTS_OK) st = check_strategy(cfg, err);
  if (st == PTS_OK) st = check_controls(cfg, err);
  if (st == PTS_OK) st = check_states(cfg, err);
  return st;
}

/* ---- the execution config ---- */

static Inference__ModelConfig *deep_copy(const Inference__ModelConfig *cfg) {
  size_t len = inference__model_config__get_packed_size(cfg);
  uint8_t *buf = pts_malloc(len ? len : 1);
  if (!buf) return NULL;
  inference__model_config__pack(cfg, buf);
  Inference__ModelConfig *copy = inference__model_config__unpack(NULL, len, buf);
  pts_free(buf);
  return copy;
}

/* What pts_model_config_free does, for the copy deep_copy made (the same
 * generated free, without a call back up into model_config.c, which calls
 * this file through the completion). */
static void copy_free(Inference__ModelConfig *x) {
  inference__model_config__free_unpacked(x, NULL);
}

/* A new input or output message (both have the same leading fields, but
 * they are distinct types, so each gets its own builder). */
static Inference__ModelInput *new_input(const char *name, Inference__DataType t,
                                        const int64_t *dims, size_t n_dims) {
  Inference__ModelInput *in = pts_malloc(sizeof *in);
  if (!in) return NULL;
  inference__model_input__init(in);
  in->name = pts_strdup(name);
  in->data_type = t;
  in->dims = pts_malloc((n_dims ? n_dims : 1) * sizeof *in->dims);
  if (!in->name || !in->dims) {
    inference__model_input__free_unpacked(in, NULL);
    return NULL;
  }
  memcpy(in->dims, dims, n_dims * sizeof *dims);
  in->n_dims = n_dims;
  return in;
}

static Inference__ModelOutput *new_output(const char *name, Inference__DataType t,
                                          const int64_t *dims, size_t n_dims) {
  Inference__ModelOutput *out = pts_malloc(sizeof *out);
  if (!out) return NULL;
  inference__model_output__init(out);
  out->name = pts_strdup(name);
  out->data_type = t;
  out->dims = pts_malloc((n_dims ? n_dims : 1) * sizeof *out->dims);
  if (!out->name || !out->dims) {
    inference__model_output__free_unpacked(out, NULL);
    return NULL;
  }
  memcpy(out->dims, dims, n_dims * sizeof *dims);
  out->n_dims = n_dims;
  return out;
}

static bool grow(void ***arr, size_t n, size_t more) {
  void **a = pts_realloc(*arr, (n + more) * sizeof *a);
  if (!a) return false;
  *arr = a;
  return true;
}

enum pts_status pts_model_config_sequence_exec(const Inference__ModelConfig *cfg,
                                               Inference__ModelConfig **out,
                                               struct pts_error *err) {
  *out = NULL;
  Inference__ModelConfig *x = deep_copy(cfg);
  if (!x) return nomem(err, cfg);
  const Seq *sb = x->sequence_batching;
  size_t nc = sb ? sb->n_control_input : 0, ns = sb ? sb->n_state : 0;
  if (!grow((void ***)&x->input, x->n_input, nc + ns + 1) ||
      !grow((void ***)&x->output, x->n_output, ns + 1)) {
    copy_free(x);
    return nomem(err, cfg);
  }
  static const int64_t one[1] = {1};
  for (size_t i = 0; i < nc; i++) {
    const Inference__ModelSequenceBatching__ControlInput *ci = sb->control_input[i];
    Inference__ModelInput *in =
        new_input(ci->name, pts_model_config_control_type(ci->control[0]), one, 1);
    if (!in) goto nomem;
    x->input[x->n_input++] = in;
  }
  for (size_t i = 0; i < ns; i++) {
    const State *st = sb->state[i];
    Inference__ModelInput *in = new_input(st->input_name, st->data_type, st->dims, st->n_dims);
    if (!in) goto nomem;
    x->input[x->n_input++] = in;
    Inference__ModelOutput *o = new_output(st->output_name, st->data_type, st->dims, st->n_dims);
    if (!o) goto nomem;
    x->output[x->n_output++] = o;
  }
  *out = x;
  return PTS_OK;
nomem:
  copy_free(x);
  return nomem(err, cfg);
}
