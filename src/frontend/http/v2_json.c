/* frontend/http/v2_json.c — see v2_json.h. */
#include "frontend/http/v2_json.h"

#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "config/json_arena.h"
#include "config/json_kind.h"
#include "core/alloc.h"
#include "core/fmt.h"
#include "frontend/http/jsonw.h"
#include "frontend/http/v2_fast.h"
#include "frontend/http/v2_values.h"
#include "tensor/bytes.h"

/* ------------------------------------------------------------------ */
/* helpers                                                             */

/* Integers above INT64_MAX, which jansson can not hold, are rewritten
 * before parsing as {BIG_KEY: index} objects (struct big_ints below). A
 * control character no sane client puts in a key; forging it would only
 * alias the client's own values. */
#define BIG_KEY "\x01u64"

/* What a value is, for messages (config/json_kind.h); a rewritten big
 * integer is named as the integer it was, never as the object that stands
 * in for it. */
static const char *json_kind(const json_t *v) {
  if (json_is_object(v) && json_object_size(v) == 1 && json_object_get(v, BIG_KEY))
    return "an integer above 9223372036854775807";
  return pts_json_kind_name(v);
}

static void put_le(unsigned char *p, uint64_t v, size_t size) {
  for (size_t i = 0; i < size; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, size_t size) {
  uint64_t v = 0;
  for (size_t i = 0; i < size; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* A JSON string as a C string; NULL when it holds a NUL byte (names must
 * not: "a\u0000b" would silently become "a"). */
static const char *plain_string(const json_t *v) {
  const char *s = json_string_value(v);
  if (!s || strlen(s) != json_string_length(v)) return NULL;
  return s;
}

static bool get_uint(const json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
  *out = (uint64_t)json_integer_value(v);
  return true;
}

/* ------------------------------------------------------------------ */
/* Inference-Header-Content-Length                                     */

enum pts_status pts_v2_header_length(const char *value, size_t body_len, size_t *header_len,
                                     struct pts_error *err) {
  if (!value) {
    *header_len = body_len;
    return PTS_OK;
  }
  size_t v = 0;
  const char *p = value;
  bool ok = *p != '\0';
  for (; *p && ok; p++) {
    if (*p < '0' || *p > '9' || v > (SIZE_MAX - 9) / 10)
      ok = false;
    else
      v = v * 10 + (size_t)(*p - '0');
  }
  if (!ok || v > body_len)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "Inference-Header-Content-Length header value '%.40s' must be an "
                         "integer in [0, %zu] (the request body length)",
                         value, body_len);
  *header_len = v;
  return PTS_OK;
}

enum pts_status pts_v2_decode_raw(struct pts_buf *body, const Inference__ModelConfig *cfg,
                                  struct pts_infer_request *req, struct pts_error *err) {
  /* Triton's checks, in Triton's order and words (QA and scripts match
   * them), each followed by what ptserve knows. */
  if (cfg->n_input != 1)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "Raw request must only have 1 input (found 1) to be deduced but got %zu "
                         "inputs in '%s' model configuration",
                         cfg->n_input, cfg->name);
  const Inference__ModelInput *in = cfg->input[0];
  enum pts_dtype dtype = (enum pts_dtype)in->data_type;
  struct pts_shape shape;
  if (!pts_shape_set(&shape, in->dims, in->n_dims) ||
      (cfg->max_batch_size != 0 && !pts_shape_prepend(&shape, 1)))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the raw input '%s' has %zu dimensions in '%s' model configuration, more "
                         "than ptserve supports",
                         in->name, in->n_dims, cfg->name);
  int variable = -1;
  int64_t known = 1; /* elements of the fixed dims */
  for (int i = cfg->max_batch_size != 0 ? 1 : 0; i < shape.ndim; i++) {
    int64_t d = shape.dims[i];
    if (d == -1) {
      if (variable >= 0)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "The shape of the raw input '%s' can not be deduced because there "
                             "are more than one variable-sized dimension (model '%s')",
                             in->name, cfg->name);
      variable = i;
    } else {
      known *= d; /* the configuration's dims were validated at load */
    }
  }
  struct pts_tensor *t = pts_infer_request_calloc(req, 1, sizeof *t);
  if (!t || !(t->name = pts_strdup(in->name))) {
    if (t) pts_free(t->name);
    return pts_error_set(err, PTS_NOMEM, "out of memory decoding a raw binary request");
  }
  req->inputs = t;
  req->n_inputs = 1;
  req->binary_data_output = true; /* every output, in binary */
  t->dtype = dtype;
  if (dtype == PTS_DTYPE_BYTES) {
    if (variable >= 0 || known != 1)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "For BYTE datatype raw input '%s', the model must have input shape "
                           "[1] (model '%s')",
                           in->name, cfg->name);
    if (body->size > UINT32_MAX)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "the raw BYTES input '%s' is %zu bytes, more than one element holds "
                           "(4294967295)",
                           in->name, body->size);
    /* One element: its 4-byte length, then the body. */
    struct pts_buf *el = pts_buf_new(4 + body->size);
    if (!el) return pts_error_set(err, PTS_NOMEM, "out of memory decoding a raw binary request");
    uint32_t n = (uint32_t)body->size;
    unsigned char *p = el->data;
    p[0] = (unsigned char)n, p[1] = (unsigned char)(n >> 8), p[2] = (unsigned char)(n >> 16),
    p[3] = (unsigned char)(n >> 24);
    if (body->size) memcpy(p + 4, body->data, body->size);
    t->buf = el;
    t->data = el->data;
    t->byte_size = el->size;
    t->shape = shape;
    return PTS_OK;
  }
  size_t elem = pts_dtype_size(dtype);
  if (variable >= 0) {
    /* known > 0: a zero fixed dim leaves nothing to deduce from */
    if (known <= 0 || body->size % (elem * (size_t)known) != 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "the raw input '%s' of model '%s' is %zu bytes, which is no whole "
                           "number of %s elements of the fixed dimensions (%" PRId64 " each)",
                           in->name, cfg->name, body->size, pts_dtype_name(dtype), known);
    shape.dims[variable] = (int64_t)(body->size / elem / (size_t)known);
  } else if ((uint64_t)known * elem != body->size) {
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the raw input '%s' of model '%s' is %zu bytes, but its shape from the "
                         "configuration needs %" PRIu64 " bytes of %s",
                         in->name, cfg->name, body->size, (uint64_t)known * elem,
                         pts_dtype_name(dtype));
  }
  t->shape = shape;
  t->buf = pts_buf_retain(body);
  t->data = body->data;
  t->byte_size = body->size;
  return PTS_OK;
}

/* ------------------------------------------------------------------ */
/* request parameters                                                  */

/* sequence_id (a non-negative integer or a string), sequence_start and
 * sequence_end (booleans): the sequence extension (protocol-facts §1.16).
 * Other sequence_* keys are custom parameters. */
