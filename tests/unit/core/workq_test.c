/* tests/unit/core/workq_test.c — the job queue: order on one thread, jobs
 * that can only finish together on two, cancellation of queued jobs at
 * destroy, and the periodic tick. No test waits on a clock: every wait is
 * for a condition another thread makes true. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "core/workq.h"

struct shared {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int order[8];
  int n;
  int arrived;      /* rendezvous of the parallel test */
  bool release;     /* lets the blocking job return */
  int cancelled;
  int ticks;
};

static struct shared sh = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void reset(void) {
  pthread_mutex_lock(&sh.mu);
  sh.n = sh.arrived = sh.cancelled = sh.ticks = 0;
  sh.release = false;
  pthread_mutex_unlock(&sh.mu);
}

static void record(void *arg, bool cancelled) {
  pthread_mutex_lock(&sh.mu);
  if (cancelled)
    sh.cancelled++;
  else
    sh.order[sh.n++] = (int)(intptr_t)arg;
  pthread_cond_broadcast(&sh.cv);
  pthread_mutex_unlock(&sh.mu);
}

static void one_thread_keeps_order(void **state) {
  (void)state;
  reset();
  struct pts_workq *q;
  struct pts_error err;
  assert_int_equal(pts_workq_create("test", 1, 0, NULL, NULL, &q, &err), PTS_OK);
  for (int i = 1; i <= 5; i++)
    assert_int_equal(pts_workq_submit(q, record, (void *)(intptr_t)i, &err), PTS_OK);
  pts_workq_wait_idle(q);
  assert_int_equal(sh.n, 5);
  for (int i = 0; i < 5; i++) assert_int_equal(sh.order[i], i + 1);
  pts_workq_destroy(q);
  assert_int_equal(sh.cancelled, 0);
}

/* Each job waits until both have arrived: only two threads running them at
 * once can finish. */
static void rendezvous(void *arg, bool cancelled) {
  (void)arg;
  (void)cancelled;
  pthread_mutex_lock(&sh.mu);
  sh.arrived++;
  pthread_cond_broadcast(&sh.cv);
  while (sh.arrived < 2) pthread_cond_wait(&sh.cv, &sh.mu);
  pthread_mutex_unlock(&sh.mu);
}

static void two_threads_run_in_parallel(void **state) {
  (void)state;
  reset();
  struct pts_workq *q;
  struct pts_error err;
  assert_int_equal(pts_workq_create("test", 2, 0, NULL, NULL, &q, &err), PTS_OK);
  assert_int_equal(pts_workq_submit(q, rendezvous, NULL, &err), PTS_OK);
  assert_int_equal(pts_workq_submit(q, rendezvous, NULL, &err), PTS_OK);
  pts_workq_wait_idle(q);
  assert_int_equal(sh.arrived, 2);
  pts_workq_destroy(q);
}

static void blocker(void *arg, bool cancelled) {
  (void)arg;
  (void)cancelled;
  pthread_mutex_lock(&sh.mu);
  sh.arrived = 1;
  pthread_cond_broadcast(&sh.cv);
  while (!sh.release) pthread_cond_wait(&sh.cv, &sh.mu);
  pthread_mutex_unlock(&sh.mu);
}

static void *destroy_thread(void *q) {
  pts_workq_destroy(q);
  return NULL;
}

static void destroy_cancels_queued_jobs(void **state) {
  (void)state;
  reset();
  struct pts_workq *q;
  struct pts_error err;
  assert_int_equal(pts_workq_create("test", 1, 0, NULL, NULL, &q, &err), PTS_OK);
  assert_int_equal(pts_workq_submit(q, blocker, NULL, &err), PTS_OK);
  assert_int_equal(pts_workq_submit(q, record, (void *)1, &err), PTS_OK);
  assert_int_equal(pts_workq_submit(q, record, (void *)2, &err), PTS_OK);
  pthread_mutex_lock(&sh.mu);
  while (!sh.arrived) pthread_cond_wait(&sh.cv, &sh.mu); /* the blocker runs */
  pthread_mutex_unlock(&sh.mu);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, destroy_thread, q), 0);
  /* Destroy can not finish while the blocker runs; once it is stopping,
   * new jobs are refused. */
  for (;;) {
    void *probe = (void *)99;
    if (pts_workq_submit(q, record, probe, &err) == PTS_UNAVAILABLE) break;
  }
  assert_int_equal(err.code, PTS_UNAVAILABLE);
  pthread_mutex_lock(&sh.mu);
  sh.release = true;
  pthread_cond_broadcast(&sh.cv);
  pthread_mutex_unlock(&sh.mu);
  pthread_join(t, NULL);
  /* Every job queued before the destroy ran, cancelled, except probes that
   * were accepted before it (those ran cancelled too). */
  assert_int_equal(sh.n, 0);
  assert_true(sh.cancelled >= 2);
}

static void tick(void *ctx) {
  (void)ctx;
  pthread_mutex_lock(&sh.mu);
  sh.ticks++;
  pthread_cond_broadcast(&sh.cv);
  pthread_mutex_unlock(&sh.mu);
}

static void tick_repeats(void **state) {
  (void)state;
  reset();
  struct pts_workq *q;
  struct pts_error err;
  assert_int_equal(pts_workq_create("test", 1, 1, tick, NULL, &q, &err), PTS_OK);
  pthread_mutex_lock(&sh.mu);
  while (sh.ticks < 3) pthread_cond_wait(&sh.cv, &sh.mu);
  pthread_mutex_unlock(&sh.mu);
  /* Jobs still run between ticks. */
  assert_int_equal(pts_workq_submit(q, record, (void *)7, &err), PTS_OK);
  pthread_mutex_lock(&sh.mu);
  while (sh.n < 1) pthread_cond_wait(&sh.cv, &sh.mu);
  pthread_mutex_unlock(&sh.mu);
  assert_int_equal(sh.order[0], 7);
  pts_workq_destroy(q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_thread_keeps_order),
      cmocka_unit_test(two_threads_run_in_parallel),
      cmocka_unit_test(destroy_cancels_queued_jobs),
      cmocka_unit_test(tick_repeats),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
