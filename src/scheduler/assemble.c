/* scheduler/assemble.c — see assemble.h. */
#include "scheduler/assemble.h"

#include <string.h>

#include "core/alloc.h"
#include "core/copy.h"
#include "tensor/bytes.h"

const struct pts_tensor *pts_request_input(const struct pts_infer_request *req, const char *name) {
  for (size_t i = 0; i < req->n_inputs; i++)
    if (req->inputs[i].name && strcmp(req->inputs[i].name, name) == 0) return &req->inputs[i];
  return NULL;
}

static bool same_but_batch(const struct pts_shape *a, const struct pts_shape *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 1; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool pts_batch_compatible(const Inference__ModelConfig *cfg, const struct pts_infer_request *a,
                          const struct pts_infer_request *b, bool device_gather) {
  for (size_t k = 0; k < cfg->n_input; k++) {
    const struct pts_tensor *ta = pts_request_input(a, cfg->input[k]->name);
    const struct pts_tensor *tb = pts_request_input(b, cfg->input[k]->name);
    if (!ta || !tb) {
      if (ta != tb) return false;
      continue;
    }
    if (ta->dtype != tb->dtype || !same_but_batch(&ta->shape, &tb->shape)) return false;
    /* Device memory (CUDA shared memory) gathers only on the device, by
     * the backend, from one device: a batch is all device or all host. */
    bool da = ta->mem == PTS_MEM_DEVICE, db = tb->mem == PTS_MEM_DEVICE;
    if (da != db) return false;
    if (da && (!device_gather || ta->device != tb->device)) return false;
  }
  return true;
}

/* Who copies a batch input's parts, which says what memory they may be
 * in: the CPU (none in device memory, for n > 1), the device (each in
 * device memory), or someone who already did (any). */
enum parts { PARTS_HOST, PARTS_DEVICE, PARTS_ANY };

/* Total bytes and rows of input `name` over the batch. */
static enum pts_status measure(const char *name, struct pts_infer_request *const *reqs, size_t n,
                               enum parts parts, size_t *total, int64_t *rows,
                               struct pts_error *err) {
  *total = 0;
  *rows = 0;
  for (size_t i = 0; i < n; i++) {
    const struct pts_tensor *t = pts_request_input(reqs[i], name);
    if (!t || (n > 1 && t->shape.ndim < 1))
      return pts_error_set(err, PTS_INTERNAL, "input '%s' can not be batched: request %zu %s", name,
                           i, t ? "has no batch dimension" : "lacks it");
    if (parts == PARTS_HOST && t->mem == PTS_MEM_DEVICE && n > 1)
      return pts_error_set(err, PTS_INTERNAL,
                           "input '%s' of request %zu is in device memory and can not be "
                           "gathered on the host",
                           name, i);
    if (parts == PARTS_DEVICE && t->mem != PTS_MEM_DEVICE)
      return pts_error_set(err, PTS_INTERNAL,
                           "input '%s' of request %zu is in host memory and can not be gathered "
                           "on the device",
                           name, i);
    *total += t->byte_size;
    if (t->shape.ndim > 0) *rows += t->shape.dims[0];
  }
  return PTS_OK;
}

/* Copies every request's bytes of input `name` one after the other into
 * `into`: one copy per byte, shared over the copy threads when large. */
static enum pts_status copy_into(const char *name, struct pts_infer_request *const *reqs, size_t n,
                                 void *into, struct pts_error *err) {
  struct pts_copy_part stack[32] = {{0}}; /* (GCC can not see every used entry is set) */
  struct pts_copy_part *parts = n <= 32 ? stack : pts_malloc(n * sizeof *parts);
  if (!parts)
    return pts_error_set(err, PTS_NOMEM, "out of memory gathering input '%s'", name);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    const struct pts_tensor *t = pts_request_input(reqs[i], name);
    parts[i] = (struct pts_copy_part){(char *)into + at, t->data, t->byte_size};
    at += t->byte_size;
  }
  pts_copy_parts(parts, n);
  if (parts != stack) pts_free(parts);
  return PTS_OK;
}

