/* core/fmt.h — decimal integers and HTTP dates without printf.
 *
 * Every HTTP inference reply writes a few integers (shapes, a header
 * length, Content-Length) and a Date header. Through snprintf each costs a
 * format-string walk and a FILE set-up: together about 6% of the
 * instructions of a small request (docs/benchmarks.md, issue #13). These
 * write the same characters directly.
 *
 * Threading: pure functions, except pts_fmt_http_date's per-thread cache;
 * all thread-safe.
 */
#ifndef PTS_CORE_FMT_H
#define PTS_CORE_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Room for any int64_t or uint64_t in decimal, sign included, and a NUL. */
#define PTS_FMT_INT_MAX 21
/* Room for an RFC 9110 IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") and a NUL. */
#define PTS_FMT_DATE_MAX 30

/* Writes v in decimal at out (PTS_FMT_INT_MAX bytes of room), NUL-terminated,
 * as "%" PRIu64 / PRId64 would; returns the length without the NUL. */
size_t pts_fmt_u64(char *out, uint64_t v);
size_t pts_fmt_i64(char *out, int64_t v);

/* The IMF-fixdate of `t` (UTC), as HTTP's Date header wants it, into out
 * (PTS_FMT_DATE_MAX bytes); returns its length (29). */
size_t pts_fmt_http_date(char *out, time_t t);

/* The Date header's value for now, formatted once per second per thread:
 * a pointer to this thread's copy, valid until the thread's next call. */
const char *pts_fmt_http_date_now(void);

#endif
