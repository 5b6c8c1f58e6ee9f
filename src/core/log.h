/* core/log.h — Triton-style log lines.
 *
 * Lines look like tritonserver's so existing log tooling keeps working:
 *   I1121 10:15:35.123456 4242 model.c:65] Loaded PyTorch model from: ...
 * (severity letter, MMDD, time, thread id, file:line). With the ISO8601
 * format the prefix is "2026-11-21T10:15:35Z I 4242 model.c:65]".
 *
 * Threading: every function is thread-safe. Settings may change at any time
 * (the logging extension changes them live); a line is written with one
 * write so lines from different threads never interleave.
 */
#ifndef PTS_CORE_LOG_H
#define PTS_CORE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pts_log_level { PTS_LOG_ERROR, PTS_LOG_WARNING, PTS_LOG_INFO, PTS_LOG_VERBOSE };
enum pts_log_format { PTS_LOG_FORMAT_DEFAULT, PTS_LOG_FORMAT_ISO8601 };

struct pts_log_settings {
  bool info, warning, error;
  int verbose_level; /* 0 = off; VERBOSE lines with level <= this print */
  enum pts_log_format format;
};

/* Current settings (a copy). */
struct pts_log_settings pts_log_get(void);
/* Replaces the settings atomically. */
void pts_log_set(const struct pts_log_settings *s);
/* Sends output to `path` (appending) instead of stderr; NULL or "" = stderr.
 * Returns 0, or -1 with errno set if the file can not be opened. */
int pts_log_set_file(const char *path);

/* The path given to pts_log_set_file ("" for stderr) into out (always
 * NUL-terminated; truncated to out_size). For the logging extension's
 * log_file. */
void pts_log_get_file(char *out, size_t out_size);

/* Whether a line of this level (and verbosity, for VERBOSE) would print. */
bool pts_log_enabled(enum pts_log_level level, int verbose);

void pts_log_write(enum pts_log_level level, int verbose, const char *file,
                   int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#ifndef __cplusplus /* <stdatomic.h> is C11 only; the C++ bridge never rate-limits */
#include <stdatomic.h>

/* A rate limit for a line that can repeat without bound (accept() failing
 * while descriptors are exhausted, a library complaining in a loop): at most
 * one line per interval. Zero-initialise one per call site (static). */
struct pts_log_limit {
  _Atomic uint64_t next_ns;      /* monotonic time the next line may go out */
  atomic_ulong suppressed;       /* lines dropped since the last one written */
};
/* True when the caller may write its line now; *suppressed (may be NULL)
 * then gets how many were dropped since the last line written. */
bool pts_log_limit_allow(struct pts_log_limit *l, uint64_t interval_ns,
                         unsigned long *suppressed);
#endif

#define PTS_LOG_ERROR(...) pts_log_write(PTS_LOG_ERROR, 0, __FILE__, __LINE__, __VA_ARGS__)
#define PTS_LOG_WARN(...) pts_log_write(PTS_LOG_WARNING, 0, __FILE__, __LINE__, __VA_ARGS__)
#define PTS_LOG_INFO(...) pts_log_write(PTS_LOG_INFO, 0, __FILE__, __LINE__, __VA_ARGS__)
#define PTS_LOG_VERBOSE(v, ...) \
  pts_log_write(PTS_LOG_VERBOSE, (v), __FILE__, __LINE__, __VA_ARGS__)

#endif
