/* tests/unit/ptperf/ptperf_http_test.c — ptperf's response framing (RFC 9112 §6,
 * §7.1): Content-Length, chunked with extensions and trailers, split reads,
 * Connection handling, and the Inference-Header-Content-Length header of
 * the binary extension (protocol-facts §1.7). Messages are written by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/alloc.h"
#include "ptperf/lib/http.h"

static enum ptperf_parse_result parse(const char *s, struct ptperf_http_response *r) {
  struct pts_error err;
  return ptperf_http_parse(s, strlen(s), r, &err);
}

static void content_length_response(void **state) {
  (void)state;
  const char *msg =
      "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
      "Inference-Header-Content-Length: 5\r\ncontent-length: 8\r\n\r\n{\"a\":1}X";
  struct ptperf_http_response r;
  assert_int_equal(parse(msg, &r), PTPERF_PARSE_DONE);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_len, 8);
  /* 17 + 40 + 36 + 19 + 2 header bytes, counted by hand. */
  assert_int_equal(r.header_len, 114);
  assert_int_equal(r.message_len, 122);
  assert_int_equal(r.infer_header_len, 5);
  assert_true(r.keep_alive);
  assert_false(r.chunked);
  char *body;
  size_t n;
  struct pts_error err;
  assert_int_equal(ptperf_http_body(msg, &r, &body, &n, &err), PTS_OK);
  assert_int_equal(n, 8);
  assert_string_equal(body, "{\"a\":1}X");
  pts_free(body);
}

static void every_prefix_needs_more(void **state) {
  (void)state;
  const char *msg = "HTTP/1.1 400 Bad Request\r\nContent-Length: 13\r\n\r\n{\"error\":\"x\"}";
  size_t len = strlen(msg);
  struct ptperf_http_response r;
  struct pts_error err;
  for (size_t i = 0; i < len; i++)
    assert_int_equal(ptperf_http_parse(msg, i, &r, &err), PTPERF_PARSE_MORE);
  assert_int_equal(ptperf_http_parse(msg, len, &r, &err), PTPERF_PARSE_DONE);
  assert_int_equal(r.status, 400);
  assert_int_equal(r.infer_header_len, -1);
}

static void bytes_after_the_message_are_not_consumed(void **state) {
  (void)state;
  const char *two = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n";
  struct ptperf_http_response r;
  assert_int_equal(parse(two, &r), PTPERF_PARSE_DONE);
  assert_int_equal(r.message_len, 40); /* 17 + 19 + 2 + 2 */
}

static void chunked_with_extension_and_trailer(void **state) {
  (void)state;
  const char *msg =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;ext=1\r\nWiki\r\nA\r\npedia in\r\n\r\n0\r\nX-Trailer: t\r\n\r\n";
  struct ptperf_http_response r;
  assert_int_equal(parse(msg, &r), PTPERF_PARSE_DONE);
  assert_true(r.chunked);
  assert_int_equal(r.body_len, 14);
  assert_int_equal(r.message_len, strlen(msg));
  char *body;
  struct pts_error err;
  assert_int_equal(ptperf_http_body(msg, &r, &body, NULL, &err), PTS_OK);
  assert_string_equal(body, "Wikipedia in\r\n");
  pts_free(body);
  /* Cut before the final CRLF: not complete yet. */
  assert_int_equal(ptperf_http_parse(msg, strlen(msg) - 2, &r, &err), PTPERF_PARSE_MORE);
}

static void connection_close_and_http10(void **state) {
  (void)state;
  struct ptperf_http_response r;
  assert_int_equal(parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", &r),
                   PTPERF_PARSE_DONE);
  assert_false(r.keep_alive);
  assert_int_equal(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", &r), PTPERF_PARSE_DONE);
  assert_false(r.keep_alive);
  assert_int_equal(
      parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", &r),
      PTPERF_PARSE_DONE);
  assert_true(r.keep_alive);
}

static void no_body_statuses(void **state) {
  (void)state;
  struct ptperf_http_response r;
  assert_int_equal(parse("HTTP/1.1 204 No Content\r\n\r\n", &r), PTPERF_PARSE_DONE);
  assert_int_equal(r.message_len, 27);
  assert_int_equal(r.body_len, 0);
}

static void malformed_responses(void **state) {
  (void)state;
  struct ptperf_http_response r;
  struct pts_error err;
  const char *bad[] = {
      "HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n",
      "HTTP/1.1 200 OK\r\n\r\n", /* neither framing: can not keep the connection */
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err.msg[0] = '\0';
    assert_int_equal(ptperf_http_parse(bad[i], strlen(bad[i]), &r, &err), PTPERF_PARSE_ERROR);
    assert_true(strlen(err.msg) > 0);
  }
}

static void addresses(void **state) {
  (void)state;
  struct ptperf_addr a;
  struct pts_error err;
  assert_int_equal(ptperf_addr_resolve("127.0.0.1:8123", &a, &err), PTS_OK);
  assert_string_equal(a.host, "127.0.0.1");
  assert_string_equal(a.port, "8123");
  assert_int_equal(ptperf_addr_resolve("http://127.0.0.1", &a, &err), PTS_OK);
  assert_string_equal(a.port, "8000");
  assert_int_equal(ptperf_addr_resolve("[::1]:9000", &a, &err), PTS_OK);
  assert_string_equal(a.host, "::1");
  assert_string_equal(a.port, "9000");
  assert_int_equal(ptperf_addr_resolve(":80", &a, &err), PTS_INVALID_ARG);
  assert_int_equal(ptperf_addr_resolve("[::1:80", &a, &err), PTS_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(content_length_response),
      cmocka_unit_test(every_prefix_needs_more),
      cmocka_unit_test(bytes_after_the_message_are_not_consumed),
      cmocka_unit_test(chunked_with_extension_and_trailer),
      cmocka_unit_test(connection_close_and_http10),
      cmocka_unit_test(no_body_statuses),
      cmocka_unit_test(malformed_responses),
      cmocka_unit_test(addresses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
