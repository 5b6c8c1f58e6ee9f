/* tests/unit/core/jsonstr_test.c — the text of a JSON string
 * (core/jsonstr.h), against RFC 3629's table of well-formed UTF-8 byte
 * sequences and RFC 8259's escapes, written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/jsonstr.h"

struct seq {
  const char *bytes;
  size_t want; /* the sequence's length, 0 when ill-formed */
};

/* RFC 3629, section 4 (UTF8-2, UTF8-3, UTF8-4), at each edge. */
static const struct seq seqs[] = {
    {"A", 1},
    {"\x7f", 1},
    {"\x80", 0},              /* a continuation byte alone */
    {"\xc0\x80", 0},          /* overlong NUL */
    {"\xc1\xbf", 0},          /* overlong */
    {"\xc2\x80", 2},          /* U+0080 */
    {"\xdf\xbf", 2},          /* U+07FF */
    {"\xc2\x41", 0},          /* no continuation */
    {"\xe0\x9f\xbf", 0},      /* overlong U+07FF */
    {"\xe0\xa0\x80", 3},      /* U+0800 */
    {"\xe2\x82\xac", 3},      /* U+20AC */
    {"\xed\x9f\xbf", 3},      /* U+D7FF */
    {"\xed\xa0\x80", 0},      /* U+D800, a surrogate */
    {"\xed\xbf\xbf", 0},      /* U+DFFF */
    {"\xee\x80\x80", 3},      /* U+E000 */
    {"\xef\xbf\xbf", 3},      /* U+FFFF */
    {"\xf0\x8f\xbf\xbf", 0},  /* overlong U+FFFF */
    {"\xf0\x90\x80\x80", 4},  /* U+10000 */
    {"\xf0\x9f\x98\x80", 4},  /* U+1F600 */
    {"\xf4\x8f\xbf\xbf", 4},  /* U+10FFFF */
    {"\xf4\x90\x80\x80", 0},  /* U+110000 */
    {"\xf5\x80\x80\x80", 0},
    {"\xf8\x88\x80\x80\x80", 0},
    {"\xff", 0},
    {"\xe2\x82\x41", 0},      /* the third byte is no continuation */
};

static void utf8_sequences(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
    const unsigned char *s = (const unsigned char *)seqs[i].bytes;
    size_t got = pts_utf8_seq(s, strlen(seqs[i].bytes));
    if (got != seqs[i].want)
      fail_msg("sequence %zu (first byte 0x%02x): %zu, want %zu", i, s[0], got, seqs[i].want);
  }
}

/* A well-formed sequence cut short by the end of the text is not one. */
static void utf8_truncated(void **state) {
  (void)state;
  assert_int_equal(pts_utf8_seq((const unsigned char *)"\xe2\x82\xac", 2), 0);
  assert_int_equal(pts_utf8_seq((const unsigned char *)"\xf0\x9f\x98\x80", 3), 0);
  assert_int_equal(pts_utf8_seq((const unsigned char *)"\xc3\xa9", 1), 0);
}

struct out {
  char text[256];
  size_t len;
  int pieces;
};

static void collect(void *ctx, const char *p, size_t n) {
  struct out *o = ctx;
  assert_true(o->len + n < sizeof o->text);
  memcpy(o->text + o->len, p, n);
  o->len += n;
  o->text[o->len] = '\0';
  o->pieces++;
}

static void escaped(const char *in, size_t n, const char *want) {
  struct out o = {.len = 0};
  pts_json_escape_text(in, n, collect, &o);
  assert_int_equal(o.len, strlen(want));
  assert_memory_equal(o.text, want, o.len);
}

/* RFC 8259, section 7: the two-character escapes by name, other control
 * characters as \u00XX (lower-case hex here), NUL included. */
static void escapes(void **state) {
  (void)state;
  escaped("\"\\\n\r\t\b\f", 7, "\\\"\\\\\\n\\r\\t\\b\\f");
  escaped("a\0b", 3, "a\\u0000b");
  escaped("\x01\x1b\x1f", 3, "\\u0001\\u001b\\u001f");
  escaped("", 0, "");
}

/* Well-formed UTF-8 stays as it is; each byte that starts no well-formed
 * sequence becomes U+FFFD (EF BF BD). */
static void replacement(void **state) {
  (void)state;
  escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  escaped("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  escaped("\xc0\xaf!", 3, "\xef\xbf\xbd\xef\xbf\xbd!");
  escaped("x\xe2\x82", 3, "x\xef\xbf\xbd\xef\xbf\xbd");
  escaped("\x7f\xff", 2, "\x7f\xef\xbf\xbd");
}

/* A run of bytes that need nothing goes out as one piece. */
static void plain_runs_whole(void **state) {
  (void)state;
  struct out o = {.len = 0};
  pts_json_escape_text("plain text", 10, collect, &o);
  assert_int_equal(o.pieces, 1);
  o = (struct out){.len = 0};
  pts_json_escape_text("ab\ncd", 5, collect, &o);
  assert_int_equal(o.pieces, 3);
  assert_string_equal(o.text, "ab\\ncd");
}

/* The table holds exactly what RFC 8259 lets stand unescaped, below 0x80. */
static void plain_bytes(void **state) {
  (void)state;
  for (int c = 0; c < 256; c++) {
    bool want = c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
    if (pts_json_plain_byte[c] != want) fail_msg("byte 0x%02x", c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(utf8_sequences),
      cmocka_unit_test(utf8_truncated),
      cmocka_unit_test(escapes),
      cmocka_unit_test(replacement),
      cmocka_unit_test(plain_runs_whole),
      cmocka_unit_test(plain_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
