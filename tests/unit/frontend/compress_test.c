/* tests/unit/frontend/compress_test.c — Content-Encoding / Accept-Encoding
 * parsing (protocol-facts §1.8) and gzip/deflate against zlib itself: what
 * we compress zlib must read back, and what zlib compresses we must read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/alloc.h"
#include "frontend/http/compress.h"

static void accept_encoding_weights(void **state) {
  (void)state;
  static const struct {
    const char *value;
    enum pts_http_encoding want;
  } cases[] = {
      {NULL, PTS_HTTP_ENC_IDENTITY},
      {"", PTS_HTTP_ENC_IDENTITY},
      {"gzip", PTS_HTTP_ENC_GZIP},
      {"deflate", PTS_HTTP_ENC_DEFLATE},
      {"GZip", PTS_HTTP_ENC_GZIP},
      {"gzip;q=0.5, deflate;q=0.9", PTS_HTTP_ENC_DEFLATE},
      {"gzip;q=0.9, deflate;q=0.5", PTS_HTTP_ENC_GZIP},
      {"deflate, gzip", PTS_HTTP_ENC_DEFLATE}, /* tie: the earlier one */
      {"gzip ; q=1.0 ,deflate", PTS_HTTP_ENC_GZIP},
      {"identity;q=0.5, gzip;q=0.4", PTS_HTTP_ENC_IDENTITY},
      {"gzip;q=0", PTS_HTTP_ENC_IDENTITY}, /* q=0: not acceptable */
      {"br", PTS_HTTP_ENC_IDENTITY},
      {"*", PTS_HTTP_ENC_IDENTITY}, /* not understood, as in Triton */
      {"br;q=1, deflate;q=0.1", PTS_HTTP_ENC_DEFLATE},
      {"gzip;q=abc, deflate;q=0.2", PTS_HTTP_ENC_DEFLATE}, /* malformed weight: skipped */
      {"gzip;q=2", PTS_HTTP_ENC_IDENTITY},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    enum pts_http_encoding got = pts_http_accept_encoding(cases[i].value);
    if (got != cases[i].want)
      fail_msg("Accept-Encoding '%s': got %d, want %d", cases[i].value ? cases[i].value : "(null)",
               got, cases[i].want);
  }
}

static void content_encoding_values(void **state) {
  (void)state;
  assert_int_equal(pts_http_content_encoding(NULL), PTS_HTTP_ENC_IDENTITY);
  assert_int_equal(pts_http_content_encoding(""), PTS_HTTP_ENC_IDENTITY);
  assert_int_equal(pts_http_content_encoding("identity"), PTS_HTTP_ENC_IDENTITY);
  assert_int_equal(pts_http_content_encoding("gzip"), PTS_HTTP_ENC_GZIP);
  assert_int_equal(pts_http_content_encoding("deflate"), PTS_HTTP_ENC_DEFLATE);
  assert_int_equal(pts_http_content_encoding("br"), PTS_HTTP_ENC_UNKNOWN);
  assert_int_equal(pts_http_content_encoding("gzip, deflate"), PTS_HTTP_ENC_UNKNOWN);
  assert_string_equal(pts_http_encoding_name(PTS_HTTP_ENC_GZIP), "gzip");
  assert_string_equal(pts_http_encoding_name(PTS_HTTP_ENC_DEFLATE), "deflate");
}

/* Test data that compresses but is not trivial. */
static unsigned char *sample(size_t n) {
  unsigned char *p = malloc(n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    p[i] = (unsigned char)((i % 7 == 0) ? (x >> 24) : 'a' + i % 13);
  }
  return p;
}

/* zlib's own gzip (windowBits 31) or zlib-format stream. */
static unsigned char *zlib_compress(const unsigned char *in, size_t n, int gzip, size_t *out_len) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  size_t cap = deflateBound(&zs, n) + 64;
  unsigned char *out = malloc(cap);
  zs.next_in = (Bytef *)in;
  zs.avail_in = (uInt)n;
  zs.next_out = out;
  zs.avail_out = (uInt)cap;
  assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
  *out_len = cap - zs.avail_out;
  deflateEnd(&zs);
  return out;
}

static void inflate_reads_zlib_output(void **state) {
  (void)state;
  size_t n = 100000;
  unsigned char *plain = sample(n);
  for (int gzip = 0; gzip <= 1; gzip++) {
    size_t zlen;
    unsigned char *z = zlib_compress(plain, n, gzip, &zlen);
    struct pts_buf *out = NULL;
    struct pts_error err;
    enum pts_http_encoding enc = gzip ? PTS_HTTP_ENC_GZIP : PTS_HTTP_ENC_DEFLATE;
    assert_int_equal(pts_http_inflate(z, zlen, n, enc, &out, &err), PTS_OK);
    assert_int_equal(out->size, n);
    assert_memory_equal(out->data, plain, n);
    pts_buf_release(out);
    /* One byte over the cap is refused, naming the limit. */
    assert_int_equal(pts_http_inflate(z, zlen, n - 1, enc, &out, &err), PTS_TOO_LARGE);
    assert_non_null(strstr(err.msg, "99999"));
    /* Truncated stream. */
    assert_int_equal(pts_http_inflate(z, zlen / 2, n, enc, &out, &err), PTS_INVALID_ARG);
    assert_non_null(strstr(err.msg, gzip ? "gzip" : "deflate"));
    free(z);
  }
  free(plain);
}

