/* frontend/grpc/infer.c — see infer.h. */
#include "frontend/grpc/infer.h"
#include "frontend/grpc/infer_fast.h"
#include "frontend/grpc/pbwire.h"
#include "frontend/grpc/version.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fmt.h"
#include "grpc_service.pb-c.h"
#include "tensor/bytes.h"

/* ------------------------------------------------------------------ */
/* protobuf-c plumbing                                                 */

/* Set when an allocation of this thread's current unpack failed, so that
 * out of memory is not reported as a malformed message. */
static _Thread_local bool pb_alloc_failed;

static void *pb_alloc(void *ctx, size_t size) {
  (void)ctx;
  void *p = pts_malloc(size ? size : 1);
  if (!p) pb_alloc_failed = true;
  return p;
}

static void pb_free(void *ctx, void *p) {
  (void)ctx;
  pts_free(p);
}

static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

ProtobufCAllocator *pts_grpc_pb_allocator(void) { return &pb_allocator; }

ProtobufCMessage *pts_grpc_unpack(const ProtobufCMessageDescriptor *d, const void *data, size_t len,
                                  struct pts_error *err) {
  pb_alloc_failed = false;
  ProtobufCMessage *m = protobuf_c_message_unpack(d, &pb_allocator, len, data);
  if (m) return m;
  if (pb_alloc_failed)
    pts_error_set(err, PTS_NOMEM, "out of memory decoding a %s", d->short_name);
  else
    pts_error_set(err, PTS_INVALID_ARG,
                  "failed to parse %s: the message is not a valid protobuf encoding of it",
                  d->short_name);
  return NULL;
}

void pts_grpc_reply_clear(struct pts_grpc_reply *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_pieces; i++) pts_buf_release(r->pieces[i].buf);
  pts_free(r->pieces);
  memset(r, 0, sizeof *r);
}

enum pts_status pts_grpc_pack(const ProtobufCMessage *m, struct pts_grpc_reply *out,
                              struct pts_error *err) {
  size_t size = protobuf_c_message_get_packed_size(m);
  struct pts_buf *b = pts_buf_new(size ? size : 1);
  struct pts_grpc_piece *p = pts_calloc(1, sizeof *p);
  if (!b || !p) {
    pts_buf_release(b);
    pts_free(p);
    return pts_error_set(err, PTS_NOMEM, "out of memory encoding a %s", m->descriptor->short_name);
  }
  protobuf_c_message_pack(m, b->data);
  p->data = b->data;
  p->size = size;
  p->buf = b;
  memset(out, 0, sizeof *out);
  out->pieces = p;
  out->n_pieces = 1;
  out->size = size;
  return PTS_OK;
}

/* ------------------------------------------------------------------ */
/* the hand-split top level (wire primitives: pbwire.h)                */

/* The field number of ModelInferRequest.raw_input_contents. */
#define FIELD_RAW_INPUT 7
/* ModelInferResponse.raw_output_contents, ModelStreamInferResponse.infer_response. */
#define FIELD_RAW_OUTPUT 6
#define FIELD_STREAM_INFER_RESPONSE 2

/* One top-level field: [start, end) is the whole field (key included);
 * for length-delimited fields [value, end) is the payload. */
struct field {
  uint32_t number;
  unsigned wire;
  size_t start, value, end;
};

static enum pts_status next_field(const uint8_t *p, size_t n, size_t *pos, struct field *f,
                                  struct pts_error *err) {
  f->start = *pos;
  uint64_t key, len;
  if (!pts_pb_read_varint(p, n, pos, PTS_PB_VARINT_MAX, &key))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to parse ModelInferRequest: truncated field key at byte %zu",
                         f->start);
  f->number = (uint32_t)(key >> 3);
  f->wire = (unsigned)(key & 7);
  if (key >> 3 == 0 || key >> 3 > 536870911u)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to parse ModelInferRequest: invalid field number at byte %zu",
                         f->start);
  f->value = *pos;
  size_t need;
  switch (f->wire) {
    case PTS_PB_VARINT:
      if (!pts_pb_read_varint(p, n, pos, PTS_PB_VARINT_MAX, &len))
        return pts_error_set(err, PTS_INVALID_ARG,
                             "failed to parse ModelInferRequest: truncated varint at byte %zu",
                             f->value);
      f->end = *pos;
      return PTS_OK;
    case PTS_PB_I64:
      need = 8;
      break;
    case PTS_PB_I32:
      need = 4;
      break;
    case PTS_PB_LEN:
      if (!pts_pb_read_varint(p, n, pos, PTS_PB_VARINT_MAX, &len))
        return pts_error_set(err, PTS_INVALID_ARG,
                             "failed to parse ModelInferRequest: truncated length at byte %zu",
                             f->value);
      f->value = *pos;
      if (len > n - *pos)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "failed to parse ModelInferRequest: field %u at byte %zu claims "
                             "%" PRIu64 " bytes, only %zu left",
                             f->number, f->start, len, n - *pos);
      need = (size_t)len;
      break;
    default:
      return pts_error_set(err, PTS_INVALID_ARG,
                           "failed to parse ModelInferRequest: unsupported wire type %u at "
                           "byte %zu",
                           f->wire, f->start);
  }
  if (need > n - *pos)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to parse ModelInferRequest: field %u at byte %zu is truncated",
                         f->number, f->start);
  *pos += need;
  f->end = *pos;
  return PTS_OK;
}

