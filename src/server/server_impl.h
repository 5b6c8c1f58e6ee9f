/* server/server_impl.h — the server's state, shared by server.c (models,
 * inference, health) and run.c (frontends and the stop signal). Private to
 * src/server/: frontends see only server.h.
 *
 * Threading: `opts`, `repo`, the queues and the pipe are fixed after
 * create; the flags are atomics read from any thread.
 */
#ifndef PTS_SERVER_SERVER_IMPL_H
#define PTS_SERVER_SERVER_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "core/workq.h"
#include "ensemble/ensemble.h"
#include "repository/repository.h"
#include "server/server.h"

struct pts_server {
  struct pts_server_options opts; /* strings point into the copies below */
  char **repo_paths;              /* owned copies of the repository paths */
  char *http_address;             /* owned copy */
  char *server_id;                /* owned copy */
  struct pts_repository *repo;
  int stop_pipe[2];        /* pts_server_stop writes a byte; run waits on it */
  atomic_bool ready_state; /* models loaded and not shutting down */
  atomic_bool shutting_down; /* a stop was asked for: draining, then stopping */
  atomic_bool stopping;    /* no new inference requests */
  atomic_int entering;     /* infer_async calls between the stopping check and enqueue */
  bool owns_trace;         /* this server started the process-wide tracer (trace/trace.h) */
  bool owns_cache;         /* this server started the process-wide response cache (cache/cache.h) */
  /* model control (control.c) */
  struct pts_workq *load_q; /* --model-load-thread-count threads: loads and unloads */
  struct pts_workq *repo_q; /* one thread: index refreshes and, in poll mode, the poll */
  atomic_bool control_stopping; /* load/unload/index requests are refused */
  struct pts_shm_registry *shm; /* client shared-memory regions (shm/shm.h) */
  struct pts_ensemble_host ensemble; /* lent to the repository's ensembles */
};

/* Model control (control.c). Start creates the load threads and loads the
 * start-up models (all of them, or --load-model's in explicit mode), in
 * parallel, and waits; *failed counts the models that failed. */
enum pts_status pts_control_start(struct pts_server *s, const struct pts_server_options *o,
                                  size_t *failed, struct pts_error *err);
/* Starts the repository thread (and its poll in poll mode): after the
 * start-up table, so a poll never races the start-up loads. */
enum pts_status pts_control_start_polling(struct pts_server *s, struct pts_error *err);
/* Refuses new requests, cancels queued ones (their callers get
 * UNAVAILABLE), waits for running loads and unloads, stops the threads.
 * Idempotent; main thread. */
void pts_control_stop(struct pts_server *s);

/* From now on new inference requests are refused (UNAVAILABLE, "Server is
 * shutting down") and the server is not ready. Idempotent; any thread. */
void pts_server_refuse_inference(struct pts_server *s);

/* Stops accepting inference, then waits (up to timeout_s seconds) for every
 * queued or running request to be answered, so frontends can be stopped
 * without a completion arriving after them. Returns how many were left. */
size_t pts_server_drain(struct pts_server *s, unsigned timeout_s);

#endif
