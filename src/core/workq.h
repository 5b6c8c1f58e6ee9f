/* core/workq.h — a few threads that run queued jobs, in order, and
 * optionally a periodic tick.
 *
 * The server runs model loads and unloads on one (--model-load-thread-count
 * threads) and index refreshes and repository polls on another (one
 * thread), so that no file is read and no model loaded on a frontend's
 * thread. Jobs that are still queued when the queue is destroyed run with
 * `cancelled` set, so whoever waits for them always gets an answer.
 *
 * Threading: submit may be called from any thread (also from a job); create
 * and destroy from one owner thread, never from a job of the same queue.
 */
#ifndef PTS_CORE_WORKQ_H
#define PTS_CORE_WORKQ_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

struct pts_workq;

/* A job: runs once, on a queue thread (or, when cancelled, on the thread
 * that destroys the queue). It owns `arg`. */
typedef void (*pts_workq_fn)(void *arg, bool cancelled);
typedef void (*pts_workq_tick_fn)(void *ctx);

/* Starts `n_threads` (>= 1) threads named "<name>" in logs. With tick_ms >
 * 0, one thread calls tick(ctx) every tick_ms milliseconds (measured from
 * the end of the previous tick) while it has no job to run. Caller frees
 * *out with pts_workq_destroy. */
enum pts_status pts_workq_create(const char *name, size_t n_threads, unsigned tick_ms,
                                 pts_workq_tick_fn tick, void *ctx, struct pts_workq **out,
                                 struct pts_error *err);

/* Queues a job. UNAVAILABLE once the queue is being destroyed (the job is
 * not run then; the caller keeps `arg`), NOMEM when out of memory. */
enum pts_status pts_workq_submit(struct pts_workq *q, pts_workq_fn fn, void *arg,
                                 struct pts_error *err);

/* Waits until no job is queued or running. */
void pts_workq_wait_idle(struct pts_workq *q);

/* Refuses new jobs, lets running jobs finish, runs the queued ones with
 * cancelled = true, joins the threads, frees. NULL-safe. */
void pts_workq_destroy(struct pts_workq *q);

#endif