/* The message split in two: the raw_input_contents payloads (views) and
 * every other field copied into `rest`, for protobuf-c. */
struct split {
  size_t n_raw;
  size_t *raw_off; /* owned */
  size_t *raw_len; /* owned */
  uint8_t *rest;   /* owned */
  size_t rest_len;
};

static void split_clear(struct split *s) {
  pts_free(s->raw_off);
  pts_free(s->raw_len);
  pts_free(s->rest);
}

static enum pts_status split_message(const uint8_t *p, size_t n, struct split *s,
                                     struct pts_error *err) {
  memset(s, 0, sizeof *s);
  size_t pos = 0, rest = 0, raw = 0;
  struct field f;
  while (pos < n) {
    enum pts_status st = next_field(p, n, &pos, &f, err);
    if (st != PTS_OK) return st;
    if (f.number == FIELD_RAW_INPUT && f.wire == PTS_PB_LEN)
      raw++;
    else
      rest += f.end - f.start;
  }
  s->rest = pts_malloc(rest ? rest : 1);
  s->raw_off = pts_calloc(raw ? raw : 1, sizeof *s->raw_off);
  s->raw_len = pts_calloc(raw ? raw : 1, sizeof *s->raw_len);
  if (!s->rest || !s->raw_off || !s->raw_len)
    return pts_error_set(err, PTS_NOMEM, "out of memory decoding a ModelInferRequest");
  pos = 0;
  while (pos < n) {
    next_field(p, n, &pos, &f, NULL); /* cannot fail: checked above */
    if (f.number == FIELD_RAW_INPUT && f.wire == PTS_PB_LEN) {
      s->raw_off[s->n_raw] = f.value;
      s->raw_len[s->n_raw++] = f.end - f.value;
    } else {
      memcpy(s->rest + s->rest_len, p + f.start, f.end - f.start);
      s->rest_len += f.end - f.start;
    }
  }
  return PTS_OK;
}

/* ------------------------------------------------------------------ */
/* versions and parameters                                             */

static const char *param_kind(const Inference__InferParameter *v) {
  switch (v ? v->parameter_choice_case : INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE__NOT_SET) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
      return "bool_param";
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
      return "int64_param";
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM:
      return "string_param";
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM:
      return "double_param";
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM:
      return "uint64_param";
    default:
      return "no value";
  }
}

static bool param_is(const Inference__InferParameter *v,
                     Inference__InferParameter__ParameterChoiceCase c) {
  return v && v->parameter_choice_case == c;
}

/* A non-negative integer from int64_param (>= 0) or uint64_param. */
static bool param_uint(const Inference__InferParameter *v, uint64_t *out) {
  if (param_is(v, INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)) {
    *out = v->uint64_param;
    return true;
  }
  if (param_is(v, INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM) &&
      v->int64_param >= 0) {
    *out = (uint64_t)v->int64_param;
    return true;
  }
  return false;
}

static enum pts_status request_param(const char *key, const Inference__InferParameter *v,
                                     struct pts_infer_request *req,
                                     struct pts_grpc_infer_opts *opts, struct pts_error *err) {
  if (strcmp(key, "triton_enable_empty_final_response") == 0) {
    if (!param_is(v, INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "request parameter 'triton_enable_empty_final_response' must be a "
                           "bool_param, got %s",
                           param_kind(v));
    if (opts) opts->empty_final_response = v->bool_param;
    return PTS_OK;
  }
  if (strncmp(key, "triton_", 7) == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "request parameter '%s' is reserved: keys starting with 'triton_' can "
                         "not be set by a client",
                         key);
  if (strcmp(key, "priority") == 0) {
    if (!param_uint(v, &req->priority))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "request parameter 'priority' must be a non-negative int64_param or "
                           "a uint64_param, got %s",
                           param_kind(v));
    return PTS_OK;
  }
  if (strcmp(key, "timeout") == 0) {
    if (!param_uint(v, &req->timeout_us))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "request parameter 'timeout' must be a non-negative int64_param "
                           "(microseconds), got %s",
                           param_kind(v));
    return PTS_OK;
  }
  if (strcmp(key, "sequence_id") == 0) {
    if (param_is(v, INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)) {
      pts_free(req->sequence_id_str);
      if (!(req->sequence_id_str = pts_strdup(v->string_param ? v->string_param : "")))
        return pts_error_set(err, PTS_NOMEM, "out of memory decoding 'sequence_id'");
      return PTS_OK;
    }
    if (!param_uint(v, &req->sequence_id))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "request parameter 'sequence_id' must be a non-negative int64_param, "
                           "a uint64_param or a string_param, got %s",
                           param_kind(v));
    return PTS_OK;
  }
  if (strcmp(key, "sequence_start") == 0 || strcmp(key, "sequence_end") == 0) {
    if (!param_is(v, INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "request parameter '%s' must be a bool_param, got %s",
                           key, param_kind(v));
    if (key[9] == 's')
      req->sequence_start = v->bool_param;
    else
      req->sequence_end = v->bool_param;
    return PTS_OK;
  }
  /* Custom parameters pass, as in Triton, when they have one of the custom
   * types. */
  if (!v || v->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE__NOT_SET ||
      v->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "request parameter '%s' has %s: custom parameters must be bool_param, "
                         "int64_param, string_param or double_param",
                         key, param_kind(v));
  /* and go on to the model (core/request_param.h) */
  struct pts_request_param p = {.key = (char *)key};
  switch (v->parameter_choice_case) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
      p.type = PTS_PARAM_BOOL;
      p.v.b = v->bool_param;
      break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
      p.type = PTS_PARAM_INT;
      p.v.i = v->int64_param;
      break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM:
      p.type = PTS_PARAM_DOUBLE;
      p.v.d = v->double_param;
      break;
    default:
      p.type = PTS_PARAM_STRING;
      p.v.s = v->string_param ? v->string_param : "";
      break;
  }
  return pts_infer_request_add_param(req, &p, err);
}

