/* frontend/http/v2_fast.c — see v2_fast.h. Scan the header into spans and
 * numbers first (no allocation, the request untouched), check everything
 * the full decoder would check, and only then fill the request: a header
 * this file declines leaves nothing behind for the full decoder to undo. */
#include "frontend/http/v2_fast.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/jsonstr.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

/* Spans point into the header text (borrowed). */
struct span {
  const char *s;
  size_t n;
};

/* A shared-memory place as the header names it; region.s NULL: none. */
struct fast_shm {
  struct span region;
  uint64_t size, offset;
};

struct fast_input {
  struct span name;
  enum pts_dtype dtype;
  struct pts_shape shape;
  uint64_t size; /* binary_data_size; unused when shm.region.s is set */
  struct fast_shm shm;
};

struct fast_output {
  struct span name;
  bool binary, binary_set;
  struct fast_shm shm;
};

struct fast_header {
  bool has_id, has_bdo, bdo;
  struct span id;
  size_t n_in, n_out;
  struct fast_input in[PTS_V2_FAST_MAX];
  struct fast_output out[PTS_V2_FAST_MAX];
};

struct scan {
  const char *p, *end;
};

static void skip_ws(struct scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static bool take(struct scan *s, char c) {
  skip_ws(s);
  if (s->p >= s->end || *s->p != c) return false;
  s->p++;
  return true;
}

/* A string of printable ASCII without escapes: jansson would decode any
 * other the same way or refuse it, and telling which is its job. */
static bool string(struct scan *s, struct span *out) {
  if (!take(s, '"')) return false;
  const char *start = s->p;
  s->p += pts_json_plain_prefix((const unsigned char *)s->p, (size_t)(s->end - s->p));
  if (s->p >= s->end || *s->p != '"') return false;
  *out = (struct span){start, (size_t)(s->p - start)};
  s->p++;
  return true;
}

/* A non-negative integer literal of at most 18 digits (so within int64);
 * a fraction or exponent makes it a real, which the full decoder refuses. */
static bool uint_lit(struct scan *s, uint64_t *out) {
  skip_ws(s);
  const char *start = s->p;
  uint64_t v = 0;
  while (s->p < s->end && *s->p >= '0' && *s->p <= '9' && s->p - start < 19)
    v = v * 10 + (uint64_t)(*s->p++ - '0');
  size_t n = (size_t)(s->p - start);
  if (n == 0 || n > 18 || (n > 1 && *start == '0')) return false;
  if (s->p < s->end && (*s->p == '.' || *s->p == 'e' || *s->p == 'E')) return false;
  *out = v;
  return true;
}

static bool bool_lit(struct scan *s, bool *out) {
  skip_ws(s);
  size_t left = (size_t)(s->end - s->p);
  if (left >= 4 && memcmp(s->p, "true", 4) == 0) {
    s->p += 4;
    *out = true;
    return true;
  }
  if (left >= 5 && memcmp(s->p, "false", 5) == 0) {
    s->p += 5;
    *out = false;
    return true;
  }
  return false;
}

static bool is(struct span k, const char *lit) {
  return k.n == strlen(lit) && memcmp(k.s, lit, k.n) == 0;
}

static bool same(struct span a, struct span b) {
  return a.n == b.n && memcmp(a.s, b.s, a.n) == 0;
}

/* Walks an object's members: *first true before the first call. Returns
 * 1 with the next key (its ':' taken), 0 at the closing brace, -1 when the
 * text is not what it should be. */
static int next_key(struct scan *s, bool *first, struct span *key) {
  if (*first) {
    *first = false;
    if (!take(s, '{')) return -1;
    if (take(s, '}')) return 0;
  } else {
    if (take(s, '}')) return 0;
    if (!take(s, ',')) return -1;
  }
  return string(s, key) && take(s, ':') ? 1 : -1;
}

/* Walks an array's elements the same way: 1 before each element. */
static int next_elem(struct scan *s, bool *first) {
  if (*first) {
    *first = false;
    if (!take(s, '[')) return -1;
    return take(s, ']') ? 0 : 1;
  }
  if (take(s, ']')) return 0;
  return take(s, ',') ? 1 : -1;
}

/* Sets bit `b` of *seen; false if it was set (a duplicate key). */
static bool once(unsigned *seen, unsigned b) {
  if (*seen & b) return false;
  *seen |= b;
  return true;
}

/* One of the shared-memory keys (protocol-facts §1.15) into *shm, its
 * bit into *seen; false for any other key, a repeated one or a value of
 * the wrong kind. */
enum { SHM_REGION = 1, SHM_SIZE = 2, SHM_OFFSET = 4 };
static bool shm_key(struct scan *s, struct span k, unsigned *seen, struct fast_shm *shm) {
  return is(k, "shared_memory_region")      ? once(seen, SHM_REGION) && string(s, &shm->region)
         : is(k, "shared_memory_byte_size") ? once(seen, SHM_SIZE) && uint_lit(s, &shm->size)
         : is(k, "shared_memory_offset")    ? once(seen, SHM_OFFSET) && uint_lit(s, &shm->offset)
                                            : false;
}

/* Whether the shared-memory keys seen name a place the full decoder takes:
 * none at all, or a non-empty region with its byte size (the offset
 * optional). A size or offset alone, a region without a size or an empty
 * name are errors, which are the full decoder's to word. */
static bool shm_whole(unsigned seen, const struct fast_shm *shm) {
  if (!(seen & SHM_REGION)) return seen == 0;
  return (seen & SHM_SIZE) && shm->region.n > 0;
}

/* {"binary_data_size": n}, or a shared-memory place, and nothing else. */
static bool input_params(struct scan *s, struct fast_input *in) {
  enum { BINARY = 8 };
  unsigned seen = 0;
  bool first = true;
  struct span k;
  int r;
  while ((r = next_key(s, &first, &k)) == 1) {
    bool ok = is(k, "binary_data_size") ? once(&seen, BINARY) && uint_lit(s, &in->size)
                                        : shm_key(s, k, &seen, &in->shm);
    if (!ok) return false;
  }
  if (r != 0) return false;
  return seen == BINARY || (!(seen & BINARY) && (seen & SHM_REGION) && shm_whole(seen, &in->shm));
}

static bool shape(struct scan *s, struct pts_shape *out) {
  bool first = true;
  int r;
  out->ndim = 0;
  while ((r = next_elem(s, &first)) == 1) {
    uint64_t d;
    if (out->ndim == PTS_TENSOR_MAX_DIMS || !uint_lit(s, &d)) return false;
    out->dims[out->ndim++] = (int64_t)d;
  }
  return r == 0;
}

static bool input(struct scan *s, struct fast_input *in) {
  enum { NAME = 1, DTYPE = 2, SHAPE = 4, PARAMS = 8 };
  unsigned seen = 0;
  bool first = true;
  struct span k, dt;
  int r;
  while ((r = next_key(s, &first, &k)) == 1) {
    bool ok = is(k, "name")         ? once(&seen, NAME) && string(s, &in->name)
              : is(k, "datatype")   ? once(&seen, DTYPE) && string(s, &dt)
              : is(k, "shape")      ? once(&seen, SHAPE) && shape(s, &in->shape)
              : is(k, "parameters") ? once(&seen, PARAMS) && input_params(s, in)
                                    : false;
    if (!ok) return false;
  }
  if (r != 0 || seen != (NAME | DTYPE | SHAPE | PARAMS)) return false;
  char name[16];
  if (dt.n >= sizeof name) return false;
  memcpy(name, dt.s, dt.n);
  name[dt.n] = '\0';
  in->dtype = pts_dtype_from_name(name);
  return in->dtype != PTS_DTYPE_INVALID;
}

/* {"binary_data": bool}, a shared-memory place, both (binary_data then
 * false), or {}. */
static bool output_params(struct scan *s, struct fast_output *o) {
  unsigned seen = 0;
  bool first = true;
  struct span k;
  int r;
  while ((r = next_key(s, &first, &k)) == 1) {
    bool ok;
    if (is(k, "binary_data")) {
      ok = !o->binary_set && bool_lit(s, &o->binary);
      o->binary_set = true;
    } else {
      ok = shm_key(s, k, &seen, &o->shm);
    }
    if (!ok) return false;
  }
  return r == 0 && shm_whole(seen, &o->shm) && !(o->shm.region.s && o->binary);
}

static bool output(struct scan *s, struct fast_output *o) {
  enum { NAME = 1, PARAMS = 2 };
  unsigned seen = 0;
  bool first = true;
  struct span k;
  int r;
  while ((r = next_key(s, &first, &k)) == 1) {
    bool ok = is(k, "name")         ? once(&seen, NAME) && string(s, &o->name)
              : is(k, "parameters") ? once(&seen, PARAMS) && output_params(s, o)
                                    : false;
    if (!ok) return false;
  }
  return r == 0 && (seen & NAME);
}

/* {"binary_data_output": bool} or {}. */
static bool request_params(struct scan *s, struct fast_header *h) {
  bool first = true;
  struct span k;
  int r;
  while ((r = next_key(s, &first, &k)) == 1) {
    if (!is(k, "binary_data_output") || h->has_bdo || !bool_lit(s, &h->bdo)) return false;
    h->has_bdo = true;
  }
  return r == 0;
}

static bool inputs(struct scan *s, struct fast_header *h) {
  bool first = true;
  int r;
  while ((r = next_elem(s, &first)) == 1) {
    if (h->n_in == PTS_V2_FAST_MAX) return false;
    struct fast_input *in = &h->in[h->n_in++];
    *in = (struct fast_input){0};
    if (!input(s, in)) return false;
  }
  return r == 0 && h->n_in > 0;
}

static bool outputs(struct scan *s, struct fast_header *h) {
  bool first = true;
  int r;
  while ((r = next_elem(s, &first)) == 1) {
    if (h->n_out == PTS_V2_FAST_MAX) return false;
    struct fast_output *o = &h->out[h->n_out++];
    *o = (struct fast_output){0};
    if (!output(s, o)) return false;
  }
  return r == 0;
}

static bool header(struct scan *s, struct fast_header *h) {
  enum { ID = 1, PARAMS = 2, INPUTS = 4, OUTPUTS = 8 };
  unsigned seen = 0;
  bool first = true;
  struct span k;
  int r;
  while ((r = next_key(s, &first, &k)) == 1) {
    bool ok = is(k, "id")           ? once(&seen, ID) && (h->has_id = string(s, &h->id))
              : is(k, "parameters") ? once(&seen, PARAMS) && request_params(s, h)
              : is(k, "inputs")     ? once(&seen, INPUTS) && inputs(s, h)
              : is(k, "outputs")    ? once(&seen, OUTPUTS) && outputs(s, h)
                                    : false;
    if (!ok) return false;
  }
  skip_ws(s);
  return r == 0 && (seen & INPUTS) && s->p == s->end;
}

/* What the full decoder checks of what was scanned: known sizes that add
 * up to the body, distinct names. */
static bool consistent(const struct fast_header *h, size_t header_len, size_t body_size) {
  size_t offset = header_len;
  for (size_t i = 0; i < h->n_in; i++) {
    const struct fast_input *in = &h->in[i];
    int64_t count = pts_shape_count(&in->shape);
    if (count < 0) return false;
    for (size_t j = 0; j < i; j++)
      if (same(h->in[j].name, in->name)) return false;
    if (in->shm.region.s) {
      /* Its bytes are in the region (the server checks them against the
       * shape later); the full decoder refuses only a byte count past
       * INT64_MAX here. */
      uint64_t unit = pts_dtype_size(in->dtype);
      if (unit && (uint64_t)count > (uint64_t)INT64_MAX / unit) return false;
      continue;
    }
    if (in->size > body_size - offset) return false;
    if (in->dtype != PTS_DTYPE_BYTES) {
      uint64_t unit = pts_dtype_size(in->dtype);
      if (count > 0 && (uint64_t)count > UINT64_MAX / unit) return false;
      if (in->size != (uint64_t)count * unit) return false;
    }
    offset += (size_t)in->size;
  }
  if (offset != body_size) return false;
  for (size_t i = 0; i < h->n_out; i++)
    for (size_t j = 0; j < i; j++)
      if (same(h->out[j].name, h->out[i].name)) return false;
  return true;
}

/* The place as the full decoder fills it (its region name owned). */
static bool fill_place(struct pts_shm_place *place, const struct fast_shm *shm) {
  place->region = pts_strndup(shm->region.s, shm->region.n);
  place->byte_size = shm->size;
  place->offset = shm->offset;
  return place->region != NULL;
}

enum pts_v2_fast pts_v2_fast_decode(struct pts_buf *body, size_t header_len,
                                    struct pts_infer_request *req) {
  struct fast_header h;
  h.has_id = h.has_bdo = h.bdo = false;
  h.n_in = h.n_out = 0;
  struct scan s = {body->data, (const char *)body->data + header_len};
  if (!header(&s, &h) || !consistent(&h, header_len, body->size)) return PTS_V2_FAST_DECLINED;

  if (h.has_id && !(req->id = pts_infer_request_strndup(req, h.id.s, h.id.n)))
    return PTS_V2_FAST_NOMEM;
  if (h.has_bdo) req->binary_data_output = h.bdo;
  if (!(req->inputs = pts_infer_request_calloc(req, h.n_in, sizeof *req->inputs)))
    return PTS_V2_FAST_NOMEM;
  req->n_inputs = h.n_in;
  size_t offset = header_len;
  for (size_t i = 0; i < h.n_in; i++) {
    struct pts_tensor *t = &req->inputs[i];
    if (!(t->name = pts_infer_request_strndup(req, h.in[i].name.s, h.in[i].name.n)))
      return PTS_V2_FAST_NOMEM;
    t->dtype = h.in[i].dtype;
    t->shape = h.in[i].shape;
    if (h.in[i].shm.region.s) {
      struct pts_shm_place *place = pts_infer_request_input_shm(req, i);
      if (!place || !fill_place(place, &h.in[i].shm)) return PTS_V2_FAST_NOMEM;
      continue;
    }
    t->buf = pts_buf_retain(body);
    t->data = (const unsigned char *)body->data + offset;
    t->byte_size = (size_t)h.in[i].size;
    offset += t->byte_size;
  }
  if (h.n_out == 0) return PTS_V2_FAST_DONE;
  if (!(req->outputs = pts_infer_request_calloc(req, h.n_out, sizeof *req->outputs)))
    return PTS_V2_FAST_NOMEM;
  req->n_outputs = h.n_out;
  for (size_t i = 0; i < h.n_out; i++) {
    struct pts_requested_output *ro = &req->outputs[i];
    if (!(ro->name = pts_infer_request_strndup(req, h.out[i].name.s, h.out[i].name.n)))
      return PTS_V2_FAST_NOMEM;
    ro->binary = h.out[i].binary;
    ro->binary_set = h.out[i].binary_set;
    if (h.out[i].shm.region.s && !fill_place(&ro->shm, &h.out[i].shm)) return PTS_V2_FAST_NOMEM;
  }
  return PTS_V2_FAST_DONE;
}
