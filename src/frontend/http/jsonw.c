/* frontend/http/jsonw.c — see jsonw.h. */
#include "frontend/http/jsonw.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fmt.h"
#include "core/jsonstr.h"

void pts_jsonw_init(struct pts_jsonw *w) { memset(w, 0, sizeof *w); }

void pts_jsonw_free(struct pts_jsonw *w) {
  if (!w) return;
  pts_free(w->data);
  memset(w, 0, sizeof *w);
}

char *pts_jsonw_take(struct pts_jsonw *w, size_t *len) {
  if (w->failed || !w->data) {
    /* An empty document is still a document: callers always get a string. */
    if (!w->failed && !w->data) {
      char *empty = pts_strdup("");
      if (empty && len) *len = 0;
      return empty;
    }
    pts_jsonw_free(w);
    return NULL;
  }
  char *out = w->data;
  if (len) *len = w->len;
  memset(w, 0, sizeof *w);
  return out;
}

static bool reserve(struct pts_jsonw *w, size_t more) {
  if (w->failed) return false;
  if (more > SIZE_MAX - w->len - 1) {
    w->failed = true;
    w->cap = 0;
    return false;
  }
  size_t need = w->len + more + 1;
  if (need <= w->cap) return true;
  size_t cap = w->cap ? w->cap : 256;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  char *p = pts_realloc(w->data, cap);
  if (!p) {
    w->failed = true;
    w->cap = 0; /* pts_jsonw_raw's inline check fails from now on */
    return false;
  }
  w->data = p;
  w->cap = cap;
  return true;
}

void pts_jsonw_raw_grow(struct pts_jsonw *w, const char *s, size_t n) {
  if (!reserve(w, n)) return;
  memcpy(w->data + w->len, s, n);
  w->len += n;
  w->data[w->len] = '\0';
}

/* Writes `"s"` followed by `tail` (tail_n bytes) when s needs no escaping;
 * false (nothing written) when it does. Names, datatypes and keys nearly
 * always need none, so one scan decides that they go out with one memcpy. */
static bool put_plain(struct pts_jsonw *w, const char *s, size_t n, const char *tail,
                      size_t tail_n) {
  if (pts_json_plain_prefix((const unsigned char *)s, n) != n) return false;
  if (!reserve(w, n + 2 + tail_n)) return true; /* failed is recorded */
  char *d = w->data + w->len;
  d[0] = '"';
  memcpy(d + 1, s, n);
  d[n + 1] = '"';
  memcpy(d + n + 2, tail, tail_n);
  w->len += n + 2 + tail_n;
  w->data[w->len] = '\0';
  return true;
}

bool pts_jsonw_is_utf8(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    size_t k = pts_utf8_seq(p + i, n - i);
    if (k == 0) return false;
    i += k;
  }
  return true;
}

static void put_piece(void *w, const char *p, size_t n) { pts_jsonw_raw(w, p, n); }

static void put_escaped(struct pts_jsonw *w, const char *s, size_t n) {
  if (put_plain(w, s, n, "", 0)) return;
  pts_jsonw_raw(w, "\"", 1);
  pts_json_escape_text(s, n, put_piece, w);
  pts_jsonw_raw(w, "\"", 1);
}

void pts_jsonw_str(struct pts_jsonw *w, const char *s, size_t n) { put_escaped(w, s, n); }

bool pts_jsonw_utf8(struct pts_jsonw *w, const char *s, size_t n) {
  if (!pts_jsonw_is_utf8(s, n)) return false;
  put_escaped(w, s, n);
  return true;
}

void pts_jsonw_key(struct pts_jsonw *w, const char *key) {
  size_t n = strlen(key);
  if (put_plain(w, key, n, ":", 1)) return;
  put_escaped(w, key, n);
  pts_jsonw_raw(w, ":", 1);
}

void pts_jsonw_int(struct pts_jsonw *w, int64_t v) {
  char tmp[PTS_FMT_INT_MAX];
  pts_jsonw_raw(w, tmp, pts_fmt_i64(tmp, v));
}

void pts_jsonw_uint(struct pts_jsonw *w, uint64_t v) {
  char tmp[PTS_FMT_INT_MAX];
  pts_jsonw_raw(w, tmp, pts_fmt_u64(tmp, v));
}

void pts_jsonw_bool(struct pts_jsonw *w, bool v) {
  if (v)
    pts_jsonw_raw(w, "true", 4);
  else
    pts_jsonw_raw(w, "false", 5);
}

bool pts_jsonw_double(struct pts_jsonw *w, double v) {
  if (!isfinite(v)) return false;
  char tmp[40];
  int n = 0;
  /* The fewest significant digits that read back as the same double. */
  for (int prec = 15; prec <= 17; prec++) {
    n = snprintf(tmp, sizeof tmp - 2, "%.*g", prec, v);
    if (strtod(tmp, NULL) == v) break;
  }
  if (!strpbrk(tmp, ".eE")) {
    tmp[n++] = '.';
    tmp[n++] = '0';
    tmp[n] = '\0';
  }
  pts_jsonw_raw(w, tmp, (size_t)n);
  return true;
}
