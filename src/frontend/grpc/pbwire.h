/* frontend/grpc/pbwire.h — the few pieces of the protobuf wire format that
 * the frontend reads and writes by hand: wire types and varints. infer.c
 * splits a ModelInferRequest's top level and writes the response header
 * with them; infer_fast.c reads the common request with them. Everything
 * else goes through protobuf-c.
 *
 * Threading: constants and pure inline functions.
 */
#ifndef PTS_FRONTEND_GRPC_PBWIRE_H
#define PTS_FRONTEND_GRPC_PBWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The low three bits of a field's key. */
#define PTS_PB_VARINT 0
#define PTS_PB_I64 1
#define PTS_PB_LEN 2
#define PTS_PB_I32 5

/* The longest varint: ten bytes carry 64 bits. */
#define PTS_PB_VARINT_MAX 10

/* Reads the varint at p[*pos] (n bytes in all), of at most max_bytes
 * bytes, into *out and moves *pos past it. False when it runs past n or
 * past max_bytes; *pos is then somewhere inside it. */
static inline bool pts_pb_read_varint(const uint8_t *p, size_t n, size_t *pos, unsigned max_bytes,
                                      uint64_t *out) {
  uint64_t v = 0;
  for (unsigned i = 0; i < max_bytes; i++) {
    if (*pos >= n) return false;
    uint8_t b = p[(*pos)++];
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

/* Bytes of v as a varint. */
static inline size_t pts_pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Writes v as a varint at p; returns its length. */
static inline size_t pts_pb_put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

#endif