static enum pts_status decode_sequence_param(const char *key, const json_t *v,
                                             struct pts_infer_request *req,
                                             struct pts_error *err) {
  if (strcmp(key, "sequence_id") == 0) {
    if (json_is_string(v)) {
      const char *id = plain_string(v);
      if (!id)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "request parameter 'sequence_id' must not contain NUL characters");
      pts_free(req->sequence_id_str);
      if (!(req->sequence_id_str = pts_strdup(id)))
        return pts_error_set(err, PTS_NOMEM, "out of memory decoding 'sequence_id'");
      return PTS_OK;
    }
    if (!get_uint(v, &req->sequence_id))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "request parameter 'sequence_id' must be a non-negative integer or a "
                           "string, got %s",
                           json_kind(v));
    return PTS_OK;
  }
  bool *flag = strcmp(key, "sequence_start") == 0 ? &req->sequence_start
               : strcmp(key, "sequence_end") == 0 ? &req->sequence_end
                                                  : NULL;
  if (!flag) return PTS_OK;
  if (!json_is_boolean(v))
    return pts_error_set(err, PTS_INVALID_ARG, "request parameter '%s' must be a boolean, got %s",
                         key, json_kind(v));
  *flag = json_is_true(v);
  return PTS_OK;
}

/* A custom parameter goes on to the model (core/request_param.h) with
 * its JSON type, as Triton's SetTritonParameterFromJsonParameter does; a
 * value of another kind (object, array, null) is accepted and not kept. */
static enum pts_status custom_param(const char *key, const json_t *v,
                                    struct pts_infer_request *req, struct pts_error *err) {
  struct pts_request_param p = {.key = (char *)key};
  if (json_is_string(v)) {
    p.type = PTS_PARAM_STRING;
    p.v.s = (char *)plain_string(v);
    if (!p.v.s)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "request parameter '%s' must not contain NUL characters", key);
  } else if (json_is_integer(v)) {
    p.type = PTS_PARAM_INT;
    p.v.i = (int64_t)json_integer_value(v);
  } else if (json_is_boolean(v)) {
    p.type = PTS_PARAM_BOOL;
    p.v.b = json_is_true(v);
  } else if (json_is_real(v)) {
    p.type = PTS_PARAM_DOUBLE;
    p.v.d = json_real_value(v);
  } else {
    return PTS_OK;
  }
  return pts_infer_request_add_param(req, &p, err);
}

enum pts_status pts_v2_decode_params(const json_t *params, struct pts_infer_request *req,
                                     struct pts_error *err) {
  if (!params) return PTS_OK;
  if (!json_is_object(params))
    return pts_error_set(err, PTS_INVALID_ARG, "request 'parameters' must be an object, got %s",
                         json_kind(params));
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)params, key, v) {
    if (strncmp(key, "triton_", 7) == 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "request parameter '%s' is reserved: keys starting with 'triton_' "
                           "can not be set by a client",
                           key);
    if (strcmp(key, "binary_data_output") == 0) {
      if (!json_is_boolean(v))
        return pts_error_set(err, PTS_INVALID_ARG,
                             "request parameter 'binary_data_output' must be a boolean, got %s",
                             json_kind(v));
      req->binary_data_output = json_is_true(v);
    } else if (strcmp(key, "priority") == 0) {
      if (!get_uint(v, &req->priority))
        return pts_error_set(err, PTS_INVALID_ARG,
                             "request parameter 'priority' must be a non-negative integer, got %s",
                             json_kind(v));
    } else if (strcmp(key, "timeout") == 0) {
      if (!get_uint(v, &req->timeout_us))
        return pts_error_set(err, PTS_INVALID_ARG,
                             "request parameter 'timeout' must be a non-negative integer "
                             "(microseconds), got %s",
                             json_kind(v));
    } else if (strncmp(key, "sequence_", 9) == 0) {
      enum pts_status st = decode_sequence_param(key, v, req, err);
      if (st != PTS_OK) return st;
    } else {
      enum pts_status st = custom_param(key, v, req, err);
      if (st != PTS_OK) return st;
    }
  }
  return PTS_OK;
}

/* ------------------------------------------------------------------ */
/* JSON tensor data                                                    */

/* Integer literals above INT64_MAX, which jansson can not hold: the
 * request text is rewritten so each becomes {"\x01u64": k}, k indexing this
 * table (see parse_request). Only UINT64 data accepts them. */
struct big_ints {
  uint64_t *vals; /* owned (pts_free) */
  size_t n;
};

/* The value of a rewritten big integer, if `v` is one. */
static bool big_int_value(const struct big_ints *bigs, const json_t *v, uint64_t *out) {
  if (!bigs || !json_is_object(v) || json_object_size(v) != 1) return false;
  const json_t *k = json_object_get(v, BIG_KEY);
  if (!json_is_integer(k) || json_integer_value(k) < 0 || (size_t)json_integer_value(k) >= bigs->n)
    return false;
  *out = bigs->vals[json_integer_value(k)];
  return true;
}

struct walk {
  const struct big_ints *bigs;
  const char *name;  /* input name, for messages */
  const char *field; /* the JSON value, for messages ("'data'") */
  enum pts_dtype dtype;
  int64_t count;      /* leaves seen */
  size_t bytes;       /* BYTES: serialized size */
  unsigned char *out; /* pass 2 */
  size_t out_size;
  size_t used;
  struct pts_error *err;
};

/* Pass 1: counts leaves, sizes strings, enforces the depth limit. */
static enum pts_status count_leaves(const json_t *arr, int depth, struct walk *w) {
  if (depth > PTS_V2_MAX_DATA_DEPTH)
    return pts_error_set(w->err, PTS_INVALID_ARG,
                         "JSON nesting depth exceeds maximum allowed limit (%d): input '%s': "
                         "%s is nested deeper than %d levels",
                         PTS_V2_MAX_DATA_DEPTH, w->name, w->field, PTS_V2_MAX_DATA_DEPTH);
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    if (json_is_array(v)) {
      enum pts_status st = count_leaves(v, depth + 1, w);
      if (st != PTS_OK) return st;
      continue;
    }
    w->count++;
    if (json_is_string(v)) w->bytes += 4 + json_string_length(v);
  }
  return PTS_OK;
}

static enum pts_status bad_type(struct walk *w, const json_t *v, const char *want) {
  return pts_error_set(w->err, PTS_INVALID_ARG,
                       "input '%s': element %" PRId64
                       " of %s must be %s for datatype %s, "
                       "got %s",
                       w->name, w->count, w->field, want, pts_dtype_name(w->dtype), json_kind(v));
}

/* Signed range of an INT* type of `size` bytes. */
static void int_range(size_t size, int64_t *lo, int64_t *hi) {
  if (size == 8) {
    *lo = INT64_MIN;
    *hi = INT64_MAX;
  } else {
    *hi = ((int64_t)1 << (8 * size - 1)) - 1;
    *lo = -*hi - 1;
  }
}

