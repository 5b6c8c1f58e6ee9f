/* tensor/bytes.h — the BYTES (TYPE_STRING) element codec.
 *
 * Wire layout (protocol-facts §5): for each element, a 4-byte little-endian
 * unsigned length N, then N raw bytes; no padding, no terminator. Used by the
 * binary extension, by JSON decoding (strings are serialized into this
 * layout), and by the pytorch backend (List[str]).
 *
 * Threading: pure functions over caller memory; thread-safe.
 */
#ifndef PTS_TENSOR_BYTES_H
#define PTS_TENSOR_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Checks that `data[0..size)` holds exactly `expected` well-formed elements
 * (expected < 0: any count) and stores the count in *count. `what` names the
 * tensor in the error message. */
enum pts_status pts_bytes_validate(const void *data, size_t size, int64_t expected,
                                   int64_t *count, const char *what, struct pts_error *err);

/* Iteration: *offset starts at 0; each call yields one element (pointer into
 * data, length) and advances. Returns 1 for an element, 0 at the end, -1 on a
 * truncated element. */
int pts_bytes_next(const void *data, size_t size, size_t *offset, const char **elem,
                   uint32_t *len);

/* Appends one element (length prefix + bytes) at out + *used, when it fits in
 * out_size; always advances *used by 4 + len so a first pass with out == NULL
 * computes the total size. */
void pts_bytes_put(void *out, size_t out_size, size_t *used, const void *elem, uint32_t len);

#endif
