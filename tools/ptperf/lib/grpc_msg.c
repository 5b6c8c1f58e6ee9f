/* ptperf/lib/grpc_msg.c — ModelInferRequest packing, response checks. */
#include "ptperf/lib/grpc_msg.h"

#include <string.h>

#include "core/alloc.h"
#include "grpc_service.pb-c.h"

enum pts_status ptperf_grpc_request_build(const struct ptperf_model *m, uint64_t seed,
                                          bool zero_data, uint8_t **out, size_t *out_len,
                                          struct pts_error *err) {
  *out = NULL;
  *out_len = 0;
  size_t n = m->n_inputs, data_len = 0;
  for (size_t i = 0; i < n; i++) data_len += ptperf_input_wire_size(&m->inputs[i]);
  Inference__ModelInferRequest__InferInputTensor *tensors = pts_calloc(n, sizeof *tensors);
  Inference__ModelInferRequest__InferInputTensor **ptrs = pts_calloc(n, sizeof *ptrs);
  ProtobufCBinaryData *raw = pts_calloc(n, sizeof *raw);
  unsigned char *data = pts_malloc(data_len ? data_len : 1);
  uint8_t *buf = NULL;
  enum pts_status st = PTS_OK;
  if (!tensors || !ptrs || !raw || !data) {
    st = pts_error_set(err, PTS_NOMEM, "no memory for a gRPC request to model '%s'", m->name);
    goto out;
  }
  ptperf_inputs_fill(m, seed, zero_data, data);
  Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
  req.model_name = m->name;
  if (m->version) req.model_version = m->version;
  req.n_inputs = n;
  req.inputs = ptrs;
  req.n_raw_input_contents = n;
  req.raw_input_contents = raw;
  unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    struct ptperf_input *in = &m->inputs[i];
    inference__model_infer_request__infer_input_tensor__init(&tensors[i]);
    tensors[i].name = in->name;
    tensors[i].datatype = (char *)pts_dtype_name(in->dtype);
    tensors[i].n_shape = (size_t)in->ndim;
    tensors[i].shape = in->dims;
    ptrs[i] = &tensors[i];
    raw[i].len = ptperf_input_wire_size(in);
    raw[i].data = p;
    p += raw[i].len;
  }
  size_t len = inference__model_infer_request__get_packed_size(&req);
  if (!(buf = pts_malloc(len ? len : 1))) {
    st = pts_error_set(err, PTS_NOMEM, "no memory for a %zu-byte gRPC request", len);
    goto out;
  }
  inference__model_infer_request__pack(&req, buf);
  *out = buf;
  *out_len = len;
out:
  pts_free(tensors);
  pts_free(ptrs);
  pts_free(raw);
  pts_free(data);
  return st;
}

/* ---- the protobuf wire format, as far as a check needs it ---- */

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

struct field {
  uint64_t number;
  int wire;
  const uint8_t *data; /* WIRE_LEN: the payload */
  size_t len;
};

static bool read_varint(const uint8_t *buf, size_t len, size_t *at, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *at < len; shift += 7) {
    uint8_t b = buf[(*at)++];
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false; /* truncated, or more than 10 bytes */
}

/* The field at *at: 1 and *f filled, 0 at the end, -1 when malformed (why
 * in err). */
