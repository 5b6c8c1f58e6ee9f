/* frontend/grpc/infer_fast.c — see infer_fast.h. Scan the message into
 * spans first (no allocation, the request untouched), check everything the
 * full decoder would check, and only then fill the request: a message this
 * file declines leaves nothing behind for the full decoder to undo. */
#include "frontend/grpc/infer_fast.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "frontend/grpc/infer.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

/* Every field of the subset is length-delimited (wire type 2); so is a
 * packed repeated int64. */
#define WIRE_LEN 2

/* Spans point into the message (borrowed). */
struct span {
  const uint8_t *s;
  size_t n;
};

struct fast_input {
  struct span name;
  enum pts_dtype dtype;
  struct pts_shape shape;
};

struct fast_msg {
  unsigned seen; /* top-level singular fields met: MODEL | VERSION | ID */
  struct span model, version, id;
  size_t n_in, n_out, n_raw;
  struct fast_input in[PTS_GRPC_FAST_MAX];
  struct span out[PTS_GRPC_FAST_MAX];
  struct span raw[PTS_GRPC_FAST_MAX];
};

struct reader {
  const uint8_t *p, *end;
};

/* A varint of at most nine bytes, so below 2^63: a field key, a length, or
 * a shape value that fits int64 without turning negative. A longer one is
 * left to protobuf-c, with whatever it makes of the bits past 64. */
