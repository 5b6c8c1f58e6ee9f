/* scheduler/sequence.c — see sequence.h.
 *
 * Sequences live in a hash table by correlation id (a string id hashes its
 * bytes; an integer id its value) and, while active, in one of three
 * places: bound to a slot (direct) or a candidate (oldest) — they may run —
 * or in the backlog, waiting for one. Each keeps its own queue of pendings
 * (linked through ->next). Choosing walks the runnable sequences: a model
 * has at most n_instances × slots of them (direct) or
 * max_candidate_sequences (oldest), so the walk is short. */
#include "scheduler/sequence.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/model_config_sequence.h"
#include "core/alloc.h"
#include "scheduler/request.h"
#include "tensor/dtype.h"

#define N_BUCKETS 256

struct pts_seq_entry {
  struct pts_seq_entry *hnext; /* hash chain */
  struct pts_seq_entry *lnext; /* the active or backlog list */
  uint64_t id;
  char *id_str; /* owned; NULL for an integer id */
  struct pts_pending *head, *tail;
  size_t queued;
  bool running;
  bool runnable;     /* has a slot (direct) or is a candidate (oldest) */
  bool end_queued;   /* its END request is queued or running */
  size_t instance;   /* direct: its slot's instance */
  size_t slot;       /* direct: its slot on that instance */
  uint64_t idle_from; /* when it last had nothing queued or running */
  bool has_state;    /* state holds data (else the initial state applies) */
  unsigned char **state; /* per config state: state_bytes[k] bytes */
};

struct pts_seq {
  const Inference__ModelConfig *cfg;
  const char *model_name;
  const Inference__ModelSequenceBatching *sb;
  bool oldest;
  bool batching; /* max_batch_size > 0 */
  size_t slots;  /* direct: per instance; oldest: max rows per batch */
  size_t n_instances;
  uint64_t idle_ns;
  uint64_t delay_ns;
  size_t max_candidates;

  struct pts_seq_entry *buckets[N_BUCKETS];
  struct pts_seq_entry **slot_of; /* direct: n_instances × slots, NULL = free */
  size_t *bound;                  /* direct: per instance, slots taken */
  struct pts_seq_entry *active;   /* oldest: the candidates (unordered) */
  size_t n_active;
  struct pts_seq_entry *backlog, *backlog_tail; /* waiting for a slot, in order */
  size_t queued;
  struct pts_seq_entry **ready; /* choose's scratch: slots (direct), candidates (oldest) */
  size_t ready_cap;

  size_t n_states;
  size_t *state_bytes;     /* per state */
  unsigned char **initial; /* per state: the initial state (zeros or file data) */
  bool corrid_string;      /* CORRID control is TYPE_STRING */
  bool has_corrid;
};

static uint64_t hash_of(uint64_t id, const char *s) {
  uint64_t h = 1469598103934665603ull;
  if (s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
  }
  return (id ^ (id >> 29)) * 0xbf58476d1ce4e5b9ull;
}

static const char *id_text(const struct pts_infer_request *req, char *buf, size_t n) {
  if (req->sequence_id_str) return req->sequence_id_str;
  snprintf(buf, n, "%" PRIu64, req->sequence_id);
  return buf;
}

static struct pts_seq_entry **find(struct pts_seq *q, const struct pts_infer_request *req) {
  struct pts_seq_entry **at =
      &q->buckets[hash_of(req->sequence_id, req->sequence_id_str) % N_BUCKETS];
  for (; *at; at = &(*at)->hnext) {
    struct pts_seq_entry *e = *at;
    if (req->sequence_id_str ? e->id_str && strcmp(e->id_str, req->sequence_id_str) == 0
                             : !e->id_str && e->id == req->sequence_id)
      return at;
  }
  return at;
}

/* ------------------------------------------------------------ lifecycle */

static void entry_free(const struct pts_seq *q, struct pts_seq_entry *e) {
  if (!e) return;
  for (size_t k = 0; e->state && k < q->n_states; k++) pts_free(e->state[k]);
  pts_free(e->state);
  pts_free(e->id_str);
  pts_free(e);
}

