/* scheduler/queue.c — see queue.h. */
#include "scheduler/queue.h"

#include <string.h>

#include "core/alloc.h"

static void policy_from(struct pts_queue_policy *dst, const Inference__ModelQueuePolicy *src) {
  memset(dst, 0, sizeof *dst);
  if (!src) return;
  dst->delay_on_timeout =
      src->timeout_action == INFERENCE__MODEL_QUEUE_POLICY__TIMEOUT_ACTION__DELAY;
  dst->default_timeout_us = src->default_timeout_microseconds;
  dst->allow_timeout_override = src->allow_timeout_override;
  dst->max_queue_size = src->max_queue_size > 0 ? (uint64_t)src->max_queue_size : 0;
}

enum pts_status pts_sched_queue_init(struct pts_sched_queue *q, const Inference__ModelConfig *cfg,
                                     struct pts_error *err) {
  memset(q, 0, sizeof *q);
  const Inference__ModelDynamicBatching *db =
      cfg->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING
          ? cfg->dynamic_batching
          : NULL;
  size_t n = db && db->priority_levels > 0 ? (size_t)db->priority_levels : 1;
  /* The config check bounds priority_levels only by the policies it lists;
   * refuse absurd level counts rather than allocate for them. */
  if (n > 1024)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': dynamic_batching.priority_levels %zu is more than 1024",
                         cfg->name, n);
  q->levels = pts_calloc(n, sizeof *q->levels);
  if (!q->levels)
    return pts_error_set(err, PTS_NOMEM, "out of memory creating the queue of model '%s'",
                         cfg->name);
  q->n_levels = n;
  for (size_t i = 0; i < n; i++)
    policy_from(&q->levels[i].policy, db ? db->default_queue_policy : NULL);
  for (size_t i = 0; db && i < db->n_priority_queue_policy; i++) {
    uint64_t key = db->priority_queue_policy[i]->key;
    if (key >= 1 && key <= n)
      policy_from(&q->levels[key - 1].policy, db->priority_queue_policy[i]->value);
  }
  q->default_level = db && db->default_priority_level >= 1 && db->default_priority_level <= n
                         ? (size_t)db->default_priority_level - 1
                         : 0;
  return PTS_OK;
}

void pts_sched_queue_free(struct pts_sched_queue *q) {
  pts_free(q->levels);
  memset(q, 0, sizeof *q);
}

/* The request's timeout: the policy's, or the request's own when the policy
 * allows an override and it is shorter (no default timeout counts as
 * infinitely long). 0 = none. */
static uint64_t timeout_us(const struct pts_queue_policy *p, uint64_t requested_us) {
  uint64_t t = p->default_timeout_us;
  if (p->allow_timeout_override && requested_us != 0 && (t == 0 || requested_us < t))
    t = requested_us;
  return t;
}

static void append(struct pts_pending **head, struct pts_pending **tail, struct pts_pending *p) {
  p->next = NULL;
  if (*tail)
    (*tail)->next = p;
  else
    *head = p;
  *tail = p;
}

enum pts_status pts_sched_queue_push(struct pts_sched_queue *q, struct pts_pending *p,
                                     uint64_t priority, uint64_t timeout, uint64_t now_ns,
                                     uint64_t default_cap, struct pts_error *err) {
  size_t level = priority == 0 || priority > q->n_levels ? q->default_level : (size_t)priority - 1;
  struct pts_queue_level *l = &q->levels[level];
  if (l->policy.max_queue_size && l->size >= l->policy.max_queue_size)
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "Exceeds maximum queue size: priority level %zu is full at %zu "
                         "(max_queue_size)",
                         level + 1, l->size);
  if (!l->policy.max_queue_size && default_cap && l->size >= default_cap)
    return pts_error_set(err, PTS_UNAVAILABLE,
                         "Exceeds maximum queue size: priority level %zu is full at %zu "
                         "(--default-max-queue-size, as the config sets no max_queue_size)",
                         level + 1, l->size);
  uint64_t t = timeout_us(&l->policy, timeout);
  p->level = level;
  p->delayed = false;
  /* A timeout too long to represent is no timeout (a wrapped deadline
   * would expire at once). */
  p->deadline_ns = t && t <= (UINT64_MAX - now_ns) / 1000u ? now_ns + t * 1000u : 0;
  append(&l->head, &l->tail, p);
  l->size++;
  q->size++;
  return PTS_OK;
}

