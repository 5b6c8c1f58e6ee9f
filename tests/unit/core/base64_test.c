/* tests/unit/core/base64_test.c — RFC 4648 §10 test vectors both ways, the
 * URL-safe alphabet, unpadded input, line breaks (libb64's), and every kind
 * of malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/alloc.h"
#include "core/base64.h"

static void decodes(const char *text, const char *want, size_t want_len) {
  uint8_t *out = NULL;
  size_t n = 0;
  struct pts_error err;
  assert_int_equal(pts_base64_decode(text, strlen(text), "t", &out, &n, &err), PTS_OK);
  assert_int_equal(n, want_len);
  assert_memory_equal(out, want, want_len);
  assert_int_equal(out[n], 0);
  pts_free(out);
}

static void rfc4648_vectors(void **state) {
  (void)state;
  /* RFC 4648 §10. */
  decodes("", "", 0);
  decodes("Zg==", "f", 1);
  decodes("Zm8=", "fo", 2);
  decodes("Zm9v", "foo", 3);
  decodes("Zm9vYg==", "foob", 4);
  decodes("Zm9vYmE=", "fooba", 5);
  decodes("Zm9vYmFy", "foobar", 6);
  /* Unpadded, as protobuf's JSON parser accepts. */
  decodes("Zg", "f", 1);
  decodes("Zm9vYmE", "fooba", 5);
}

static void both_alphabets(void **state) {
  (void)state;
  /* 0xfb 0xff 0xbf: "+/+/" standard, "-_-_" URL-safe. */
  decodes("+/+/", "\xfb\xff\xbf", 3);
  decodes("-_-_", "\xfb\xff\xbf", 3);
  decodes("AAECAw==", "\x00\x01\x02\x03", 4);
}

static void line_breaks(void **state) {
  (void)state;
  decodes("Zm9v\nYmFy", "foobar", 6);
  decodes("Zm9vYg==\n", "foob", 4);
  decodes("Zm9v\r\nYmE=\r\n", "fooba", 5);
  /* A CUDA IPC handle (64 bytes, here 0..63) as libb64 writes it: a line
   * break after 72 characters and one at the end (perf_analyzer's HTTP
   * registrations); the text is Python's base64.b64encode, broken there. */
  const char *libb64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1\n"
                       "Njc4OTo7PD0+Pw==\n";
  uint8_t want[64];
  for (int i = 0; i < 64; i++) want[i] = (uint8_t)i;
  decodes(libb64, (const char *)want, sizeof want);
}

static void refuses(const char *text, const char *needle) {
  uint8_t *out = (uint8_t *)"sentinel";
  size_t n = 7;
  struct pts_error err;
  assert_int_equal(pts_base64_decode(text, strlen(text), "parameter 'file:1/m'", &out, &n, &err),
                   PTS_INVALID_ARG);
  assert_null(out);
  assert_int_equal(n, 0);
  assert_non_null(strstr(err.msg, "parameter 'file:1/m' is not valid base64"));
  if (!strstr(err.msg, needle)) fail_msg("'%s': message '%s' lacks '%s'", text, err.msg, needle);
}

static void malformed(void **state) {
  (void)state;
  refuses("Zm9v!", "character 4 (0x21)");
  refuses("Zm 9v", "character 2 (0x20)");
  refuses("Z", "can not encode whole bytes");
  refuses("Zm9vY", "can not encode whole bytes");
  refuses("Zg=", "not a multiple of 4");
  refuses("Zg=a", "character 2 (0x3d)"); /* padding in the middle */
  refuses("Zh==", "bits set beyond the data");
  refuses("Zm9=", "bits set beyond the data");
  /* Line breaks are skipped, and hide nothing. */
  refuses("Zm9v\tYmFy", "character 4 (0x09)");
  refuses("Zm9v\nY\n", "5 characters can not encode whole bytes");
  refuses("Zg=\n", "padded to 3 characters");
  refuses("Zg=\n=", "character 2 (0x3d)");
}

static void encodes(const char *data, size_t len, const char *want) {
  size_t n = 99;
  char *out = pts_base64_encode(data, len, &n);
  assert_non_null(out);
  assert_string_equal(out, want);
  assert_int_equal(n, strlen(want));
  pts_free(out);
}

static void encoder(void **state) {
  (void)state;
  /* RFC 4648 §10. */
  encodes("", 0, "");
  encodes("f", 1, "Zg==");
  encodes("fo", 2, "Zm8=");
  encodes("foo", 3, "Zm9v");
  encodes("foobar", 6, "Zm9vYmFy");
  encodes("\xfb\xff\xbf", 3, "+/+/");
  /* A cudaIpcMemHandle_t's 64 bytes, every value, round trip. */
  uint8_t handle[64], *back = NULL;
  for (int i = 0; i < 64; i++) handle[i] = (uint8_t)(i * 37 + 11);
  size_t n, m;
  char *text = pts_base64_encode(handle, sizeof handle, &n);
  assert_int_equal(n, 88);
  struct pts_error err;
  assert_int_equal(pts_base64_decode(text, n, "t", &back, &m, &err), PTS_OK);
  assert_int_equal(m, sizeof handle);
  assert_memory_equal(back, handle, sizeof handle);
  pts_free(text);
  pts_free(back);
  pts_alloc_fail_after(0);
  assert_null(pts_base64_encode("f", 1, NULL));
  pts_alloc_fail_after(-1);
}

static void allocation_failure(void **state) {
  (void)state;
  uint8_t *out = NULL;
  size_t n = 0;
  struct pts_error err;
  pts_alloc_fail_after(0);
  enum pts_status st = pts_base64_decode("Zm9v", 4, "t", &out, &n, &err);
  pts_alloc_fail_after(-1);
  assert_int_equal(st, PTS_NOMEM);
  assert_null(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rfc4648_vectors),
      cmocka_unit_test(both_alphabets),
      cmocka_unit_test(line_breaks),
      cmocka_unit_test(malformed),
      cmocka_unit_test(encoder),
      cmocka_unit_test(allocation_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