/* ------------------------------------------------------------------ */
/* typed contents                                                      */

/* Which InferTensorContents field carries a datatype (protocol-facts §2.3). */
static const char *contents_field(enum pts_dtype t) {
  switch (t) {
    case PTS_DTYPE_BOOL:
      return "bool_contents";
    case PTS_DTYPE_INT8:
    case PTS_DTYPE_INT16:
    case PTS_DTYPE_INT32:
      return "int_contents";
    case PTS_DTYPE_INT64:
      return "int64_contents";
    case PTS_DTYPE_UINT8:
    case PTS_DTYPE_UINT16:
    case PTS_DTYPE_UINT32:
      return "uint_contents";
    case PTS_DTYPE_UINT64:
      return "uint64_contents";
    case PTS_DTYPE_FP32:
      return "fp32_contents";
    case PTS_DTYPE_FP64:
      return "fp64_contents";
    case PTS_DTYPE_BYTES:
      return "bytes_contents";
    default:
      return NULL;
  }
}

/* Element counts of every field, in InferTensorContents field order. */
static void contents_counts(const Inference__InferTensorContents *c, size_t n[8]) {
  n[0] = c->n_bool_contents;
  n[1] = c->n_int_contents;
  n[2] = c->n_int64_contents;
  n[3] = c->n_uint_contents;
  n[4] = c->n_uint64_contents;
  n[5] = c->n_fp32_contents;
  n[6] = c->n_fp64_contents;
  n[7] = c->n_bytes_contents;
}

static const char *const CONTENTS_NAMES[8] = {"bool_contents", "int_contents",    "int64_contents",
                                              "uint_contents", "uint64_contents", "fp32_contents",
                                              "fp64_contents", "bytes_contents"};

