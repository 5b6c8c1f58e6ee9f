/* trace/tbuf.c — see tbuf.h. */
#include "trace/tbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"

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

/* Length of the UTF-8 sequence at s (0 when it is not one). */
static size_t utf8_len(const unsigned char *s) {
  if (s[0] < 0x80) return 1;
  size_t n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || (n == 2 && s[0] < 0xC2)) return 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return n;
}

void tbuf_json_str(struct tbuf *b, const char *s) {
  tbuf_add(b, "\"", 1);
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  while (*p) {
    char esc[8];
    if (*p == '"' || *p == '\\') {
      esc[0] = '\\';
      esc[1] = (char)*p;
      tbuf_add(b, esc, 2);
      p++;
      continue;
    }
    size_t n = *p < 0x20 ? 0 : utf8_len(p);
    if (n == 0) {
      snprintf(esc, sizeof esc, "\\u%04x", *p);
      tbuf_add(b, esc, 6);
      p++;
      continue;
    }
    tbuf_add(b, (const char *)p, n);
    p += n;
  }
  tbuf_add(b, "\"", 1);
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
