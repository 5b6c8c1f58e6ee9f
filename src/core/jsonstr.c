/* core/jsonstr.c — see jsonstr.h. */
#include "core/jsonstr.h"

/* Ranges in designators are a GNU C extension, which gcc and clang share. */
const bool pts_json_plain_byte[256] = {
    [0x20 ... 0x21] = true, /* '"' is 0x22 */
    [0x23 ... 0x5b] = true, /* '\\' is 0x5c */
    [0x5d ... 0x7f] = true,
};

size_t pts_utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0; /* below: overlong */
    if (c == 0xED) hi = 0x9F; /* above: surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90; /* below: overlong */
    if (c == 0xF4) hi = 0x8F; /* above: past U+10FFFF */
  } else {
    return 0;
  }
  if (n < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return len;
}

/* The escape of c, a quote, a backslash or a byte below 0x20, into out;
 * returns its length (2 or 6). */
static size_t escape(unsigned char c, char out[6]) {
  static const char hex[] = "0123456789abcdef";
  char named;
  switch (c) {
    case '"':
    case '\\':
      named = (char)c;
      break;
    case '\n':
      named = 'n';
      break;
    case '\r':
      named = 'r';
      break;
    case '\t':
      named = 't';
      break;
    case '\b':
      named = 'b';
      break;
    case '\f':
      named = 'f';
      break;
    default:
      named = 0;
  }
  out[0] = '\\';
  if (named) {
    out[1] = named;
    return 2;
  }
  out[1] = 'u';
  out[2] = '0';
  out[3] = '0';
  out[4] = hex[c >> 4];
  out[5] = hex[c & 15];
  return 6;
}

void pts_json_escape_text(const char *s, size_t n, pts_json_put_fn put, void *ctx) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    /* The longest run that needs nothing, in one piece. */
    size_t run = i + pts_json_plain_prefix(p + i, n - i);
    if (run > i) {
      put(ctx, s + i, run - i);
      i = run;
      continue;
    }
    if (p[i] >= 0x80) {
      size_t k = pts_utf8_seq(p + i, n - i);
      if (k == 0) {
        put(ctx, "\xEF\xBF\xBD", 3); /* U+FFFD */
        i++;
      } else {
        put(ctx, s + i, k);
        i += k;
      }
      continue;
    }
    char esc[6];
    put(ctx, esc, escape(p[i], esc));
    i++;
  }
}