static void put_le(uint8_t *p, uint64_t v, size_t size) {
  for (size_t i = 0; i < size; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static enum pts_status out_of_range(const struct pts_tensor *t, size_t i, int64_t v,
                                    struct pts_error *err) {
  return pts_error_set(err, PTS_INVALID_ARG,
                       "input '%s': element %zu of %s (%" PRId64 ") is out of range for %s",
                       t->name, i, contents_field(t->dtype), v, pts_dtype_name(t->dtype));
}

/* Writes the fixed-size elements little-endian into out (exactly the
 * tensor's byte size), narrowing int_contents / uint_contents with a range
 * check as the JSON path does. */
static enum pts_status fill_fixed(const Inference__InferTensorContents *c,
                                  const struct pts_tensor *t, uint8_t *out, struct pts_error *err) {
  size_t es = pts_dtype_size(t->dtype);
  size_t i;
  switch (t->dtype) {
    case PTS_DTYPE_BOOL:
      for (i = 0; i < c->n_bool_contents; i++) out[i] = c->bool_contents[i] ? 1 : 0;
      return PTS_OK;
    case PTS_DTYPE_INT8:
    case PTS_DTYPE_INT16:
    case PTS_DTYPE_INT32: {
      int64_t lo = es == 1 ? INT8_MIN : es == 2 ? INT16_MIN : INT32_MIN;
      int64_t hi = es == 1 ? INT8_MAX : es == 2 ? INT16_MAX : INT32_MAX;
      for (i = 0; i < c->n_int_contents; i++) {
        int64_t v = c->int_contents[i];
        if (v < lo || v > hi) return out_of_range(t, i, v, err);
        put_le(out + i * es, (uint64_t)v, es);
      }
      return PTS_OK;
    }
    case PTS_DTYPE_UINT8:
    case PTS_DTYPE_UINT16:
    case PTS_DTYPE_UINT32: {
      uint64_t hi = es == 1 ? UINT8_MAX : es == 2 ? UINT16_MAX : UINT32_MAX;
      for (i = 0; i < c->n_uint_contents; i++) {
        if (c->uint_contents[i] > hi) return out_of_range(t, i, c->uint_contents[i], err);
        put_le(out + i * es, c->uint_contents[i], es);
      }
      return PTS_OK;
    }
    case PTS_DTYPE_INT64:
      for (i = 0; i < c->n_int64_contents; i++)
        put_le(out + i * 8, (uint64_t)c->int64_contents[i], 8);
      return PTS_OK;
    case PTS_DTYPE_UINT64:
      for (i = 0; i < c->n_uint64_contents; i++) put_le(out + i * 8, c->uint64_contents[i], 8);
      return PTS_OK;
    case PTS_DTYPE_FP32:
      for (i = 0; i < c->n_fp32_contents; i++) {
        uint32_t bits;
        memcpy(&bits, &c->fp32_contents[i], 4);
        put_le(out + i * 4, bits, 4);
      }
      return PTS_OK;
    case PTS_DTYPE_FP64:
      for (i = 0; i < c->n_fp64_contents; i++) {
        uint64_t bits;
        memcpy(&bits, &c->fp64_contents[i], 8);
        put_le(out + i * 8, bits, 8);
      }
      return PTS_OK;
    default:
      return pts_error_set(err, PTS_INTERNAL, "input '%s': no typed contents for %s", t->name,
                           pts_dtype_name(t->dtype));
  }
}

static enum pts_status decode_contents(const Inference__InferTensorContents *c,
                                       struct pts_tensor *t, struct pts_error *err) {
  const char *want = contents_field(t->dtype);
  if (!want)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s': datatype %s has no typed contents field; send it in "
                         "raw_input_contents",
                         t->name, pts_dtype_name(t->dtype));
  size_t counts[8];
  contents_counts(c, counts);
  size_t have = 0;
  for (int i = 0; i < 8; i++) {
    if (strcmp(CONTENTS_NAMES[i], want) == 0)
      have = counts[i];
    else if (counts[i])
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s': datatype %s expects its data in '%s', got %zu elements "
                           "in '%s'",
                           t->name, pts_dtype_name(t->dtype), want, counts[i], CONTENTS_NAMES[i]);
  }
  int64_t count = pts_shape_count(&t->shape);
  if (count < 0 || (uint64_t)count != have) {
    char shape[128];
    pts_shape_format(&t->shape, shape, sizeof shape);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s': shape %s has %" PRId64 " elements but '%s' holds %zu",
                         t->name, shape, count, want, have);
  }
  size_t size;
  if (t->dtype == PTS_DTYPE_BYTES) {
    size = 0;
    for (size_t i = 0; i < c->n_bytes_contents; i++) {
      if (c->bytes_contents[i].len > UINT32_MAX)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "input '%s': element %zu of bytes_contents is longer than 4 GiB",
                             t->name, i);
      size += 4 + c->bytes_contents[i].len;
    }
  } else {
    size = have * pts_dtype_size(t->dtype);
  }
  struct pts_buf *b = pts_buf_new(size ? size : 1);
  if (!b) return pts_error_set(err, PTS_NOMEM, "out of memory decoding input '%s'", t->name);
  enum pts_status st = PTS_OK;
  if (t->dtype == PTS_DTYPE_BYTES) {
    size_t used = 0;
    for (size_t i = 0; i < c->n_bytes_contents; i++)
      pts_bytes_put(b->data, size, &used, c->bytes_contents[i].data,
                    (uint32_t)c->bytes_contents[i].len);
  } else {
    st = fill_fixed(c, t, b->data, err);
  }
  if (st != PTS_OK) {
    pts_buf_release(b);
    return st;
  }
  t->buf = b;
  t->data = b->data;
  t->byte_size = size;
  return PTS_OK;
}

/* ------------------------------------------------------------------ */
/* inputs and outputs                                                  */

/* The shared-memory parameters of an input or requested output
 * (protocol-facts §1.15): shared_memory_region (string_param),
 * shared_memory_byte_size (required with a region) and shared_memory_offset
 * (default 0), each int64_param >= 0 or uint64_param. Other
 * shared_memory_* keys are refused rather than ignored. Callers feed every
 * parameter to shm_key, then call shm_place. */
struct shm_keys {
  const Inference__InferParameter *region, *size, *offset;
};

static enum pts_status shm_key(const char *key, const Inference__InferParameter *v,
                               const char *what, struct shm_keys *k, struct pts_error *err) {
  if (strncmp(key, "shared_memory_", 14) != 0) return PTS_OK;
  if (strcmp(key, "shared_memory_region") == 0)
    k->region = v;
  else if (strcmp(key, "shared_memory_byte_size") == 0)
    k->size = v;
  else if (strcmp(key, "shared_memory_offset") == 0)
    k->offset = v;
  else
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s: unknown parameter '%.60s' (shared memory takes "
                         "shared_memory_region, shared_memory_byte_size and shared_memory_offset)",
                         what, key);
  return PTS_OK;
}