static enum pts_status read_initial(struct pts_seq *q, size_t k, const char *model_dir,
                                    struct pts_error *err) {
  const Inference__ModelSequenceBatching__State *st = q->sb->state[k];
  q->initial[k] = pts_calloc(1, q->state_bytes[k] ? q->state_bytes[k] : 1);
  if (!q->initial[k])
    return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", q->model_name);
  if (st->n_initial_state == 0 ||
      st->initial_state[0]->state_data_case !=
          INFERENCE__MODEL_SEQUENCE_BATCHING__INITIAL_STATE__STATE_DATA_DATA_FILE)
    return PTS_OK; /* zeros */
  const char *file = st->initial_state[0]->data_file;
  char path[4096];
  int len = snprintf(path, sizeof path, "%s/initial_state/%s", model_dir ? model_dir : ".", file);
  if (len < 0 || (size_t)len >= sizeof path)
    return pts_error_set(err, PTS_INVALID_ARG, "model '%s': initial_state path is too long",
                         q->model_name);
  FILE *f = fopen(path, "rb");
  if (!f)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': can not open initial_state data_file '%s' of state '%s'",
                         q->model_name, path, st->input_name);
  size_t got = fread(q->initial[k], 1, q->state_bytes[k], f);
  int extra = fgetc(f);
  fclose(f);
  if (got != q->state_bytes[k] || extra != EOF)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': initial_state data_file '%s' of state '%s' must hold "
                         "exactly %zu bytes (the state's dims and data type)",
                         q->model_name, path, st->input_name, q->state_bytes[k]);
  return PTS_OK;
}

static enum pts_status init_states(struct pts_seq *q, const char *model_dir,
                                   struct pts_error *err) {
  q->n_states = q->sb->n_state;
  size_t n = q->n_states ? q->n_states : 1;
  q->state_bytes = pts_calloc(n, sizeof *q->state_bytes);
  q->initial = pts_calloc(n, sizeof *q->initial);
  if (!q->state_bytes || !q->initial)
    return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", q->model_name);
  for (size_t k = 0; k < q->n_states; k++) {
    const Inference__ModelSequenceBatching__State *st = q->sb->state[k];
    size_t bytes = pts_dtype_size((enum pts_dtype)st->data_type);
    for (size_t d = 0; d < st->n_dims; d++) bytes *= (size_t)st->dims[d];
    q->state_bytes[k] = bytes;
    enum pts_status s = read_initial(q, k, model_dir, err);
    if (s != PTS_OK) return s;
  }
  return PTS_OK;
}

enum pts_status pts_seq_create(const Inference__ModelConfig *cfg, const char *model_name,
                               const char *model_dir, size_t n_instances, struct pts_seq **out,
                               struct pts_error *err) {
  *out = NULL;
  struct pts_seq *q = pts_calloc(1, sizeof *q);
  if (!q) return pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", model_name);
  q->cfg = cfg;
  q->model_name = model_name;
  q->sb = cfg->sequence_batching;
  q->batching = cfg->max_batch_size > 0;
  q->slots = q->batching ? (size_t)cfg->max_batch_size : 1;
  q->n_instances = n_instances ? n_instances : 1;
  q->idle_ns = q->sb->max_sequence_idle_microseconds * 1000u;
  q->oldest =
      q->sb->strategy_choice_case == INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE_OLDEST;
  if (q->oldest) {
    q->delay_ns = q->sb->oldest->max_queue_delay_microseconds * 1000u;
    q->max_candidates = (size_t)q->sb->oldest->max_candidate_sequences;
  } else if (q->sb->direct) {
    q->delay_ns = q->sb->direct->max_queue_delay_microseconds * 1000u;
  }
  for (size_t i = 0; i < q->sb->n_control_input; i++) {
    const Inference__ModelSequenceBatching__Control *c = q->sb->control_input[i]->control[0];
    if (c->kind != INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_CORRID)
      continue;
    q->has_corrid = true;
    q->corrid_string = c->data_type == INFERENCE__DATA_TYPE__TYPE_STRING;
  }
  enum pts_status st = PTS_OK;
  if (!q->oldest) {
    q->slot_of = pts_calloc(q->n_instances * q->slots, sizeof *q->slot_of);
    q->bound = pts_calloc(q->n_instances, sizeof *q->bound);
    if (!q->slot_of || !q->bound)
      st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", model_name);
  }
  if (st == PTS_OK) {
    q->ready_cap = q->slots;
    if (!(q->ready = pts_calloc(q->ready_cap, sizeof *q->ready)))
      st = pts_error_set(err, PTS_NOMEM, "out of memory loading model '%s'", model_name);
  }
  if (st == PTS_OK) st = init_states(q, model_dir, err);
  if (st != PTS_OK) {
    pts_seq_destroy(q);
    return st;
  }
  *out = q;
  return PTS_OK;
}