static enum pts_status put_integer(struct walk *w, const json_t *v, bool is_signed) {
  size_t size = pts_dtype_size(w->dtype);
  uint64_t big;
  if (big_int_value(w->bigs, v, &big)) {
    if (is_signed || size != 8)
      return pts_error_set(w->err, PTS_INVALID_ARG,
                           "input '%s': element %" PRId64 " of %s (%" PRIu64
                           ") is out of "
                           "range for %s",
                           w->name, w->count, w->field, big, pts_dtype_name(w->dtype));
    put_le(w->out + w->used, big, 8);
    w->used += 8;
    return PTS_OK;
  }
  if (!json_is_integer(v))
    return bad_type(w, v, is_signed ? "an integer" : "a non-negative integer");
  json_int_t x = json_integer_value(v);
  if (is_signed) {
    int64_t lo, hi;
    int_range(size, &lo, &hi);
    if (x < lo || x > hi)
      return pts_error_set(w->err, PTS_INVALID_ARG,
                           "input '%s': element %" PRId64
                           " of %s (%lld) is out of range "
                           "for %s [%" PRId64 ", %" PRId64 "]",
                           w->name, w->count, w->field, (long long)x, pts_dtype_name(w->dtype), lo,
                           hi);
  } else {
    uint64_t hi = size == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * size)) - 1;
    if (x < 0 || (uint64_t)x > hi)
      return pts_error_set(w->err, PTS_INVALID_ARG,
                           "input '%s': element %" PRId64
                           " of %s (%lld) is out of range "
                           "for %s [0, %" PRIu64 "]",
                           w->name, w->count, w->field, (long long)x, pts_dtype_name(w->dtype), hi);
  }
  put_le(w->out + w->used, (uint64_t)x, size);
  w->used += size;
  return PTS_OK;
}

static enum pts_status put_leaf(struct walk *w, const json_t *v) {
  switch (w->dtype) {
    case PTS_DTYPE_BOOL:
      if (!json_is_boolean(v)) return bad_type(w, v, "true or false");
      w->out[w->used++] = json_is_true(v) ? 1 : 0;
      return PTS_OK;
    case PTS_DTYPE_INT8:
    case PTS_DTYPE_INT16:
    case PTS_DTYPE_INT32:
    case PTS_DTYPE_INT64:
      return put_integer(w, v, true);
    case PTS_DTYPE_UINT8:
    case PTS_DTYPE_UINT16:
    case PTS_DTYPE_UINT32:
    case PTS_DTYPE_UINT64:
      return put_integer(w, v, false);
    case PTS_DTYPE_FP32: {
      if (!json_is_number(v)) return bad_type(w, v, "a number");
      double d = json_number_value(v);
      if (d > FLT_MAX || d < -FLT_MAX)
        return pts_error_set(w->err, PTS_INVALID_ARG,
                             "input '%s': element %" PRId64
                             " of %s (%g) is out of range "
                             "for FP32",
                             w->name, w->count, w->field, d);
      float f = (float)d;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      put_le(w->out + w->used, bits, 4);
      w->used += 4;
      return PTS_OK;
    }
    case PTS_DTYPE_FP64: {
      if (!json_is_number(v)) return bad_type(w, v, "a number");
      double d = json_number_value(v);
      uint64_t bits;
      memcpy(&bits, &d, 8);
      put_le(w->out + w->used, bits, 8);
      w->used += 8;
      return PTS_OK;
    }
    case PTS_DTYPE_BYTES: {
      if (!json_is_string(v)) return bad_type(w, v, "a string");
      size_t n = json_string_length(v);
      if (n > UINT32_MAX)
        return pts_error_set(w->err, PTS_INVALID_ARG,
                             "input '%s': element %" PRId64 " of %s is longer than 4 GiB",
                             w->name, w->count, w->field);
      pts_bytes_put(w->out, w->out_size, &w->used, json_string_value(v), (uint32_t)n);
      return PTS_OK;
    }
    default:
      return pts_error_set(w->err, PTS_INVALID_ARG,
                           "input '%s': datatype %s can not be given as JSON data; use the binary "
                           "data extension (parameters.binary_data_size)",
                           w->name, pts_dtype_name(w->dtype));
  }
}

/* Pass 2: converts every leaf, row-major (nested arrays flatten in order). */
static enum pts_status fill_leaves(const json_t *arr, struct walk *w) {
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    enum pts_status st = json_is_array(v) ? fill_leaves(v, w) : put_leaf(w, v);
    if (st != PTS_OK) return st;
    if (!json_is_array(v)) w->count++;
  }
  return PTS_OK;
}

static enum pts_status decode_json_data(const json_t *data, int64_t expected,
                                        const struct big_ints *bigs, const char *field,
                                        struct pts_tensor *t, struct pts_error *err) {
  char shape[256];
  if (!json_is_array(data))
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s': %s must be an array, got %s",
                         t->name, field, json_kind(data));
  if (t->dtype == PTS_DTYPE_FP16 || t->dtype == PTS_DTYPE_BF16)
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s': datatype %s has no JSON form",
                         t->name, pts_dtype_name(t->dtype));
  struct walk w = {.bigs = bigs, .name = t->name, .field = field, .dtype = t->dtype, .err = err};
  enum pts_status st = count_leaves(data, 1, &w);
  if (st != PTS_OK) return st;
  if (w.count != expected) {
    pts_shape_format(&t->shape, shape, sizeof shape);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s': %s has %" PRId64 " elements, but shape %s has %" PRId64,
                         t->name, field, w.count, shape, expected);
  }
  size_t size = t->dtype == PTS_DTYPE_BYTES ? w.bytes : (size_t)w.count * pts_dtype_size(t->dtype);
  struct pts_buf *buf = pts_buf_new(size);
  if (!buf) return pts_error_set(err, PTS_NOMEM, "out of memory decoding input '%s'", t->name);
  w.out = buf->data;
  w.out_size = size;
  w.count = 0;
  st = fill_leaves(data, &w);
  if (st != PTS_OK) {
    pts_buf_release(buf);
    return st;
  }
  t->buf = buf;
  t->data = buf->data;
  t->byte_size = size;
  return PTS_OK;
}

enum pts_status pts_v2_decode_values(const json_t *data, int64_t expected, const char *field,
                                     struct pts_tensor *t, struct pts_error *err) {
  return decode_json_data(data, expected, NULL, field, t, err);
}

/* ------------------------------------------------------------------ */
/* inputs                                                              */

