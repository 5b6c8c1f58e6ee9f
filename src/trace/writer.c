/* trace/writer.c — the writer thread: jobs run one after another off the
 * threads that made them.
 *
 * Request threads only append finished traces to a collection (trace.c);
 * when a collection is due (log_frequency, shutdown) it becomes a job here,
 * and this thread formats and writes it (format.c). Profile sessions
 * (profile.c) come the same way. So file I/O never happens on an event
 * loop or an instance thread. A job is a function and its argument: this
 * file knows nothing of what the jobs write.
 */
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "trace/trace_impl.h"

struct job {
  void (*run)(void *arg); /* writes and frees arg */
  void *arg;              /* owned by the job until run */
  struct job *next;
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool running, stopping;
  pthread_t thread;
  struct job *head, *tail;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void run_job(struct job *j) {
  j->run(j->arg);
  pts_free(j);
}

static void *writer_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&W.mu);
  for (;;) {
    while (!W.head && !W.stopping) pthread_cond_wait(&W.cv, &W.mu);
    struct job *j = W.head;
    if (!j) break; /* stopping and drained */
    W.head = j->next;
    if (!W.head) W.tail = NULL;
    pthread_mutex_unlock(&W.mu);
    run_job(j);
    pthread_mutex_lock(&W.mu);
  }
  pthread_mutex_unlock(&W.mu);
  return NULL;
}

enum pts_status trace_writer_start(struct pts_error *err) {
  pthread_mutex_lock(&W.mu);
  W.stopping = false;
  int rc = W.running ? 0 : pthread_create(&W.thread, NULL, writer_main, NULL);
  if (rc == 0) W.running = true;
  pthread_mutex_unlock(&W.mu);
  if (rc != 0)
    return pts_error_set(err, PTS_INTERNAL, "failed to start the trace writer thread: %s",
                         strerror(rc));
  return PTS_OK;
}

void trace_writer_stop(void) {
  pthread_mutex_lock(&W.mu);
  bool running = W.running;
  W.stopping = true;
  pthread_cond_signal(&W.cv);
  pthread_mutex_unlock(&W.mu);
  if (running) pthread_join(W.thread, NULL);
  pthread_mutex_lock(&W.mu);
  W.running = false;
  pthread_mutex_unlock(&W.mu);
}

/* Queues a job; without a writer (never started, or stopped), or without
 * the memory to queue it, runs it now: better late on this thread than
 * lost. */
void trace_writer_submit(void (*run)(void *arg), void *arg) {
  struct job *j = pts_calloc(1, sizeof *j);
  if (!j) {
    run(arg);
    return;
  }
  j->run = run;
  j->arg = arg;
  pthread_mutex_lock(&W.mu);
  if (W.running && !W.stopping) {
    if (W.tail)
      W.tail->next = j;
    else
      W.head = j;
    W.tail = j;
    pthread_cond_signal(&W.cv);
    pthread_mutex_unlock(&W.mu);
    return;
  }
  pthread_mutex_unlock(&W.mu);
  run_job(j);
}
