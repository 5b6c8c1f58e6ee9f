/* net/listen.c — see listen.h. */
#include "net/listen.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/overload.h"

enum pts_status pts_listen_open(const char *what, const char *flag, const char *address, int port,
                                bool reuse_port, int *out, int *bound_port, struct pts_error *err) {
  char host[256];
  snprintf(host, sizeof host, "%s", address ? address : "");
  size_t hl = strlen(host);
  if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') { /* "[::1]" */
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = '\0';
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  char port_s[16];
  snprintf(port_s, sizeof port_s, "%d", port);
  int gai = getaddrinfo(host[0] ? host : NULL, port_s, &hints, &res);
  if (gai != 0)
    return pts_error_set(err, PTS_INVALID_ARG, "invalid %s '%s': %s", flag, address ? address : "",
                         gai_strerror(gai));
  enum pts_status st = PTS_OK;
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  int one = 1;
  if (fd < 0) {
    st = pts_error_set(err, PTS_INTERNAL, "failed to create the %s socket: %s", what,
                       strerror(errno));
  } else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
             (reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
             bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
    st = pts_error_set(err, PTS_UNAVAILABLE, "failed to bind the %s endpoint %s:%d: %s", what,
                       address ? address : "", port, strerror(errno));
  }
  freeaddrinfo(res);
  if (st != PTS_OK) {
    if (fd >= 0) close(fd);
    return st;
  }
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  *bound_port = port;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
    if (ss.ss_family == AF_INET) *bound_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) *bound_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  }
  *out = fd;
  return PTS_OK;
}

/* ------------------------------------------------------------------ */
/* pausing                                                             */

struct pts_accept_pause {
  struct evconnlistener *lev;
  const char *name;
  struct event *resume_ev;
  unsigned next_ms;       /* the next pause */
  uint64_t last_fail_ns;  /* monotonic */
  struct pts_accept_pause *next;
};

/* The error callback gets the listener and the accept callback's argument
 * (evhttp's, for HTTP): listeners are found in this short list. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pts_accept_pause *registry;
/* Descriptors run out for the whole process at once: one line for every
 * listener (the HTTP loops each have one) per interval. */
static struct pts_log_limit log_limit;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_resume(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct pts_accept_pause *p = arg;
  evconnlistener_enable(p->lev);
}

static void on_accept_error(struct evconnlistener *lev, void *arg) {
  (void)arg;
  int e = errno; /* libevent's listener_read_cb leaves accept()'s errno */
  evconnlistener_disable(lev);
  pthread_mutex_lock(&registry_mu);
  struct pts_accept_pause *p = registry;
  while (p && p->lev != lev) p = p->next;
  pthread_mutex_unlock(&registry_mu);
  if (!p) return; /* not attached: stays disabled rather than spinning */
  uint64_t now = now_ns();
  if (now - p->last_fail_ns > (uint64_t)PTS_ACCEPT_LOG_INTERVAL_S * 1000000000u)
    p->next_ms = PTS_ACCEPT_PAUSE_MIN_MS;
  p->last_fail_ns = now;
  unsigned ms = p->next_ms;
  p->next_ms = ms * 2 > PTS_ACCEPT_PAUSE_MAX_MS ? PTS_ACCEPT_PAUSE_MAX_MS : ms * 2;
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
  evtimer_add(p->resume_ev, &tv);
  pts_overload_count(PTS_OVERLOAD_ACCEPT_PAUSES, 1);
  unsigned long dropped = 0;
  if (!pts_log_limit_allow(&log_limit, (uint64_t)PTS_ACCEPT_LOG_INTERVAL_S * 1000000000u,
                           &dropped))
    return;
  struct rlimit rl;
  unsigned long long nofile =
      getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (unsigned long long)rl.rlim_cur : 0;
  char more[80] = "";
  if (dropped)
    snprintf(more, sizeof more, " (%lu more pauses of listeners since the last message)", dropped);
  PTS_LOG_WARN("%s: accept() failed: %s (descriptor limit %llu); not accepting new connections "
               "for %u ms%s",
               p->name, strerror(e), nofile, ms, more);
}

struct pts_accept_pause *pts_accept_pause_attach(struct evconnlistener *lev, const char *name) {
  struct pts_accept_pause *p = pts_calloc(1, sizeof *p);
  if (!p) return NULL;
  p->lev = lev;
  p->name = name;
  p->next_ms = PTS_ACCEPT_PAUSE_MIN_MS;
  p->resume_ev = evtimer_new(evconnlistener_get_base(lev), on_resume, p);
  if (!p->resume_ev) {
    pts_free(p);
    return NULL;
  }
  pthread_mutex_lock(&registry_mu);
  p->next = registry;
  registry = p;
  pthread_mutex_unlock(&registry_mu);
  evconnlistener_set_error_cb(lev, on_accept_error);
  return p;
}

void pts_accept_pause_free(struct pts_accept_pause *p) {
  if (!p) return;
  pthread_mutex_lock(&registry_mu);
  for (struct pts_accept_pause **q = &registry; *q; q = &(*q)->next)
    if (*q == p) {
      *q = p->next;
      break;
    }
  pthread_mutex_unlock(&registry_mu);
  event_free(p->resume_ev);
  pts_free(p);
}