/* `what` is "input 'x'" or "output 'x'". Leaves place->region NULL when no
 * region is named. */
static enum pts_status shm_place(const struct shm_keys *k, const char *what,
                                 struct pts_shm_place *place, struct pts_error *err) {
  const Inference__InferParameter *region = k->region, *size = k->size, *offset = k->offset;
  if (!region) {
    if (size || offset)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "%s: 'shared_memory_%s' is given without 'shared_memory_region'", what,
                           size ? "byte_size" : "offset");
    return PTS_OK;
  }
  if (!param_is(region, INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM) ||
      !region->string_param[0])
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s: 'shared_memory_region' must be a non-empty string_param, got %s",
                         what, param_kind(region));
  if (!size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s: 'shared_memory_byte_size' must be given with 'shared_memory_region'",
                         what);
  if (!param_uint(size, &place->byte_size))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s: 'shared_memory_byte_size' must be a non-negative int64_param or a "
                         "uint64_param, got %s",
                         what, param_kind(size));
  place->offset = 0;
  if (offset && !param_uint(offset, &place->offset))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s: 'shared_memory_offset' must be a non-negative int64_param or a "
                         "uint64_param, got %s",
                         what, param_kind(offset));
  place->region = pts_strdup(region->string_param);
  if (!place->region) return pts_error_set(err, PTS_NOMEM, "%s: out of memory", what);
  return PTS_OK;
}

static enum pts_status decode_shape(const Inference__ModelInferRequest__InferInputTensor *in,
                                    struct pts_tensor *t, struct pts_error *err) {
  if (in->n_shape > PTS_TENSOR_MAX_DIMS)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "input '%s': 'shape' has %zu dimensions, more than the %d supported",
                         in->name, in->n_shape, PTS_TENSOR_MAX_DIMS);
  t->shape.ndim = (int)in->n_shape;
  for (size_t i = 0; i < in->n_shape; i++) {
    if (in->shape[i] < 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "input '%s': 'shape' element %zu must be non-negative, got %" PRId64,
                           in->name, i, in->shape[i]);
    t->shape.dims[i] = in->shape[i];
  }
  return PTS_OK;
}

static enum pts_status decode_inputs(const Inference__ModelInferRequest *m, struct pts_buf *msg,
                                     const struct split *sp, struct pts_infer_request *req,
                                     struct pts_error *err) {
  if (m->n_inputs == 0) return PTS_OK;
  req->inputs = pts_infer_request_calloc(req, m->n_inputs, sizeof *req->inputs);
  if (!req->inputs) return pts_error_set(err, PTS_NOMEM, "out of memory decoding inputs");
  req->n_inputs = m->n_inputs;
  size_t next_raw = 0;
  for (size_t i = 0; i < m->n_inputs; i++) {
    const Inference__ModelInferRequest__InferInputTensor *in = m->inputs[i];
    struct pts_tensor *t = &req->inputs[i];
    t->name = pts_infer_request_strdup(req, in->name);
    if (!t->name) return pts_error_set(err, PTS_NOMEM, "out of memory decoding input %zu", i);
    t->dtype = pts_dtype_from_name(in->datatype);
    if (t->dtype == PTS_DTYPE_INVALID)
      return pts_error_set(err, PTS_INVALID_ARG, "input '%s': unknown datatype '%.40s'", in->name,
                           in->datatype);
    enum pts_status st = decode_shape(in, t, err);
    if (st != PTS_OK) return st;
    /* Named only when it can be needed: without parameters there is no
     * shared-memory key to complain about (snprintf is 700 instructions). */
    char what[PTS_ERROR_MSG_MAX / 4] = "";
    if (in->n_parameters) snprintf(what, sizeof what, "input '%s'", in->name);
    struct shm_keys keys = {0};
    for (size_t k = 0; st == PTS_OK && k < in->n_parameters; k++)
      st = shm_key(in->parameters[k]->key, in->parameters[k]->value, what, &keys, err);
    struct pts_shm_place place = {0};
    if (st == PTS_OK) st = shm_place(&keys, what, &place, err);
    if (st != PTS_OK) return st;
    if (place.region) {
      /* §2.4: shared memory first; it consumes no raw_input_contents entry. */
      struct pts_shm_place *slot = pts_infer_request_input_shm(req, i);
      if (!slot || in->contents) {
        pts_free(place.region);
        if (!slot) return pts_error_set(err, PTS_NOMEM, "out of memory decoding input %zu", i);
        return pts_error_set(err, PTS_INVALID_ARG,
                             "input '%s' has both shared-memory parameters and 'contents'; it "
                             "must have one of them",
                             in->name);
      }
      *slot = place;
      continue;
    }
    if (in->contents) {
      if (sp->n_raw > 0)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "contents field must not be specified when using "
                             "raw_input_contents for '%s' for model '%s'",
                             in->name, req->model_name);
      st = decode_contents(in->contents, t, err);
      if (st != PTS_OK) return st;
      continue;
    }
    if (next_raw >= sp->n_raw)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "unable to find data for input tensor '%s' for model '%s': it has no "
                           "contents and raw_input_contents has only %zu entries",
                           in->name, req->model_name, sp->n_raw);
    t->buf = pts_buf_retain(msg);
    t->data = (const uint8_t *)msg->data + sp->raw_off[next_raw];
    t->byte_size = sp->raw_len[next_raw];
    next_raw++;
  }
  if (next_raw != sp->n_raw)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': raw_input_contents has %zu entries but only %zu inputs "
                         "without contents use them",
                         req->model_name, sp->n_raw, next_raw);
  return PTS_OK;
}

