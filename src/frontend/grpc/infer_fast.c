/* frontend/grpc/infer_fast.c — see infer_fast.h. Scan the message into
 * spans first (no allocation, the request untouched), check everything the
 * full decoder would check, and only then fill the request: a message this
 * file declines leaves nothing behind for the full decoder to undo. */
#include "frontend/grpc/infer_fast.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "frontend/grpc/pbwire.h"
#include "frontend/grpc/version.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

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

/* The bytes still to read: p[pos..n). */
struct reader {
  const uint8_t *p;
  size_t n, pos;
};

/* Longest forms taken here. A shape value of at most nine bytes is below
 * 2^63, so an int64 without turning negative; a longer one is left to
 * protobuf-c, with whatever it makes of the bits past 64. protobuf-c
 * reads a length in at most five bytes (and refuses more), and a key in
 * at most five; every field of the subset is below 16, so its key is one
 * byte in the shortest form, and a longer form is left to protobuf-c too. */
#define VALUE_MAX_BYTES 9
#define LENGTH_MAX_BYTES 5

/* The next field: its number in *number and its payload in *v; false at a
 * truncated field, one that is not length-delimited (every field of the
 * subset is, and so is a packed repeated int64), or a key or length in a
 * longer form than above. */
static bool next_field(struct reader *r, uint64_t *number, struct span *v) {
  uint64_t n;
  if (r->pos >= r->n) return false;
  uint8_t key = r->p[r->pos++];
  if ((key & 0x80) || (key & 7) != PTS_PB_LEN ||
      !pts_pb_read_varint(r->p, r->n, &r->pos, LENGTH_MAX_BYTES, &n) || n > r->n - r->pos)
    return false;
  *number = key >> 3;
  *v = (struct span){r->p + r->pos, (size_t)n};
  r->pos += (size_t)n;
  return true;
}

/* Whether protobuf-c takes a string field and reads it as the same C
 * string: ASCII without NUL. protobuf-c refuses a proto3 string that is
 * not UTF-8, and a C string ends at a NUL; any other UTF-8 is left to it,
 * whatever its checker makes of the corners. */
static bool text(struct span v) {
  for (size_t i = 0; i < v.n; i++)
    if (v.s[i] == 0 || v.s[i] >= 0x80) return false;
  return true;
}

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
  struct reader r = {v.s, v.n, 0};
  int n = 0;
  while (r.pos < r.n) {
    uint64_t d;
    if (n == PTS_TENSOR_MAX_DIMS || !pts_pb_read_varint(r.p, r.n, &r.pos, VALUE_MAX_BYTES, &d))
      return false;
    out->dims[n++] = (int64_t)d;
  }
  out->ndim = n;
  return true;
}

/* InferInputTensor with exactly name, datatype and shape. */
static bool input(struct span m, struct fast_input *in) {
  enum { NAME = 1, DATATYPE = 2, SHAPE = 4 };
  struct reader r = {m.s, m.n, 0};
  unsigned seen = 0;
  while (r.pos < r.n) {
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
  struct reader r = {m.s, m.n, 0};
  bool seen = false;
  while (r.pos < r.n) {
    uint64_t number;
    if (!next_field(&r, &number, name) || number != 1 || seen || !text(*name)) return false;
    seen = true;
  }
  return seen;
}

static bool message(struct reader *r, struct fast_msg *m) {
  enum { MODEL = 1, VERSION = 2, ID = 4 };
  while (r->pos < r->n) {
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
  struct reader r = {msg->data, msg->size, 0};
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
