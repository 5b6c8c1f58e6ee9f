/* core/overload.h — the process-wide overload state: one memory budget for
 * request bytes held by the server, and the counters that say what was
 * refused because of it or of the connection limit.
 *
 * Envoy's overload manager is the model: bytes a client makes the server
 * hold (bodies being read, decoded tensors, requests waiting in a queue) are
 * charged to one budget shared by HTTP and gRPC; beyond it new work is
 * refused quickly (HTTP 503, gRPC RESOURCE_EXHAUSTED) while work already
 * admitted finishes. The budget holds no memory itself: it is accounting,
 * and the frontends decide what to refuse.
 *
 * Charges are plain byte counts: whoever charges n bytes releases exactly n
 * later (a request carries its charge in pts_infer_request.budget_bytes and
 * pts_infer_request_free returns it).
 *
 * Threading: every function is thread-safe (atomics); pts_overload_configure
 * is meant for start-up, before requests arrive, and pts_overload_tick for
 * one housekeeping thread (the main thread's wait loop in server/run.c).
 */
#ifndef PTS_CORE_OVERLOAD_H
#define PTS_CORE_OVERLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sets the budget in bytes; 0 = the default share of the machine's memory
 * (pts_overload_default_budget of pts_overload_system_memory). Returns the
 * budget in force. Bytes already charged stay charged. */
size_t pts_overload_configure(size_t budget);
/* The budget in force (the default until configured). */
size_t pts_overload_budget(void);

/* Charges n bytes if they fit: true when held + n <= budget (then they are
 * held), false when they do not (nothing is charged). */
bool pts_overload_try_charge(size_t n);
/* Charges n bytes whether or not they fit: for bytes already in memory that
 * belong to admitted work (decoded tensors of an admitted request, headers
 * being read). */
void pts_overload_charge(size_t n);
/* Returns n bytes charged earlier. */
void pts_overload_release(size_t n);
/* Moves a charge of `from` bytes to `to` (charging or releasing the
 * difference; never refused) and returns `to`: what an admitted request
 * holds once decoded replaces what its message was charged. */
size_t pts_overload_recharge(size_t from, size_t to);
/* Bytes held now. */
size_t pts_overload_held(void);

/* The cap on requests waiting in one queue level of one model version
 * where the config sets no max_queue_size (--default-max-queue-size;
 * 0 = unbounded, Triton's behaviour). Beyond it a request is refused at
 * once (503 / UNAVAILABLE) rather than left to wait past its client's
 * timeout. The scheduler reads it at every enqueue, so it may be set at any
 * time; start-up sets it before models load. */
#define PTS_OVERLOAD_DEFAULT_QUEUE_CAP 4096u
void pts_overload_set_queue_cap(uint64_t cap);
uint64_t pts_overload_queue_cap(void);

/* Counters for the metrics endpoint (monotonic unless said otherwise). */
enum pts_overload_counter {
  PTS_OVERLOAD_HTTP_CONNECTIONS,     /* gauge: HTTP connections open now */
  PTS_OVERLOAD_HTTP_CONN_REFUSED,    /* connections refused: --http-max-connections */
  PTS_OVERLOAD_GRPC_CONNECTIONS,     /* gauge: gRPC connections open now */
  PTS_OVERLOAD_GRPC_CONN_REFUSED,    /* connections refused: --grpc-max-connections */
  PTS_OVERLOAD_ACCEPT_PAUSES,        /* accept() failed (descriptors exhausted): paused */
  PTS_OVERLOAD_HTTP_MEMORY_REFUSED,  /* HTTP requests refused: memory budget */
  PTS_OVERLOAD_GRPC_MEMORY_REFUSED,  /* gRPC requests refused: memory budget */
  /* GOAWAY frames the gRPC transport sent, one counter per HTTP/2 error
   * code: FIRST + code for RFC 9113's NO_ERROR (0) to HTTP_1_1_REQUIRED
   * (13), OTHER for any code above */
  PTS_OVERLOAD_GRPC_GOAWAY_FIRST,
  PTS_OVERLOAD_GRPC_GOAWAY_OTHER = PTS_OVERLOAD_GRPC_GOAWAY_FIRST + 14,
  /* gRPC connections the server closed for a failure of its own or of the
   * session, without a GOAWAY (the client sees the connection drop) */
  PTS_OVERLOAD_GRPC_CONN_FAILED,
  PTS_OVERLOAD_COUNTER_COUNT
};
void pts_overload_count(enum pts_overload_counter c, int64_t delta);

struct pts_overload_stats {
  uint64_t budget;
  uint64_t held;
  uint64_t counters[PTS_OVERLOAD_COUNTER_COUNT];
};
void pts_overload_snapshot(struct pts_overload_stats *out);

/* Housekeeping, about once a second: after a burst (the bytes held have
 * fallen to a quarter of their peak, and jemalloc's free pages, or where
 * it is not the allocator that peak, are PTS_OVERLOAD_TRIM_MIN or more)
 * the allocator's free pages are returned to the system
 * (jemalloc's arena purge, or glibc's malloc_trim), so the resident size
 * comes back down; once then, and once more at the next tick. Returns
 * whether it trimmed (never with PTSERVE_MALLOC_TRIM=0 in the environment,
 * a benchmark's switch). Call it from one thread. */
#define PTS_OVERLOAD_TRIM_MIN ((size_t)64 << 20)
bool pts_overload_tick(void);
/* The tick's rule (pure, unit-tested): the bytes held have fallen to a
 * quarter of their peak since the last return, and the return is worth
 * it: the allocator's free pages not yet returned (`dirty`, bytes) are
 * PTS_OVERLOAD_TRIM_MIN or more, or, where the allocator does not say
 * (dirty < 0: the C library's malloc), the peak was. jemalloc keeps its
 * free pages for reuse in this server (main.c, malloc_conf), so after a
 * steady load whose bytes held never reached the minimum they are what
 * is left to return. */
bool pts_overload_burst_ended(size_t held, size_t peak, int64_t dirty);

/* ---- defaults (pure, unit-tested) ---- */

/* The default budget: a quarter of `total_memory` (bytes; 0 = unknown,
 * then 1 GiB), never below 64 MiB. The rest is left to models, the
 * runtime and the kernel. */
size_t pts_overload_default_budget(uint64_t total_memory);
/* The machine's memory as this process may use it: physical memory, or the
 * cgroup's memory limit when that is lower (containers). 0 when unknown. */
uint64_t pts_overload_system_memory(void);

/* Descriptors kept out of the default connection limit: model files, the
 * log, event-loop and wakeup descriptors, the metrics listener. */
#define PTS_OVERLOAD_FD_RESERVE 128u
/* A default connection limit for a descriptor limit of `nofile`: `percent`
 * of what is left after PTS_OVERLOAD_FD_RESERVE (or of half a smaller
 * limit); at least 1. HTTP takes 75 and gRPC 25 when both serve, either
 * 100 alone. */
unsigned long pts_overload_default_connections(uint64_t nofile, unsigned percent);

#endif
