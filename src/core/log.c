/* core/log.c — see log.h. One mutex guards the settings and the sink; the
 * line itself is formatted outside the lock. Whether a line prints at all
 * is read from `gate`, an atomic copy of the levels, without the mutex:
 * the hot paths ask it for verbose lines on every request (gRPC's call
 * path, the scheduler's batch), and a global mutex taken twice per
 * request by every loop and queue thread was the one lock they all
 * shared. */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pts_log_settings settings = {true, true, true, 0, PTS_LOG_FORMAT_DEFAULT};
static FILE *sink; /* NULL = stderr; owned when non-NULL */
static char sink_path[4096]; /* what pts_log_set_file was given; "" = stderr */

/* `settings` as one word, written under `lock` whenever settings change:
 * bit 0 error, bit 1 warning, bit 2 info, the high 32 bits the verbose
 * level (never negative). Relaxed is enough: a thread that reads the
 * previous levels for a moment after a change prints or skips one line as
 * it would have just before. */
#define GATE_ERROR 1u
#define GATE_WARNING 2u
#define GATE_INFO 4u
static _Atomic uint64_t gate = GATE_ERROR | GATE_WARNING | GATE_INFO;

static uint64_t gate_of(const struct pts_log_settings *s) {
  uint64_t v = s->verbose_level > 0 ? (uint64_t)s->verbose_level : 0;
  return (s->error ? GATE_ERROR : 0) | (s->warning ? GATE_WARNING : 0) |
         (s->info ? GATE_INFO : 0) | v << 32;
}

struct pts_log_settings pts_log_get(void) {
  pthread_mutex_lock(&lock);
  struct pts_log_settings s = settings;
  pthread_mutex_unlock(&lock);
  return s;
}

void pts_log_set(const struct pts_log_settings *s) {
  pthread_mutex_lock(&lock);
  settings = *s;
  atomic_store_explicit(&gate, gate_of(s), memory_order_relaxed);
  pthread_mutex_unlock(&lock);
}

int pts_log_set_file(const char *path) {
  FILE *f = NULL;
  if (path && *path) {
    f = fopen(path, "a");
    if (!f) return -1;
    setvbuf(f, NULL, _IOLBF, 0);
  }
  pthread_mutex_lock(&lock);
  FILE *old = sink;
  sink = f;
  snprintf(sink_path, sizeof sink_path, "%s", f ? path : "");
  pthread_mutex_unlock(&lock);
  if (old) fclose(old);
  return 0;
}

void pts_log_get_file(char *out, size_t out_size) {
  if (!out || out_size == 0) return;
  pthread_mutex_lock(&lock);
  snprintf(out, out_size, "%s", sink_path);
  pthread_mutex_unlock(&lock);
}

bool pts_log_enabled(enum pts_log_level level, int verbose) {
  uint64_t g = atomic_load_explicit(&gate, memory_order_relaxed);
  switch (level) {
    case PTS_LOG_ERROR: return g & GATE_ERROR;
    case PTS_LOG_WARNING: return g & GATE_WARNING;
    case PTS_LOG_INFO: return g & GATE_INFO;
    case PTS_LOG_VERBOSE: {
      int64_t v = (int64_t)(g >> 32);
      return v > 0 && v >= verbose;
    }
  }
  return false;
}

void pts_log_write(enum pts_log_level level, int verbose, const char *file,
                   int line, const char *fmt, ...) {
  if (!pts_log_enabled(level, verbose)) return;
  static const char letters[] = {'E', 'W', 'I', 'I'};
  struct pts_log_settings s = pts_log_get();
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  long tid = (long)syscall(SYS_gettid);

  char buf[4096];
  int n;
  if (s.format == PTS_LOG_FORMAT_ISO8601)
    n = snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ %c %ld %s:%d] ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec, letters[level], tid, base, line);
  else
    n = snprintf(buf, sizeof buf, "%c%02d%02d %02d:%02d:%02d.%06ld %ld %s:%d] ",
                 letters[level], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec, (long)tv.tv_usec, tid, base, line);
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';

  pthread_mutex_lock(&lock);
  FILE *out = sink ? sink : stderr;
  fwrite(buf, 1, len, out);
  fflush(out);
  pthread_mutex_unlock(&lock);
}

bool pts_log_limit_allow(struct pts_log_limit *l, uint64_t interval_ns,
                         unsigned long *suppressed) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  uint64_t next = atomic_load(&l->next_ns);
  /* One thread wins the slot; the others count themselves as dropped. */
  if (now < next || !atomic_compare_exchange_strong(&l->next_ns, &next, now + interval_ns)) {
    atomic_fetch_add(&l->suppressed, 1);
    return false;
  }
  unsigned long n = atomic_exchange(&l->suppressed, 0);
  if (suppressed) *suppressed = n;
  return true;
}
