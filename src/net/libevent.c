/* net/libevent.c — see libevent.h. */
#include "net/libevent.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"

/* libevent logs from loops that may be in a tight spot (a resource gone):
 * at most one of its lines per this interval, with the count dropped. */
#define EVLOG_INTERVAL_NS 1000000000u

static void on_event_log(int severity, const char *msg) {
  /* Debug lines only come when libevent's debug logging is switched on. */
  if (severity == EVENT_LOG_DEBUG) {
    PTS_LOG_VERBOSE(2, "libevent: %s", msg);
    return;
  }
  static struct pts_log_limit limit;
  unsigned long dropped = 0;
  if (!pts_log_limit_allow(&limit, EVLOG_INTERVAL_NS, &dropped)) return;
  char tail[80] = "";
  if (dropped) snprintf(tail, sizeof tail, " (and %lu more libevent messages dropped)", dropped);
  if (severity == EVENT_LOG_ERR)
    PTS_LOG_ERROR("libevent: %s%s", msg, tail);
  else if (severity == EVENT_LOG_WARN)
    PTS_LOG_WARN("libevent: %s%s", msg, tail);
  else
    PTS_LOG_INFO("libevent: %s%s", msg, tail);
}

static void on_event_fatal(int err) {
  PTS_LOG_ERROR("libevent: fatal internal error %d; aborting", err);
  abort();
}

static void init_once(void) {
  evthread_use_pthreads();
  event_set_log_callback(on_event_log);
  event_set_fatal_callback(on_event_fatal);
}

struct event_base *pts_libevent_loop_base(void) {
  struct event_config *cfg = event_config_new();
  if (!cfg) return NULL;
  event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
  struct event_base *base = event_base_new_with_config(cfg);
  event_config_free(cfg);
  return base;
}

void pts_libevent_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_once);
}
