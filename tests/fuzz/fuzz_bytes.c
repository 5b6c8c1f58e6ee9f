/* tests/fuzz/fuzz_bytes.c — the BYTES codec on arbitrary bytes.
 *
 * The first input byte is the element count the caller expects (255 = any),
 * the rest the serialized tensor. Properties: validate and the iterator agree
 * on well-formedness and count; re-encoding every element with
 * pts_bytes_put reproduces the input exactly. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "fuzz_common.h"
#include "tensor/bytes.h"

/* Walks the elements; returns the count, or -1 when one is truncated. */
static int64_t walk(const uint8_t *p, size_t n) {
  size_t off = 0;
  int64_t count = 0;
  const char *elem;
  uint32_t len;
  int rc;
  while ((rc = pts_bytes_next(p, n, &off, &elem, &len)) == 1) {
    fuzz_check(elem >= (const char *)p && elem + len <= (const char *)p + n,
               "element outside the buffer");
    count++;
  }
  return rc == 0 ? count : -1;
}

static void reencode(const uint8_t *p, size_t n) {
  uint8_t *copy = pts_malloc(n);
  if (!copy) return;
  size_t off = 0, used = 0;
  const char *elem;
  uint32_t len;
  while (pts_bytes_next(p, n, &off, &elem, &len) == 1) pts_bytes_put(copy, n, &used, elem, len);
  fuzz_check(used == n && memcmp(copy, p, n) == 0, "re-encoding differs from the input");
  pts_free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int64_t expected = data[0] == 255 ? -1 : data[0];
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  struct pts_error err;
  pts_error_clear(&err);
  int64_t count = -2;
  enum pts_status st = pts_bytes_validate(p, n, expected, &count, "fuzz", &err);
  int64_t walked = walk(p, n);
  if (st == PTS_OK) {
    fuzz_check(walked >= 0 && walked == count, "validate and the iterator disagree");
    fuzz_check(expected < 0 || count == expected, "validate accepted the wrong count");
    reencode(p, n);
  } else {
    fuzz_check(err.msg[0] != '\0', "validation error without a message");
    fuzz_check(walked < 0 || (expected >= 0 && walked != expected),
               "validate refused a well-formed tensor of the right count");
  }
  return 0;
}