void pts_seq_destroy(struct pts_seq *q) {
  if (!q) return;
  for (size_t b = 0; b < N_BUCKETS; b++) {
    struct pts_seq_entry *e = q->buckets[b];
    while (e) {
      struct pts_seq_entry *next = e->hnext;
      entry_free(q, e);
      e = next;
    }
  }
  for (size_t k = 0; q->initial && k < q->n_states; k++) pts_free(q->initial[k]);
  pts_free(q->initial);
  pts_free(q->state_bytes);
  pts_free(q->slot_of);
  pts_free(q->bound);
  pts_free(q->ready);
  pts_free(q);
}

/* ------------------------------------------------------- slots, backlog */

/* Gives e a slot (direct: the least loaded instance's first free slot) or
 * a candidacy (oldest), when one is free. */
static bool make_runnable(struct pts_seq *q, struct pts_seq_entry *e) {
  if (q->oldest) {
    if (q->n_active >= q->max_candidates) return false;
    if (q->n_active >= q->ready_cap) {
      void *r = pts_realloc(q->ready, 2 * q->ready_cap * sizeof *q->ready);
      if (!r) return false; /* stays in the backlog until memory allows */
      q->ready = r;
      q->ready_cap *= 2;
    }
    e->lnext = q->active;
    q->active = e;
    q->n_active++;
    e->runnable = true;
    return true;
  }
  size_t best = q->n_instances;
  for (size_t i = 0; i < q->n_instances; i++)
    if (q->bound[i] < q->slots && (best == q->n_instances || q->bound[i] < q->bound[best]))
      best = i;
  if (best == q->n_instances) return false;
  for (size_t s = 0; s < q->slots; s++) {
    if (q->slot_of[best * q->slots + s]) continue;
    q->slot_of[best * q->slots + s] = e;
    q->bound[best]++;
    e->instance = best;
    e->slot = s;
    e->runnable = true;
    return true;
  }
  return false;
}

static void backlog_append(struct pts_seq *q, struct pts_seq_entry *e) {
  e->lnext = NULL;
  if (q->backlog_tail)
    q->backlog_tail->lnext = e;
  else
    q->backlog = e;
  q->backlog_tail = e;
}

/* Frees the slot or candidacy of e, removes it from the table and frees it;
 * then the backlog's first sequences take what became free. */
static void release(struct pts_seq *q, struct pts_seq_entry *e) {
  if (e->runnable) {
    if (q->oldest) {
      struct pts_seq_entry **at = &q->active;
      while (*at && *at != e) at = &(*at)->lnext;
      if (*at) *at = e->lnext;
      q->n_active--;
    } else {
      q->slot_of[e->instance * q->slots + e->slot] = NULL;
      q->bound[e->instance]--;
    }
  }
  struct pts_infer_request key = {.sequence_id = e->id, .sequence_id_str = e->id_str};
  struct pts_seq_entry **at = find(q, &key);
  if (*at == e) *at = e->hnext;
  entry_free(q, e);
  while (q->backlog) {
    struct pts_seq_entry *b = q->backlog, *rest = b->lnext;
    if (!make_runnable(q, b)) break; /* (it may reuse b->lnext) */
    q->backlog = rest;
    if (!rest) q->backlog_tail = NULL;
  }
}

/* ----------------------------------------------------------------- push */

