/* core/base64.c — see base64.h. */
#include "core/base64.h"

#include "core/alloc.h"

/* 0..63, or -1 for a character of neither alphabet. */
static int sextet(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

enum pts_status pts_base64_decode(const char *text, size_t len, const char *what, uint8_t **out,
                                  size_t *out_len, struct pts_error *err) {
  *out = NULL;
  *out_len = 0;
  /* Padding only at the very end, at most two, and only to a multiple of 4. */
  size_t data = len;
  while (data > 0 && text[data - 1] == '=' && len - data < 2) data--;
  for (size_t i = 0; i < data; i++)
    if (sextet((unsigned char)text[i]) < 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "%s is not valid base64: character %zu (0x%02x) is not in the "
                           "alphabet",
                           what, i, (unsigned char)text[i]);
  if (data < len && len % 4 != 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s is not valid base64: padded to %zu characters, not a multiple of 4",
                         what, len);
  if (data % 4 == 1)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s is not valid base64: %zu characters can not encode whole bytes", what,
                         data);
  size_t n = data / 4 * 3 + (data % 4 ? data % 4 - 1 : 0);
  uint8_t *buf = pts_malloc(n + 1);
  if (!buf) return pts_error_set(err, PTS_NOMEM, "out of memory decoding %s", what);
  uint32_t acc = 0;
  size_t k = 0;
  for (size_t i = 0; i < data; i++) {
    int v = sextet((unsigned char)text[i]);
    acc = acc << 6 | (uint32_t)v;
    if (i % 4 == 3) {
      buf[k++] = (uint8_t)(acc >> 16);
      buf[k++] = (uint8_t)(acc >> 8);
      buf[k++] = (uint8_t)acc;
      acc = 0;
    }
  }
  size_t tail = data % 4;
  /* The bits below the last whole byte must be zero (RFC 4648 §3.5):
   * otherwise two texts would decode to the same bytes. */
  if ((tail == 2 && (acc & 0xf)) || (tail == 3 && (acc & 0x3))) {
    pts_free(buf);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s is not valid base64: the last character has bits set beyond the "
                         "data",
                         what);
  }
  if (tail == 2) {
    buf[k++] = (uint8_t)(acc >> 4);
  } else if (tail == 3) {
    buf[k++] = (uint8_t)(acc >> 10);
    buf[k++] = (uint8_t)(acc >> 2);
  }
  buf[k] = 0;
  *out = buf;
  *out_len = k;
  return PTS_OK;
}

char *pts_base64_encode(const void *data, size_t len, size_t *out_len) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const uint8_t *b = data;
  char *out = pts_malloc((len + 2) / 3 * 4 + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < len; i += 3) {
    uint32_t v = (uint32_t)b[i] << 16;
    if (i + 1 < len) v |= (uint32_t)b[i + 1] << 8;
    if (i + 2 < len) v |= b[i + 2];
    out[o++] = alphabet[(v >> 18) & 63];
    out[o++] = alphabet[(v >> 12) & 63];
    out[o++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
    out[o++] = i + 2 < len ? alphabet[v & 63] : '=';
  }
  out[o] = 0;
  if (out_len) *out_len = o;
  return out;
}
