/* core/workq.c — see workq.h. */
#include "core/workq.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/log.h"

struct job {
  struct job *next;
  pts_workq_fn fn;
  void *arg;
};

struct worker {
  struct pts_workq *q;
  pthread_t thread;
  bool started;
  bool ticks; /* the one thread that runs the tick */
};

struct pts_workq {
  char name[32];
  pthread_mutex_t mu;
  pthread_cond_t work; /* a job was queued, or the queue is stopping */
  pthread_cond_t idle; /* running and queue went to zero */
  struct job *head, *tail;
  size_t running;
  bool stopping;
  unsigned tick_ms;
  pts_workq_tick_fn tick;
  void *tick_ctx;
  struct timespec next_tick; /* CLOCK_MONOTONIC */
  size_t n_workers;
  struct worker *workers;
};

static void schedule_tick(struct pts_workq *q) {
  clock_gettime(CLOCK_MONOTONIC, &q->next_tick);
  q->next_tick.tv_sec += q->tick_ms / 1000;
  q->next_tick.tv_nsec += (long)(q->tick_ms % 1000) * 1000000L;
  if (q->next_tick.tv_nsec >= 1000000000L) {
    q->next_tick.tv_sec++;
    q->next_tick.tv_nsec -= 1000000000L;
  }
}

static bool tick_due(const struct pts_workq *q) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > q->next_tick.tv_sec ||
         (now.tv_sec == q->next_tick.tv_sec && now.tv_nsec >= q->next_tick.tv_nsec);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct pts_workq *q = w->q;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    struct job *j = q->head;
    if (j) {
      q->head = j->next;
      if (!q->head) q->tail = NULL;
      q->running++;
      bool cancelled = q->stopping;
      pthread_mutex_unlock(&q->mu);
      j->fn(j->arg, cancelled);
      pts_free(j);
      pthread_mutex_lock(&q->mu);
      q->running--;
      if (q->running == 0 && !q->head) pthread_cond_broadcast(&q->idle);
      continue;
    }
    if (q->stopping) break;
    if (w->ticks) {
      if (tick_due(q)) {
        q->running++;
        pthread_mutex_unlock(&q->mu);
        q->tick(q->tick_ctx);
        pthread_mutex_lock(&q->mu);
        q->running--;
        schedule_tick(q);
        if (q->running == 0 && !q->head) pthread_cond_broadcast(&q->idle);
        continue;
      }
      pthread_cond_timedwait(&q->work, &q->mu, &q->next_tick);
    } else {
      pthread_cond_wait(&q->work, &q->mu);
    }
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

enum pts_status pts_workq_create(const char *name, size_t n_threads, unsigned tick_ms,
                                 pts_workq_tick_fn tick, void *ctx, struct pts_workq **out,
                                 struct pts_error *err) {
  *out = NULL;
  if (n_threads == 0) n_threads = 1;
  struct pts_workq *q = pts_calloc(1, sizeof *q);
  if (q) q->workers = pts_calloc(n_threads, sizeof *q->workers);
  if (!q || !q->workers) {
    pts_free(q);
    return pts_error_set(err, PTS_NOMEM, "out of memory creating the %s threads", name);
  }
  snprintf(q->name, sizeof q->name, "%s", name);
  pthread_mutex_init(&q->mu, NULL);
  /* Timed waits for the tick use the monotonic clock, like schedule_tick. */
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&q->work, &ca);
  pthread_condattr_destroy(&ca);
  pthread_cond_init(&q->idle, NULL);
  q->tick_ms = tick ? tick_ms : 0;
  q->tick = tick;
  q->tick_ctx = ctx;
  if (q->tick_ms) schedule_tick(q);
  q->n_workers = n_threads;
  enum pts_status st = PTS_OK;
  for (size_t i = 0; i < n_threads; i++) {
    struct worker *w = &q->workers[i];
    w->q = q;
    w->ticks = i == 0 && q->tick_ms > 0;
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
      st = pts_error_set(err, PTS_INTERNAL, "failed to start a %s thread: %s", name, strerror(rc));
      break;
    }
    w->started = true;
  }
  if (st != PTS_OK) {
    pts_workq_destroy(q);
    return st;
  }
  *out = q;
  return PTS_OK;
}

enum pts_status pts_workq_submit(struct pts_workq *q, pts_workq_fn fn, void *arg,
                                 struct pts_error *err) {
  struct job *j = pts_malloc(sizeof *j);
  if (!j) return pts_error_set(err, PTS_NOMEM, "out of memory queueing %s work", q->name);
  j->next = NULL;
  j->fn = fn;
  j->arg = arg;
  pthread_mutex_lock(&q->mu);
  if (q->stopping) {
    pthread_mutex_unlock(&q->mu);
    pts_free(j);
    return pts_error_set(err, PTS_UNAVAILABLE, "the server is shutting down");
  }
  if (q->tail)
    q->tail->next = j;
  else
    q->head = j;
  q->tail = j;
  pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->mu);
  return PTS_OK;
}

void pts_workq_wait_idle(struct pts_workq *q) {
  pthread_mutex_lock(&q->mu);
  while (q->running > 0 || q->head) pthread_cond_wait(&q->idle, &q->mu);
  pthread_mutex_unlock(&q->mu);
}

void pts_workq_destroy(struct pts_workq *q) {
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  q->stopping = true;
  pthread_cond_broadcast(&q->work);
  pthread_mutex_unlock(&q->mu);
  for (size_t i = 0; i < q->n_workers; i++)
    if (q->workers[i].started) pthread_join(q->workers[i].thread, NULL);
  /* No thread started at all: the queue is empty (submit needs a queue). */
  while (q->head) {
    struct job *j = q->head;
    q->head = j->next;
    j->fn(j->arg, true);
    pts_free(j);
  }
  pthread_cond_destroy(&q->work);
  pthread_cond_destroy(&q->idle);
  pthread_mutex_destroy(&q->mu);
  pts_free(q->workers);
  pts_free(q);
}
