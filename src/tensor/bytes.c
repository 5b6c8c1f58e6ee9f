/* tensor/bytes.c — see bytes.h. */
#include "tensor/bytes.h"

#include <string.h>

static uint32_t read_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int pts_bytes_next(const void *data, size_t size, size_t *offset, const char **elem,
                   uint32_t *len) {
  const unsigned char *p = data;
  if (*offset == size) return 0;
  if (size - *offset < 4) return -1;
  uint32_t n = read_le32(p + *offset);
  if (size - *offset - 4 < n) return -1;
  *elem = (const char *)p + *offset + 4;
  *len = n;
  *offset += 4 + (size_t)n;
  return 1;
}

enum pts_status pts_bytes_validate(const void *data, size_t size, int64_t expected,
                                   int64_t *count, const char *what, struct pts_error *err) {
  size_t off = 0;
  int64_t n = 0;
  const char *e;
  uint32_t len;
  int r;
  while ((r = pts_bytes_next(data, size, &off, &e, &len)) == 1) n++;
  if (r < 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "element %lld of BYTES tensor '%s' is truncated: its length prefix "
                         "runs past the %zu bytes given",
                         (long long)n, what, size);
  if (expected >= 0 && n != expected)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "unexpected number of string elements for '%s': expected %lld, got %lld",
                         what, (long long)expected, (long long)n);
  if (count) *count = n;
  return PTS_OK;
}

void pts_bytes_put(void *out, size_t out_size, size_t *used, const void *elem, uint32_t len) {
  if (out && *used + 4 + (size_t)len <= out_size) {
    unsigned char *p = (unsigned char *)out + *used;
    p[0] = (unsigned char)(len & 0xff);
    p[1] = (unsigned char)(len >> 8 & 0xff);
    p[2] = (unsigned char)(len >> 16 & 0xff);
    p[3] = (unsigned char)(len >> 24 & 0xff);
    if (len) memcpy(p + 4, elem, len);
  }
  *used += 4 + (size_t)len;
}