static enum pts_status decode_output(
    const Inference__ModelInferRequest__InferRequestedOutputTensor *o,
    struct pts_infer_request *req, struct pts_requested_output *ro, struct pts_error *err) {
  ro->name = pts_infer_request_strdup(req, o->name);
  if (!ro->name) return pts_error_set(err, PTS_NOMEM, "out of memory decoding outputs");
  for (size_t i = 0; i < o->n_parameters; i++) {
    const char *key = o->parameters[i]->key;
    const Inference__InferParameter *v = o->parameters[i]->value;
    if (strcmp(key, "classification") == 0) {
      uint64_t k;
      if (!param_uint(v, &k) || k == 0 || k > UINT32_MAX)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "output '%s': 'classification' must be a positive int64_param",
                             o->name);
      ro->classification = (uint32_t)k;
    }
  }
  char what[PTS_ERROR_MSG_MAX / 4] = ""; /* as for inputs: only with parameters */
  if (o->n_parameters) snprintf(what, sizeof what, "output '%s'", o->name);
  struct shm_keys keys = {0};
  enum pts_status st = PTS_OK;
  for (size_t k = 0; st == PTS_OK && k < o->n_parameters; k++)
    st = shm_key(o->parameters[k]->key, o->parameters[k]->value, what, &keys, err);
  if (st == PTS_OK) st = shm_place(&keys, what, &ro->shm, err);
  if (st != PTS_OK) return st;
  /* §1.9: classification replaces the output by strings; Triton refuses it
   * together with shared memory. */
  if (ro->classification > 0 && ro->shm.region)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "output '%s': 'classification' can not be combined with shared memory",
                         o->name);
  return PTS_OK;
}

