/* frontend/http/compress.c — see compress.h. */
#include "frontend/http/compress.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "core/alloc.h"

const char *pts_http_encoding_name(enum pts_http_encoding e) {
  switch (e) {
    case PTS_HTTP_ENC_GZIP:
      return "gzip";
    case PTS_HTTP_ENC_DEFLATE:
      return "deflate";
    case PTS_HTTP_ENC_IDENTITY:
      return "identity";
    default:
      return "unknown";
  }
}

static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* Trims spaces around s[0..*n), returning the new start. */
static const char *trim(const char *s, size_t *n) {
  while (*n && is_space(*s)) {
    s++;
    (*n)--;
  }
  while (*n && is_space(s[*n - 1])) (*n)--;
  return s;
}

static enum pts_http_encoding coding_of(const char *s, size_t n) {
  if (n == 4 && strncasecmp(s, "gzip", 4) == 0) return PTS_HTTP_ENC_GZIP;
  if (n == 7 && strncasecmp(s, "deflate", 7) == 0) return PTS_HTTP_ENC_DEFLATE;
  if (n == 8 && strncasecmp(s, "identity", 8) == 0) return PTS_HTTP_ENC_IDENTITY;
  return PTS_HTTP_ENC_UNKNOWN;
}

enum pts_http_encoding pts_http_content_encoding(const char *value) {
  if (!value) return PTS_HTTP_ENC_IDENTITY;
  size_t n = strlen(value);
  const char *s = trim(value, &n);
  if (n == 0) return PTS_HTTP_ENC_IDENTITY;
  return coding_of(s, n);
}

/* The weight of one Accept-Encoding element's parameters (";q=0.5"):
 * 1 when absent; a malformed q makes the element unusable (-1). */
static double parse_weight(const char *params, size_t n) {
  double q = 1.0;
  while (n) {
    const char *semi = memchr(params, ';', n);
    size_t len = semi ? (size_t)(semi - params) : n;
    size_t plen = len;
    const char *p = trim(params, &plen);
    if (plen >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
      char tmp[16];
      size_t vlen = plen - 2;
      if (vlen == 0 || vlen >= sizeof tmp) return -1;
      memcpy(tmp, p + 2, vlen);
      tmp[vlen] = '\0';
      char *end;
      q = strtod(tmp, &end);
      if (*end != '\0' || q < 0 || q > 1) return -1;
    }
    if (!semi) break;
    params = semi + 1;
    n -= len + 1;
  }
  return q;
}

enum pts_http_encoding pts_http_accept_encoding(const char *value) {
  enum pts_http_encoding best = PTS_HTTP_ENC_IDENTITY;
  double best_q = 0;
  if (!value) return best;
  const char *p = value;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    const char *semi = memchr(p, ';', n);
    size_t name_len = semi ? (size_t)(semi - p) : n;
    const char *name = trim(p, &name_len);
    enum pts_http_encoding e = coding_of(name, name_len);
    double q = semi ? parse_weight(semi + 1, n - (size_t)(semi - p) - 1) : 1.0;
    /* Strictly greater: on a tie the coding named first stays. */
    if (e != PTS_HTTP_ENC_UNKNOWN && q > 0 && q > best_q) {
      best = e;
      best_q = q;
    }
    if (!comma) break;
    p = comma + 1;
  }
  return best;
}

/* zlib counts in uInt; feed larger inputs in slices. */
static uInt slice(size_t n) { return n > UINT_MAX ? UINT_MAX : (uInt)n; }

/* Reallocates *buf to ncap bytes; on failure *buf and *cap stay as they
 * were (still the caller's to free) and false is returned. */
static bool grow(unsigned char **buf, size_t *cap, size_t ncap) {
  unsigned char *nb = pts_realloc(*buf, ncap);
  if (!nb) return false;
  *buf = nb;
  *cap = ncap;
  return true;
}

