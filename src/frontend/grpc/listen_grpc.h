/* frontend/grpc/listen_grpc.h — ptserve's own listener for gRPC.
 *
 * gRPC 1.51's listener stops accepting for good after one failed accept()
 * (EMFILE: "Failed accept4: Too many open files"), so a moment of
 * descriptor exhaustion would end the gRPC service. Instead the frontend
 * binds the port itself, accepts on a libevent loop whose accept() failures
 * pause it with a backoff (net/listen.h), and hands each connection to the
 * transport: the nghttp2 transport (h2.h, the default) serves it on this
 * loop or hands it to another of its loops; gRPC core takes it with
 * grpc_server_add_channel_from_fd (grpc.c).
 *
 * That is also where --grpc-max-connections is enforced: beyond it a new
 * connection is closed at once (what gRPC's own connection quota does in
 * newer releases). gRPC does not say when it closes a connection, so the
 * listener remembers each socket's descriptor and inode and counts the
 * ones still open (fstat), when at the limit and once a second for the
 * ptserve_grpc_connections gauge.
 *
 * Threading: open/run/stop on the main thread; the accept loop has its own
 * thread, on which `take` runs.
 */
#ifndef PTS_FRONTEND_GRPC_LISTEN_GRPC_H
#define PTS_FRONTEND_GRPC_LISTEN_GRPC_H

#include "core/status.h"
#include "server/server.h"

struct pts_grpc_listen;

/* Binds o->grpc_address:o->grpc_port (SO_REUSEPORT with
 * o->reuse_grpc_port); the port bound in *port. Accepts nothing yet. Free
 * with pts_grpc_listen_stop. */
enum pts_status pts_grpc_listen_open(const struct pts_server_options *o,
                                     struct pts_grpc_listen **out, int *port,
                                     struct pts_error *err);
/* The accept loop, for a transport that serves its connections there
 * (borrowed until stop; it runs once pts_grpc_listen_run has started it). */
struct event_base *pts_grpc_listen_base(struct pts_grpc_listen *l);
/* Takes an accepted, non-blocking socket (owned by the callee from now on). */
typedef void (*pts_grpc_take_fn)(void *ctx, int fd);
/* Starts accepting: each connection within the limit goes to take(ctx, fd),
 * on the loop's thread. ctx is borrowed until stop. */
enum pts_status pts_grpc_listen_run(struct pts_grpc_listen *l, pts_grpc_take_fn take, void *ctx,
                                    struct pts_error *err);
/* The connection limit in force (--grpc-max-connections or its default). */
unsigned long pts_grpc_listen_max_connections(const struct pts_grpc_listen *l);
/* Stops the loop and joins its thread (accepting ends; a transport on the
 * loop stops with it); stop does it too. Main thread. */
void pts_grpc_listen_halt(struct pts_grpc_listen *l);
/* Stops accepting, joins the thread, closes the listening socket, frees.
 * Connections already handed over stay the transport's. NULL-safe. */
void pts_grpc_listen_stop(struct pts_grpc_listen *l);

#endif