static enum pts_status decode_shape(const json_t *shape, struct pts_tensor *t,
                                    struct pts_error *err) {
  if (!json_is_array(shape))
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s': 'shape' must be an array, got %s",
                         t->name, shape ? json_kind(shape) : "nothing");
  size_t n = json_array_size(shape);
  if (n > PTS_TENSOR_MAX_DIMS)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s': 'shape' has %zu dimensions, more than the %d supported",
                         t->name, n, PTS_TENSOR_MAX_DIMS);
  t->shape.ndim = (int)n;
  for (size_t i = 0; i < n; i++) {
    const json_t *d = json_array_get(shape, i);
    if (!json_is_integer(d) || json_integer_value(d) < 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s': 'shape' element %zu must be a non-negative integer, "
                           "got %s",
                           t->name, i, json_kind(d));
    t->shape.dims[i] = json_integer_value(d);
  }
  return PTS_OK;
}

/* The shared-memory parameters of an input or a requested output
 * (protocol-facts §1.15): shared_memory_region (string), then
 * shared_memory_byte_size (unsigned integer, required with a region) and
 * shared_memory_offset (unsigned integer, default 0). `what` is "input
 * 'x'" or "output 'x'". Leaves place->region NULL when no region is named;
 * a size or offset without a region is an error. */
static enum pts_status decode_shm_params(const json_t *params, const char *what,
                                         const struct big_ints *bigs,
                                         struct pts_shm_place *place, struct pts_error *err) {
  const json_t *region = json_object_get(params, "shared_memory_region");
  const json_t *size = json_object_get(params, "shared_memory_byte_size");
  const json_t *offset = json_object_get(params, "shared_memory_offset");
  if (!region) {
    if (size || offset)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "%s: 'shared_memory_%s' is given without 'shared_memory_region'", what,
                           size ? "byte_size" : "offset");
    return PTS_OK;
  }
  const char *name = plain_string(region);
  if (!name || !name[0])
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s: 'shared_memory_region' must be a non-empty string, got %s", what,
                         json_is_string(region) ? "an empty string or one with NUL bytes"
                                                : json_kind(region));
  if (!size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s: 'shared_memory_byte_size' must be given with 'shared_memory_region'",
                         what);
  /* Any uint64, as in Triton: a size or an offset past INT64_MAX is then
   * refused by the region's bounds, in Triton's words (shm.h). */
  if (!get_uint(size, &place->byte_size) && !big_int_value(bigs, size, &place->byte_size))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s: 'shared_memory_byte_size' must be a non-negative integer, got %s",
                         what, json_kind(size));
  place->offset = 0;
  if (offset && !get_uint(offset, &place->offset) && !big_int_value(bigs, offset, &place->offset))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s: 'shared_memory_offset' must be a non-negative integer, got %s", what,
                         json_kind(offset));
  place->region = pts_strdup(name);
  if (!place->region) return pts_error_set(err, PTS_NOMEM, "%s: out of memory", what);
  return PTS_OK;
}

static enum pts_status decode_binary(const json_t *size_v, struct pts_buf *body, size_t *offset,
                                     int64_t count, struct pts_tensor *t, struct pts_error *err) {
  uint64_t size;
  if (!get_uint(size_v, &size))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s': 'binary_data_size' must be a non-negative integer, got %s",
                         t->name, json_kind(size_v));
  size_t left = body->size - *offset;
  if (size > left)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "unexpected size for input '%s': expecting %" PRIu64
                         " additional bytes of binary data, but only %zu remain in the request "
                         "body",
                         t->name, size, left);
  if (t->dtype != PTS_DTYPE_BYTES) {
    uint64_t want = (uint64_t)count * pts_dtype_size(t->dtype);
    if (count > 0 && want / (uint64_t)count != pts_dtype_size(t->dtype)) want = UINT64_MAX;
    if (size != want) {
      char shape[256];
      pts_shape_format(&t->shape, shape, sizeof shape);
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s': 'binary_data_size' is %" PRIu64
                           " bytes, but shape %s of %s needs %" PRIu64 " bytes",
                           t->name, size, shape, pts_dtype_name(t->dtype), want);
    }
  }
  t->buf = pts_buf_retain(body);
  t->data = (const unsigned char *)body->data + *offset;
  t->byte_size = (size_t)size;
  *offset += (size_t)size;
  return PTS_OK;
}

static enum pts_status decode_input(const json_t *in, size_t index, struct pts_buf *body,
                                    size_t *offset, const struct big_ints *bigs,
                                    struct pts_infer_request *req, struct pts_error *err) {
  struct pts_tensor *t = &req->inputs[index];
  if (!json_is_object(in))
    return pts_error_set(err, PTS_INVALID_ARG, "element %zu of 'inputs' must be an object, got %s",
                         index, json_kind(in));
  const char *name = plain_string(json_object_get(in, "name"));
  if (!name)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "element %zu of 'inputs' has no 'name' string (without NUL bytes)", index);
  t->name = pts_infer_request_strdup(req, name);
  if (!t->name) return pts_error_set(err, PTS_NOMEM, "out of memory decoding input %zu", index);

  const json_t *dt = json_object_get(in, "datatype");
  if (!json_is_string(dt))
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s': 'datatype' must be a string, got %s",
                         name, dt ? json_kind(dt) : "nothing");
  t->dtype = pts_dtype_from_name(plain_string(dt));
  if (t->dtype == PTS_DTYPE_INVALID)
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s': unknown datatype '%.64s'", name,
                         json_string_value(dt));

  enum pts_status st = decode_shape(json_object_get(in, "shape"), t, err);
  if (st != PTS_OK) return st;
  int64_t count = pts_shape_count(&t->shape);
  size_t elem = pts_dtype_size(t->dtype); /* 0 for BYTES */
  if (count < 0 || (elem && count > INT64_MAX / (int64_t)elem)) {
    /* Triton's phrases (its QA matches them), then the shape. */
    char shape[256];
    pts_shape_format(&t->shape, shape, sizeof shape);
    if (count < 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s': shape %s causes total element count to exceed maximum "
                           "size of %" PRId64,
                           name, shape, INT64_MAX);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "byte size overflow for input '%s': shape %s of %s is more than %" PRId64
                         " bytes",
                         name, shape, pts_dtype_name(t->dtype), INT64_MAX);
  }

  const json_t *params = json_object_get(in, "parameters");
  if (params && !json_is_object(params))
    return pts_error_set(err, PTS_INVALID_ARG, "input '%s': 'parameters' must be an object, got %s",
                         name, json_kind(params));
  const json_t *data = json_object_get(in, "data");
  const json_t *bds = params ? json_object_get(params, "binary_data_size") : NULL;
  const json_t *shm = params ? json_object_get(params, "shared_memory_region") : NULL;
  if (!shm && params &&
      (json_object_get(params, "shared_memory_byte_size") ||
       json_object_get(params, "shared_memory_offset")))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s': 'shared_memory_%s' is given without 'shared_memory_region'",
                         name,
                         json_object_get(params, "shared_memory_byte_size") ? "byte_size"
                                                                             : "offset");
  int set = (data != NULL) + (bds != NULL) + (shm != NULL);
  if (set != 1) {
    char what[160] = "none of them";
    if (set > 1)
      snprintf(what, sizeof what, "%s%s%s", data ? "'data' " : "",
               bds ? "'parameters.binary_data_size' " : "",
               shm ? "'parameters.shared_memory_region' " : "");
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s' must set exactly one of 'data', "
                         "'parameters.binary_data_size' and 'parameters.shared_memory_region'; "
                         "it sets %s",
                         name, what);
  }
  if (shm) {
    /* The bytes are in a registered region: the server resolves the place
     * (and checks the size against the shape) before validation. */
    struct pts_shm_place *place = pts_infer_request_input_shm(req, index);
    if (!place) return pts_error_set(err, PTS_NOMEM, "out of memory decoding input '%s'", name);
    char what[PTS_ERROR_MSG_MAX / 4];
    snprintf(what, sizeof what, "input '%s'", name);
    return decode_shm_params(params, what, bigs, place, err);
  }
  if (bds) return decode_binary(bds, body, offset, count, t, err);
  if (t->dtype == PTS_DTYPE_FP16 || t->dtype == PTS_DTYPE_BF16)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s': datatype %s can not be given as JSON data; use the binary "
                         "data extension (parameters.binary_data_size)",
                         t->name, pts_dtype_name(t->dtype));
  return decode_json_data(data, count, bigs, "'data'", t, err);
}

