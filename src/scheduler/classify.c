/* scheduler/classify.c — see classify.h. */
#include "scheduler/classify.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"

/* A label file larger than this is surely not one (a million classes of
 * 64 bytes each fit). */
#define LABELS_MAX_BYTES (64u << 20)

/* ------------------------------------------------------------ labels */

void pts_labels_clear(struct pts_labels *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) pts_free(l->names[i]);
  pts_free(l->names);
  l->n = 0;
  l->names = NULL;
}

static enum pts_status read_all(const char *path, char **text, size_t *len,
                                struct pts_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return pts_error_set(err, PTS_NOT_FOUND, "unable to read label file '%s': %s", path,
                         strerror(errno));
  struct stat st;
  enum pts_status s = PTS_OK;
  *text = NULL;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    s = pts_error_set(err, PTS_INVALID_ARG, "label file '%s' is not a regular file", path);
  } else if ((unsigned long long)st.st_size > LABELS_MAX_BYTES) {
    s = pts_error_set(err, PTS_INVALID_ARG, "label file '%s' is %lld bytes, more than the %u "
                      "allowed", path, (long long)st.st_size, LABELS_MAX_BYTES);
  } else if (!(*text = pts_malloc((size_t)st.st_size + 1))) {
    s = pts_error_set(err, PTS_NOMEM, "out of memory reading label file '%s'", path);
  } else {
    *len = fread(*text, 1, (size_t)st.st_size, f);
    if (ferror(f)) s = pts_error_set(err, PTS_INVALID_ARG, "error reading label file '%s'", path);
  }
  fclose(f);
  if (s != PTS_OK) {
    pts_free(*text);
    *text = NULL;
  }
  return s;
}

enum pts_status pts_labels_load(const char *path, struct pts_labels *out, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  char *text = NULL;
  size_t len = 0;
  enum pts_status s = read_all(path, &text, &len, err);
  if (s != PTS_OK) return s;
  size_t lines = 0;
  for (size_t i = 0; i < len; i++)
    if (text[i] == '\n') lines++;
  if (len > 0 && text[len - 1] != '\n') lines++;
  out->names = pts_calloc(lines ? lines : 1, sizeof *out->names);
  if (!out->names) {
    pts_free(text);
    return pts_error_set(err, PTS_NOMEM, "out of memory reading label file '%s'", path);
  }
  size_t start = 0;
  while (start < len) {
    size_t end = start;
    while (end < len && text[end] != '\n') end++;
    size_t n = end - start;
    if (n > 0 && text[start + n - 1] == '\r') n--;
    out->names[out->n] = pts_strndup(text + start, n);
    if (!out->names[out->n]) {
      pts_free(text);
      pts_labels_clear(out);
      return pts_error_set(err, PTS_NOMEM, "out of memory reading label file '%s'", path);
    }
    out->n++;
    start = end + 1;
  }
  pts_free(text);
  return PTS_OK;
}

/* ------------------------------------------------------------ top k */

enum kind { SIGNED, UNSIGNED, FLOATING };

struct entry {
  union {
    int64_t i;
    uint64_t u;
    double d;
  } v;
  size_t index;
};

bool pts_classify_supported(enum pts_dtype t) {
  switch (t) {
    case PTS_DTYPE_UINT8:
    case PTS_DTYPE_UINT16:
    case PTS_DTYPE_UINT32:
    case PTS_DTYPE_UINT64:
    case PTS_DTYPE_INT8:
    case PTS_DTYPE_INT16:
    case PTS_DTYPE_INT32:
    case PTS_DTYPE_INT64:
    case PTS_DTYPE_FP32:
    case PTS_DTYPE_FP64:
      return true;
    default:
      return false;
  }
}

static enum kind kind_of(enum pts_dtype t) {
  switch (t) {
    case PTS_DTYPE_UINT8:
    case PTS_DTYPE_UINT16:
    case PTS_DTYPE_UINT32:
    case PTS_DTYPE_UINT64:
      return UNSIGNED;
    case PTS_DTYPE_FP32:
    case PTS_DTYPE_FP64:
      return FLOATING;
    default:
      return SIGNED;
  }
}

/* Element i of a little-endian tensor, widened without loss. */
static void read_value(const unsigned char *data, enum pts_dtype t, size_t i, struct entry *e) {
  e->index = i;
  switch (t) {
#define WIDEN(DT, CT, FIELD)                        \
  case PTS_DTYPE_##DT: {                            \
    CT x;                                           \
    memcpy(&x, data + i * sizeof x, sizeof x);      \
    e->v.FIELD = x;                                 \
    break;                                          \
  }
    WIDEN(UINT8, uint8_t, u)
    WIDEN(UINT16, uint16_t, u)
    WIDEN(UINT32, uint32_t, u)
    WIDEN(UINT64, uint64_t, u)
    WIDEN(INT8, int8_t, i)
    WIDEN(INT16, int16_t, i)
    WIDEN(INT32, int32_t, i)
    WIDEN(INT64, int64_t, i)
    WIDEN(FP32, float, d)
    WIDEN(FP64, double, d)
#undef WIDEN
    default:
      e->v.u = 0;
  }
}

/* Highest first; ties by the lower index. */
static int by_index(const struct entry *a, const struct entry *b) {
  return a->index < b->index ? -1 : a->index > b->index;
}

static int cmp_signed(const void *pa, const void *pb) {
  const struct entry *a = pa, *b = pb;
  if (a->v.i != b->v.i) return a->v.i > b->v.i ? -1 : 1;
  return by_index(a, b);
}

