/* net/listen.h — listening sockets, and accept() that survives running out
 * of descriptors. Shared by the HTTP, gRPC and metrics listeners.
 *
 * When accept() fails with an error libevent does not retry (EMFILE,
 * ENFILE, ENOBUFS, ENOMEM, ...), libevent's listener logs "Error from
 * accept() call" and tries again at the next readiness of the socket —
 * at once, since the connection is still waiting: a busy loop writing a
 * log line per try (docs/reliability.md). gRPC 1.51's own listener stops
 * accepting for good instead. A paused listener (pts_accept_pause) is
 * disabled for a backoff and enabled again; connections wait in the
 * kernel's backlog meanwhile, and one log line says so per interval.
 *
 * Threading: pts_listen_open is thread-safe. A pts_accept_pause is
 * attached and freed on the owner's thread while its loop does not run;
 * its callbacks run on the loop's thread.
 */
#ifndef PTS_NET_LISTEN_H
#define PTS_NET_LISTEN_H

#include <stdbool.h>

#include "core/status.h"

struct evconnlistener;

/* A listening TCP socket (close-on-exec, SO_REUSEADDR, SO_REUSEPORT when
 * reuse_port, backlog 1024) on address:port; address NULL or "" = every
 * interface, an IPv6 literal may be in brackets. *bound_port gets the port
 * bound (useful with port 0). `what` ("HTTP") and `flag` ("--http-address")
 * name the endpoint in errors; borrowed. Caller closes *fd. */
enum pts_status pts_listen_open(const char *what, const char *flag, const char *address, int port,
                                bool reuse_port, int *fd, int *bound_port, struct pts_error *err);

/* Backoff of a paused listener: from PTS_ACCEPT_PAUSE_MIN_MS, doubling up
 * to PTS_ACCEPT_PAUSE_MAX_MS while accept() keeps failing; back to the
 * minimum when the last failure is older than PTS_ACCEPT_LOG_INTERVAL_S.
 * At most one log line per PTS_ACCEPT_LOG_INTERVAL_S for all listeners. */
#define PTS_ACCEPT_PAUSE_MIN_MS 10u
#define PTS_ACCEPT_PAUSE_MAX_MS 1000u
#define PTS_ACCEPT_LOG_INTERVAL_S 10

struct pts_accept_pause;
/* From now on, an accept() error on `lev` pauses it (and counts in
 * PTS_OVERLOAD_ACCEPT_PAUSES, core/overload.h). `name` names the listener
 * in the log ("HTTP"); borrowed, must outlive the pause. NULL on allocation
 * failure. Free with pts_accept_pause_free before the listener (and before
 * the evhttp that owns it). */
struct pts_accept_pause *pts_accept_pause_attach(struct evconnlistener *lev, const char *name);
void pts_accept_pause_free(struct pts_accept_pause *p); /* NULL-safe */

#endif
