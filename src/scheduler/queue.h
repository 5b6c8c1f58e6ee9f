/* scheduler/queue.h — the request queue of one model version: priority
 * levels, queue policies, timeouts, and the dynamic batcher's choice.
 *
 * The queue has one level per `dynamic_batching.priority_levels` (one level
 * when there are none), level 1 first. Each level has its policy
 * (`priority_queue_policy[level]`, else `default_queue_policy`):
 * max_queue_size, default_timeout_microseconds, allow_timeout_override and
 * timeout_action. Within a level requests are FIFO; requests whose timeout
 * expired under DELAY move to the level's delayed list, which is served
 * after the level's other requests (Triton's policy queue). Dispatch order
 * is therefore: level 1, level 1 delayed, level 2, level 2 delayed, ...
 *
 * pts_sched_queue_choose is the batcher: given the limits of the model, it
 * says how many requests from the front (in dispatch order) form the next
 * batch now, or how long to wait for a better one.
 *
 * Threading: none; the scheduler calls everything under its mutex. The
 * functions never allocate except in init.
 */
#ifndef PTS_SCHEDULER_QUEUE_H
#define PTS_SCHEDULER_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "core/status.h"
#include "model_config.pb-c.h"
#include "scheduler/request.h"

/* One queued request. Owned by the scheduler from enqueue to completion. */
struct pts_pending {
  struct pts_pending *next;
  struct pts_infer_request *req; /* owned until done is called */
  void *hold;                    /* what the request keeps alive (scheduler.h); may be NULL */
  int64_t batch_size;            /* elements (dim 0), 1 for a model without batching */
  uint64_t enqueue_ns;
  uint64_t deadline_ns; /* 0 = no timeout */
  uint64_t seq;         /* arrival order (preserve_ordering) */
  size_t level;         /* index into the queue's levels */
  bool delayed;         /* on its level's delayed list */
  /* sequence_batching: the request's sequence (sequence.c), borrowed from
   * the sequence batcher; NULL otherwise. */
  struct pts_seq_entry *sequence;
  /* sequence_batching direct: the batch row (its sequence's slot) when
   * choose took it. `padding`: a row with no request in it, which the
   * scheduler made to keep the other rows at their slots (its req is the
   * scheduler's own zero-filled request; READY false; never answered). */
  size_t row;
  bool padding;
  /* A request of a model with response_cache that missed: its key, owned
   * until its answer is stored (build_responses) or it is freed (empty when
   * it is not to be stored), and how long the lookup took. */
  struct pts_cache_key cache_key;
  uint64_t cache_lookup_ns;
  /* The outcome, kept while a finished request waits for earlier ones
   * (preserve_ordering). */
  struct pts_infer_response *resp;
  struct pts_error err;
};

struct pts_queue_policy {
  bool delay_on_timeout; /* timeout_action DELAY (else REJECT) */
  uint64_t default_timeout_us;
  bool allow_timeout_override;
  uint64_t max_queue_size; /* 0 = unbounded */
};

struct pts_queue_level {
  struct pts_queue_policy policy;
  struct pts_pending *head, *tail;   /* waiting */
  struct pts_pending *dhead, *dtail; /* timed out under DELAY */
  size_t size;                       /* both lists */
};

struct pts_sched_queue {
  size_t n_levels;
  struct pts_queue_level *levels; /* owned */
  size_t default_level;           /* index */
  size_t size;                    /* every level */
};

/* Sets up the levels from `cfg->dynamic_batching` (one level with the
 * default policy when absent). Free with pts_sched_queue_free. */
enum pts_status pts_sched_queue_init(struct pts_sched_queue *q, const Inference__ModelConfig *cfg,
                                     struct pts_error *err);
/* Frees the levels only; the queue must be empty. */
void pts_sched_queue_free(struct pts_sched_queue *q);

/* Appends `p` to the level of `priority` (0 or out of range: the default
 * level, as Triton does), with its deadline from the level's policy and the
 * request `timeout_us` (an override may only shorten the timeout). A full
 * level refuses with UNAVAILABLE "Exceeds maximum queue size: ..." (Triton's
 * words first, then the level and which limit) and leaves `p` alone. A
 * level is full at its policy's max_queue_size or, without one, at
 * `default_cap` requests (0 = unbounded). */
enum pts_status pts_sched_queue_push(struct pts_sched_queue *q, struct pts_pending *p,
                                     uint64_t priority, uint64_t timeout_us, uint64_t now_ns,
                                     uint64_t default_cap, struct pts_error *err);

/* Applies the timeouts at `now_ns`: under REJECT, expired requests are
 * unlinked and appended to *rejected (a list through ->next, in dispatch
 * order); under DELAY they move to the end of their level's delayed list.
 * Returns the earliest deadline still pending, or 0. */
uint64_t pts_sched_queue_expire(struct pts_sched_queue *q, uint64_t now_ns,
                                struct pts_pending **rejected);

/* Dispatch order: the first request, and the one after `p`; NULL at the end. */
struct pts_pending *pts_sched_queue_first(const struct pts_sched_queue *q);
struct pts_pending *pts_sched_queue_next(const struct pts_sched_queue *q,
                                         const struct pts_pending *p);

/* Unlinks the first `n` requests in dispatch order and returns them as a
 * list (through ->next, NULL-terminated), in that order. */
struct pts_pending *pts_sched_queue_take(struct pts_sched_queue *q, size_t n);

/* What the batcher may build. */
struct pts_batch_limits {
  bool dynamic; /* dynamic_batching is configured and max_batch_size > 0 */
  int64_t max_batch_size;
  const int32_t *preferred; /* preferred_batch_size, any order */
  size_t n_preferred;
  uint64_t max_delay_ns; /* max_queue_delay_microseconds × 1000 */
};

/* Whether `p` may join a batch that starts with `first` (same shapes apart
 * from the batch dimension, same optional inputs). */
typedef bool (*pts_batch_compatible_fn)(const struct pts_pending *first,
                                        const struct pts_pending *p, void *ctx);

/* The batcher's decision at `now_ns`. Returns how many requests from the
 * front form the batch to run now (>= 1), or 0 when the queue is empty or
 * the batcher should wait for more: then *wake_ns is when to decide again
 * (0 = only when a request arrives). With `flush` (shutting down) whatever
 * can run runs at once.
 *
 * Rules (Triton's dynamic batcher): requests join in dispatch order while the
 * total stays <= max_batch_size and they are compatible; the walk stops at
 * the largest preferred size. Reaching it, or not being able to grow (the
 * next request does not fit), sends at once — the largest preferred prefix
 * when one exists, else everything walked. Otherwise a prefix of a preferred
 * size is sent at once; failing that, the batch waits until the oldest
 * request has waited max_queue_delay, then goes as it is. Without dynamic
 * batching a batch is one request. */
size_t pts_sched_queue_choose(const struct pts_sched_queue *q, const struct pts_batch_limits *lim,
                              uint64_t now_ns, bool flush, pts_batch_compatible_fn compatible,
                              void *ctx, uint64_t *wake_ns);

#endif
