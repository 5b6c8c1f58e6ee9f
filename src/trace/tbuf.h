/* trace/tbuf.h — a growable text buffer for the trace writers (internal to
 * src/trace/).
 *
 * The trace area writes JSON, Markdown and CSV off the request path; it has
 * its own small builder so that it does not depend on a frontend's writer.
 * An allocation failure is remembered (`failed`) instead of being returned
 * by every call: write everything, check once.
 *
 * Threading: a buffer belongs to one thread.
 */
#ifndef PTS_TRACE_TBUF_H
#define PTS_TRACE_TBUF_H

#include <stdbool.h>
#include <stddef.h>

struct tbuf {
  char *data; /* owned (pts_free); NUL-terminated while !failed */
  size_t len, cap;
  bool failed;
};

void tbuf_init(struct tbuf *b);
void tbuf_free(struct tbuf *b);
void tbuf_add(struct tbuf *b, const char *s, size_t n);
void tbuf_cstr(struct tbuf *b, const char *s);
void tbuf_printf(struct tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A quoted JSON string of the n bytes at s, whatever they are: quotes,
 * backslashes and control characters (NUL too) escaped, a byte that does
 * not start well-formed UTF-8 given as U+FFFD (core/jsonstr.h), so the
 * file stays UTF-8 that a strict JSON reader takes. */
void tbuf_json_strn(struct tbuf *b, const char *s, size_t n);
/* The same for a NUL-terminated string (NULL: ""). */
void tbuf_json_str(struct tbuf *b, const char *s);
/* A CSV field: quoted when it holds a comma, quote or newline. */
void tbuf_csv_field(struct tbuf *b, const char *s);

#endif
