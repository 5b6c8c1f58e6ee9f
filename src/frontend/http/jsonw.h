/* frontend/http/jsonw.h — a small append-only JSON text writer.
 *
 * Every JSON document the HTTP frontend sends is written with this, not with
 * jansson: responses can carry millions of numbers, UINT64 values above
 * INT64_MAX (which jansson can not hold), and doubles that must read back
 * exactly (as Triton's writer prints them). Reading JSON
 * stays with jansson.
 *
 * The writer records an allocation failure instead of returning it from
 * every call: write everything, then check `failed` once (pts_jsonw_take).
 * Separators are the caller's job (pts_jsonw_raw(w, ",", 1)).
 *
 * Threading: a writer belongs to one thread; the functions are reentrant.
 */
#ifndef PTS_FRONTEND_HTTP_JSONW_H
#define PTS_FRONTEND_HTTP_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct pts_jsonw {
  char *data; /* owned (pts_free); NUL-terminated while !failed */
  size_t len;
  size_t cap;  /* bytes at data; 0 once failed, so every append takes the slow path */
  bool failed; /* an allocation failed; the text is incomplete */
};

void pts_jsonw_init(struct pts_jsonw *w);
/* Frees the text (if not taken). NULL-safe. */
void pts_jsonw_free(struct pts_jsonw *w);
/* Hands the text to the caller (pts_free), NUL-terminated, length in *len;
 * NULL when an allocation failed. The writer is empty afterwards. */
char *pts_jsonw_take(struct pts_jsonw *w, size_t *len);

/* The growing half of pts_jsonw_raw; call pts_jsonw_raw. */
void pts_jsonw_raw_grow(struct pts_jsonw *w, const char *s, size_t n);

/* Appends bytes as they are (punctuation, pre-rendered JSON). Inline: an
 * inference response is some thirty short appends, and a call plus a
 * capacity check each cost more than the bytes (#13). */
static inline void pts_jsonw_raw(struct pts_jsonw *w, const char *s, size_t n) {
  if (w->len + n < w->cap) { /* cap is 0 before the first byte and once failed */
    memcpy(w->data + w->len, s, n);
    w->len += n;
    w->data[w->len] = '\0';
    return;
  }
  pts_jsonw_raw_grow(w, s, n);
}
/* Appends a NUL-terminated string as they are (inline: strlen of a literal
 * folds to a constant). */
static inline void pts_jsonw_cstr(struct pts_jsonw *w, const char *s) {
  pts_jsonw_raw(w, s, strlen(s));
}
/* Appends `"key":`. The key is escaped like any string. */
void pts_jsonw_key(struct pts_jsonw *w, const char *key);

/* Appends a quoted, escaped string. Bytes that are not valid UTF-8 are
 * written as U+FFFD, so text quoted from a URL or a file never breaks the
 * document (use pts_jsonw_utf8 where that would lose data). */
void pts_jsonw_str(struct pts_jsonw *w, const char *s, size_t n);
/* Like pts_jsonw_str, but refuses (returns false, writes nothing) when `s`
 * is not valid UTF-8: BYTES tensor elements must round-trip exactly. */
bool pts_jsonw_utf8(struct pts_jsonw *w, const char *s, size_t n);

void pts_jsonw_int(struct pts_jsonw *w, int64_t v);
void pts_jsonw_uint(struct pts_jsonw *w, uint64_t v);
void pts_jsonw_bool(struct pts_jsonw *w, bool v);
/* Text that reads back as exactly `v`: 15 significant digits, or 16 or 17
 * when fewer would not round-trip (what repr() prints for all but rare
 * values), always with a '.' or an exponent so clients see a float. Returns false (writes nothing)
 * for NaN and infinities, which JSON can not represent. */
bool pts_jsonw_double(struct pts_jsonw *w, double v);

/* Whether s[0..n) is well-formed UTF-8 (no overlongs, no surrogates). */
bool pts_jsonw_is_utf8(const char *s, size_t n);

#endif
