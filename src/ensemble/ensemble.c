/* ensemble/ensemble.c — see ensemble.h. The graph (built and checked once,
 * when the ensemble loads), the check of the composing models, and the
 * execution of one ensemble request on an instance thread. */
#include "ensemble/ensemble.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "core/log.h"
#include "repository/repository.h"
#include "scheduler/request.h"
#include "scheduler/validate.h"
#include "tensor/dtype.h"

/* ------------------------------------------------------------ the graph */

struct ens_step {
  const Inference__ModelEnsembling__Step *cfg; /* borrowed from the config */
  size_t *in_tensor;  /* per input_map entry: the ensemble tensor it reads */
  size_t *out_tensor; /* per output_map entry: the ensemble tensor it writes */
};

struct pts_ensemble_graph {
  const Inference__ModelConfig *cfg; /* borrowed */
  size_t n_tensors;
  const char **names; /* borrowed from cfg: ensemble inputs first, then step outputs */
  long *producer;     /* per tensor: the step that writes it, -1 for an ensemble input */
  size_t n_steps;
  struct ens_step *steps;
  size_t *output_tensor; /* per config output: its tensor */
};

void pts_ensemble_graph_free(struct pts_ensemble_graph *g) {
  if (!g) return;
  for (size_t i = 0; g->steps && i < g->n_steps; i++) {
    pts_free(g->steps[i].in_tensor);
    pts_free(g->steps[i].out_tensor);
  }
  pts_free(g->steps);
  pts_free(g->names);
  pts_free(g->producer);
  pts_free(g->output_tensor);
  pts_free(g);
}

static long find_tensor(const struct pts_ensemble_graph *g, const char *name) {
  for (size_t i = 0; i < g->n_tensors; i++)
    if (strcmp(g->names[i], name) == 0) return (long)i;
  return -1;
}

static const char *step_model(const struct pts_ensemble_graph *g, long step) {
  return g->steps[step].cfg->model_name;
}

