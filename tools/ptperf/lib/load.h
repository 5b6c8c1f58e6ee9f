/* ptperf/lib/load.h — closed-loop load at a fixed concurrency.
 *
 * N keep-alive connections, each with exactly one request in flight: when a
 * response is complete the next request goes out on the same connection at
 * once (perf_analyzer's concurrency mode). One thread drives every
 * connection of a load with poll(): on a 2-core machine shared with the
 * server, one client thread costs less CPU and fewer context switches than N
 * blocking ones. Where one thread is not enough (hundreds of KB per request
 * on a GPU host), ptperf runs several loads side by side (--threads), each
 * with its share of the connections, recording into one recorder. Every
 * response must be a well-framed 200; anything else, and every broken
 * connection, counts as an error (the connection is then reopened).
 *
 * Threading: start/stop are called from one controlling thread; the load
 * runs on its own thread between start and stop and records into `rec`,
 * which other loads may share (samples.h: it has its own lock).
 */
#ifndef PTPERF_LOAD_H
#define PTPERF_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "ptperf/lib/http.h"
#include "ptperf/lib/samples.h"

struct ptperf_load;

/* The requests (complete HTTP messages) and the recorder are borrowed
 * until ptperf_load_stop; the requests are sent in turn. Caller frees *out
 * with ptperf_load_stop. */
enum pts_status ptperf_load_start(const struct ptperf_addr *addr, int concurrency,
                                  char *const *requests, const size_t *request_lens,
                                  size_t n_requests, struct ptperf_recorder *rec,
                                  struct ptperf_load **out, struct pts_error *err);

/* Stops the load (requests in flight are abandoned), joins the thread,
 * closes the connections and frees l. NULL-safe. */
void ptperf_load_stop(struct ptperf_load *l);

#endif