static bool varint(struct reader *r, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 63; shift += 7) {
    if (r->p == r->end) return false;
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

/* The next field: its number in *number and its payload in *v; false at a
 * truncated field or one that is not length-delimited. */
static bool next_field(struct reader *r, uint64_t *number, struct span *v) {
  uint64_t key, n;
  if (!varint(r, &key) || (key & 7) != WIRE_LEN || !varint(r, &n) ||
      n > (uint64_t)(r->end - r->p))
    return false;
  *number = key >> 3;
  *v = (struct span){r->p, (size_t)n};
  r->p += n;
  return true;
}

/* Whether a string field reads the same as the C string protobuf-c makes
 * of it: no NUL inside. */
static bool text(struct span v) { return memchr(v.s, 0, v.n) == NULL; }

static bool once(unsigned *seen, unsigned bit) {
  if (*seen & bit) return false;
  *seen |= bit;
  return true;
}

/* A NUL-terminated copy of a short field, for the parsers that take C
 * strings (the full decoder calls the same ones). */
static bool c_string(struct span v, char *out, size_t cap) {
  if (v.n >= cap || !text(v)) return false;
  memcpy(out, v.s, v.n);
  out[v.n] = '\0';
  return true;
}

static bool datatype(struct span v, enum pts_dtype *out) {
  char name[16];
  if (!c_string(v, name, sizeof name)) return false;
  *out = pts_dtype_from_name(name);
  return *out != PTS_DTYPE_INVALID;
}

/* One packed run of dimensions, each below 2^63 (so non-negative). */
static bool shape(struct span v, struct pts_shape *out) {
  struct reader r = {v.s, v.s + v.n};
  int n = 0;
  while (r.p < r.end) {
    uint64_t d;
    if (n == PTS_TENSOR_MAX_DIMS || !varint(&r, &d)) return false;
    out->dims[n++] = (int64_t)d;
  }
  out->ndim = n;
  return true;
}

/* InferInputTensor with exactly name, datatype and shape. */
static bool input(struct span m, struct fast_input *in) {
  enum { NAME = 1, DATATYPE = 2, SHAPE = 4 };
  struct reader r = {m.s, m.s + m.n};
  unsigned seen = 0;
  while (r.p < r.end) {
    uint64_t number;
    struct span v;
    if (!next_field(&r, &number, &v)) return false;
    bool ok = number == 1   ? once(&seen, NAME) && text(v) && (in->name = v, true)
              : number == 2 ? once(&seen, DATATYPE) && datatype(v, &in->dtype)
              : number == 3 ? once(&seen, SHAPE) && shape(v, &in->shape)
                            : false;
    if (!ok) return false;
  }
  return seen == (NAME | DATATYPE | SHAPE);
}

/* InferRequestedOutputTensor with a name alone. */
static bool output(struct span m, struct span *name) {
  struct reader r = {m.s, m.s + m.n};
  bool seen = false;
  while (r.p < r.end) {
    uint64_t number;
    if (!next_field(&r, &number, name) || number != 1 || seen || !text(*name)) return false;
    seen = true;
  }
  return seen;
}

static bool message(struct reader *r, struct fast_msg *m) {
  enum { MODEL = 1, VERSION = 2, ID = 4 };
  while (r->p < r->end) {
    uint64_t number;
    struct span v;
    if (!next_field(r, &number, &v)) return false;
    bool ok;
    switch (number) {
      case 1: /* model_name */
        ok = once(&m->seen, MODEL) && v.n > 0 && text(v) && (m->model = v, true);
        break;
      case 2: /* model_version */
        ok = once(&m->seen, VERSION) && (m->version = v, true);
        break;
      case 3: /* id */
        ok = once(&m->seen, ID) && text(v) && (m->id = v, true);
        break;
      case 5: /* inputs */
        if (m->n_in == PTS_GRPC_FAST_MAX) return false;
        m->in[m->n_in] = (struct fast_input){0}; /* dims past ndim 0, as calloc leaves them */
        ok = input(v, &m->in[m->n_in++]);
        break;
      case 6: /* outputs */
        if (m->n_out == PTS_GRPC_FAST_MAX) return false;
        ok = output(v, &m->out[m->n_out++]);
        break;
      case 7: /* raw_input_contents */
        if (m->n_raw == PTS_GRPC_FAST_MAX) return false;
        m->raw[m->n_raw++] = v;
        ok = true;
        break;
      default: /* parameters (4) and anything unknown: the full decoder's */
        ok = false;
    }
    if (!ok) return false;
  }
  return (m->seen & MODEL) && m->n_in > 0 && m->n_raw == m->n_in;
}

static char *dup_span(struct pts_infer_request *req, struct span v) {
  return pts_infer_request_strndup(req, (const char *)v.s, v.n);
}

enum pts_grpc_fast pts_grpc_fast_decode(struct pts_buf *msg, struct pts_infer_request *req) {
  struct fast_msg m;
  m.seen = 0;
  m.n_in = m.n_out = m.n_raw = 0;
  m.version.n = 0;
  m.id.n = 0;
  struct reader r = {msg->data, (const uint8_t *)msg->data + msg->size};
  if (!message(&r, &m)) return PTS_GRPC_FAST_DECLINED;
  /* The version as the full decoder reads it; "" (or none) is the latest. */
  char version[24];
  int64_t model_version = -1;
  struct pts_error err;
  if (m.version.n > 0 && (!c_string(m.version, version, sizeof version) ||
                          pts_grpc_parse_version(version, NULL, &model_version, &err) != PTS_OK))
    return PTS_GRPC_FAST_DECLINED;

  if (!(req->model_name = dup_span(req, m.model))) return PTS_GRPC_FAST_NOMEM;
  req->model_version = model_version;
  if (m.id.n > 0 && !(req->id = dup_span(req, m.id))) return PTS_GRPC_FAST_NOMEM;
  if (!(req->inputs = pts_infer_request_calloc(req, m.n_in, sizeof *req->inputs)))
    return PTS_GRPC_FAST_NOMEM;
  req->n_inputs = m.n_in;
  for (size_t i = 0; i < m.n_in; i++) {
    struct pts_tensor *t = &req->inputs[i];
    if (!(t->name = dup_span(req, m.in[i].name))) return PTS_GRPC_FAST_NOMEM;
    t->dtype = m.in[i].dtype;
    t->shape = m.in[i].shape;
    t->buf = pts_buf_retain(msg);
    t->data = m.raw[i].s;
    t->byte_size = m.raw[i].n;
  }
  if (m.n_out == 0) return PTS_GRPC_FAST_DONE;
  if (!(req->outputs = pts_infer_request_calloc(req, m.n_out, sizeof *req->outputs)))
    return PTS_GRPC_FAST_NOMEM;
  req->n_outputs = m.n_out;
  for (size_t i = 0; i < m.n_out; i++)
    if (!(req->outputs[i].name = dup_span(req, m.out[i]))) return PTS_GRPC_FAST_NOMEM;
  return PTS_GRPC_FAST_DONE;
}
