/* trace/tbuf.c — see tbuf.h. */
#include "trace/tbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/jsonstr.h"

void tbuf_init(struct tbuf *b) { memset(b, 0, sizeof *b); }

void tbuf_free(struct tbuf *b) {
  pts_free(b->data);
  memset(b, 0, sizeof *b);
}

static bool reserve(struct tbuf *b, size_t more) {
  if (b->failed) return false;
  if (b->len + more + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more + 1) {
    if (cap > SIZE_MAX / 2) {
      b->failed = true;
      return false;
    }
    cap *= 2;
  }
  char *d = pts_realloc(b->data, cap);
  if (!d) {
    b->failed = true;
    return false;
  }
  b->data = d;
  b->cap = cap;
  return true;
}

void tbuf_add(struct tbuf *b, const char *s, size_t n) {
  if (!reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void tbuf_cstr(struct tbuf *b, const char *s) { tbuf_add(b, s, strlen(s)); }

void tbuf_printf(struct tbuf *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    tbuf_add(b, small, (size_t)n);
    return;
  }
  if (!reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static void put_piece(void *b, const char *p, size_t n) { tbuf_add(b, p, n); }

void tbuf_json_strn(struct tbuf *b, const char *s, size_t n) {
  tbuf_add(b, "\"", 1);
  pts_json_escape_text(s, n, put_piece, b);
  tbuf_add(b, "\"", 1);
}

void tbuf_json_str(struct tbuf *b, const char *s) {
  if (!s) s = "";
  tbuf_json_strn(b, s, strlen(s));
}

void tbuf_csv_field(struct tbuf *b, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    tbuf_cstr(b, s);
    return;
  }
  tbuf_add(b, "\"", 1);
  for (const char *p = s; *p; p++) {
    if (*p == '"') tbuf_add(b, "\"", 1);
    tbuf_add(b, p, 1);
  }
  tbuf_add(b, "\"", 1);
}