static enum pts_status decode_inputs(const json_t *root, struct pts_buf *body, size_t header_len,
                                     const struct big_ints *bigs, struct pts_infer_request *req,
                                     struct pts_error *err) {
  const json_t *inputs = json_object_get(root, "inputs");
  if (!json_is_array(inputs))
    return pts_error_set(err, PTS_INVALID_ARG, "request JSON must contain an 'inputs' array%s",
                         inputs ? "" : " (it has none)");
  size_t n = json_array_size(inputs);
  req->inputs = pts_infer_request_calloc(req, n, sizeof *req->inputs);
  if (!req->inputs) return pts_error_set(err, PTS_NOMEM, "out of memory decoding inputs");
  req->n_inputs = n;
  size_t offset = header_len;
  for (size_t i = 0; i < n; i++) {
    enum pts_status st =
        decode_input(json_array_get(inputs, i), i, body, &offset, bigs, req, err);
    if (st != PTS_OK) return st;
    for (size_t j = 0; j < i; j++)
      if (strcmp(req->inputs[j].name, req->inputs[i].name) == 0)
        return pts_error_set(err, PTS_INVALID_ARG, "input '%s' appears more than once in request",
                             req->inputs[i].name);
  }
  if (offset != body->size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "unexpected additional input data: %zu bytes after the JSON header and "
                         "the binary data of every input",
                         body->size - offset);
  return PTS_OK;
}

/* ------------------------------------------------------------------ */
/* requested outputs                                                   */

static enum pts_status decode_output(const json_t *o, size_t index, const struct big_ints *bigs,
                                     struct pts_infer_request *req,
                                     struct pts_requested_output *ro, struct pts_error *err) {
  if (!json_is_object(o))
    return pts_error_set(err, PTS_INVALID_ARG, "element %zu of 'outputs' must be an object, got %s",
                         index, json_kind(o));
  const char *name = plain_string(json_object_get(o, "name"));
  if (!name)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "element %zu of 'outputs' has no 'name' string (without NUL bytes)",
                         index);
  ro->name = pts_infer_request_strdup(req, name);
  if (!ro->name) return pts_error_set(err, PTS_NOMEM, "out of memory decoding output %zu", index);
  const json_t *params = json_object_get(o, "parameters");
  if (!params) return PTS_OK;
  if (!json_is_object(params))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "output '%s': 'parameters' must be an object, got %s", name,
                         json_kind(params));
  const json_t *bin = json_object_get(params, "binary_data");
  if (bin) {
    if (!json_is_boolean(bin))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "output '%s': 'binary_data' must be a boolean, got %s", name,
                           json_kind(bin));
    ro->binary = json_is_true(bin);
    ro->binary_set = true;
  }
  const json_t *cls = json_object_get(params, "classification");
  if (cls) {
    uint64_t k;
    if (!get_uint(cls, &k) || k == 0 || k > UINT32_MAX)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "output '%s': 'classification' must be a positive integer", name);
    ro->classification = (uint32_t)k;
  }
  char what[PTS_ERROR_MSG_MAX / 4];
  snprintf(what, sizeof what, "output '%s'", name);
  enum pts_status st = decode_shm_params(params, what, bigs, &ro->shm, err);
  if (st != PTS_OK) return st;
  if (ro->shm.region && ro->binary)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "output '%s' can not set both 'binary_data' (true) and "
                         "'shared_memory_region': its bytes go to the region",
                         name);
  /* §1.9: classification replaces the output by strings; Triton refuses it
   * together with shared memory. */
  if (ro->shm.region && ro->classification > 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "output '%s': 'classification' can not be combined with shared memory",
                         name);
  return PTS_OK;
}

static enum pts_status decode_outputs(const json_t *root, const struct big_ints *bigs,
                                      struct pts_infer_request *req, struct pts_error *err) {
  const json_t *outputs = json_object_get(root, "outputs");
  if (!outputs) return PTS_OK;
  if (!json_is_array(outputs))
    return pts_error_set(err, PTS_INVALID_ARG, "request 'outputs' must be an array, got %s",
                         json_kind(outputs));
  size_t n = json_array_size(outputs);
  if (n == 0) return PTS_OK;
  req->outputs = pts_infer_request_calloc(req, n, sizeof *req->outputs);
  if (!req->outputs) return pts_error_set(err, PTS_NOMEM, "out of memory decoding outputs");
  req->n_outputs = n;
  for (size_t i = 0; i < n; i++) {
    enum pts_status st =
        decode_output(json_array_get(outputs, i), i, bigs, req, &req->outputs[i], err);
    if (st != PTS_OK) return st;
    for (size_t j = 0; j < i; j++)
      if (strcmp(req->outputs[j].name, req->outputs[i].name) == 0)
        return pts_error_set(err, PTS_INVALID_ARG, "output '%s' already exists in request",
                             req->outputs[i].name);
  }
  return PTS_OK;
}

/* ------------------------------------------------------------------ */
/* the request                                                         */

/* Length of the number token at s[0..n), or 0 if none starts there. */
static size_t number_token(const char *s, size_t n) {
  size_t i = 0;
  while (i < n && (strchr("0123456789+-.eE", s[i]) != NULL)) i++;
  return i;
}

/* Parses an all-digit token above INT64_MAX that fits uint64. */
static bool parse_big(const char *s, size_t n, uint64_t *out) {
  if (n < 19 || n > 20) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (v <= (uint64_t)INT64_MAX) return false;
  *out = v;
  return true;
}

/* Copies the JSON text with every integer literal in (INT64_MAX, UINT64_MAX]
 * outside strings replaced by {"\u0001u64":k}. Returns NULL on OOM. */
