/* core/copy.c — see copy.h. */
#include "core/copy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

#define CHUNK (1u << 20)
#define MAX_THREADS 16

/* One large copy being shared out. It lives on the caller's stack; the
 * caller waits until no worker holds it before returning. */
struct job {
  const struct pts_copy_part *parts;
  size_t n_parts;
  size_t total;
  size_t n_chunks;
  atomic_size_t next; /* next chunk to take */
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t work;     /* a job was posted */
  pthread_cond_t released; /* a worker let go of the job */
  struct job *job;         /* the job being shared out, or NULL */
  uint64_t gen;            /* bumped for every job, so a worker takes each once */
  int holders;             /* workers inside the current job */
  int n_threads;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          NULL, 0, 0, 0};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
/* ptserve_host_copy_bytes_total; relaxed: a statistic, read by scrapes. */
static _Atomic uint64_t copied_bytes;

void pts_copy_count(size_t n) { atomic_fetch_add_explicit(&copied_bytes, n, memory_order_relaxed); }

uint64_t pts_copy_bytes_total(void) {
  return atomic_load_explicit(&copied_bytes, memory_order_relaxed);
}

/* Copies bytes [from, to) of the concatenation of the job's parts. */
static void copy_range(const struct job *j, size_t from, size_t to) {
  size_t at = 0;
  for (size_t i = 0; i < j->n_parts && from < to; i++) {
    const struct pts_copy_part *p = &j->parts[i];
    size_t end = at + p->n;
    if (from < end) {
      size_t off = from - at, len = (to < end ? to : end) - from;
      memcpy((char *)p->dst + off, (const char *)p->src + off, len);
      from += len;
    }
    at = end;
  }
}

static void run_chunks(struct job *j) {
  for (;;) {
    size_t c = atomic_fetch_add(&j->next, 1);
    if (c >= j->n_chunks) return;
    size_t from = c * (size_t)CHUNK;
    size_t to = from + CHUNK < j->total ? from + CHUNK : j->total;
    copy_range(j, from, to);
  }
}

static void *worker(void *arg) {
  (void)arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    while (!pool.job || pool.gen == seen) pthread_cond_wait(&pool.work, &pool.mu);
    struct job *j = pool.job;
    seen = pool.gen;
    pool.holders++;
    pthread_mutex_unlock(&pool.mu);
    run_chunks(j);
    pthread_mutex_lock(&pool.mu);
    if (--pool.holders == 0) pthread_cond_broadcast(&pool.released);
  }
  return NULL;
}

static void start_pool(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int n = cpus >= 4 ? (int)(cpus / 4) : 0;
  if (n > 4) n = 4;
  const char *env = getenv("PTSERVE_COPY_THREADS");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0 || v > MAX_THREADS)
      PTS_LOG_WARN("PTSERVE_COPY_THREADS='%s' is not a number in 0..%d; using %d", env,
                   MAX_THREADS, n);
    else
      n = (int)v;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int started = 0;
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, &attr, worker, NULL) == 0) started++;
  }
  pthread_attr_destroy(&attr);
  pool.n_threads = started;
}

int pts_copy_threads(void) {
  pthread_once(&pool_once, start_pool);
  return pool.n_threads;
}

static void copy_alone(const struct pts_copy_part *parts, size_t n_parts) {
  for (size_t i = 0; i < n_parts; i++)
    if (parts[i].n) memcpy(parts[i].dst, parts[i].src, parts[i].n);
}

void pts_copy_parts(const struct pts_copy_part *parts, size_t n_parts) {
  size_t total = 0;
  for (size_t i = 0; i < n_parts; i++) total += parts[i].n;
  pts_copy_count(total);
  if (total < PTS_COPY_PARALLEL_MIN || pts_copy_threads() == 0) {
    copy_alone(parts, n_parts);
    return;
  }
  struct job j = {.parts = parts, .n_parts = n_parts, .total = total,
                  .n_chunks = (total + CHUNK - 1) / CHUNK};
  atomic_init(&j.next, 0);
  pthread_mutex_lock(&pool.mu);
  if (pool.job) { /* another caller's copy has the pool */
    pthread_mutex_unlock(&pool.mu);
    copy_alone(parts, n_parts);
    return;
  }
  pool.job = &j;
  pool.gen++;
  pthread_cond_broadcast(&pool.work);
  pthread_mutex_unlock(&pool.mu);
  run_chunks(&j);
  pthread_mutex_lock(&pool.mu);
  /* Every chunk has been taken; wait for the workers still copying theirs,
   * then withdraw the job (under the same lock, so a worker that wakes
   * late finds nothing and goes back to sleep). */
  while (pool.holders > 0) pthread_cond_wait(&pool.released, &pool.mu);
  pool.job = NULL;
  pthread_mutex_unlock(&pool.mu);
}
