/* net/libevent.h — libevent set up once for the whole process: event bases
 * created lock-aware (instance threads wake loops with event_active), and
 * libevent's own log lines through ptserve's logger (core/log.h), so that
 * nothing in the process writes lines in another format (libevent's
 * default is "[warn] ..." on stderr, one per call, unbounded).
 *
 * Threading: pts_libevent_init may be called from any thread, any number of
 * times (the first call does the work); the callbacks run on whichever
 * thread libevent logs from.
 */
#ifndef PTS_NET_LIBEVENT_H
#define PTS_NET_LIBEVENT_H

/* evthread_use_pthreads; event_set_log_callback (rate limited, in ptserve's
 * format); event_set_fatal_callback (one error line, then abort). Call
 * before creating an event base. */
void pts_libevent_init(void);

struct event_base;

/* A new event base for a connection-serving loop (HTTP), with epoll's
 * changelist on: evhttp turns a connection's read and write interest off
 * and on around every request, and the changelist folds what one loop turn
 * changes into one epoll_ctl instead of one per change (4 to 2 per request
 * over HTTP). libevent leaves it off by default because it misreports
 * events for descriptors made with dup() and closed while registered; the
 * HTTP loops register accepted sockets (never duplicated) and their own
 * dup of the listening socket, which lives as long as the base. NULL on
 * failure. Call pts_libevent_init first. */
struct event_base *pts_libevent_loop_base(void);

#endif
