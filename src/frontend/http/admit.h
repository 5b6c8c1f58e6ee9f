/* frontend/http/admit.h — connection admission for the HTTP frontend: the
 * connection limit, the memory budget while requests are being read, and
 * accept() when descriptors run out. docs/internals/http.md ("Overload")
 * tells the whole story; in short:
 *
 *  - evhttp creates each connection's bufferevent through our callback, so
 *    every accepted connection gets a `struct conn` and is counted. Beyond
 *    --http-max-connections a connection is answered at once with 503,
 *    Retry-After and Connection: close, and closed.
 *  - Bytes arriving on a connection are charged to the memory budget
 *    (core/overload.h) as they arrive. When a request's head is complete
 *    (before evhttp has parsed it) its declared body is reserved, or the
 *    request is refused — 503 naming the budget, or 413 when the body is
 *    larger than the whole budget — before any of the body is read.
 *  - The rest of an admitted body with a declared length is read from the
 *    socket here, in large reads, rather than 4096 bytes per loop iteration
 *    as libevent 2.1 reads; never past the declared length, so a pipelined
 *    next request stays in the socket.
 * (accept() failing for lack of descriptors pauses the listener: net/listen.h.)
 *
 * Threading: every function runs on the loop's thread, except
 * pts_admit_loop_init / pts_admit_loop_destroy (main thread, loop not
 * running).
 */
#ifndef PTS_FRONTEND_HTTP_ADMIT_H
#define PTS_FRONTEND_HTTP_ADMIT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "frontend/http/http_impl.h"

/* How long a client is asked to wait before retrying a 503 (Retry-After). */
#define PTS_ADMIT_RETRY_AFTER_S 1

/* After evhttp_new: the loop's events and evhttp's bufferevent callback. */
enum pts_status pts_admit_loop_init(struct loop *lp, struct pts_error *err);
/* After evhttp_free (which closed every adopted connection): frees what is
 * left of connections never adopted, and the loop's events. */
void pts_admit_loop_destroy(struct loop *lp);

/* The connection of a request; NULL when it is not tracked (its state
 * could not be allocated). */
struct conn *pts_admit_conn_of(struct loop *lp, struct evhttp_request *req);

/* The request on `cn` has been read and is handed to a handler. Returns how
 * many bytes of the memory budget the request now carries (its body and
 * head, as charged while they arrived); the caller releases them (or
 * passes them to the inference request). *checked says whether the head
 * check admitted the request; when false (pipelined bytes it could not
 * see), the caller checks the budget itself. cn may be NULL (0 bytes, not
 * checked). */
size_t pts_admit_request_read(struct conn *cn, bool *checked);

#endif