static enum pts_status new_entry(struct pts_seq *q, const struct pts_infer_request *req,
                                 struct pts_seq_entry **out, struct pts_error *err) {
  struct pts_seq_entry *e = pts_calloc(1, sizeof *e);
  if (e) {
    e->id = req->sequence_id;
    e->state = pts_calloc(q->n_states ? q->n_states : 1, sizeof *e->state);
    bool ok = e->state != NULL;
    for (size_t k = 0; ok && k < q->n_states; k++)
      ok = (e->state[k] = pts_malloc(q->state_bytes[k] ? q->state_bytes[k] : 1)) != NULL;
    if (ok && req->sequence_id_str) ok = (e->id_str = pts_strdup(req->sequence_id_str)) != NULL;
    if (!ok) {
      entry_free(q, e);
      e = NULL;
    }
  }
  if (!e)
    return pts_error_set(err, PTS_NOMEM, "out of memory starting a sequence of model '%s'",
                         q->model_name);
  *out = e;
  return PTS_OK;
}

static enum pts_status check_request(struct pts_seq *q, const struct pts_pending *p,
                                     struct pts_error *err) {
  const struct pts_infer_request *req = p->req;
  bool has_id = req->sequence_id_str ? req->sequence_id_str[0] != '\0' : req->sequence_id != 0;
  if (!has_id)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "inference request to model '%s' must specify a non-zero or non-empty "
                         "correlation ID",
                         q->model_name);
  char buf[24];
  if (q->has_corrid && q->corrid_string != (req->sequence_id_str != NULL))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "inference request for sequence %s to model '%s': the model's "
                         "CONTROL_SEQUENCE_CORRID takes %s correlation IDs",
                         id_text(req, buf, sizeof buf), q->model_name,
                         q->corrid_string ? "string" : "integer");
  if (p->batch_size != 1)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "inference request for sequence %s to model '%s' must have batch size "
                         "1, got %lld: each request of a sequence is one row of a batch",
                         id_text(req, buf, sizeof buf), q->model_name, (long long)p->batch_size);
  return PTS_OK;
}

/* Whether e has been idle for max_sequence_idle at now_ns. */
static bool idled_out(const struct pts_seq *q, const struct pts_seq_entry *e, uint64_t now_ns) {
  return e->runnable && !e->running && e->queued == 0 && now_ns >= e->idle_from + q->idle_ns;
}

enum pts_status pts_seq_push(struct pts_seq *q, struct pts_pending *p, uint64_t now_ns,
                             uint64_t cap, struct pts_error *err) {
  const struct pts_infer_request *req = p->req;
  enum pts_status st = check_request(q, p, err);
  if (st != PTS_OK) return st;
  if (cap && q->queued >= cap)
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "Exceeds maximum queue size: %zu requests of sequences are queued "
                         "(--default-max-queue-size; sequence_batching has no max_queue_size)",
                         q->queued);
  struct pts_seq_entry **at = find(q, req);
  struct pts_seq_entry *e = *at;
  /* An instance thread may not have woken for the idle deadline yet: the
   * request must find the sequence released all the same. */
  if (e && idled_out(q, e, now_ns)) {
    release(q, e);
    at = find(q, req);
    e = NULL;
  }
  /* After its END request the sequence is over for new requests (Triton
   * forgets the id when the END request is queued): only a START begins
   * it again. */
  if ((!e || e->end_queued) && !req->sequence_start) {
    char buf[24];
    return pts_error_set(err, PTS_INVALID_ARG,
                         "inference request for sequence %s to model '%s' must specify the START "
                         "flag on the first request of the sequence",
                         id_text(req, buf, sizeof buf), q->model_name);
  }
  if (!e) {
    if ((st = new_entry(q, req, &e, err)) != PTS_OK) return st;
    e->hnext = NULL;
    *at = e;
    if (!make_runnable(q, e)) backlog_append(q, e);
  }
  e->end_queued = req->sequence_end;
  p->sequence = e;
  p->next = NULL;
  if (e->tail)
    e->tail->next = p;
  else
    e->head = p;
  e->tail = p;
  e->queued++;
  q->queued++;
  return PTS_OK;
}

size_t pts_seq_queued(const struct pts_seq *q) { return q->queued; }

/* --------------------------------------------------------------- choose */

/* Releases the runnable sequences idle for max_sequence_idle — with
 * `flush` (shutting down) every runnable sequence with nothing queued or
 * running, so that backlogged requests get a slot and the drain never waits
 * out an idle timeout. Returns the earliest time another one will be idle
 * (0 = none). */