static void inflate_rejects_garbage(void **state) {
  (void)state;
  struct pts_buf *out = NULL;
  struct pts_error err;
  static const char bad_gzip[] = "\x1f\x8b\x08\x00this is not a gzip stream";
  assert_int_equal(
      pts_http_inflate(bad_gzip, sizeof bad_gzip - 1, 1 << 20, PTS_HTTP_ENC_GZIP, &out, &err),
      PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "gzip"));
  static const char text[] = "plain text, not zlib";
  assert_int_equal(
      pts_http_inflate(text, sizeof text - 1, 1 << 20, PTS_HTTP_ENC_DEFLATE, &out, &err),
      PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "deflate"));
  assert_int_equal(pts_http_inflate("", 0, 1 << 20, PTS_HTTP_ENC_GZIP, &out, &err),
                   PTS_INVALID_ARG);
  /* Trailing bytes after a complete stream. */
  size_t zlen;
  unsigned char *z = zlib_compress((const unsigned char *)"hello", 5, 1, &zlen);
  unsigned char *more = malloc(zlen + 3);
  memcpy(more, z, zlen);
  memcpy(more + zlen, "xyz", 3);
  assert_int_equal(pts_http_inflate(more, zlen + 3, 100, PTS_HTTP_ENC_GZIP, &out, &err),
                   PTS_INVALID_ARG);
  free(more);
  free(z);
}

/* Our compressor, read back by zlib alone. */
static unsigned char *zlib_decompress(const void *z, size_t zlen, int gzip, size_t cap,
                                      size_t *out_len) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  assert_int_equal(inflateInit2(&zs, gzip ? 31 : 15), Z_OK);
  unsigned char *out = malloc(cap);
  zs.next_in = (Bytef *)z;
  zs.avail_in = (uInt)zlen;
  zs.next_out = out;
  zs.avail_out = (uInt)cap;
  assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
  assert_int_equal(zs.avail_in, 0);
  *out_len = cap - zs.avail_out;
  inflateEnd(&zs);
  return out;
}

static void deflate_round_trip_through_zlib(void **state) {
  (void)state;
  size_t n = 70000;
  unsigned char *plain = sample(n);
  /* JSON header + two chunks, one empty, as a binary response would be. */
  struct pts_http_piece pieces[] = {{plain, 1000}, {plain + 1000, 0}, {plain + 1000, n - 1000}};
  for (int gzip = 0; gzip <= 1; gzip++) {
    void *z = NULL;
    size_t zlen = 0;
    struct pts_error err;
    assert_int_equal(pts_http_deflate(gzip ? PTS_HTTP_ENC_GZIP : PTS_HTTP_ENC_DEFLATE,
                                      PTS_HTTP_DEFLATE_DEFAULT, pieces, 3, &z, &zlen, &err),
                     PTS_OK);
    const unsigned char *zb = z;
    if (gzip) {
      assert_int_equal(zb[0], 0x1f); /* RFC 1952 magic */
      assert_int_equal(zb[1], 0x8b);
    } else {
      assert_int_equal((zb[0] * 256 + zb[1]) % 31, 0); /* RFC 1950 header check */
      assert_int_equal(zb[0] & 0x0f, 8);
    }
    size_t got;
    unsigned char *back = zlib_decompress(z, zlen, gzip, n + 16, &got);
    assert_int_equal(got, n);
    assert_memory_equal(back, plain, n);
    free(back);
    pts_free(z);
  }
  free(plain);
}

static void deflate_empty_body(void **state) {
  (void)state;
  struct pts_http_piece p = {"", 0};
  void *z = NULL;
  size_t zlen = 0;
  struct pts_error err;
  assert_int_equal(pts_http_deflate(PTS_HTTP_ENC_GZIP, 9, &p, 1, &z, &zlen, &err), PTS_OK);
  size_t got = 99;
  unsigned char *back = zlib_decompress(z, zlen, 1, 16, &got);
  assert_int_equal(got, 0);
  free(back);
  pts_free(z);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(accept_encoding_weights),         cmocka_unit_test(content_encoding_values),
      cmocka_unit_test(inflate_reads_zlib_output),       cmocka_unit_test(inflate_rejects_garbage),
      cmocka_unit_test(deflate_round_trip_through_zlib), cmocka_unit_test(deflate_empty_body),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
