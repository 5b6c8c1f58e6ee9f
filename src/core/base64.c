/* core/base64.c — see base64.h. */
#include "core/base64.h"

#include <stdbool.h>

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

/* Line breaks are skipped wherever they are: MIME's base64 (RFC 2045)
 * breaks its lines, and so does libb64, with which NVIDIA's C++ clients
 * encode (every 72 characters, and one at the end: perf_analyzer's CUDA
 * raw handles, a C++ client's file overrides). Triton's libb64 decoder
 * skips them; other whitespace stays an error. */
static bool line_break(char c) { return c == '\n' || c == '\r'; }

enum pts_status pts_base64_decode(const char *text, size_t len, const char *what, uint8_t **out,
                                  size_t *out_len, struct pts_error *err) {
  *out = NULL;
  *out_len = 0;
  size_t end = len; /* past the last character that is not a line break */
  while (end > 0 && line_break(text[end - 1])) end--;
  /* Padding only at the very end, at most two, and only to a multiple of 4. */
  size_t data = end, pads = 0;
  while (data > 0 && text[data - 1] == '=' && pads < 2) data--, pads++;
  size_t chars = 0; /* the data's characters, line breaks left out */
  for (size_t i = 0; i < data; i++) {
    if (line_break(text[i])) continue;
    if (sextet((unsigned char)text[i]) < 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "%s is not valid base64: character %zu (0x%02x) is not in the "
                           "alphabet",
                           what, i, (unsigned char)text[i]);
    chars++;
  }
  if (pads && (chars + pads) % 4 != 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s is not valid base64: padded to %zu characters, not a multiple of 4",
                         what, chars + pads);
  if (chars % 4 == 1)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s is not valid base64: %zu characters can not encode whole bytes", what,
                         chars);
  size_t n = chars / 4 * 3 + (chars % 4 ? chars % 4 - 1 : 0);
  uint8_t *buf = pts_malloc(n + 1);
  if (!buf) return pts_error_set(err, PTS_NOMEM, "out of memory decoding %s", what);
  uint32_t acc = 0;
  size_t k = 0, j = 0; /* j: the data's characters so far */
  for (size_t i = 0; i < data; i++) {
    if (line_break(text[i])) continue;
    acc = acc << 6 | (uint32_t)sextet((unsigned char)text[i]);
    if (j++ % 4 == 3) {
      buf[k++] = (uint8_t)(acc >> 16);
      buf[k++] = (uint8_t)(acc >> 8);
      buf[k++] = (uint8_t)acc;
      acc = 0;
    }
  }
  size_t tail = chars % 4;
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
