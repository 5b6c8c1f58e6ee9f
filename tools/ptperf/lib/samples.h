/* ptperf/lib/samples.h — what a load loop records: one latency per
 * successful request, a count of failed ones and the first failure's text.
 *
 * Both load loops (HTTP in load.h, gRPC in grpc_load.h) record into a
 * recorder from their own thread; the controlling thread takes what
 * completed at the end of each window.
 *
 * Threading: a recorder is safe to use from any thread (one mutex); a
 * struct ptperf_samples taken out of it belongs to the taker.
 */
#ifndef PTPERF_SAMPLES_H
#define PTPERF_SAMPLES_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* What completed since the previous take. */
struct ptperf_samples {
  uint64_t *lat_ns; /* one per successful request, in completion order */
  size_t n, cap;
  uint64_t errors;
  char first_error[512]; /* the first error's description, "" if none */
};

/* Embedded by the load loops; its fields are theirs only through the
 * functions below. */
struct ptperf_recorder {
  pthread_mutex_t mu;
  struct ptperf_samples cur;
};

void ptperf_recorder_init(struct ptperf_recorder *r);
/* Frees what was recorded and not taken. */
void ptperf_recorder_destroy(struct ptperf_recorder *r);

void ptperf_recorder_ok(struct ptperf_recorder *r, uint64_t lat_ns);
/* Counts one failed request; the text is kept if it is the first. */
void ptperf_recorder_error(struct ptperf_recorder *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Moves the samples recorded since the last take into *s, whose previous
 * contents are discarded (its array is reused). */
void ptperf_recorder_take(struct ptperf_recorder *r, struct ptperf_samples *s);

/* Frees the array of samples filled by a take. */
void ptperf_samples_free(struct ptperf_samples *s);

/* CLOCK_MONOTONIC in nanoseconds: the clock of every latency. */
uint64_t ptperf_now_ns(void);

#endif
