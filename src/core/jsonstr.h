/* core/jsonstr.h — the text of a JSON string, for everything that writes
 * or scans one: the HTTP frontend's reply writer (frontend/http/jsonw.c)
 * and one-pass request decoder (v2_fast.c), and the trace files
 * (trace/tbuf.c).
 *
 * RFC 8259: inside a string the quote, the backslash and the bytes below
 * 0x20 must be escaped; anything else may stand as it is, in UTF-8. The
 * writers give every byte that does not start a well-formed UTF-8 sequence
 * as U+FFFD, so that whatever bytes they are handed (a BYTES tensor, a
 * client's name) their output is UTF-8 that any strict JSON reader takes.
 *
 * Threading: a constant table and pure functions.
 */
#ifndef PTS_CORE_JSONSTR_H
#define PTS_CORE_JSONSTR_H

#include <stdbool.h>
#include <stddef.h>

/* The bytes a JSON string holds as they are, with no escape and no UTF-8
 * sequence to check: 0x20 to 0x7f but the quote and the backslash. Hot
 * paths go through it byte by byte: one load per byte decides. */
extern const bool pts_json_plain_byte[256];

/* How many of the n bytes at p, from the first, are plain bytes. Inline:
 * the reply writer asks it for every key and name it writes. */
static inline size_t pts_json_plain_prefix(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n && pts_json_plain_byte[p[i]]) i++;
  return i;
}

/* Length of the well-formed UTF-8 sequence at s, of which n bytes may be
 * read (1..4), or 0 when the bytes there are not one (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF). n >= 1. */
size_t pts_utf8_seq(const unsigned char *s, size_t n);

/* Where pts_json_escape_text sends its pieces: the writer's append. */
typedef void (*pts_json_put_fn)(void *ctx, const char *p, size_t n);

/* The text of a JSON string holding the n bytes at s, without the quotes,
 * sent to put in pieces: runs of plain bytes and well-formed UTF-8 as they
 * are, a quote, a backslash or a byte below 0x20 escaped (\n, \t and the
 * like by name, others as \u00XX), any other byte as U+FFFD. */
void pts_json_escape_text(const char *s, size_t n, pts_json_put_fn put, void *ctx);

#endif
