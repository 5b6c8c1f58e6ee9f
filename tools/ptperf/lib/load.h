/* ptperf/lib/load.h — closed-loop load at a fixed concurrency.
 *
 * N keep-alive connections, each with exactly one request in flight: when a
 * response is complete the next request goes out on the same connection at
 * once (perf_analyzer's concurrency mode). One thread drives every
 * connection with poll(): on a 2-core machine shared with the server, one
 * client thread costs less CPU and fewer context switches than N blocking
 * ones. Every response must be a well-framed 200; anything else, and every
 * broken connection, counts as an error (the connection is then reopened).
 *
 * Threading: start/take/stop are called from one controlling thread; the
 * load runs on its own thread between start and stop.
 */
#ifndef PTPERF_LOAD_H
#define PTPERF_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "ptperf/lib/http.h"
#include "ptperf/lib/samples.h"

struct ptperf_load;

/* The requests (complete HTTP messages) are borrowed until ptperf_load_stop
 * and sent in turn. Caller frees *out with ptperf_load_stop. */
enum pts_status ptperf_load_start(const struct ptperf_addr *addr, int concurrency,
                                  char *const *requests, const size_t *request_lens,
                                  size_t n_requests, struct ptperf_load **out,
                                  struct pts_error *err);

/* Moves the samples recorded since the last take into *s, whose previous
 * contents are discarded (its array is reused). */
void ptperf_load_take(struct ptperf_load *l, struct ptperf_samples *s);

/* Stops the load (requests in flight are abandoned), joins the thread,
 * closes the connections and frees l. NULL-safe. */
void ptperf_load_stop(struct ptperf_load *l);

#endif
