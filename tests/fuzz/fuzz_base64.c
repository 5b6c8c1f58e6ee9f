/* tests/fuzz/fuzz_base64.c — the base64 decoder on arbitrary text.
 *
 * Properties: a text the decoder accepts is, with its line breaks left out,
 * its URL-safe characters written as standard ones and '=' padding added,
 * exactly what the encoder makes of the bytes decoded (one text per byte
 * string, so nothing malformed slips through as a shorter value); a text it
 * refuses gets a message that names it; and every byte string encodes to
 * a text that decodes back to it, with or without libb64's line breaks. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/base64.h"
#include "fuzz_common.h"

/* The text as the encoder would write it: line breaks out, "-_" as "+/",
 * padded to a multiple of 4. Caller frees. */
static char *canonical(const char *text, size_t len, size_t *out_len) {
  char *c = pts_malloc(len + 4);
  if (!c) return NULL;
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = text[i];
    if (ch == '\n' || ch == '\r') continue;
    c[n++] = ch == '-' ? '+' : ch == '_' ? '/' : ch;
  }
  while (n % 4) c[n++] = '=';
  *out_len = n;
  return c;
}

/* Encodes `data`, breaks its lines as libb64 does (every 72 characters and
 * at the end), and decodes both forms: each must give `data` back. */
static void round_trip(const uint8_t *data, size_t size) {
  size_t n;
  char *text = pts_base64_encode(data, size, &n);
  if (!text) return;
  char *broken = pts_malloc(n + n / 72 + 2);
  if (!broken) {
    pts_free(text);
    return;
  }
  size_t b = 0;
  for (size_t i = 0; i < n; i++) {
    broken[b++] = text[i];
    if (i % 72 == 71) broken[b++] = '\n';
  }
  broken[b++] = '\n';
  const char *forms[] = {text, broken};
  size_t lens[] = {n, b};
  for (int f = 0; f < 2; f++) {
    uint8_t *out = NULL;
    size_t out_len = 0;
    struct pts_error err;
    enum pts_status st = pts_base64_decode(forms[f], lens[f], "fuzz", &out, &out_len, &err);
    if (st == PTS_NOMEM) continue;
    fuzz_check(st == PTS_OK, "the encoder's text was refused");
    fuzz_check(out_len == size && memcmp(out, data, size) == 0, "the round trip changed the bytes");
    pts_free(out);
  }
  pts_free(broken);
  pts_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  uint8_t *out = NULL;
  size_t out_len = 0;
  struct pts_error err;
  pts_error_clear(&err);
  enum pts_status st = pts_base64_decode(text, size, "value 'x'", &out, &out_len, &err);
  if (st == PTS_OK) {
    size_t want_len, got_len;
    char *want = canonical(text, size, &want_len);
    char *got = pts_base64_encode(out, out_len, &got_len);
    if (want && got)
      fuzz_check(got_len == want_len && memcmp(got, want, want_len) == 0,
                 "an accepted text is not the encoding of what it decoded to");
    pts_free(want);
    pts_free(got);
    pts_free(out);
  } else if (st == PTS_INVALID_ARG) {
    fuzz_check(out == NULL && out_len == 0, "a refusal returned bytes");
    fuzz_check(strstr(err.msg, "value 'x' is not valid base64") != NULL,
               "a refusal does not name the value");
  }
  round_trip(data, size);
  return 0;
}