/* Walks one level's waiting list, moving or collecting expired requests. */
static uint64_t expire_level(struct pts_sched_queue *q, struct pts_queue_level *l, uint64_t now,
                             struct pts_pending **rej_head, struct pts_pending **rej_tail) {
  uint64_t earliest = 0;
  struct pts_pending *keep_head = NULL, *keep_tail = NULL, *p = l->head;
  while (p) {
    struct pts_pending *next = p->next;
    if (p->deadline_ns == 0 || p->deadline_ns > now) {
      if (p->deadline_ns && (earliest == 0 || p->deadline_ns < earliest)) earliest = p->deadline_ns;
      append(&keep_head, &keep_tail, p);
    } else if (l->policy.delay_on_timeout) {
      p->delayed = true;
      p->deadline_ns = 0;
      append(&l->dhead, &l->dtail, p);
    } else {
      l->size--;
      q->size--;
      append(rej_head, rej_tail, p);
    }
    p = next;
  }
  l->head = keep_head;
  l->tail = keep_tail;
  return earliest;
}

uint64_t pts_sched_queue_expire(struct pts_sched_queue *q, uint64_t now_ns,
                                struct pts_pending **rejected) {
  struct pts_pending *rej_head = NULL, *rej_tail = NULL;
  uint64_t earliest = 0;
  for (size_t i = 0; i < q->n_levels; i++) {
    uint64_t e = expire_level(q, &q->levels[i], now_ns, &rej_head, &rej_tail);
    if (e && (earliest == 0 || e < earliest)) earliest = e;
  }
  *rejected = rej_head;
  return earliest;
}

/* The first request of the lists from (level, delayed) onwards. */
static struct pts_pending *first_from(const struct pts_sched_queue *q, size_t level, bool delayed) {
  for (size_t i = level; i < q->n_levels; i++) {
    const struct pts_queue_level *l = &q->levels[i];
    if (!delayed && l->head) return l->head;
    if (l->dhead) return l->dhead;
    delayed = false;
  }
  return NULL;
}

struct pts_pending *pts_sched_queue_first(const struct pts_sched_queue *q) {
  return first_from(q, 0, false);
}

struct pts_pending *pts_sched_queue_next(const struct pts_sched_queue *q,
                                         const struct pts_pending *p) {
  if (p->next) return p->next;
  return p->delayed ? first_from(q, p->level + 1, false) : first_from(q, p->level, true);
}

/* Pops the first request in dispatch order. */
static struct pts_pending *pop_first(struct pts_sched_queue *q) {
  for (size_t i = 0; i < q->n_levels; i++) {
    struct pts_queue_level *l = &q->levels[i];
    struct pts_pending **head = l->head ? &l->head : l->dhead ? &l->dhead : NULL;
    if (!head) continue;
    struct pts_pending *p = *head;
    *head = p->next;
    if (!*head) {
      if (head == &l->head)
        l->tail = NULL;
      else
        l->dtail = NULL;
    }
    l->size--;
    q->size--;
    p->next = NULL;
    return p;
  }
  return NULL;
}

struct pts_pending *pts_sched_queue_take(struct pts_sched_queue *q, size_t n) {
  struct pts_pending *head = NULL, *tail = NULL;
  for (size_t i = 0; i < n; i++) {
    struct pts_pending *p = pop_first(q);
    if (!p) break;
    append(&head, &tail, p);
  }
  return head;
}

static bool is_preferred(const struct pts_batch_limits *lim, int64_t total) {
  for (size_t i = 0; i < lim->n_preferred; i++)
    if (lim->preferred[i] == total) return true;
  return false;
}

static int64_t max_preferred(const struct pts_batch_limits *lim) {
  int64_t m = 0;
  for (size_t i = 0; i < lim->n_preferred; i++)
    if (lim->preferred[i] > m) m = lim->preferred[i];
  return m > 0 && m <= lim->max_batch_size ? m : lim->max_batch_size;
}

size_t pts_sched_queue_choose(const struct pts_sched_queue *q, const struct pts_batch_limits *lim,
                              uint64_t now_ns, bool flush, pts_batch_compatible_fn compatible,
                              void *ctx, uint64_t *wake_ns) {
  *wake_ns = 0;
  const struct pts_pending *first = pts_sched_queue_first(q);
  if (!first) return 0;
  if (!lim->dynamic) return 1;
  int64_t target = max_preferred(lim), total = 0;
  size_t count = 0, preferred_count = 0;
  uint64_t oldest = first->enqueue_ns;
  bool cannot_grow = false;
  for (const struct pts_pending *p = first; p; p = pts_sched_queue_next(q, p)) {
    if (count > 0 && (total + p->batch_size > lim->max_batch_size ||
                      (compatible && !compatible(first, p, ctx)))) {
      cannot_grow = true;
      break;
    }
    total += p->batch_size;
    count++;
    if (p->enqueue_ns < oldest) oldest = p->enqueue_ns;
    if (is_preferred(lim, total)) preferred_count = count;
    if (total >= target) break;
  }
  if (total >= target || cannot_grow) return preferred_count ? preferred_count : count;
  if (flush || lim->max_delay_ns == 0) return count;
  if (preferred_count) return preferred_count;
  uint64_t due = oldest + lim->max_delay_ns;
  if (now_ns >= due) return count;
  *wake_ns = due;
  return 0;
}