static enum pts_status graph_fail(struct pts_error *err, const struct pts_ensemble_graph *g,
                                  const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static enum pts_status graph_fail(struct pts_error *err, const struct pts_ensemble_graph *g,
                                  const char *fmt, ...) {
  char what[PTS_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return pts_error_set(err, PTS_INVALID_ARG, "ensemble '%s': %s", g->cfg->name, what);
}

/* Step outputs join the table; each tensor is written once, never over an
 * ensemble input. */
static enum pts_status add_step_outputs(struct pts_ensemble_graph *g, struct pts_error *err) {
  for (size_t s = 0; s < g->n_steps; s++) {
    const Inference__ModelEnsembling__Step *st = g->steps[s].cfg;
    for (size_t k = 0; k < st->n_output_map; k++) {
      const char *t = st->output_map[k]->value;
      if (!t || !t[0])
        return graph_fail(err, g, "step %zu (model '%s') maps output '%s' to an empty name", s,
                          st->model_name, st->output_map[k]->key);
      long at = find_tensor(g, t);
      if (at >= 0 && g->producer[at] < 0)
        return graph_fail(err, g,
                          "step %zu (model '%s') writes ensemble tensor '%s', which is an input "
                          "of the ensemble",
                          s, st->model_name, t);
      if (at >= 0)
        return graph_fail(err, g,
                          "ensemble tensor '%s' is written by step %ld (model '%s') and step "
                          "%zu (model '%s'); each tensor can appear in an output map only once",
                          t, g->producer[at], step_model(g, g->producer[at]), s, st->model_name);
      g->names[g->n_tensors] = t;
      g->producer[g->n_tensors] = (long)s;
      g->steps[s].out_tensor[k] = g->n_tensors++;
    }
  }
  return PTS_OK;
}

/* Every tensor a step reads exists; every ensemble input is read. */
static enum pts_status link_step_inputs(struct pts_ensemble_graph *g, struct pts_error *err) {
  const Inference__ModelConfig *cfg = g->cfg;
  bool *used = pts_calloc(cfg->n_input + 1, sizeof *used);
  if (!used)
    return pts_error_set(err, PTS_NOMEM, "out of memory checking ensemble '%s'", cfg->name);
  enum pts_status rc = PTS_OK;
  for (size_t s = 0; s < g->n_steps && rc == PTS_OK; s++) {
    const Inference__ModelEnsembling__Step *st = g->steps[s].cfg;
    for (size_t k = 0; k < st->n_input_map && rc == PTS_OK; k++) {
      const char *t = st->input_map[k]->value;
      long at = t ? find_tensor(g, t) : -1;
      if (at < 0) {
        rc = graph_fail(err, g,
                        "step %zu (model '%s') reads ensemble tensor '%s' (for its input '%s'), "
                        "which is neither an input of the ensemble nor written by any step",
                        s, st->model_name, t ? t : "", st->input_map[k]->key);
        break;
      }
      g->steps[s].in_tensor[k] = (size_t)at;
      if ((size_t)at < cfg->n_input) used[at] = true;
    }
  }
  for (size_t i = 0; i < cfg->n_input && rc == PTS_OK; i++)
    if (!used[i])
      rc = graph_fail(err, g, "input '%s' is not used by any step", cfg->input[i]->name);
  pts_free(used);
  return rc;
}

static enum pts_status link_outputs(struct pts_ensemble_graph *g, struct pts_error *err) {
  const Inference__ModelConfig *cfg = g->cfg;
  for (size_t i = 0; i < cfg->n_output; i++) {
    long at = find_tensor(g, cfg->output[i]->name);
    if (at < 0 || g->producer[at] < 0)
      return graph_fail(err, g, "output '%s' is not written by any step", cfg->output[i]->name);
    g->output_tensor[i] = (size_t)at;
  }
  return PTS_OK;
}

/* Kahn's order over the steps; what it can not order lies on or behind a
 * cycle, which the message spells out step by step. */
static enum pts_status check_acyclic(const struct pts_ensemble_graph *g, struct pts_error *err) {
  size_t n = g->n_steps;
  size_t *waiting = pts_calloc(n + 1, sizeof *waiting);
  size_t *queue = pts_calloc(n + 1, sizeof *queue);
  bool *done = pts_calloc(n + 1, sizeof *done);
  enum pts_status rc = PTS_OK;
  if (!waiting || !queue || !done) {
    rc = pts_error_set(err, PTS_NOMEM, "out of memory checking ensemble '%s'", g->cfg->name);
    goto out;
  }
  size_t head = 0, tail = 0;
  for (size_t s = 0; s < n; s++) {
    for (size_t k = 0; k < g->steps[s].cfg->n_input_map; k++)
      waiting[s] += g->producer[g->steps[s].in_tensor[k]] >= 0;
    if (waiting[s] == 0) queue[tail++] = s;
  }
  while (head < tail) {
    size_t s = queue[head++];
    done[s] = true;
    for (size_t k = 0; k < g->steps[s].cfg->n_output_map; k++) {
      size_t t = g->steps[s].out_tensor[k];
      for (size_t c = 0; c < n; c++)
        for (size_t j = 0; j < g->steps[c].cfg->n_input_map; j++)
          if (g->steps[c].in_tensor[j] == t && --waiting[c] == 0) queue[tail++] = c;
    }
  }
  if (tail == n) goto out;
  /* Walk back from a step that never became runnable, always to a producer
   * that did not run either, until a step repeats: that is the cycle. */
  size_t *path = queue; /* reused: at most n + 1 entries */
  size_t len = 0, s = 0;
  while (done[s]) s++;
  for (;;) {
    for (size_t i = 0; i < len; i++) {
      if (path[i] != s) continue;
      char text[PTS_ERROR_MSG_MAX / 2];
      size_t used = 0;
      text[0] = '\0';
      for (size_t j = len; j-- > i;) {
        int w = snprintf(text + used, sizeof text - used, "step %zu (model '%s') -> ", path[j],
                         step_model(g, (long)path[j]));
        if (w < 0 || (size_t)w >= sizeof text - used) break;
        used += (size_t)w;
      }
      /* The walk went from reader to writer; data flows the other way. */
      snprintf(text + used, sizeof text - used, "step %zu (model '%s')", path[len - 1],
               step_model(g, (long)path[len - 1]));
      rc = graph_fail(err, g,
                      "the steps form a cycle: %s; a step can not read what it writes, directly "
                      "or through other steps",
                      text);
      goto out;
    }
    path[len++] = s;
    size_t next = s;
    for (size_t k = 0; k < g->steps[s].cfg->n_input_map && next == s; k++) {
      long p = g->producer[g->steps[s].in_tensor[k]];
      if (p >= 0 && !done[p]) next = (size_t)p;
    }
    if (next == s) { /* reads its own output: a cycle of one */
      bool self = false;
      for (size_t k = 0; k < g->steps[s].cfg->n_input_map; k++)
        self = self || g->producer[g->steps[s].in_tensor[k]] == (long)s;
      if (!self) break; /* can not happen: an unordered step has an unordered producer */
    }
    s = next;
  }
  rc = graph_fail(err, g, "the steps can not be ordered");
out:
  pts_free(waiting);
  pts_free(queue);
  pts_free(done);
  return rc;
}

enum pts_status pts_ensemble_graph_build(const Inference__ModelConfig *cfg,
                                         struct pts_ensemble_graph **out, struct pts_error *err) {
  *out = NULL;
  const Inference__ModelEnsembling *es = cfg->ensemble_scheduling;
  if (!es || es->n_step == 0)
    return pts_error_set(err, PTS_INVALID_ARG, "ensemble '%s' has no steps", cfg->name);
  size_t cap = cfg->n_input + 1;
  for (size_t s = 0; s < es->n_step; s++) cap += es->step[s]->n_output_map;
  struct pts_ensemble_graph *g = pts_calloc(1, sizeof *g);
  if (g) {
    g->cfg = cfg;
    g->names = pts_calloc(cap, sizeof *g->names);
    g->producer = pts_calloc(cap, sizeof *g->producer);
    g->steps = pts_calloc(es->n_step, sizeof *g->steps);
    g->output_tensor = pts_calloc(cfg->n_output + 1, sizeof *g->output_tensor);
  }
  bool ok = g && g->names && g->producer && g->steps && g->output_tensor;
  for (size_t s = 0; ok && s < es->n_step; s++) {
    g->n_steps++;
    g->steps[s].cfg = es->step[s];
    g->steps[s].in_tensor = pts_calloc(es->step[s]->n_input_map + 1, sizeof(size_t));
    g->steps[s].out_tensor = pts_calloc(es->step[s]->n_output_map + 1, sizeof(size_t));
    ok = g->steps[s].in_tensor && g->steps[s].out_tensor;
  }
  if (!ok) {
    pts_ensemble_graph_free(g);
    return pts_error_set(err, PTS_NOMEM, "out of memory checking ensemble '%s'", cfg->name);
  }
  for (size_t i = 0; i < cfg->n_input; i++) {
    g->names[g->n_tensors] = cfg->input[i]->name;
    g->producer[g->n_tensors++] = -1;
  }
  enum pts_status rc = add_step_outputs(g, err);
  if (rc == PTS_OK) rc = link_step_inputs(g, err);
  if (rc == PTS_OK) rc = link_outputs(g, err);
  if (rc == PTS_OK) rc = check_acyclic(g, err);
  if (rc != PTS_OK) {
    pts_ensemble_graph_free(g);
    return rc;
  }
  *out = g;
  return PTS_OK;
}

size_t pts_ensemble_composing_models(const Inference__ModelConfig *cfg, const char **names,
                                     size_t cap) {
  size_t n = 0;
  const Inference__ModelEnsembling *es = cfg ? cfg->ensemble_scheduling : NULL;
  for (size_t s = 0; es && s < es->n_step && n < cap; s++) {
    const char *m = es->step[s]->model_name;
    bool seen = false;
    for (size_t i = 0; i < n && !seen; i++) seen = strcmp(names[i], m) == 0;
    if (!seen && m && m[0]) names[n++] = m;
  }
  return n;
}

/* --------------------------------------------------- composing models */

/* Triton's step model_version: -1 (and the proto default 0) mean the
 * latest READY version. */
static int64_t step_version(const Inference__ModelEnsembling__Step *st) {
  return st->model_version > 0 ? st->model_version : -1;
}

static const char *dtype_name(int t) { return pts_dtype_config_name((enum pts_dtype)t); }

/* What a config says of one tensor: its type and its full shape, the batch
 * dimension (-1) first when its model batches. Borrowed from the config. */
struct tinfo {
  int dtype;
  const int64_t *dims;
  size_t n_dims;
  bool batch;
};

static struct tinfo tinfo_of(int dtype, const int64_t *dims, size_t n_dims, int32_t mbs) {
  return (struct tinfo){.dtype = dtype, .dims = dims, .n_dims = n_dims, .batch = mbs > 0};
}

static int64_t full_dim(const struct tinfo *t, size_t i) {
  return t->batch ? (i == 0 ? -1 : t->dims[i - 1]) : t->dims[i];
}

/* One dimension: equal, or variable (-1) on either side. */
static bool dim_agrees(int64_t x, int64_t y) { return x == y || x == -1 || y == -1; }

static bool dims_agree(const int64_t *a, size_t na, const int64_t *b, size_t nb) {
  if (na != nb) return false;
  for (size_t i = 0; i < na; i++)
    if (!dim_agrees(a[i], b[i])) return false;
  return true;
}

/* Whether two shapes can describe one tensor, as Triton's
 * ValidateTensorConsistency decides: the configured dims agree (each
 * dimension equal or variable on either side), or else the full shapes,
 * batch dimension included, do (a tensor shared by a batching model's [d]
 * and a non-batching model's [-1, d]). Where only the dims agree, the
 * request's shape is checked against each model at run time. */
static bool shapes_agree(const struct tinfo *a, const struct tinfo *b) {
  if (dims_agree(a->dims, a->n_dims, b->dims, b->n_dims)) return true;
  size_t na = a->n_dims + a->batch, nb = b->n_dims + b->batch;
  if (na != nb) return false;
  for (size_t i = 0; i < na; i++)
    if (!dim_agrees(full_dim(a, i), full_dim(b, i))) return false;
  return true;
}

static void shape_text(const struct tinfo *t, char *out, size_t n) {
  size_t used = 0;
  out[0] = '\0';
  size_t nd = t->n_dims + t->batch;
  for (size_t i = 0; i <= nd && used < n; i++) {
    int w = i == nd ? snprintf(out + used, n - used, "]")
                    : snprintf(out + used, n - used, "%s%lld", i ? "," : "[",
                               (long long)full_dim(t, i));
    if (w < 0) return;
    used += (size_t)w;
  }
}

/* One step against its composing model's config: the maps name its
 * tensors, every required input is fed, the batch sizes fit. Fills the
 * data types of the tensors the step writes. */
static enum pts_status check_step(const struct pts_ensemble_graph *g, size_t s,
                                  const Inference__ModelConfig *mc, struct tinfo *info,
                                  struct pts_error *err) {
  const Inference__ModelConfig *cfg = g->cfg;
  const Inference__ModelEnsembling__Step *st = g->steps[s].cfg;
  for (size_t k = 0; k < st->n_input_map; k++)
    if (!pts_model_config_input(mc, st->input_map[k]->key))
      return graph_fail(err, g, "step %zu maps '%s', which is not an input of model '%s'", s,
                        st->input_map[k]->key, mc->name);
  for (size_t i = 0; i < mc->n_input; i++) {
    bool mapped = false;
    for (size_t k = 0; k < st->n_input_map && !mapped; k++)
      mapped = strcmp(st->input_map[k]->key, mc->input[i]->name) == 0;
    if (!mapped && !mc->input[i]->optional)
      return graph_fail(err, g, "step %zu does not map input '%s' of model '%s' (input_map)", s,
                        mc->input[i]->name, mc->name);
  }
  for (size_t k = 0; k < st->n_output_map; k++) {
    const Inference__ModelOutput *o = pts_model_config_output(mc, st->output_map[k]->key);
    if (!o)
      return graph_fail(err, g, "step %zu maps '%s', which is not an output of model '%s'", s,
                        st->output_map[k]->key, mc->name);
    info[g->steps[s].out_tensor[k]] =
        tinfo_of(o->data_type, o->dims, o->n_dims, mc->max_batch_size);
  }
  /* A non-batching model may sit in a batching ensemble (a batch of 1
   * reaches it without the batch dimension: fit_batching), as in Triton. */
  if (cfg->max_batch_size > 0 && mc->max_batch_size > 0 &&
      mc->max_batch_size < cfg->max_batch_size)
    return graph_fail(err, g,
                      "ensemble allows maximum batch size %d, but it contains model '%s' which "
                      "only allows maximum batch size to be %d",
                      (int)cfg->max_batch_size, mc->name, (int)mc->max_batch_size);
  return PTS_OK;
}

/* Where a tensor comes from, for messages. */
static void describe_tensor(const struct pts_ensemble_graph *g, size_t t, char *out, size_t n) {
  if (g->producer[t] < 0)
    snprintf(out, n, "input of the ensemble");
  else
    snprintf(out, n, "written by step %ld (model '%s')", g->producer[t],
             step_model(g, g->producer[t]));
}

/* Every read, and every ensemble output, agrees with the writer's data
 * type and shape (Triton's consistency check, shapes_agree). */
static enum pts_status check_types(const struct pts_ensemble_graph *g,
                                   const Inference__ModelConfig *const *mcs,
                                   const struct tinfo *info, struct pts_error *err) {
  char from[256], have[128], want[128];
  for (size_t s = 0; s < g->n_steps; s++) {
    const Inference__ModelEnsembling__Step *st = g->steps[s].cfg;
    for (size_t k = 0; k < st->n_input_map; k++) {
      size_t t = g->steps[s].in_tensor[k];
      const Inference__ModelInput *in = pts_model_config_input(mcs[s], st->input_map[k]->key);
      struct tinfo need = tinfo_of(in->data_type, in->dims, in->n_dims, mcs[s]->max_batch_size);
      bool type_ok = need.dtype == info[t].dtype;
      if (type_ok && shapes_agree(&need, &info[t])) continue;
      describe_tensor(g, t, from, sizeof from);
      shape_text(&info[t], have, sizeof have);
      shape_text(&need, want, sizeof want);
      return graph_fail(err, g,
                        "ensemble tensor '%s' (%s) is %s %s, but step %zu feeds it to input "
                        "'%s' of model '%s', which takes %s %s",
                        g->names[t], from, dtype_name(info[t].dtype), have, s, in->name,
                        mcs[s]->name, dtype_name(need.dtype), want);
    }
  }
  for (size_t i = 0; i < g->cfg->n_output; i++) {
    size_t t = g->output_tensor[i];
    const Inference__ModelOutput *o = g->cfg->output[i];
    struct tinfo mine = tinfo_of(o->data_type, o->dims, o->n_dims, g->cfg->max_batch_size);
    if (mine.dtype == info[t].dtype && shapes_agree(&mine, &info[t])) continue;
    describe_tensor(g, t, from, sizeof from);
    shape_text(&mine, want, sizeof want);
    shape_text(&info[t], have, sizeof have);
    return graph_fail(err, g, "output '%s' is %s %s, but the tensor %s is %s %s", o->name,
                      dtype_name(mine.dtype), want, from, dtype_name(info[t].dtype), have);
  }
  return PTS_OK;
}

/* The composing models as they serve now: each must have a READY version
 * (an ensemble is ready only when its composing models are). */
static enum pts_status check_composing(const struct pts_ensemble_graph *g,
                                       struct pts_repository *repo, struct pts_error *err) {
  size_t n = g->n_steps;
  struct pts_model **held = pts_calloc(n, sizeof *held);
  const Inference__ModelConfig **mcs = pts_calloc(n, sizeof *mcs);
  struct tinfo *info = pts_calloc(g->n_tensors + 1, sizeof *info);
  enum pts_status rc = PTS_OK;
  if (!held || !mcs || !info)
    rc = pts_error_set(err, PTS_NOMEM, "out of memory checking ensemble '%s'", g->cfg->name);
  for (size_t i = 0; rc == PTS_OK && i < g->cfg->n_input; i++)
    info[i] = tinfo_of(g->cfg->input[i]->data_type, g->cfg->input[i]->dims,
                       g->cfg->input[i]->n_dims, g->cfg->max_batch_size);
  for (size_t s = 0; rc == PTS_OK && s < n; s++) {
    const Inference__ModelEnsembling__Step *st = g->steps[s].cfg;
    struct pts_error why;
    if (pts_repository_get(repo, st->model_name, step_version(st), false, &held[s], &why) !=
        PTS_OK) {
      rc = graph_fail(err, g, "step %zu uses model '%s', which is not available: %s", s,
                      st->model_name, why.msg);
      break;
    }
    mcs[s] = pts_model_config(held[s]);
    if (!mcs[s])
      rc = graph_fail(err, g, "step %zu uses model '%s', which has no configuration", s,
                      st->model_name);
    else
      rc = check_step(g, s, mcs[s], info, err);
  }
  if (rc == PTS_OK) rc = check_types(g, mcs, info, err);
  for (size_t s = 0; held && s < n; s++) pts_model_release(held[s]);
  pts_free(held);
  pts_free(mcs);
  pts_free(info);
  return rc;
}

/* ---------------------------------------------------------- the backend */

struct ens_model {
  char *name;
  struct pts_ensemble_graph *graph;
  struct pts_repository *repo; /* borrowed from the host */
};

static void ens_model_unload(void *state) {
  struct ens_model *m = state;
  if (!m) return;
  pts_ensemble_graph_free(m->graph);
  pts_free(m->name);
  pts_free(m);
}

static enum pts_status ens_model_load(const struct pts_backend_model_desc *desc, void **state,
                                      struct pts_error *err) {
  const struct pts_ensemble_host *host = desc->host;
  if (!host || !host->repo)
    return pts_error_set(err, PTS_INTERNAL, "ensemble '%s' loaded without a repository",
                         desc->name);
  struct ens_model *m = pts_calloc(1, sizeof *m);
  if (!m || !(m->name = pts_strdup(desc->name))) {
    pts_free(m);
    return pts_error_set(err, PTS_NOMEM, "out of memory loading ensemble '%s'", desc->name);
  }
  m->repo = host->repo;
  enum pts_status rc = pts_ensemble_graph_build(desc->config, &m->graph, err);
  if (rc == PTS_OK) rc = check_composing(m->graph, m->repo, err);
  if (rc != PTS_OK) {
    ens_model_unload(m);
    return rc;
  }
  *state = m;
  return PTS_OK;
}

static enum pts_status ens_instance_create(void *model_state,
                                           const struct pts_backend_instance_desc *desc,
                                           void **instance_state, struct pts_error *err) {
  (void)desc;
  (void)err;
  *instance_state = model_state; /* a run keeps its state on the instance thread's stack */
  return PTS_OK;
}

static void ens_instance_destroy(void *instance_state) { (void)instance_state; }

/* One ensemble request in flight. `mu` guards everything below it; steps'
 * completions (composing instance threads) fill tensors and wake `cv`. */
struct run;
struct step_ctx {
  struct run *run;
  size_t step;
  bool batching; /* the step's model batches (set when queued, read by step_done) */
};

enum step_state { STEP_WAITING, STEP_QUEUED, STEP_DONE };

struct run {
  const struct ens_model *m;
  const struct pts_batch *batch; /* the ensemble request's; borrowed */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct pts_tensor *tensors; /* per graph tensor; data NULL = not (yet) there */
  bool *ready;                /* per graph tensor: written (or an input, present or not) */
  bool *batched;              /* per graph tensor: its writer batches (its shape[0] is a batch) */
  enum step_state *state;     /* per step */
  struct step_ctx *ctx;       /* per step: the done callback's context */
  size_t in_flight, done;
  bool failed;
  struct pts_error err; /* the first failure */
};

static void run_fail_locked(struct run *r, const struct pts_error *why, size_t step) {
  if (r->failed) return;
  r->failed = true;
  const Inference__ModelEnsembling__Step *st = r->m->graph->steps[step].cfg;
  r->err = *why;
  if (r->err.code == PTS_OK) r->err.code = PTS_INTERNAL;
  pts_error_prefix(&r->err, "in ensemble '%s', step %zu (model '%s')", r->m->name, step,
                   st->model_name);
}

/* A step's answer, on the composing model's instance thread: its outputs
 * move into the table (no copy: the tensors keep their buffers). */
static void step_done(struct pts_infer_request *req, struct pts_infer_response *resp,
                      const struct pts_error *err, void *ctx) {
  struct step_ctx *c = ctx;
  struct run *r = c->run;
  const struct ens_step *es = &r->m->graph->steps[c->step];
  pthread_mutex_lock(&r->mu);
  if (err && err->code != PTS_OK) {
    run_fail_locked(r, err, c->step);
  } else if (!resp) {
    struct pts_error none;
    pts_error_set(&none, PTS_INTERNAL, "the model gave no response");
    run_fail_locked(r, &none, c->step);
  } else {
    for (size_t k = 0; k < es->cfg->n_output_map; k++) {
      size_t t = es->out_tensor[k];
      struct pts_tensor *got = NULL;
      const char *want = es->cfg->output_map[k]->key;
      for (size_t j = 0; j < resp->n_outputs && !got; j++)
        if (resp->outputs[j].name && strcmp(resp->outputs[j].name, want) == 0)
          got = &resp->outputs[j];
      if (!got) {
        struct pts_error miss;
        pts_error_set(&miss, PTS_INTERNAL, "the response has no output '%s'",
                      es->cfg->output_map[k]->key);
        run_fail_locked(r, &miss, c->step);
        break;
      }
      pts_tensor_clear(&r->tensors[t]);
      r->tensors[t] = *got; /* the name is replaced when the tensor is read */
      memset(got, 0, sizeof *got);
      r->batched[t] = c->batching;
      r->ready[t] = true;
    }
  }
  pthread_mutex_unlock(&r->mu);
  /* Before the step counts as done: the request's inputs may hold the
   * client's shared-memory region (or request body), and once the last
   * step is done the ensemble answers, after which the client may
   * unregister the region and expects it unused. */
  pts_infer_response_free(resp);
  pts_infer_request_free(req);
  pthread_mutex_lock(&r->mu);
  r->state[c->step] = STEP_DONE;
  r->done++;
  r->in_flight--;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* Triton's rule (its ensemble scheduler's ReshapeTensorDims) for a tensor
 * passed between a batching and a non-batching side, which the load check
 * allows when their dims agree: into a batching model, a tensor that
 * matches the model's dims gets a batch of 1 in front; into a
 * non-batching model (or out of a non-batching ensemble), a batch of 1
 * that does not match the dims loses it. Anything else is passed as it is
 * and validated as any request. */
static void fit_batching(struct pts_shape *shape, bool tensor_batched, bool want_batched,
                         const int64_t *dims, size_t n_dims) {
  if (tensor_batched == want_batched) return;
  bool same = dims_agree(dims, n_dims, shape->dims, (size_t)shape->ndim);
  if (want_batched) {
    if (same) (void)pts_shape_prepend(shape, 1); /* at the rank limit, passed as it is */
  } else if (!same && shape->ndim > 0 && shape->dims[0] == 1) {
    memmove(shape->dims, shape->dims + 1, sizeof(int64_t) * (size_t)(shape->ndim - 1));
    shape->ndim--;
  }
}

/* A view of `src` named `name`. Borrowed bytes (no buffer: a request's own
 * bytes the scheduler lends for the batch) are shared too: every step ends
 * before execute returns, and with it the lender's batch. */
static enum pts_status view_as(struct pts_tensor *dst, const struct pts_tensor *src,
                               const char *name, struct pts_error *err) {
  *dst = *src;
  dst->name = pts_strdup(name);
  if (!dst->name) {
    memset(dst, 0, sizeof *dst);
    return pts_error_set(err, PTS_NOMEM, "out of memory passing tensor '%s'", name);
  }
  pts_buf_retain(dst->buf);
  return PTS_OK;
}

/* Builds step s's request from the table, for the composing model's
 * config `mc`. Caller owns *out. */
static enum pts_status step_request(struct run *r, size_t s, const Inference__ModelConfig *mc,
                                    struct pts_infer_request **out, struct pts_error *err) {
  const struct ens_step *es = &r->m->graph->steps[s];
  const Inference__ModelEnsembling__Step *st = es->cfg;
  struct pts_infer_request *req = pts_infer_request_new();
  if (!req) return pts_error_set(err, PTS_NOMEM, "out of memory");
  enum pts_status rc = PTS_OK;
  req->model_name = pts_strdup(st->model_name);
  req->model_version = step_version(st);
  req->inputs = pts_calloc(st->n_input_map + 1, sizeof *req->inputs);
  req->outputs = pts_calloc(st->n_output_map + 1, sizeof *req->outputs);
  if (!req->model_name || !req->inputs || !req->outputs)
    rc = pts_error_set(err, PTS_NOMEM, "out of memory");
  for (size_t k = 0; rc == PTS_OK && k < st->n_input_map; k++) {
    const struct pts_tensor *t = &r->tensors[es->in_tensor[k]];
    if (!t->data && t->shape.ndim == 0) continue; /* an optional input the client left out */
    struct pts_tensor *in = &req->inputs[req->n_inputs];
    rc = view_as(in, t, st->input_map[k]->key, err);
    if (rc != PTS_OK) break;
    req->n_inputs++;
    const Inference__ModelInput *ci = pts_model_config_input(mc, st->input_map[k]->key);
    if (ci)
      fit_batching(&in->shape, r->batched[es->in_tensor[k]], mc->max_batch_size > 0, ci->dims,
                   ci->n_dims);
  }
  for (size_t k = 0; rc == PTS_OK && k < st->n_output_map; k++) {
    req->outputs[k].name = pts_strdup(st->output_map[k]->key);
    if (!req->outputs[k].name)
      rc = pts_error_set(err, PTS_NOMEM, "out of memory");
    else
      req->n_outputs++;
  }
  /* Each step belongs to the ensemble request's sequence, if it has one:
   * a sequence model among the steps keeps its state per correlation id. */
  const struct pts_batch *b = r->batch;
  req->sequence_id = b->sequence_id;
  req->sequence_start = b->sequence_start;
  req->sequence_end = b->sequence_end;
  if (rc == PTS_OK && b->sequence_id_str &&
      !(req->sequence_id_str = pts_strdup(b->sequence_id_str)))
    rc = pts_error_set(err, PTS_NOMEM, "out of memory");
  /* and carries its parameters, as Triton's ensembles give each step the
   * ensemble request's */
  for (size_t k = 0; rc == PTS_OK && k < b->n_params; k++)
    rc = pts_infer_request_add_param(req, &b->params[k], err);
  req->binary_data_output = true;
  req->receive_ns = pts_now_ns();
  req->done = step_done;
  req->done_ctx = &r->ctx[s];
  if (rc != PTS_OK) {
    pts_infer_request_free(req);
    return rc;
  }
  *out = req;
  return PTS_OK;
}

/* Queues step s on its composing model as any request is queued: lookup,
 * validation, the model's scheduler. Called without r->mu. */
static enum pts_status queue_step(struct run *r, size_t s, struct pts_error *err) {
  const Inference__ModelEnsembling__Step *st = r->m->graph->steps[s].cfg;
  struct pts_infer_request *req = NULL;
  struct pts_model *m = NULL;
  int64_t batch = 0;
  enum pts_status rc =
      pts_repository_get(r->m->repo, st->model_name, step_version(st), false, &m, err);
  if (rc != PTS_OK) return rc;
  const Inference__ModelConfig *mc = pts_model_config(m);
  r->ctx[s].batching = mc->max_batch_size > 0; /* read by step_done, after the enqueue */
  rc = step_request(r, s, mc, &req, err);
  if (rc == PTS_OK) rc = pts_validate_request(mc, pts_model_name(m), req, &batch, err);
  if (rc == PTS_OK) rc = pts_model_enqueue(m, req, batch, err); /* takes req and m */
  if (rc != PTS_OK) {
    pts_model_release(m);
    pts_infer_request_free(req);
  }
  return rc;
}

/* Steps whose inputs are all there, marked queued. r->mu held. */
static size_t runnable_locked(struct run *r, size_t *steps) {
  const struct pts_ensemble_graph *g = r->m->graph;
  size_t n = 0;
  for (size_t s = 0; s < g->n_steps; s++) {
    if (r->state[s] != STEP_WAITING) continue;
    bool all = true;
    for (size_t k = 0; k < g->steps[s].cfg->n_input_map && all; k++)
      all = r->ready[g->steps[s].in_tensor[k]];
    if (!all) continue;
    r->state[s] = STEP_QUEUED;
    r->in_flight++;
    steps[n++] = s;
  }
  return n;
}

/* Runs the graph: queues what can run, waits for answers, queues what they
 * made runnable. After a failure it queues nothing more but still waits for
 * the steps in flight, whose callbacks point into r. */
static void run_graph(struct run *r, size_t *steps) {
  const struct pts_ensemble_graph *g = r->m->graph;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    size_t n = r->failed ? 0 : runnable_locked(r, steps);
    if (n > 0) {
      pthread_mutex_unlock(&r->mu);
      for (size_t i = 0; i < n; i++) {
        struct pts_error qerr;
        if (queue_step(r, steps[i], &qerr) == PTS_OK) continue;
        pthread_mutex_lock(&r->mu);
        run_fail_locked(r, &qerr, steps[i]);
        r->state[steps[i]] = STEP_DONE;
        r->in_flight--;
        pthread_mutex_unlock(&r->mu);
      }
      pthread_mutex_lock(&r->mu);
      continue;
    }
    if (r->in_flight == 0) break;
    pthread_cond_wait(&r->cv, &r->mu);
  }
  if (!r->failed && r->done < g->n_steps) {
    /* The graph check makes this impossible; say so rather than hang. */
    struct pts_error stuck;
    pts_error_set(&stuck, PTS_INTERNAL, "no step can run; the ensemble graph is inconsistent");
    size_t s = 0;
    while (s + 1 < g->n_steps && r->state[s] == STEP_DONE) s++;
    run_fail_locked(r, &stuck, s);
  }
  pthread_mutex_unlock(&r->mu);
}

static void run_free(struct run *r) {
  const struct pts_ensemble_graph *g = r->m->graph;
  for (size_t t = 0; r->tensors && t < g->n_tensors; t++) pts_tensor_clear(&r->tensors[t]);
  pts_free(r->tensors);
  pts_free(r->ready);
  pts_free(r->batched);
  pts_free(r->state);
  pts_free(r->ctx);
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
}

static enum pts_status ens_execute(void *instance_state, struct pts_batch *batch,
                                   struct pts_error *err) {
  const struct ens_model *m = instance_state;
  const struct pts_ensemble_graph *g = m->graph;
  const Inference__ModelConfig *cfg = g->cfg;
  if (batch->n_inputs != cfg->n_input || batch->n_outputs != cfg->n_output)
    return pts_error_set(err, PTS_INTERNAL, "ensemble '%s' got %zu inputs and %zu outputs",
                         m->name, batch->n_inputs, batch->n_outputs);
  struct run r = {.m = m, .batch = batch};
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  r.tensors = pts_calloc(g->n_tensors + 1, sizeof *r.tensors);
  r.ready = pts_calloc(g->n_tensors + 1, sizeof *r.ready);
  r.batched = pts_calloc(g->n_tensors + 1, sizeof *r.batched);
  r.state = pts_calloc(g->n_steps + 1, sizeof *r.state);
  r.ctx = pts_calloc(g->n_steps + 1, sizeof *r.ctx);
  size_t *steps = pts_calloc(g->n_steps + 1, sizeof *steps);
  enum pts_status rc = PTS_OK;
  if (!r.tensors || !r.ready || !r.batched || !r.state || !r.ctx || !steps)
    rc = pts_error_set(err, PTS_NOMEM, "out of memory running ensemble '%s'", m->name);
  for (size_t s = 0; rc == PTS_OK && s < g->n_steps; s++)
    r.ctx[s] = (struct step_ctx){&r, s, false};
  /* The ensemble's inputs are tensors 0..n_input-1, in config order, as
   * the scheduler passes them. */
  for (size_t i = 0; rc == PTS_OK && i < cfg->n_input; i++) {
    const struct pts_tensor *in = &batch->inputs[i];
    r.ready[i] = true;
    r.batched[i] = cfg->max_batch_size > 0;
    if (!in->data && in->shape.ndim == 0) continue; /* an optional input left out */
    rc = view_as(&r.tensors[i], in, cfg->input[i]->name, err);
  }
  if (rc == PTS_OK) {
    run_graph(&r, steps);
    if (r.failed) {
      *err = r.err;
      rc = err->code;
    }
  }
  for (size_t i = 0; rc == PTS_OK && i < cfg->n_output; i++) {
    size_t t = g->output_tensor[i];
    rc = view_as(&batch->outputs[i], &r.tensors[t], cfg->output[i]->name, err);
    if (rc == PTS_OK)
      fit_batching(&batch->outputs[i].shape, r.batched[t], cfg->max_batch_size > 0,
                   cfg->output[i]->dims, cfg->output[i]->n_dims);
  }
  run_free(&r);
  pts_free(steps);
  return rc;
}

const struct pts_backend pts_ensemble_backend = {
    .name = "ensemble",
    .model_load = ens_model_load,
    .model_unload = ens_model_unload,
    .instance_create = ens_instance_create,
    .instance_destroy = ens_instance_destroy,
    .execute = ens_execute,
    .default_instances = PTS_ENSEMBLE_INSTANCES,
};