static int cmp_unsigned(const void *pa, const void *pb) {
  const struct entry *a = pa, *b = pb;
  if (a->v.u != b->v.u) return a->v.u > b->v.u ? -1 : 1;
  return by_index(a, b);
}

/* NaN below every number, so that it never wins a class. */
static int cmp_floating(const void *pa, const void *pb) {
  const struct entry *a = pa, *b = pb;
  bool an = isnan(a->v.d), bn = isnan(b->v.d);
  if (an != bn) return an ? 1 : -1;
  if (!an && a->v.d != b->v.d) return a->v.d > b->v.d ? -1 : 1;
  return by_index(a, b);
}

/* The value as std::to_string prints the element's type: its length. */
static int format_value(char *buf, size_t size, enum kind k, const struct entry *e) {
  switch (k) {
    case SIGNED:
      return snprintf(buf, size, "%lld", (long long)e->v.i);
    case UNSIGNED:
      return snprintf(buf, size, "%llu", (unsigned long long)e->v.u);
    default:
      return snprintf(buf, size, "%f", e->v.d);
  }
}

/* "%f" of DBL_MAX is 317 characters; the index adds at most 21. */
#define ENTRY_TEXT_MAX 352

/* "<value>:<index>" into buf; returns its length. */
static size_t entry_text(char *buf, enum kind k, const struct entry *e) {
  int n = format_value(buf, ENTRY_TEXT_MAX, k, e);
  n += snprintf(buf + n, ENTRY_TEXT_MAX - (size_t)n, ":%zu", e->index);
  return (size_t)n;
}

static const char *label_of(const struct pts_labels *labels, size_t index) {
  return labels && index < labels->n ? labels->names[index] : NULL;
}

/* Each element of the result: 4-byte little-endian length, then the text
 * and, with a label, ":" and the label (tensor/bytes.h). */
static void put_u32le(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

enum pts_status pts_classify(const struct pts_tensor *out, bool batched, uint32_t k,
                             const struct pts_labels *labels, struct pts_tensor *result,
                             struct pts_error *err) {
  memset(result, 0, sizeof *result);
  const char *name = out->name ? out->name : "";
  if (!pts_classify_supported(out->dtype))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "output '%s': classification is not supported for datatype %s", name,
                         pts_dtype_name(out->dtype));
  int64_t total = pts_shape_count(&out->shape);
  int64_t rows = batched && out->shape.ndim > 0 ? out->shape.dims[0] : 1;
  size_t esize = pts_dtype_size(out->dtype);
  if (total < 0 || (uint64_t)total * esize > out->byte_size || (total > 0 && !out->data))
    return pts_error_set(err, PTS_INTERNAL, "output '%s': shape and data disagree", name);
  size_t count = rows > 0 ? (size_t)(total / rows) : 0;
  size_t n = k < count ? k : count;
  size_t n_rows = rows > 0 ? (size_t)rows : 0;

  struct entry *all = pts_malloc((count ? count : 1) * sizeof *all);
  size_t n_top = n_rows * n;
  struct entry *top = pts_malloc((n_top > 0 ? n_top : 1) * sizeof *top);
  if (!all || !top) {
    pts_free(all);
    pts_free(top);
    return pts_error_set(err, PTS_NOMEM, "out of memory classifying output '%s'", name);
  }
  enum kind kind = kind_of(out->dtype);
  int (*cmp)(const void *, const void *) =
      kind == SIGNED ? cmp_signed : kind == UNSIGNED ? cmp_unsigned : cmp_floating;
  const unsigned char *data = out->data;
  for (size_t r = 0; r < n_rows; r++) {
    for (size_t i = 0; i < count; i++) read_value(data + r * count * esize, out->dtype, i, &all[i]);
    qsort(all, count, sizeof *all, cmp);
    memcpy(top + r * n, all, n * sizeof *all);
  }
  pts_free(all);

  /* Two passes: the size, then the bytes. */
  char text[ENTRY_TEXT_MAX];
  size_t size = 0;
  for (size_t i = 0; i < n_rows * n; i++) {
    const char *label = label_of(labels, top[i].index);
    size += 4 + entry_text(text, kind, &top[i]) + (label ? 1 + strlen(label) : 0);
  }
  struct pts_buf *buf = pts_buf_new(size ? size : 1);
  result->name = pts_strdup(name);
  if (!buf || !result->name) {
    pts_free(top);
    pts_buf_release(buf);
    pts_tensor_clear(result);
    return pts_error_set(err, PTS_NOMEM, "out of memory classifying output '%s'", name);
  }
  unsigned char *p = buf->data;
  for (size_t i = 0; i < n_rows * n; i++) {
    const char *label = label_of(labels, top[i].index);
    size_t len = entry_text(text, kind, &top[i]);
    size_t label_len = label ? strlen(label) : 0;
    put_u32le(p, (uint32_t)(len + (label ? 1 + label_len : 0)));
    memcpy(p + 4, text, len);
    p += 4 + len;
    if (label) {
      *p++ = ':';
      memcpy(p, label, label_len);
      p += label_len;
    }
  }
  pts_free(top);
  result->dtype = PTS_DTYPE_BYTES;
  if (batched) {
    result->shape.ndim = 2;
    result->shape.dims[0] = rows;
    result->shape.dims[1] = (int64_t)n;
  } else {
    result->shape.ndim = 1;
    result->shape.dims[0] = (int64_t)n;
  }
  result->data = buf->data;
  result->byte_size = size;
  result->buf = buf;
  return PTS_OK;
}