static int next_field(const uint8_t *buf, size_t len, size_t *at, const char *what, struct field *f,
                      struct pts_error *err) {
  if (*at == len) return 0;
  size_t start = *at;
  uint64_t key, v;
  if (!read_varint(buf, len, at, &key) || (key >> 3) == 0) {
    pts_error_set(err, PTS_INVALID_ARG, "malformed %s: bad field key at byte %zu", what, start);
    return -1;
  }
  f->number = key >> 3;
  f->wire = (int)(key & 7);
  f->data = NULL;
  f->len = 0;
  size_t skip;
  switch (f->wire) {
    case WIRE_VARINT:
      if (read_varint(buf, len, at, &v)) return 1;
      pts_error_set(err, PTS_INVALID_ARG, "malformed %s: field %llu at byte %zu: truncated varint",
                    what, (unsigned long long)f->number, start);
      return -1;
    case WIRE_I64:
      skip = 8;
      break;
    case WIRE_I32:
      skip = 4;
      break;
    case WIRE_LEN:
      if (!read_varint(buf, len, at, &v)) {
        pts_error_set(err, PTS_INVALID_ARG,
                      "malformed %s: field %llu at byte %zu: truncated length", what,
                      (unsigned long long)f->number, start);
        return -1;
      }
      if (v > len - *at) {
        pts_error_set(err, PTS_INVALID_ARG,
                      "malformed %s: field %llu at byte %zu: length %llu runs past the end "
                      "(%zu bytes left)",
                      what, (unsigned long long)f->number, start, (unsigned long long)v, len - *at);
        return -1;
      }
      f->data = buf + *at;
      f->len = (size_t)v;
      *at += (size_t)v;
      return 1;
    default:
      pts_error_set(err, PTS_INVALID_ARG, "malformed %s: field %llu at byte %zu: wire type %d",
                    what, (unsigned long long)f->number, start, f->wire);
      return -1;
  }
  if (skip > len - *at) {
    pts_error_set(err, PTS_INVALID_ARG, "malformed %s: field %llu at byte %zu: truncated", what,
                  (unsigned long long)f->number, start);
    return -1;
  }
  *at += skip;
  return 1;
}

/* ModelInferResponse: outputs = 5, raw_output_contents = 6. */
static enum pts_status check_infer_response(const uint8_t *buf, size_t len,
                                            struct ptperf_grpc_reply *out, struct pts_error *err) {
  static const char what[] = "ModelInferResponse";
  size_t at = 0;
  struct field f;
  int r;
  while ((r = next_field(buf, len, &at, what, &f, err)) == 1) {
    if (f.wire == WIRE_LEN && f.number == 5) out->n_outputs++;
    if (f.wire == WIRE_LEN && f.number == 6) out->n_raw++;
  }
  if (r < 0) return PTS_INVALID_ARG;
  if (out->n_outputs == 0) return pts_error_set(err, PTS_INVALID_ARG, "%s has no outputs", what);
  if (out->n_raw != out->n_outputs)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s has %zu outputs but %zu raw_output_contents entries", what,
                         out->n_outputs, out->n_raw);
  return PTS_OK;
}

/* ModelStreamInferResponse: error_message = 1, infer_response = 2. */
static enum pts_status check_stream_response(const uint8_t *buf, size_t len,
                                             struct ptperf_grpc_reply *out, struct pts_error *err) {
  static const char what[] = "ModelStreamInferResponse";
  size_t at = 0;
  struct field f, resp = {0};
  bool have_resp = false;
  int r;
  while ((r = next_field(buf, len, &at, what, &f, err)) == 1) {
    if (f.wire == WIRE_LEN && f.number == 1) {
      out->error = (const char *)f.data;
      out->error_len = f.len;
    } else if (f.wire == WIRE_LEN && f.number == 2) {
      resp = f; /* protobuf: a repeated singular message field, the last wins */
      have_resp = true;
    }
  }
  if (r < 0) return PTS_INVALID_ARG;
  if (out->error && out->error_len > 0)
    return pts_error_set(err, PTS_UNAVAILABLE, "%s.error_message: %.*s", what,
                         (int)(out->error_len > 400 ? 400 : out->error_len), out->error);
  if (!have_resp) return pts_error_set(err, PTS_INVALID_ARG, "%s has no infer_response", what);
  return check_infer_response(resp.data, resp.len, out, err);
}

enum pts_status ptperf_grpc_response_check(const uint8_t *buf, size_t len, bool stream,
                                           struct ptperf_grpc_reply *out, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  return stream ? check_stream_response(buf, len, out, err)
                : check_infer_response(buf, len, out, err);
}

const char *ptperf_grpc_status_name(int code) {
  static const char *const names[] = {
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
  };
  if (code < 0 || (size_t)code >= sizeof names / sizeof names[0]) return "UNKNOWN";
  return names[code];
}