static char *rewrite_big_ints(const char *s, size_t n, struct big_ints *bigs, size_t *out_len) {
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  size_t i = 0, copied = 0;
  bool in_string = false;
  while (i < n) {
    char c = s[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = false;
      i++;
      continue;
    }
    if (c == '"') {
      in_string = true;
      i++;
      continue;
    }
    size_t len = (c == '-' || (c >= '0' && c <= '9')) ? number_token(s + i, n - i) : 0;
    uint64_t v;
    if (len && parse_big(s + i, len, &v)) {
      uint64_t *grown = pts_realloc(bigs->vals, (bigs->n + 1) * sizeof *grown);
      if (!grown) {
        pts_jsonw_free(&w);
        return NULL;
      }
      bigs->vals = grown;
      bigs->vals[bigs->n] = v;
      pts_jsonw_raw(&w, s + copied, i - copied);
      pts_jsonw_cstr(&w, "{\"\\u0001u64\":");
      pts_jsonw_uint(&w, bigs->n);
      pts_jsonw_raw(&w, "}", 1);
      bigs->n++;
      copied = i + len;
    }
    i += len ? len : 1;
  }
  pts_jsonw_raw(&w, s + copied, n - copied);
  return pts_jsonw_take(&w, out_len);
}

static enum pts_status parse_request(const char *text, size_t n, struct big_ints *bigs,
                                     json_t **root, struct pts_error *err) {
  const size_t flags = JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
  json_error_t je;
  *root = json_loadb(text, n, flags, &je);
  if (!*root && bigs && strncmp(je.text, "too big integer", 15) == 0) {
    /* UINT64 data may legally go up to 2^64-1 (§5); give jansson a text
     * it can hold and keep the values aside. */
    size_t len;
    char *again = rewrite_big_ints(text, n, bigs, &len);
    if (!again) return pts_error_set(err, PTS_NOMEM, "out of memory parsing the request JSON");
    if (bigs->n > 0) *root = json_loadb(again, len, flags, &je);
    pts_free(again);
  }
  if (!*root)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to parse the request JSON at line %d column %d: %s", je.line,
                         je.column, je.text);
  return PTS_OK;
}

enum pts_status pts_v2_parse_json(const char *text, size_t n, json_t **root,
                                  struct pts_error *err) {
  return parse_request(text, n, NULL, root, err);
}

const char *pts_v2_json_kind(const json_t *v) { return json_kind(v); }

enum pts_status pts_v2_decode_infer(struct pts_buf *body, size_t header_len,
                                    struct pts_infer_request *req, struct pts_error *err) {
  if (header_len <= body->size) {
    enum pts_v2_fast f = pts_v2_fast_decode(body, header_len, req);
    if (f == PTS_V2_FAST_DONE) return PTS_OK;
    if (f == PTS_V2_FAST_NOMEM)
      return pts_error_set(err, PTS_NOMEM, "out of memory decoding the request");
  }
  return pts_v2_decode_infer_tree(body, header_len, req, err);
}

enum pts_status pts_v2_decode_infer_tree(struct pts_buf *body, size_t header_len,
                                         struct pts_infer_request *req, struct pts_error *err) {
  if (header_len > body->size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "inference header length %zu is larger than the %zu-byte request body",
                         header_len, body->size);
  struct big_ints bigs = {0};
  json_t *root = NULL;
  /* The document lives only in this call: its values come from the
   * thread's scratch buffer (config/json_arena.h), released at the end. */
  pts_json_arena_begin();
  enum pts_status st = parse_request(body->data, header_len, &bigs, &root, err);
  if (st != PTS_OK) {
    pts_json_arena_end();
    pts_free(bigs.vals);
    return st;
  }
  if (!json_is_object(root)) {
    st = pts_error_set(err, PTS_INVALID_ARG, "the request JSON must be an object, got %s",
                       json_kind(root));
    goto done;
  }
  const json_t *id = json_object_get(root, "id");
  if (id) {
    const char *s = plain_string(id);
    if (!s) {
      st = pts_error_set(err, PTS_INVALID_ARG, "request 'id' must be a string, got %s",
                         json_kind(id));
      goto done;
    }
    req->id = pts_infer_request_strdup(req, s);
    if (!req->id) {
      st = pts_error_set(err, PTS_NOMEM, "out of memory decoding the request id");
      goto done;
    }
  }
  st = pts_v2_decode_params(json_object_get(root, "parameters"), req, err);
  if (st == PTS_OK) st = decode_inputs(root, body, header_len, &bigs, req, err);
  if (st == PTS_OK) st = decode_outputs(root, &bigs, req, err);
done:
  json_decref(root);
  pts_json_arena_end();
  pts_free(bigs.vals);
  return st;
}

/* ------------------------------------------------------------------ */
/* response encoding                                                   */

static void write_shape(struct pts_jsonw *w, const struct pts_shape *s) {
  pts_jsonw_raw(w, "[", 1);
  for (int i = 0; i < s->ndim; i++) {
    if (i) pts_jsonw_raw(w, ",", 1);
    pts_jsonw_int(w, s->dims[i]);
  }
  pts_jsonw_raw(w, "]", 1);
}

static enum pts_status refuse_json(const struct pts_tensor *t, const char *why,
                                   struct pts_error *err) {
  return pts_error_set(err, PTS_INVALID_ARG, "output '%s' can not be returned as JSON: %s",
                       t->name, why);
}

static enum pts_status write_bytes_data(struct pts_jsonw *w, const struct pts_tensor *t,
                                        int64_t count, struct pts_error *err) {
  size_t off = 0;
  const char *e;
  uint32_t len;
  int64_t i = 0;
  int r;
  while ((r = pts_bytes_next(t->data, t->byte_size, &off, &e, &len)) == 1) {
    if (i) pts_jsonw_raw(w, ",", 1);
    if (!pts_jsonw_utf8(w, e, len)) {
      char why[64];
      snprintf(why, sizeof why, "element %" PRId64 " is not valid UTF-8", i);
      return refuse_json(t, why, err);
    }
    i++;
  }
  if (r < 0 || i != count)
    return pts_error_set(err, PTS_INTERNAL,
                         "output '%s' holds %" PRId64
                         " well-formed BYTES elements, but its shape "
                         "has %" PRId64,
                         t->name, i, count);
  return PTS_OK;
}

