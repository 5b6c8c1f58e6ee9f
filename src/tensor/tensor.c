/* tensor/tensor.c — see tensor.h. */
#include "tensor/tensor.h"

#include <stdio.h>
#include <string.h>

#include "core/alloc.h"

int64_t pts_shape_count(const struct pts_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->ndim; i++) {
    int64_t d = s->dims[i];
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

int64_t pts_shape_byte_size(enum pts_dtype t, const struct pts_shape *s) {
  size_t es = pts_dtype_size(t);
  int64_t n = pts_shape_count(s);
  if (es == 0 || n < 0) return -1;
  if (n > INT64_MAX / (int64_t)es) return -1;
  return n * (int64_t)es;
}

bool pts_shape_equal(const struct pts_shape *a, const struct pts_shape *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool pts_shape_set(struct pts_shape *out, const int64_t *dims, size_t n) {
  if (n > PTS_TENSOR_MAX_DIMS) return false;
  out->ndim = (int)n;
  if (n) memcpy(out->dims, dims, n * sizeof *dims);
  return true;
}

bool pts_shape_prepend(struct pts_shape *s, int64_t lead) {
  if (s->ndim >= PTS_TENSOR_MAX_DIMS) return false;
  memmove(s->dims + 1, s->dims, (size_t)s->ndim * sizeof *s->dims);
  s->dims[0] = lead;
  s->ndim++;
  return true;
}

void pts_shape_format(const struct pts_shape *s, char *out, size_t out_size) {
  size_t used = 0;
  if (out_size == 0) return;
  out[0] = '\0';
  int n = snprintf(out, out_size, "[");
  used = n > 0 ? (size_t)n : 0;
  for (int i = 0; i < s->ndim && used < out_size; i++) {
    n = snprintf(out + used, out_size - used, "%s%lld", i ? "," : "", (long long)s->dims[i]);
    if (n < 0) return;
    used += (size_t)n;
  }
  if (used < out_size) snprintf(out + used, out_size - used, "]");
}

void pts_tensor_clear(struct pts_tensor *t) {
  if (!t) return;
  pts_free(t->name);
  pts_buf_release(t->buf);
  memset(t, 0, sizeof *t);
}

enum pts_status pts_tensor_copy_view(struct pts_tensor *dst, const struct pts_tensor *src,
                                     struct pts_error *err) {
  *dst = *src;
  dst->name = pts_strdup(src->name ? src->name : "");
  if (!dst->name) {
    memset(dst, 0, sizeof *dst);
    return pts_error_set(err, PTS_NOMEM, "out of memory copying tensor '%s'", src->name);
  }
  pts_buf_retain(dst->buf);
  return PTS_OK;
}