static enum pts_status decode_outputs(const Inference__ModelInferRequest *m,
                                      struct pts_infer_request *req, struct pts_error *err) {
  if (m->n_outputs == 0) return PTS_OK;
  req->outputs = pts_infer_request_calloc(req, m->n_outputs, sizeof *req->outputs);
  if (!req->outputs) return pts_error_set(err, PTS_NOMEM, "out of memory decoding outputs");
  req->n_outputs = m->n_outputs;
  for (size_t i = 0; i < m->n_outputs; i++) {
    enum pts_status st = decode_output(m->outputs[i], req, &req->outputs[i], err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

static enum pts_status decode_header(const Inference__ModelInferRequest *m,
                                     struct pts_infer_request *req,
                                     struct pts_grpc_infer_opts *opts, struct pts_error *err) {
  if (!m->model_name[0])
    return pts_error_set(err, PTS_INVALID_ARG, "ModelInferRequest has an empty model_name");
  req->model_name = pts_infer_request_strdup(req, m->model_name);
  if (!req->model_name) return pts_error_set(err, PTS_NOMEM, "out of memory decoding a request");
  enum pts_status st =
      pts_grpc_parse_version(m->model_version, m->model_name, &req->model_version, err);
  if (st != PTS_OK) return st;
  if (m->id[0]) {
    req->id = pts_infer_request_strdup(req, m->id);
    if (!req->id) return pts_error_set(err, PTS_NOMEM, "out of memory decoding a request");
  }
  for (size_t i = 0; i < m->n_parameters; i++) {
    st = request_param(m->parameters[i]->key, m->parameters[i]->value, req, opts, err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

enum pts_status pts_grpc_decode_infer(struct pts_buf *msg, struct pts_infer_request *req,
                                      struct pts_grpc_infer_opts *opts, struct pts_error *err) {
  enum pts_grpc_fast f = pts_grpc_fast_decode(msg, req);
  if (f == PTS_GRPC_FAST_DONE) {
    if (opts) memset(opts, 0, sizeof *opts);
    return PTS_OK;
  }
  if (f == PTS_GRPC_FAST_NOMEM)
    return pts_error_set(err, PTS_NOMEM, "out of memory decoding a ModelInferRequest");
  return pts_grpc_decode_infer_full(msg, req, opts, err);
}

enum pts_status pts_grpc_decode_infer_full(struct pts_buf *msg, struct pts_infer_request *req,
                                           struct pts_grpc_infer_opts *opts,
                                           struct pts_error *err) {
  struct split sp;
  enum pts_status st = split_message(msg->data, msg->size, &sp, err);
  if (st != PTS_OK) {
    split_clear(&sp);
    return st;
  }
  Inference__ModelInferRequest *m = (Inference__ModelInferRequest *)pts_grpc_unpack(
      &inference__model_infer_request__descriptor, sp.rest, sp.rest_len, err);
  if (!m) {
    split_clear(&sp);
    return err ? err->code : PTS_INVALID_ARG;
  }
  if (opts) memset(opts, 0, sizeof *opts);
  st = decode_header(m, req, opts, err);
  if (st == PTS_OK) st = decode_inputs(m, msg, &sp, req, err);
  if (st == PTS_OK) st = decode_outputs(m, req, err);
  inference__model_infer_request__free_unpacked(m, pts_grpc_pb_allocator());
  split_clear(&sp);
  return st;
}

/* ------------------------------------------------------------------ */
/* responses                                                           */

/* Room for a key byte and a 64-bit length varint. */
#define PREFIX_MAX 11

/* The key and length of a length-delimited field (field < 16: one key
 * byte) whose len bytes follow; returns the prefix's length. */
static size_t put_len_prefix(uint8_t *p, uint32_t field, size_t len) {
  p[0] = (uint8_t)(field << 3 | PTS_PB_LEN);
  return 1 + pts_pb_put_varint(p + 1, len);
}

/* Bytes of a length-delimited field holding n bytes, prefix included. */
static size_t len_field_size(size_t n) { return 1 + pts_pb_varint_size(n) + n; }

static bool add_piece(struct pts_grpc_reply *r, const void *data, size_t size, struct pts_buf *b) {
  r->pieces[r->n_pieces].data = data;
  r->pieces[r->n_pieces].size = size;
  r->pieces[r->n_pieces].buf = pts_buf_retain(b);
  r->n_pieces++;
  r->size += size;
  return true;
}

/* The response header: every ModelInferResponse field but
 * raw_output_contents, written by hand in protobuf-c's order and form
 * (fields by number, proto3's empty strings and empty shapes left out,
 * shapes packed), so the bytes are what protobuf_c_message_pack would
 * write (grpc_infer_test packs the unpacked reply again and compares),
 * without the two arrays of structures it needed and its generic size and
 * pack passes: 1.0k instructions per response instead of 2.6k. Every
 * field number here is below 16: one key byte. */

/* ModelInferResponse.parameters["triton_final_response"] = bool_param true,
 * the entry a stream's response carries: key (1) and value (2, an
 * InferParameter whose bool_param is field 1). */
static const uint8_t FINAL_RESPONSE_ENTRY[] = {
    0x22, 0x1b, 0x0a, 0x15, 't', 'r', 'i', 't', 'o', 'n', '_', 'f', 'i', 'n', 'a', 'l',
    '_',  'r',  'e',  's',  'p', 'o', 'n', 's', 'e', 0x12, 0x02, 0x08, 0x01};

#define RESP_MODEL_NAME 1
#define RESP_MODEL_VERSION 2
#define RESP_ID 3
#define RESP_OUTPUTS 5
#define TENSOR_NAME 1
#define TENSOR_DATATYPE 2
#define TENSOR_SHAPE 3

/* A string field: nothing for "" (proto3's default). */
static size_t str_field_size(size_t n) { return n ? len_field_size(n) : 0; }

static uint8_t *put_len_field(uint8_t *p, uint32_t field, const void *data, size_t n) {
  p += put_len_prefix(p, field, n);
  memcpy(p, data, n);
  return p + n;
}

static uint8_t *put_str_field(uint8_t *p, uint32_t field, const char *s, size_t n) {
  return n ? put_len_field(p, field, s, n) : p;
}

/* A dimension as protobuf writes an int64: its two's complement as a
 * varint (ten bytes when negative). */
static size_t shape_payload(const struct pts_shape *sh) {
  size_t n = 0;
  for (int i = 0; i < sh->ndim; i++) n += pts_pb_varint_size((uint64_t)sh->dims[i]);
  return n;
}

/* What the header borrows from the request and the response. */
struct header {
  const char *name, *id;
  size_t name_len, id_len, version_len;
  char version[PTS_FMT_INT_MAX];
};

/* An output's InferOutputTensor: its name and datatype with their
 * lengths, the length of its packed shape, and the whole message's. */
struct tensor_fields {
  const char *name, *dtype;
  size_t name_len, dtype_len, shape_len, size;
};

static void tensor_fields(const struct pts_tensor *t, struct tensor_fields *f) {
  f->name = t->name ? t->name : "";
  f->dtype = pts_dtype_name(t->dtype);
  f->name_len = strlen(f->name);
  f->dtype_len = strlen(f->dtype);
  f->shape_len = shape_payload(&t->shape);
  f->size = str_field_size(f->name_len) + str_field_size(f->dtype_len) +
            (t->shape.ndim ? len_field_size(f->shape_len) : 0);
}

static size_t header_size(const struct header *h, const struct pts_infer_response *resp,
                          bool stream) {
  size_t n = str_field_size(h->name_len) + str_field_size(h->version_len) +
             str_field_size(h->id_len) + (stream ? sizeof FINAL_RESPONSE_ENTRY : 0);
  for (size_t i = 0; i < resp->n_outputs; i++) {
    struct tensor_fields f;
    tensor_fields(&resp->outputs[i], &f);
    n += len_field_size(f.size);
  }
  return n;
}

static uint8_t *put_header(uint8_t *p, const struct header *h,
                           const struct pts_infer_response *resp, bool stream) {
  p = put_str_field(p, RESP_MODEL_NAME, h->name, h->name_len);
  p = put_str_field(p, RESP_MODEL_VERSION, h->version, h->version_len);
  p = put_str_field(p, RESP_ID, h->id, h->id_len);
  if (stream) {
    memcpy(p, FINAL_RESPONSE_ENTRY, sizeof FINAL_RESPONSE_ENTRY);
    p += sizeof FINAL_RESPONSE_ENTRY;
  }
  for (size_t i = 0; i < resp->n_outputs; i++) {
    const struct pts_tensor *t = &resp->outputs[i];
    struct tensor_fields f;
    tensor_fields(t, &f);
    p += put_len_prefix(p, RESP_OUTPUTS, f.size);
    p = put_str_field(p, TENSOR_NAME, f.name, f.name_len);
    p = put_str_field(p, TENSOR_DATATYPE, f.dtype, f.dtype_len);
    if (t->shape.ndim) {
      p += put_len_prefix(p, TENSOR_SHAPE, f.shape_len);
      for (int d = 0; d < t->shape.ndim; d++) p += pts_pb_put_varint(p, (uint64_t)t->shape.dims[d]);
    }
  }
  return p;
}

static void header_init(struct header *h, const struct pts_infer_request *req,
                        const struct pts_infer_response *resp) {
  const char *name = resp->model_name ? resp->model_name : req->model_name;
  const char *id = resp->id ? resp->id : req->id;
  h->name = name ? name : "";
  h->id = id ? id : "";
  h->name_len = strlen(h->name);
  h->id_len = strlen(h->id);
  pts_fmt_i64(h->version, resp->model_version);
  h->version_len = strlen(h->version);
}

enum pts_status pts_grpc_encode_infer(const struct pts_infer_request *req,
                                      const struct pts_infer_response *resp, bool stream,
                                      struct pts_grpc_reply *out, struct pts_error *err) {
  struct header h;
  header_init(&h, req, resp);
  size_t n = resp->n_outputs;
  size_t head = header_size(&h, resp, stream);
  /* inner = header + each raw entry (key, length, bytes); outputs without
   * a buffer are copied into the arena, the others referenced. */
  size_t inner = head, copied = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len = resp->outputs[i].byte_size;
    inner += len_field_size(len);
    if (!resp->outputs[i].buf) copied += len;
  }
  size_t arena_size = (stream ? PREFIX_MAX : 0) + head + n * PREFIX_MAX + copied;
  struct pts_buf *arena = pts_buf_new(arena_size ? arena_size : 1);
  struct pts_grpc_reply r = {0, NULL, 0};
  r.pieces = pts_calloc(1 + 2 * n, sizeof *r.pieces);
  if (!arena || !r.pieces) {
    pts_buf_release(arena);
    pts_free(r.pieces);
    return pts_error_set(err, PTS_NOMEM, "out of memory encoding the response of model '%s'",
                         h.name);
  }
  uint8_t *a = arena->data;
  size_t used = 0;
  if (stream) used += put_len_prefix(a, FIELD_STREAM_INFER_RESPONSE, inner);
  used = (size_t)(put_header(a + used, &h, resp, stream) - a);
  add_piece(&r, a, used, arena);
  for (size_t i = 0; i < n; i++) {
    const struct pts_tensor *t = &resp->outputs[i];
    size_t plen = put_len_prefix(a + used, FIELD_RAW_OUTPUT, t->byte_size);
    add_piece(&r, a + used, plen, arena);
    used += plen;
    if (t->byte_size == 0) continue;
    if (t->buf) {
      add_piece(&r, t->data, t->byte_size, t->buf);
    } else {
      memcpy(a + used, t->data, t->byte_size);
      add_piece(&r, a + used, t->byte_size, arena);
      used += t->byte_size;
    }
  }
  pts_buf_release(arena); /* the pieces hold it now */
  *out = r;
  return PTS_OK;
}

enum pts_status pts_grpc_encode_stream_error(const char *id, const char *msg,
                                             struct pts_grpc_reply *out, struct pts_error *err) {
  Inference__ModelInferResponse inner;
  inference__model_infer_response__init(&inner);
  inner.id = (char *)(id ? id : "");
  Inference__ModelStreamInferResponse m;
  inference__model_stream_infer_response__init(&m);
  m.error_message = (char *)(msg ? msg : "");
  m.infer_response = &inner;
  return pts_grpc_pack(&m.base, out, err);
}