static enum pts_status write_fixed_data(struct pts_jsonw *w, const struct pts_tensor *t,
                                        int64_t count, struct pts_error *err) {
  size_t es = pts_dtype_size(t->dtype);
  if ((uint64_t)count * es != t->byte_size)
    return pts_error_set(err, PTS_INTERNAL,
                         "output '%s' has %zu bytes, but its shape needs %" PRIu64, t->name,
                         t->byte_size, (uint64_t)count * es);
  const unsigned char *p = t->data;
  for (int64_t i = 0; i < count; i++, p += es) {
    if (i) pts_jsonw_raw(w, ",", 1);
    uint64_t raw = get_le(p, es);
    switch (t->dtype) {
      case PTS_DTYPE_BOOL:
        pts_jsonw_bool(w, raw != 0);
        break;
      case PTS_DTYPE_INT8:
      case PTS_DTYPE_INT16:
      case PTS_DTYPE_INT32:
      case PTS_DTYPE_INT64: {
        /* Sign-extend from the element width. */
        unsigned shift = (unsigned)(64 - 8 * es);
        int64_t v = (int64_t)(raw << shift) >> shift;
        pts_jsonw_int(w, v);
        break;
      }
      case PTS_DTYPE_FP32: {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, 4);
        if (!pts_jsonw_double(w, (double)f)) return refuse_json(t, "it holds NaN or infinity", err);
        break;
      }
      case PTS_DTYPE_FP64: {
        double d;
        memcpy(&d, &raw, 8);
        if (!pts_jsonw_double(w, d)) return refuse_json(t, "it holds NaN or infinity", err);
        break;
      }
      default: /* UINT* */
        pts_jsonw_uint(w, raw);
    }
  }
  return PTS_OK;
}

enum pts_status pts_v2_write_values(struct pts_jsonw *w, const struct pts_tensor *t,
                                    bool scalar_if_one, struct pts_error *err) {
  if (t->dtype == PTS_DTYPE_FP16 || t->dtype == PTS_DTYPE_BF16) {
    char why[48];
    snprintf(why, sizeof why, "datatype %s has no JSON form", pts_dtype_name(t->dtype));
    return refuse_json(t, why, err);
  }
  int64_t count = pts_shape_count(&t->shape);
  if (count < 0 || t->dtype == PTS_DTYPE_INVALID)
    return pts_error_set(err, PTS_INTERNAL, "output '%s' has an invalid shape or datatype",
                         t->name);
  bool bare = scalar_if_one && count == 1;
  if (!bare) pts_jsonw_raw(w, "[", 1);
  enum pts_status st = t->dtype == PTS_DTYPE_BYTES ? write_bytes_data(w, t, count, err)
                                                   : write_fixed_data(w, t, count, err);
  if (!bare) pts_jsonw_raw(w, "]", 1);
  return st;
}

/* An output in the infer reply's JSON: a refusal says how to get it
 * anyway (binary data, which every datatype and value has). */
static enum pts_status write_json_data(struct pts_jsonw *w, const struct pts_tensor *t,
                                       struct pts_error *err) {
  pts_jsonw_raw(w, ",\"data\":", 8);
  enum pts_status st = pts_v2_write_values(w, t, false, err);
  if (st == PTS_INVALID_ARG) {
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n,
             "; request it as binary data (output parameter \"binary_data\": true)");
  }
  return st;
}

/* §1.7 as Triton's code does it: a listed output is binary only when it
 * says binary_data: true; binary_data_output covers the unlisted ones. */
/* Whether the request placed this output in shared memory: the response
 * then names it without data (§1.7: neither 'data' nor 'binary_data_size'). */
static bool output_in_shm(const struct pts_infer_request *req, const char *name) {
  for (size_t i = 0; i < req->n_outputs; i++)
    if (req->outputs[i].name && strcmp(req->outputs[i].name, name) == 0)
      return req->outputs[i].shm.region != NULL;
  return false;
}

static bool output_is_binary(const struct pts_infer_request *req, const char *name) {
  for (size_t i = 0; i < req->n_outputs; i++)
    if (req->outputs[i].name && strcmp(req->outputs[i].name, name) == 0)
      return req->outputs[i].binary_set && req->outputs[i].binary;
  return req->binary_data_output;
}

void pts_v2_reply_clear(struct pts_v2_reply *r) {
  if (!r) return;
  pts_free(r->json);
  for (size_t i = 0; i < r->n_chunks; i++) pts_buf_release(r->chunks[i].buf);
  pts_free(r->chunks);
  memset(r, 0, sizeof *r);
}

enum pts_status pts_v2_encode_infer(const struct pts_infer_request *req,
                                    const struct pts_infer_response *resp, struct pts_v2_reply *out,
                                    struct pts_error *err) {
  struct pts_v2_reply r = {0};
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  enum pts_status st = PTS_OK;
  r.chunks = pts_calloc(resp->n_outputs, sizeof *r.chunks);
  if (!r.chunks) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory encoding the response");
    goto fail;
  }
  const char *model = resp->model_name ? resp->model_name : req->model_name;
  const char *id = resp->id ? resp->id : req->id;
  /* The keys are constants: written with the punctuation around them as
   * literals, not through pts_jsonw_key's escaping check (about 120
   * instructions a key, five keys and more per reply). */
  pts_jsonw_cstr(&w, "{\"model_name\":");
  pts_jsonw_str(&w, model ? model : "", model ? strlen(model) : 0);
  char ver[PTS_FMT_INT_MAX];
  size_t ver_len = pts_fmt_i64(ver, resp->model_version);
  pts_jsonw_cstr(&w, ",\"model_version\":");
  pts_jsonw_str(&w, ver, ver_len);
  if (id && id[0]) {
    pts_jsonw_cstr(&w, ",\"id\":");
    pts_jsonw_str(&w, id, strlen(id));
  }
  pts_jsonw_cstr(&w, ",\"outputs\":[");
  for (size_t i = 0; i < resp->n_outputs; i++) {
    const struct pts_tensor *t = &resp->outputs[i];
    const char *name = t->name ? t->name : "";
    if (i) pts_jsonw_cstr(&w, ",");
    pts_jsonw_cstr(&w, "{\"name\":");
    pts_jsonw_str(&w, name, strlen(name));
    pts_jsonw_cstr(&w, ",\"datatype\":\"");
    pts_jsonw_cstr(&w, pts_dtype_name(t->dtype));
    pts_jsonw_cstr(&w, "\",\"shape\":");
    write_shape(&w, &t->shape);
    if (output_in_shm(req, name)) {
      /* the bytes are in the client's region already */
    } else if (output_is_binary(req, name)) {
      r.binary = true;
      pts_jsonw_cstr(&w, ",\"parameters\":{\"binary_data_size\":");
      pts_jsonw_uint(&w, t->byte_size);
      pts_jsonw_raw(&w, "}", 1);
      if (t->byte_size > 0) {
        struct pts_v2_chunk *c = &r.chunks[r.n_chunks++];
        c->data = t->data;
        c->size = t->byte_size;
        c->buf = pts_buf_retain(t->buf);
      }
    } else {
      st = write_json_data(&w, t, err);
      if (st != PTS_OK) goto fail;
    }
    pts_jsonw_raw(&w, "}", 1);
  }
  pts_jsonw_raw(&w, "]}", 2);
  r.json = pts_jsonw_take(&w, &r.json_len);
  if (!r.json) {
    st = pts_error_set(err, PTS_NOMEM, "out of memory encoding the response");
    goto fail;
  }
  *out = r;
  return PTS_OK;