static uint64_t reap(struct pts_seq *q, uint64_t now_ns, bool flush) {
  uint64_t wake = 0;
  size_t n = q->oldest ? q->n_active : q->n_instances * q->slots;
  struct pts_seq_entry *e = q->oldest ? q->active : NULL;
  for (size_t i = 0; i < n; i++) {
    struct pts_seq_entry *cur = q->oldest ? e : q->slot_of[i];
    if (q->oldest) e = e ? e->lnext : NULL;
    if (!cur || cur->running || cur->queued) continue;
    uint64_t at = cur->idle_from + q->idle_ns;
    if (flush || idled_out(q, cur, now_ns)) {
      release(q, cur); /* (oldest: e already points past it) */
      continue;
    }
    if (wake == 0 || at < wake) wake = at;
  }
  return wake;
}

static int by_head_age(const void *a, const void *b) {
  const struct pts_seq_entry *x = *(struct pts_seq_entry *const *)a;
  const struct pts_seq_entry *y = *(struct pts_seq_entry *const *)b;
  return x->head->enqueue_ns < y->head->enqueue_ns   ? -1
         : x->head->enqueue_ns > y->head->enqueue_ns ? 1
                                                     : 0;
}

/* The oldest strategy's batch size out of `n` ready sequences. */
static size_t oldest_size(const struct pts_seq *q, size_t n, uint64_t oldest_ns, uint64_t now_ns,
                          bool flush, uint64_t *wake_ns) {
  const Inference__ModelSequenceBatching__StrategyOldest *o = q->sb->oldest;
  size_t max_pref = 0;
  bool preferred = false;
  for (size_t i = 0; i < o->n_preferred_batch_size; i++) {
    size_t p = (size_t)o->preferred_batch_size[i];
    if (p > max_pref) max_pref = p;
    if (p == n) preferred = true;
  }
  if (max_pref == 0 || max_pref > q->slots) max_pref = q->slots;
  if (n >= max_pref) return max_pref;
  if (flush || q->delay_ns == 0 || preferred || now_ns >= oldest_ns + q->delay_ns) return n;
  *wake_ns = oldest_ns + q->delay_ns;
  return 0;
}

size_t pts_seq_choose(struct pts_seq *q, size_t instance, uint64_t now_ns, bool flush,
                      struct pts_pending **out, size_t *rows, uint64_t *wake_ns) {
  *out = NULL;
  *rows = 0;
  uint64_t idle_wake = reap(q, now_ns, flush);
  *wake_ns = idle_wake;
  struct pts_seq_entry **ready = q->ready;
  size_t n = 0, limit = q->slots;
  uint64_t oldest_ns = UINT64_MAX;
  if (q->oldest) {
    for (struct pts_seq_entry *e = q->active; e; e = e->lnext)
      if (e->head && !e->running) ready[n++] = e;
    qsort(ready, n, sizeof ready[0], by_head_age);
  } else {
    if (instance >= q->n_instances) return 0;
    for (size_t s = 0; s < q->slots; s++) {
      struct pts_seq_entry *e = q->slot_of[instance * q->slots + s];
      if (e && e->head && !e->running) ready[n++] = e;
    }
  }
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (ready[i]->head->enqueue_ns < oldest_ns) oldest_ns = ready[i]->head->enqueue_ns;
  uint64_t wake = 0;
  if (q->oldest) {
    limit = oldest_size(q, n < limit ? n : limit, oldest_ns, now_ns, flush, &wake);
  } else if (!flush && q->delay_ns && n < q->bound[instance] &&
             now_ns < oldest_ns + q->delay_ns) {
    wake = oldest_ns + q->delay_ns; /* direct: wait for the other active slots */
    limit = 0;
  }
  if (limit == 0) {
    *wake_ns = idle_wake && idle_wake < wake ? idle_wake : wake;
    return 0;
  }
  if (n > limit) n = limit;
  *rows = n;
  /* Direct: the batch spans every slot up to the highest one in use (its
   * sequence may have nothing queued now), as Triton's does. */
  for (size_t s = 0; !q->oldest && q->batching && s < q->slots; s++)
    if (q->slot_of[instance * q->slots + s]) *rows = s + 1;
  struct pts_pending **tail = out;
  for (size_t i = 0; i < n; i++) {
    struct pts_seq_entry *e = ready[i];
    struct pts_pending *p = e->head;
    p->row = q->oldest ? i : e->slot;
    e->head = p->next;
    if (!e->head) e->tail = NULL;
    e->queued--;
    q->queued--;
    e->running = true;
    p->next = NULL;
    *tail = p;
    tail = &p->next;
  }
  return n;
}