static void describe(const struct pts_tensor *first, int64_t rows, size_t n, size_t total,
                     struct pts_tensor *dst) {
  dst->dtype = first->dtype;
  dst->shape = first->shape;
  if (n > 1) dst->shape.dims[0] = rows;
  dst->byte_size = total;
  dst->device = 0;
}

enum pts_status pts_batch_gather(const char *name, struct pts_infer_request *const *reqs, size_t n,
                                 struct pts_tensor *dst, struct pts_buf **owned,
                                 struct pts_error *err) {
  *owned = NULL;
  const struct pts_tensor *first = pts_request_input(reqs[0], name);
  if (!first) return PTS_OK;
  if (n == 1) {
    dst->dtype = first->dtype;
    dst->shape = first->shape;
    dst->data = first->data;
    dst->byte_size = first->byte_size;
    dst->buf = first->buf;
    dst->mem = first->mem;
    dst->device = first->device;
    return PTS_OK;
  }
  size_t total;
  int64_t rows;
  enum pts_status st = measure(name, reqs, n, PARTS_HOST, &total, &rows, err);
  if (st != PTS_OK) return st;
  struct pts_buf *b = pts_buf_new(total ? total : 1);
  if (!b)
    return pts_error_set(err, PTS_NOMEM, "out of memory gathering %zu bytes of input '%s'", total,
                         name);
  st = copy_into(name, reqs, n, b->data, err);
  if (st != PTS_OK) {
    pts_buf_release(b);
    return st;
  }
  describe(first, rows, n, total, dst);
  dst->data = b->data;
  dst->buf = b;
  dst->mem = PTS_MEM_HOST;
  *owned = b;
  return PTS_OK;
}

enum pts_status pts_batch_gather_size(const char *name, struct pts_infer_request *const *reqs,
                                      size_t n, size_t *bytes, struct pts_error *err) {
  *bytes = 0;
  if (!pts_request_input(reqs[0], name)) return PTS_OK;
  int64_t rows;
  return measure(name, reqs, n, PARTS_HOST, bytes, &rows, err);
}

enum pts_status pts_batch_gather_into(const char *name, struct pts_infer_request *const *reqs,
                                      size_t n, void *into, size_t cap, enum pts_mem mem,
                                      struct pts_tensor *dst, struct pts_error *err) {
  const struct pts_tensor *first = pts_request_input(reqs[0], name);
  if (!first) return PTS_OK;
  size_t total;
  int64_t rows;
  enum pts_status st = measure(name, reqs, n, PARTS_HOST, &total, &rows, err);
  if (st != PTS_OK) return st;
  if (total > cap)
    return pts_error_set(err, PTS_INTERNAL,
                         "input '%s' needs %zu bytes, the staging buffer holds %zu", name, total,
                         cap);
  st = copy_into(name, reqs, n, into, err);
  if (st != PTS_OK) return st;
  describe(first, rows, n, total, dst);
  dst->data = into;
  dst->buf = NULL;
  dst->mem = mem;
  return PTS_OK;
}

enum pts_status pts_batch_device_parts(const char *name, struct pts_infer_request *const *reqs,
                                       size_t n, struct pts_device_part *parts, size_t *total,
                                       struct pts_error *err) {
  int64_t rows;
  enum pts_status st = measure(name, reqs, n, PARTS_DEVICE, total, &rows, err);
  if (st != PTS_OK) return st;
  for (size_t i = 0; i < n; i++) {
    const struct pts_tensor *t = pts_request_input(reqs[i], name);
    parts[i] = (struct pts_device_part){t->data, t->byte_size, t->device};
  }
  return PTS_OK;
}