fail:
  pts_jsonw_free(&w);
  pts_v2_reply_clear(&r);
  return st;
}

/* ------------------------------------------------------------------ */
/* small documents                                                     */

char *pts_v2_error_json(const char *msg, size_t *len) {
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  pts_jsonw_raw(&w, "{", 1);
  pts_jsonw_key(&w, "error");
  pts_jsonw_str(&w, msg, strlen(msg));
  pts_jsonw_raw(&w, "}", 1);
  return pts_jsonw_take(&w, len);
}

char *pts_v2_server_metadata(const char *name, const char *version, const char *const *extensions,
                             size_t n_extensions, size_t *len) {
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  pts_jsonw_raw(&w, "{", 1);
  pts_jsonw_key(&w, "name");
  pts_jsonw_str(&w, name, strlen(name));
  pts_jsonw_raw(&w, ",", 1);
  pts_jsonw_key(&w, "version");
  pts_jsonw_str(&w, version, strlen(version));
  pts_jsonw_raw(&w, ",\"extensions\":[", 15);
  for (size_t i = 0; i < n_extensions; i++) {
    if (i) pts_jsonw_raw(&w, ",", 1);
    pts_jsonw_str(&w, extensions[i], strlen(extensions[i]));
  }
  pts_jsonw_raw(&w, "]}", 2);
  return pts_jsonw_take(&w, len);
}

static void write_tensor_meta(struct pts_jsonw *w, const char *name, int data_type,
                              const int64_t *dims, size_t n_dims, bool batched) {
  pts_jsonw_raw(w, "{", 1);
  pts_jsonw_key(w, "name");
  pts_jsonw_str(w, name ? name : "", name ? strlen(name) : 0);
  pts_jsonw_raw(w, ",", 1);
  pts_jsonw_key(w, "datatype");
  const char *dt = pts_dtype_name((enum pts_dtype)data_type);
  pts_jsonw_str(w, dt, strlen(dt));
  pts_jsonw_raw(w, ",\"shape\":[", 10);
  if (batched) pts_jsonw_raw(w, n_dims ? "-1," : "-1", n_dims ? 3 : 2);
  for (size_t i = 0; i < n_dims; i++) {
    if (i) pts_jsonw_raw(w, ",", 1);
    pts_jsonw_int(w, dims[i]);
  }
  pts_jsonw_raw(w, "]}", 2);
}

char *pts_v2_model_metadata(const char *name, const int64_t *versions, size_t n_versions,
                            const Inference__ModelConfig *cfg, size_t *len) {
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  pts_jsonw_raw(&w, "{", 1);
  pts_jsonw_key(&w, "name");
  pts_jsonw_str(&w, name, strlen(name));
  pts_jsonw_raw(&w, ",\"versions\":[", 13);
  for (size_t i = 0; i < n_versions; i++) {
    char v[24];
    snprintf(v, sizeof v, "%" PRId64, versions[i]);
    if (i) pts_jsonw_raw(&w, ",", 1);
    pts_jsonw_str(&w, v, strlen(v));
  }
  pts_jsonw_raw(&w, "],", 2);
  const char *platform = "";
  if (cfg && cfg->platform && cfg->platform[0])
    platform = cfg->platform;
  else if (cfg && cfg->backend)
    platform = cfg->backend;
  pts_jsonw_key(&w, "platform");
  pts_jsonw_str(&w, platform, strlen(platform));
  bool batched = cfg && cfg->max_batch_size > 0;
  pts_jsonw_raw(&w, ",\"inputs\":[", 11);
  for (size_t i = 0; cfg && i < cfg->n_input; i++) {
    const Inference__ModelInput *in = cfg->input[i];
    if (i) pts_jsonw_raw(&w, ",", 1);
    write_tensor_meta(&w, in->name, in->data_type, in->dims, in->n_dims, batched);
  }
  pts_jsonw_raw(&w, "],\"outputs\":[", 13);
  for (size_t i = 0; cfg && i < cfg->n_output; i++) {
    const Inference__ModelOutput *o = cfg->output[i];
    if (i) pts_jsonw_raw(&w, ",", 1);
    write_tensor_meta(&w, o->name, o->data_type, o->dims, o->n_dims, batched);
  }
  pts_jsonw_raw(&w, "]}", 2);
  return pts_jsonw_take(&w, len);
}

char *pts_v2_index_json(const struct pts_index_entry *entries, size_t n, size_t *len) {
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  pts_jsonw_raw(&w, "[", 1);
  for (size_t i = 0; i < n; i++) {
    const struct pts_index_entry *e = &entries[i];
    const char *name = e->name ? e->name : "";
    if (i) pts_jsonw_raw(&w, ",", 1);
    pts_jsonw_raw(&w, "{", 1);
    pts_jsonw_key(&w, "name");
    pts_jsonw_str(&w, name, strlen(name));
    if (e->version >= 0) {
      char v[24];
      snprintf(v, sizeof v, "%" PRId64, e->version);
      pts_jsonw_raw(&w, ",", 1);
      pts_jsonw_key(&w, "version");
      pts_jsonw_str(&w, v, strlen(v));
    }
    /* A model found on disk but never loaded is listed by name only. */
    if (e->version >= 0 || e->state != PTS_MODEL_UNKNOWN) {
      const char *state = pts_model_state_name(e->state);
      pts_jsonw_raw(&w, ",", 1);
      pts_jsonw_key(&w, "state");
      pts_jsonw_str(&w, state, strlen(state));
    }
    if (e->reason && e->reason[0]) {
      pts_jsonw_raw(&w, ",", 1);
      pts_jsonw_key(&w, "reason");
      pts_jsonw_str(&w, e->reason, strlen(e->reason));
    }
    pts_jsonw_raw(&w, "}", 1);
  }
  pts_jsonw_raw(&w, "]", 1);
  return pts_jsonw_take(&w, len);
}

enum pts_status pts_v2_parse_index_request(const char *body, size_t len, bool *ready,
                                           struct pts_error *err) {
  *ready = false;
  if (len == 0) return PTS_OK;
  json_error_t je;
  json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to parse the index request JSON at line %d column %d: %s", je.line,
                         je.column, je.text);
  enum pts_status st = PTS_OK;
  if (!json_is_object(root)) {
    st = pts_error_set(err, PTS_INVALID_ARG, "the index request JSON must be an object, got %s",
                       json_kind(root));
  } else {
    const json_t *r = json_object_get(root, "ready");
    if (r && !json_is_boolean(r))
      st = pts_error_set(err, PTS_INVALID_ARG,
                         "Invalid value for 'ready': expected a boolean, got %s", json_kind(r));
    else if (r)
      *ready = json_is_true(r);
  }
  json_decref(root);
  return st;
}
