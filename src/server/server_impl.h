/* server/server_impl.h — the server's state, shared by server.c (models,
 * inference, health) and run.c (frontends and the stop signal). Private to
 * src/server/: frontends see only server.h.
 *
 * Threading: `opts`, `repo` and the pipe are fixed after create; the flags
 * are atomics read from any thread.
 */
#ifndef PTS_SERVER_SERVER_IMPL_H
#define PTS_SERVER_SERVER_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "repository/repository.h"
#include "server/server.h"

struct pts_server {
  struct pts_server_options opts; /* strings point into the copies below */
  char **repo_paths;              /* owned copies of the repository paths */
  char *http_address;             /* owned copy */
  struct pts_repository *repo;
  int stop_pipe[2];        /* pts_server_stop writes a byte; run waits on it */
  atomic_bool ready_state; /* models loaded and not shutting down */
  atomic_bool shutting_down; /* a stop was asked for: draining, then stopping */
  atomic_bool stopping;    /* no new inference requests */
  atomic_int entering;     /* infer_async calls between the stopping check and enqueue */
  bool owns_trace;         /* this server started the process-wide tracer (trace/trace.h) */
};

/* Stops accepting inference, then waits (up to timeout_s seconds) for every
 * queued or running request to be answered, so frontends can be stopped
 * without a completion arriving after them. Returns how many were left. */
size_t pts_server_drain(struct pts_server *s, unsigned timeout_s);

#endif
