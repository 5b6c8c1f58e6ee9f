/* tests/unit/frontend/head_test.c — the head scan of the memory-budget
 * check. Each expectation is evhttp 2.1's reading of the same bytes
 * (http.c: evbuffer_readln CRLF, evhttp_parse_headers_, evhttp_get_body,
 * evhttp_get_body_length), worked by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "frontend/http/head.h"

static size_t end_of(const char *s) { return pts_http_head_end(s, strlen(s)); }

static struct pts_http_head parse(const char *s) {
  struct pts_http_head h;
  size_t end = end_of(s);
  assert_true(end > 0);
  pts_http_head_parse(s, end, &h);
  return h;
}

static void head_end(void **state) {
  (void)state;
  assert_int_equal(end_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 27);
  assert_int_equal(end_of("GET / HTTP/1.1\r\nHost: x\r\n\r\nBODY"), 27);
  assert_int_equal(end_of("GET / HTTP/1.1\nHost: x\n\n"), 24);  /* bare LF */
  assert_int_equal(end_of("GET / HTTP/1.1\nHost: x\r\n\r\n"), 26);
  assert_int_equal(end_of("GET / HTTP/1.1\r\nHost: x\n\r\n"), 26); /* LF, then CRLF */
  /* Not yet. */
  assert_int_equal(end_of("GET / HTTP/1.1\r\nHost: x\r\n"), 0);
  assert_int_equal(end_of("GET / HTTP/1.1\r\nHost: x\r\n\r"), 0);
  assert_int_equal(end_of(""), 0);
  assert_int_equal(end_of("\r\r\r\r"), 0); /* CRs alone end no line */
  /* A blank line that begins the bytes ends a (bad) head at once. */
  assert_int_equal(end_of("\n\nGET"), 2);
}

static void bodies(void **state) {
  (void)state;
  struct pts_http_head h = parse("POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                                 "Content-Length: 123\r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_LENGTH);
  assert_int_equal(h.content_length, 123);
  /* Any case; spaces after the colon and at the end are dropped. */
  h = parse("PUT / HTTP/1.1\r\ncontent-LENGTH:   7   \r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_LENGTH);
  assert_int_equal(h.content_length, 7);
  /* strtoll: a sign and a tab are accepted, as evhttp accepts them. */
  h = parse("PATCH / HTTP/1.1\r\nContent-Length: \t+9\r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_LENGTH);
  assert_int_equal(h.content_length, 9);
  /* The first Content-Length counts (evhttp_find_header). */
  h = parse("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 500\r\n\r\n");
  assert_int_equal(h.content_length, 5);
  /* Huge values pass as huge: the caller compares them with its limits. */
  h = parse("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_LENGTH);
  assert_true(h.content_length >= (uint64_t)INT64_MAX);
  /* Chunked wins over any length, in any case. */
  h = parse("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: Chunked\r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_CHUNKED);
  /* Another coding is not chunked: the length decides. */
  h = parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nContent-Length: 4\r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_LENGTH);
  assert_int_equal(h.content_length, 4);
  /* No length, not chunked: no body. */
  h = parse("POST / HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_NONE);
}

static void methods_without_bodies(void **state) {
  (void)state;
  /* evhttp reads no body for these even with a length. */
  static const char *const heads[] = {
      "GET / HTTP/1.1\r\nContent-Length: 10\r\n\r\n",
      "HEAD / HTTP/1.1\r\nContent-Length: 10\r\n\r\n",
      "DELETE / HTTP/1.1\r\nContent-Length: 10\r\n\r\n",
      "OPTIONS / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
      "post / HTTP/1.1\r\nContent-Length: 10\r\n\r\n", /* methods are case-sensitive */
  };
  for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
    assert_int_equal(parse(heads[i]).body, PTS_HTTP_BODY_NONE);
}

static void invalid_heads(void **state) {
  (void)state;
  static const char *const heads[] = {
      "POST / HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n", /* junk after the digits */
      "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",    /* negative */
      "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n",       /* empty */
      "POST / HTTP/1.1\r\nContent-Length: 5\r\n 6\r\n\r\n", /* folded: "5 6" */
      "POST / HTTP/1.1\r\nNo colon here\r\n\r\n",           /* evhttp fails the head */
      "POST / HTTP/1.1\r\n continuation of nothing\r\n\r\n",
  };
  for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
    assert_int_equal(parse(heads[i]).body, PTS_HTTP_BODY_INVALID);
}

static void header_names_as_evhttp_reads_them(void **state) {
  (void)state;
  /* A space before the colon is part of the name: not Content-Length. */
  struct pts_http_head h = parse("POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_NONE);
  /* A fold after another header changes only that one. */
  h = parse("POST / HTTP/1.1\r\nX-A: 1\r\n 2\r\nContent-Length: 3\r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_LENGTH);
  assert_int_equal(h.content_length, 3);
  /* A fold of the chunked header makes it "chunked x": not chunked. */
  h = parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n x\r\nContent-Length: 2\r\n\r\n");
  assert_int_equal(h.body, PTS_HTTP_BODY_LENGTH);
  assert_int_equal(h.content_length, 2);
  /* evhttp works on C strings: a NUL ends the value. */
  static const char nul[] = "POST / HTTP/1.1\r\nContent-Length: 8\0junk\r\n\r\n";
  size_t end = pts_http_head_end(nul, sizeof nul - 1);
  assert_int_equal(end, sizeof nul - 1);
  pts_http_head_parse(nul, end, &h);
  assert_int_equal(h.body, PTS_HTTP_BODY_LENGTH);
  assert_int_equal(h.content_length, 8);
  /* A value too long to keep is treated as invalid, never as a length. */
  char big[400];
  snprintf(big, sizeof big, "POST / HTTP/1.1\r\nContent-Length: %0200d\r\n\r\n", 7);
  assert_int_equal(parse(big).body, PTS_HTTP_BODY_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(head_end),
      cmocka_unit_test(bodies),
      cmocka_unit_test(methods_without_bodies),
      cmocka_unit_test(invalid_heads),
      cmocka_unit_test(header_names_as_evhttp_reads_them),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
