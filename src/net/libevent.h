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

#endif
