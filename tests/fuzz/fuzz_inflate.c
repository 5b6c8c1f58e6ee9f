/* tests/fuzz/fuzz_inflate.c — request-body decompression (gzip / deflate).
 *
 * The first byte picks the declared encoding and the output cap (a few KiB,
 * so a decompression bomb is cut off early). Properties: a success never
 * exceeds the cap; a cap exceeded is TOO_LARGE, never a bigger buffer. */
#include <stddef.h>
#include <stdint.h>

#include "core/alloc.h"
#include "frontend/http/compress.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  enum pts_http_encoding enc = (data[0] & 1) ? PTS_HTTP_ENC_GZIP : PTS_HTTP_ENC_DEFLATE;
  size_t cap = 1 + (size_t)(data[0] >> 1) * 64; /* 1 .. 8129 bytes */
  struct pts_buf *out = NULL;
  struct pts_error err;
  pts_error_clear(&err);
  enum pts_status st = pts_http_inflate(data + 1, size - 1, cap, enc, &out, &err);
  if (st == PTS_OK) {
    fuzz_check(out != NULL && out->size <= cap, "inflated past the cap");
    pts_buf_release(out);
  } else {
    fuzz_check(out == NULL && err.msg[0] != '\0', "inflate error without a message");
    fuzz_check(st == PTS_TOO_LARGE || st == PTS_INVALID_ARG || st == PTS_NOMEM,
               "unexpected inflate status");
  }
  (void)pts_http_content_encoding(NULL);
  return 0;
}