enum pts_status pts_http_inflate(const void *in, size_t in_len, size_t max_out,
                                 enum pts_http_encoding enc, struct pts_buf **out,
                                 struct pts_error *err) {
  const char *name = pts_http_encoding_name(enc);
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 15 | 32) != Z_OK)
    return pts_error_set(err, PTS_INTERNAL, "failed to start %s decompression", name);
  /* A compressed body rarely expands less than 2x; start there and double. */
  size_t cap = in_len < max_out / 4 ? in_len * 4 + 64 : max_out + 1;
  if (cap > max_out + 1) cap = max_out + 1;
  unsigned char *buf = pts_malloc(cap);
  size_t used = 0, consumed = 0;
  enum pts_status st = PTS_OK;
  if (!buf) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory decompressing a %s request body", name);
    goto done;
  }
  for (;;) {
    if (used == cap) {
      if (cap > max_out) {
        st = pts_error_set(err, PTS_TOO_LARGE,
                           "decompressed %s request body is larger than the maximum allowed "
                           "input size of %zu bytes",
                           name, max_out);
        goto done;
      }
      if (!grow(&buf, &cap, cap > max_out / 2 ? max_out + 1 : cap * 2)) {
        st = pts_error_set(err, PTS_NOMEM, "out of memory decompressing a %s request body", name);
        goto done;
      }
    }
    zs.next_in = (Bytef *)((const unsigned char *)in + consumed);
    zs.avail_in = slice(in_len - consumed);
    zs.next_out = buf + used;
    zs.avail_out = slice(cap - used);
    uInt in_before = zs.avail_in, out_before = zs.avail_out;
    int r = inflate(&zs, Z_NO_FLUSH);
    consumed += in_before - zs.avail_in;
    used += out_before - zs.avail_out;
    if (r == Z_STREAM_END) break;
    if (r == Z_OK) continue;
    if (r == Z_BUF_ERROR && zs.avail_out == 0) continue; /* needs more room */
    if (r == Z_BUF_ERROR || (r == Z_OK && consumed == in_len)) {
      st = pts_error_set(err, PTS_INVALID_ARG,
                         "%s request body is truncated: the compressed stream ends early", name);
    } else {
      st = pts_error_set(err, PTS_INVALID_ARG, "%s request body is corrupt: %s", name,
                         zs.msg ? zs.msg : "invalid compressed data");
    }
    goto done;
  }
  if (used > max_out) {
    st = pts_error_set(err, PTS_TOO_LARGE,
                       "decompressed %s request body is larger than the maximum allowed input "
                       "size of %zu bytes",
                       name, max_out);
    goto done;
  }
  if (consumed != in_len) {
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "%s request body has %zu bytes of trailing data after the compressed "
                       "stream",
                       name, in_len - consumed);
    goto done;
  }
  *out = pts_buf_wrap(buf, used, NULL, NULL);
  if (!*out) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory decompressing a %s request body", name);
    goto done;
  }
  buf = NULL;
done:
  inflateEnd(&zs);
  pts_free(buf);
  return st;
}

enum pts_status pts_http_deflate(enum pts_http_encoding enc, int level,
                                 const struct pts_http_piece *pieces, size_t n_pieces, void **out,
                                 size_t *out_len, struct pts_error *err) {
  const char *name = pts_http_encoding_name(enc);
  int bits = enc == PTS_HTTP_ENC_GZIP ? 15 | 16 : 15;
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (deflateInit2(&zs, level, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return pts_error_set(err, PTS_INTERNAL, "failed to start %s compression", name);
  size_t total = 0;
  for (size_t i = 0; i < n_pieces; i++) total += pieces[i].len;
  size_t cap = total / 2 + 128;
  size_t used = 0;
  unsigned char *buf = pts_malloc(cap);
  enum pts_status st = PTS_OK;
  if (!buf) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory compressing a %s response", name);
    goto done;
  }
  for (size_t i = 0; i <= n_pieces; i++) {
    bool last = i == n_pieces;
    const unsigned char *p = last ? NULL : pieces[i].data;
    size_t left = last ? 0 : pieces[i].len;
    int flush = Z_NO_FLUSH;
    do {
      zs.next_in = (Bytef *)p;
      zs.avail_in = slice(left);
      if (last) flush = Z_FINISH;
      uInt in_before = zs.avail_in;
      int r;
      do {
        if (used == cap) {
          if (!grow(&buf, &cap, cap * 2)) {
            st = pts_error_set(err, PTS_NOMEM, "out of memory compressing a %s response", name);
            goto done;
          }
        }
        zs.next_out = buf + used;
        zs.avail_out = slice(cap - used);
        uInt out_before = zs.avail_out;
        r = deflate(&zs, flush);
        used += out_before - zs.avail_out;
        if (r == Z_STREAM_ERROR) {
          st = pts_error_set(err, PTS_INTERNAL, "%s compression failed", name);
          goto done;
        }
      } while (zs.avail_out == 0 || (flush == Z_FINISH && r != Z_STREAM_END));
      size_t took = in_before - zs.avail_in;
      if (p) p += took;
      left -= took;
    } while (left > 0);
  }
  *out = buf;
  *out_len = used;
  buf = NULL;
done:
  deflateEnd(&zs);
  pts_free(buf);
  return st;
}
