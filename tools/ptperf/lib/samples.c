/* ptperf/lib/samples.c — the recorder shared by the load loops. */
#include "ptperf/lib/samples.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"

uint64_t ptperf_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void ptperf_recorder_init(struct ptperf_recorder *r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
}

void ptperf_recorder_destroy(struct ptperf_recorder *r) {
  ptperf_samples_free(&r->cur);
  pthread_mutex_destroy(&r->mu);
}

void ptperf_recorder_error(struct ptperf_recorder *r, const char *fmt, ...) {
  pthread_mutex_lock(&r->mu);
  r->cur.errors++;
  if (r->cur.first_error[0] == '\0') {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->cur.first_error, sizeof r->cur.first_error, fmt, ap);
    va_end(ap);
  }
  pthread_mutex_unlock(&r->mu);
}

void ptperf_recorder_ok(struct ptperf_recorder *r, uint64_t lat) {
  pthread_mutex_lock(&r->mu);
  struct ptperf_samples *s = &r->cur;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 4096;
    uint64_t *a = pts_realloc(s->lat_ns, cap * sizeof *a);
    if (!a) {
      s->errors++;
      if (!s->first_error[0])
        snprintf(s->first_error, sizeof s->first_error, "no memory to record a latency");
      pthread_mutex_unlock(&r->mu);
      return;
    }
    s->lat_ns = a;
    s->cap = cap;
  }
  s->lat_ns[s->n++] = lat;
  pthread_mutex_unlock(&r->mu);
}

void ptperf_recorder_take(struct ptperf_recorder *r, struct ptperf_samples *s) {
  struct ptperf_samples empty = {.lat_ns = s->lat_ns, .cap = s->cap};
  pthread_mutex_lock(&r->mu);
  *s = r->cur;
  r->cur = empty;
  pthread_mutex_unlock(&r->mu);
}

void ptperf_samples_free(struct ptperf_samples *s) {
  pts_free(s->lat_ns);
  memset(s, 0, sizeof *s);
}