enum pts_status pts_batch_gathered(const char *name, struct pts_infer_request *const *reqs,
                                   size_t n, void *data, enum pts_mem mem, int device,
                                   struct pts_tensor *dst, struct pts_error *err) {
  const struct pts_tensor *first = pts_request_input(reqs[0], name);
  if (!first) return PTS_OK;
  size_t total;
  int64_t rows;
  enum pts_status st = measure(name, reqs, n, PARTS_ANY, &total, &rows, err);
  if (st != PTS_OK) return st;
  describe(first, rows, n, total, dst);
  dst->data = data;
  dst->buf = NULL;
  dst->mem = mem;
  dst->device = device;
  return PTS_OK;
}

/* Byte offsets of the row boundaries of a BYTES tensor: bounds[i] is where
 * slice i starts, bounds[n] the end. One pass over the length prefixes. */
static enum pts_status bytes_bounds(const struct pts_tensor *src, const int64_t *rows, size_t n,
                                    int64_t per_row, size_t *bounds, struct pts_error *err) {
  size_t offset = 0;
  bounds[0] = 0;
  for (size_t i = 0; i < n; i++) {
    for (int64_t e = 0; e < rows[i] * per_row; e++) {
      const char *elem;
      uint32_t len;
      if (pts_bytes_next(src->data, src->byte_size, &offset, &elem, &len) != 1)
        return pts_error_set(err, PTS_INTERNAL,
                             "BYTES output '%s' holds fewer elements than its shape says",
                             src->name ? src->name : "");
    }
    bounds[i + 1] = offset;
  }
  return PTS_OK;
}

static enum pts_status make_slice(const struct pts_tensor *src, int64_t rows, size_t from,
                                  size_t to, struct pts_tensor *out, struct pts_error *err) {
  out->name = pts_strdup(src->name ? src->name : "");
  if (!out->name)
    return pts_error_set(err, PTS_NOMEM, "out of memory slicing output '%s'", src->name);
  out->dtype = src->dtype;
  out->shape = src->shape;
  out->shape.dims[0] = rows;
  out->data = (const char *)src->data + from;
  out->byte_size = to - from;
  out->buf = pts_buf_retain(src->buf);
  return PTS_OK;
}

enum pts_status pts_batch_split(const struct pts_tensor *src, const int64_t *rows, size_t n,
                                struct pts_tensor *slices, struct pts_error *err) {
  int64_t total_rows = 0;
  for (size_t i = 0; i < n; i++) total_rows += rows[i];
  if (src->shape.ndim < 1 || src->shape.dims[0] != total_rows)
    return pts_error_set(
        err, PTS_INTERNAL, "output '%s' has %lld rows in its batch dimension, the batch has %lld",
        src->name ? src->name : "", (long long)(src->shape.ndim ? src->shape.dims[0] : -1),
        (long long)total_rows);
  int64_t count = pts_shape_count(&src->shape);
  int64_t per_row = total_rows ? count / total_rows : 0;
  size_t stack[17];
  size_t *bounds = n < 17 ? stack : pts_malloc((n + 1) * sizeof *bounds);
  if (!bounds) return pts_error_set(err, PTS_NOMEM, "out of memory slicing output '%s'", src->name);
  enum pts_status st = PTS_OK;
  if (src->dtype == PTS_DTYPE_BYTES) {
    st = bytes_bounds(src, rows, n, per_row, bounds, err);
  } else {
    size_t row_bytes = total_rows ? src->byte_size / (size_t)total_rows : 0;
    bounds[0] = 0;
    for (size_t i = 0; i < n; i++) bounds[i + 1] = bounds[i] + (size_t)rows[i] * row_bytes;
  }
  for (size_t i = 0; st == PTS_OK && i < n; i++)
    st = make_slice(src, rows[i], bounds[i], bounds[i + 1], &slices[i], err);
  if (st != PTS_OK)
    for (size_t i = 0; i < n; i++) pts_tensor_clear(&slices[i]);
  if (bounds != stack) pts_free(bounds);
  return st;
}