void pts_seq_done(struct pts_seq *q, struct pts_pending *list, size_t n, uint64_t now_ns) {
  for (size_t i = 0; i < n && list; i++, list = list->next) {
    struct pts_seq_entry *e = list->sequence;
    if (!e) continue;
    e->running = false;
    if (e->queued) continue;
    e->idle_from = now_ns;
    if (list->req->sequence_end) release(q, e);
  }
}

/* ---------------------------------------------------------- the tensors */

static void put_control(unsigned char *dst, const Inference__ModelSequenceBatching__Control *c,
                        bool value) {
  if (c->n_int32_false_true) {
    int32_t v = c->int32_false_true[value ? 1 : 0];
    memcpy(dst, &v, sizeof v);
  } else if (c->n_fp32_false_true) {
    float v = c->fp32_false_true[value ? 1 : 0];
    memcpy(dst, &v, sizeof v);
  } else {
    *dst = c->bool_false_true[value ? 1 : 0] ? 1 : 0;
  }
}

static void put_corrid(unsigned char *dst, Inference__DataType t, uint64_t id) {
  switch (t) {
    case INFERENCE__DATA_TYPE__TYPE_INT32: {
      int32_t v = (int32_t)id;
      memcpy(dst, &v, sizeof v);
      break;
    }
    case INFERENCE__DATA_TYPE__TYPE_UINT32: {
      uint32_t v = (uint32_t)id;
      memcpy(dst, &v, sizeof v);
      break;
    }
    default: /* INT64, UINT64: the same bytes */
      memcpy(dst, &id, sizeof id);
      break;
  }
}

/* A CORRID of TYPE_STRING: each row one BYTES element, the id (a string id
 * as it is; config validation makes integer ids impossible here). */
static enum pts_status corrid_strings(struct pts_seq *q, struct pts_pending *const *items,
                                      size_t n, struct pts_buf **owned, struct pts_error *err) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += 4 + (items[i]->padding ? 0 : strlen(items[i]->sequence->id_str));
  struct pts_buf *b = pts_buf_new(total ? total : 1);
  if (!b)
    return pts_error_set(err, PTS_NOMEM, "out of memory building CORRID of model '%s'",
                         q->model_name);
  unsigned char *w = b->data;
  for (size_t i = 0; i < n; i++) {
    const char *s = items[i]->padding ? "" : items[i]->sequence->id_str;
    uint32_t len = (uint32_t)strlen(s);
    for (int k = 0; k < 4; k++) *w++ = (unsigned char)(len >> (8 * k));
    memcpy(w, s, len);
    w += len;
  }
  b->size = total;
  *owned = b;
  return PTS_OK;
}

static enum pts_status control_input(struct pts_seq *q, size_t k, struct pts_pending *const *items,
                                     size_t n, struct pts_tensor *dst, struct pts_buf **owned,
                                     struct pts_error *err) {
  const Inference__ModelSequenceBatching__Control *c = q->sb->control_input[k]->control[0];
  Inference__DataType t = pts_model_config_control_type(c);
  dst->dtype = (enum pts_dtype)t;
  dst->shape.ndim = q->batching ? 2 : 1;
  dst->shape.dims[0] = q->batching ? (int64_t)n : 1;
  if (q->batching) dst->shape.dims[1] = 1;
  if (t == INFERENCE__DATA_TYPE__TYPE_STRING) {
    enum pts_status st = corrid_strings(q, items, n, owned, err);
    if (st != PTS_OK) return st;
  } else {
    size_t el = pts_dtype_size((enum pts_dtype)t);
    *owned = pts_buf_new(n * el);
    if (!*owned)
      return pts_error_set(err, PTS_NOMEM,
                           "out of memory building control input '%s' of model '%s'",
                           q->sb->control_input[k]->name, q->model_name);
    unsigned char *w = (*owned)->data;
    for (size_t i = 0; i < n; i++, w += el) {
      const struct pts_infer_request *req = items[i]->req;
      switch (c->kind) {
        case INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_START:
          put_control(w, c, req->sequence_start);
          break;
        case INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_END:
          put_control(w, c, req->sequence_end);
          break;
        case INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_READY:
          put_control(w, c, !items[i]->padding);
          break;
        default:
          put_corrid(w, t, items[i]->padding ? 0 : items[i]->sequence->id);
          break;
      }
    }
  }
  dst->buf = *owned;
  dst->data = (*owned)->data;
  dst->byte_size = (*owned)->size;
  dst->mem = PTS_MEM_HOST;
  return PTS_OK;
}

