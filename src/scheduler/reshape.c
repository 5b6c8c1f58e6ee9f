/* scheduler/reshape.c — see reshape.h. */
#include "scheduler/reshape.h"

#include <string.h>

static int count_wildcards(const int64_t *dims, size_t n) {
  int c = 0;
  for (size_t i = 0; i < n; i++)
    if (dims[i] == -1) c++;
  return c;
}

static enum pts_status shape_mismatch(const struct pts_shape *actual, struct pts_error *err) {
  char got[192];
  pts_shape_format(actual, got, sizeof got);
  return pts_error_set(err, PTS_INVALID_ARG, "shape %s does not correspond to the reshape", got);
}

/* Each -1 of `to` takes the value at the matching -1 position of `from`. */
static enum pts_status map_by_position(const int64_t *from, size_t n_from, const int64_t *to,
                                       size_t n_to, const struct pts_shape *actual,
                                       struct pts_shape *out, struct pts_error *err) {
  if ((size_t)actual->ndim != n_from) return shape_mismatch(actual, err);
  size_t src = 0;
  for (size_t i = 0; i < n_to; i++) {
    if (to[i] != -1) {
      out->dims[i] = to[i];
      continue;
    }
    while (src < n_from && from[src] != -1) src++;
    out->dims[i] = actual->dims[src++];
  }
  return PTS_OK;
}

/* A single -1 of `to` takes whatever the element count leaves for it. */
static enum pts_status map_by_count(const int64_t *to, size_t n_to, const struct pts_shape *actual,
                                    struct pts_shape *out, struct pts_error *err) {
  int64_t total = pts_shape_count(actual);
  int64_t known = 1;
  size_t hole = 0;
  for (size_t i = 0; i < n_to; i++) {
    if (to[i] == -1) {
      hole = i;
      continue;
    }
    known *= to[i];
    out->dims[i] = to[i];
  }
  if (total < 0 || known <= 0 || total % known != 0) {
    if (total == 0 && known > 0) {
      out->dims[hole] = 0;
      return PTS_OK;
    }
    return shape_mismatch(actual, err);
  }
  out->dims[hole] = total / known;
  return PTS_OK;
}

enum pts_status pts_reshape_map(const int64_t *from, size_t n_from, const int64_t *to, size_t n_to,
                                const struct pts_shape *actual, struct pts_shape *out,
                                struct pts_error *err) {
  if (n_to > PTS_TENSOR_MAX_DIMS)
    return pts_error_set(err, PTS_INVALID_ARG, "reshape has more than %d dimensions",
                         PTS_TENSOR_MAX_DIMS);
  memset(out, 0, sizeof *out);
  out->ndim = (int)n_to;
  int holes_to = count_wildcards(to, n_to);
  if (holes_to == 0) {
    if (n_to) memcpy(out->dims, to, n_to * sizeof *to);
  } else if (holes_to == count_wildcards(from, n_from) &&
             map_by_position(from, n_from, to, n_to, actual, out, NULL) == PTS_OK &&
             pts_shape_count(out) == pts_shape_count(actual)) {
    return PTS_OK;
  } else if (holes_to != 1 || map_by_count(to, n_to, actual, out, err) != PTS_OK) {
    return shape_mismatch(actual, err);
  }
  if (pts_shape_count(out) != pts_shape_count(actual)) return shape_mismatch(actual, err);
  return PTS_OK;
}

enum pts_status pts_reshape_map_batched(const int64_t *from, size_t n_from, const int64_t *to,
                                        size_t n_to, bool batched,
                                        const struct pts_shape *actual, struct pts_shape *out,
                                        struct pts_error *err) {
  int lead = batched ? 1 : 0;
  if (actual->ndim < lead) return shape_mismatch(actual, err);
  struct pts_shape inner = {0}, mapped;
  inner.ndim = actual->ndim - lead;
  memcpy(inner.dims, actual->dims + lead, (size_t)inner.ndim * sizeof inner.dims[0]);
  enum pts_status st = pts_reshape_map(from, n_from, to, n_to, &inner, &mapped, err);
  if (st != PTS_OK) return st;
  if (mapped.ndim + lead > PTS_TENSOR_MAX_DIMS)
    return pts_error_set(err, PTS_INVALID_ARG, "reshape has more than %d dimensions",
                         PTS_TENSOR_MAX_DIMS);
  memset(out, 0, sizeof *out);
  out->ndim = mapped.ndim + lead;
  if (lead) out->dims[0] = actual->dims[0];
  memcpy(out->dims + lead, mapped.dims, (size_t)mapped.ndim * sizeof mapped.dims[0]);
  return PTS_OK;
}
