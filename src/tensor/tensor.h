/* tensor/tensor.h — a named, typed, shaped view of bytes.
 *
 * A tensor never owns raw memory directly: `data` points into `buf`, of which
 * the tensor holds one reference (or `buf` is NULL and `data` is borrowed for
 * the tensor's lifetime, as in unit tests). Bytes are row-major, little-endian,
 * unpadded — the KServe binary layout — and BYTES tensors hold their elements
 * serialized as 4-byte little-endian length + bytes (tensor/bytes.h).
 *
 * Threading: a tensor belongs to one thread at a time; its buffer may be
 * shared (read-only) with other threads through the buffer's reference count.
 */
#ifndef PTS_TENSOR_TENSOR_H
#define PTS_TENSOR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/status.h"
#include "tensor/dtype.h"

/* More dimensions than any real model uses; requests with more are rejected
 * with a message rather than allocated for. */
#define PTS_TENSOR_MAX_DIMS 16

struct pts_shape {
  int ndim;
  int64_t dims[PTS_TENSOR_MAX_DIMS];
};

/* Where a tensor's bytes live. Almost every tensor is in ordinary host
 * memory (the zero value). Pinned host memory is host memory a GPU copies by
 * DMA without staging (a registered shared-memory region, a backend's
 * staging buffer). Device memory (a CUDA shared-memory region) can not be
 * read by the CPU at all: only a backend that declares it can take device
 * inputs ever sees such a tensor (backend.h), and code that reads tensor
 * bytes on the host checks `mem` first. */
enum pts_mem {
  PTS_MEM_HOST = 0,
  PTS_MEM_PINNED,
  PTS_MEM_DEVICE,
};

struct pts_tensor {
  char *name;            /* owned (pts_free) */
  enum pts_dtype dtype;
  struct pts_shape shape;
  const void *data;      /* points into buf->data (or borrowed when buf is NULL) */
  size_t byte_size;
  struct pts_buf *buf;   /* one reference held, may be NULL */
  enum pts_mem mem;      /* where `data` points */
  int device;            /* CUDA device of PTS_MEM_DEVICE data; 0 otherwise */
};

/* Element count (product of dims; 1 for rank 0). Returns -1 when the product
 * overflows int64 or a dim is negative. */
int64_t pts_shape_count(const struct pts_shape *s);
/* Byte size of a fixed-size tensor of this type and shape; -1 on overflow or
 * for BYTES (whose size depends on the data). */
int64_t pts_shape_byte_size(enum pts_dtype t, const struct pts_shape *s);
bool pts_shape_equal(const struct pts_shape *a, const struct pts_shape *b);
/* *out = dims[0..n). Returns false, leaving *out alone, when n is over
 * PTS_TENSOR_MAX_DIMS. */
bool pts_shape_set(struct pts_shape *out, const int64_t *dims, size_t n);
/* Puts `lead` in front of s's dims: how a configuration's dims become a
 * shape with its batch dimension, which each caller fills with what it knows
 * of the batch (its size, -1 for any, 1 for a request of one). Returns
 * false, leaving *s alone, when s already has PTS_TENSOR_MAX_DIMS dims; the
 * configuration check (config/model_config_complete.c) refuses at load a
 * tensor whose dims could not take the batch dimension, so for dims that
 * passed it this never fails. */
bool pts_shape_prepend(struct pts_shape *s, int64_t lead);
/* Writes "[1,3,224,224]" into out (always NUL-terminated). */
void pts_shape_format(const struct pts_shape *s, char *out, size_t out_size);

/* Frees the name and releases the buffer; leaves *t zeroed. NULL-safe. */
void pts_tensor_clear(struct pts_tensor *t);
/* Makes `dst` a second view of `src` (copies name, retains buffer).
 * Returns PTS_NOMEM on allocation failure. */
enum pts_status pts_tensor_copy_view(struct pts_tensor *dst, const struct pts_tensor *src,
                                     struct pts_error *err);

#endif