static enum pts_status state_input(struct pts_seq *q, size_t k, struct pts_pending *const *items,
                                   size_t n, struct pts_tensor *dst, struct pts_buf **owned,
                                   struct pts_error *err) {
  const Inference__ModelSequenceBatching__State *st = q->sb->state[k];
  /* Fits: the configuration check refused a state whose rows would not. */
  if (!pts_shape_set(&dst->shape, st->dims, st->n_dims) ||
      (q->batching && !pts_shape_prepend(&dst->shape, (int64_t)n)))
    return pts_error_set(err, PTS_INTERNAL, "state '%s' of model '%s' has too many dimensions",
                         st->input_name, q->model_name);
  size_t bytes = q->state_bytes[k], total = n * bytes;
  *owned = pts_buf_new(total > 0 ? total : 1);
  if (!*owned)
    return pts_error_set(err, PTS_NOMEM, "out of memory building state '%s' of model '%s'",
                         st->input_name, q->model_name);
  unsigned char *w = (*owned)->data;
  for (size_t i = 0; i < n; i++, w += bytes) {
    struct pts_seq_entry *e = items[i]->sequence;
    if (!e) { /* a padding row */
      memcpy(w, q->initial[k], bytes);
      continue;
    }
    /* START resets the state, also of a sequence that starts again. */
    if (items[i]->req->sequence_start) e->has_state = false;
    memcpy(w, e->has_state ? e->state[k] : q->initial[k], bytes);
  }
  dst->dtype = (enum pts_dtype)st->data_type;
  dst->buf = *owned;
  dst->data = (*owned)->data;
  dst->byte_size = n * bytes;
  dst->mem = PTS_MEM_HOST;
  return PTS_OK;
}

enum pts_status pts_seq_build_input(struct pts_seq *q, size_t k, struct pts_pending *const *items,
                                    size_t n, struct pts_tensor *dst, struct pts_buf **owned,
                                    struct pts_error *err) {
  *owned = NULL;
  if (k < q->sb->n_control_input) return control_input(q, k, items, n, dst, owned, err);
  return state_input(q, k - q->sb->n_control_input, items, n, dst, owned, err);
}

enum pts_status pts_seq_keep_state(struct pts_seq *q, struct pts_pending *const *items, size_t n,
                                   const struct pts_tensor *state_outputs, struct pts_error *err) {
  for (size_t k = 0; k < q->n_states; k++) {
    const struct pts_tensor *t = &state_outputs[k];
    size_t bytes = q->state_bytes[k];
    if (t->byte_size != n * bytes || t->mem == PTS_MEM_DEVICE || (!t->data && bytes))
      return pts_error_set(err, PTS_INTERNAL,
                           "model '%s' returned %zu bytes for state output '%s' of a batch of "
                           "%zu sequences; the state's dims and data type need %zu per sequence",
                           q->model_name, t->byte_size, q->sb->state[k]->output_name, n, bytes);
  }
  for (size_t k = 0; k < q->n_states; k++)
    for (size_t i = 0; i < n; i++)
      if (items[i]->sequence)
        memcpy(items[i]->sequence->state[k],
               (const unsigned char *)state_outputs[k].data + i * q->state_bytes[k],
               q->state_bytes[k]);
  for (size_t i = 0; i < n && q->n_states; i++)
    if (items[i]->sequence) items[i]->sequence->has_state = true;
  return PTS_OK;
}
