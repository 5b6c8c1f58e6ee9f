/* config/pbjson.c — protobuf-c message → jansson; see pbjson.h. */
#include "config/pbjson.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/pbtxt.h"
#include "core/alloc.h"
#include "core/base64.h"

/* 64-bit fields Triton's /config leaves as JSON strings (its int64 fix-up
 * list does not cover them), as "<message full name>.<field>". */
static const char *const string_int64_fields[] = {
    "inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.dim",
    "inference.ModelInstanceGroup.SecondaryDevice.device_id",
};

static bool int64_as_string(const ProtobufCMessageDescriptor *d,
                            const ProtobufCFieldDescriptor *f) {
  size_t n = strlen(d->name);
  for (size_t i = 0; i < sizeof string_int64_fields / sizeof string_int64_fields[0]; i++) {
    const char *e = string_int64_fields[i];
    if (strncmp(e, d->name, n) == 0 && e[n] == '.' && strcmp(e + n + 1, f->name) == 0) return true;
  }
  return false;
}

static const void *member(const ProtobufCMessage *m, unsigned offset) {
  return (const char *)m + offset;
}

/* protobuf prints a float by its shortest round-trip form (0.1f → 0.1);
 * widening to double directly would print 0.10000000149011612. */
static double float_as_double(float f) {
  char buf[32];
  for (int precision = 6; precision <= 9; precision++) {
    snprintf(buf, sizeof buf, "%.*g", precision, (double)f);
    if ((float)strtod(buf, NULL) == f) break;
  }
  return strtod(buf, NULL);
}

static json_t *real(double d) {
  if (isnan(d)) return json_string("NaN");
  if (isinf(d)) return json_string(d > 0 ? "Infinity" : "-Infinity");
  return json_real(d);
}

static json_t *int_string(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *int_string(const char *fmt, ...) {
  char buf[32];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return json_string(buf);
}

static json_t *text(const char *s, size_t n) {
  json_t *j = json_stringn(s, n);
  if (j) return j;
  /* Not UTF-8 (the pbtxt parser never produces that, but a message built
   * elsewhere might): keep the valid ASCII and mark the rest. */
  char *copy = pts_malloc(n + 1);
  if (!copy) return NULL;
  for (size_t i = 0; i < n; i++) copy[i] = (s[i] > 0 && s[i] < 0x7f) ? s[i] : '?';
  j = json_stringn(copy, n);
  pts_free(copy);
  return j;
}

static json_t *base64(const ProtobufCBinaryData *b) {
  size_t n;
  char *out = pts_base64_encode(b->data, b->len, &n);
  if (!out) return NULL;
  json_t *j = json_stringn(out, n);
  pts_free(out);
  return j;
}

static json_t *render_enum(const ProtobufCFieldDescriptor *f, int value) {
  const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, value);
  return ev ? json_string(ev->name) : json_integer(value);
}

static json_t *render_message(const ProtobufCMessage *m);

/* One value of field `f` stored at `at`. */
static json_t *render_value(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f,
                            const void *at) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      return json_integer(*(const int32_t *)at);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      return json_integer(*(const uint32_t *)at);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: {
      int64_t v = *(const int64_t *)at;
      return int64_as_string(d, f) ? int_string("%" PRId64, v) : json_integer(v);
    }
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: {
      uint64_t v = *(const uint64_t *)at;
      if (int64_as_string(d, f)) return int_string("%" PRIu64, v);
      /* jansson integers are signed 64-bit; beyond that only a real fits. */
      return v <= INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
    }
    case PROTOBUF_C_TYPE_FLOAT:
      return real(float_as_double(*(const float *)at));
    case PROTOBUF_C_TYPE_DOUBLE:
      return real(*(const double *)at);
    case PROTOBUF_C_TYPE_BOOL:
      return json_boolean(*(const protobuf_c_boolean *)at);
    case PROTOBUF_C_TYPE_ENUM:
      return render_enum(f, *(const int *)at);
    case PROTOBUF_C_TYPE_STRING: {
      const char *s = *(char *const *)at;
      return s ? text(s, strlen(s)) : json_string("");
    }
    case PROTOBUF_C_TYPE_BYTES:
      return base64(at);
    case PROTOBUF_C_TYPE_MESSAGE: {
      const ProtobufCMessage *sub = *(ProtobufCMessage *const *)at;
      if (sub) return render_message(sub);
      /* Only a map value can get here unset: print its default message. */
      const ProtobufCMessageDescriptor *sd = f->descriptor;
      ProtobufCMessage *empty = pts_malloc(sd->sizeof_message);
      if (!empty) return NULL;
      protobuf_c_message_init(sd, empty);
      json_t *j = render_message(empty);
      protobuf_c_message_free_unpacked(empty, NULL);
      return j;
    }
  }
  return NULL;
}

/* A map key as a JSON object key. */
static bool key_text(const ProtobufCFieldDescriptor *kf, const void *at, char *buf, size_t size,
                     const char **out) {
  switch (kf->type) {
    case PROTOBUF_C_TYPE_STRING:
      *out = *(char *const *)at ? *(char *const *)at : "";
      return true;
    case PROTOBUF_C_TYPE_BOOL:
      *out = *(const protobuf_c_boolean *)at ? "true" : "false";
      return true;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      snprintf(buf, size, "%" PRId32, *(const int32_t *)at);
      break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      snprintf(buf, size, "%" PRIu32, *(const uint32_t *)at);
      break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      snprintf(buf, size, "%" PRId64, *(const int64_t *)at);
      break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      snprintf(buf, size, "%" PRIu64, *(const uint64_t *)at);
      break;
    default:
      return false;
  }
  *out = buf;
  return true;
}

static json_t *render_map(const ProtobufCFieldDescriptor *f, ProtobufCMessage *const *entries,
                          size_t n) {
  const ProtobufCMessageDescriptor *ed = f->descriptor;
  const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
  json_t *obj = json_object();
  for (size_t i = 0; obj && i < n; i++) {
    char buf[32];
    const char *key;
    json_t *v = NULL;
    if (key_text(kf, member(entries[i], kf->offset), buf, sizeof buf, &key))
      v = render_value(ed, vf, member(entries[i], vf->offset));
    if (!v || json_object_set_new(obj, key, v) != 0) {
      json_decref(obj);
      obj = NULL;
    }
  }
  return obj;
}

static json_t *render_repeated(const ProtobufCMessageDescriptor *d,
                               const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m) {
  size_t n = *(const size_t *)member(m, f->quantifier_offset);
  const char *arr = *(char *const *)member(m, f->offset);
  if (pts_pbtxt_field_is_map(f)) return render_map(f, (ProtobufCMessage *const *)arr, n);
  size_t size = pts_pbtxt_value_size(f->type);
  json_t *list = json_array();
  for (size_t i = 0; list && i < n; i++) {
    json_t *v = render_value(d, f, arr + i * size);
    if (!v || json_array_append_new(list, v) != 0) {
      json_decref(list);
      list = NULL;
    }
  }
  return list;
}

/* Field indices in declaration order: protoc-c lays the struct out in that
 * order (oneof unions last), while `fields` is sorted by number. */
static void declaration_order(const ProtobufCMessageDescriptor *d, unsigned *order) {
  for (unsigned i = 0; i < d->n_fields; i++) {
    unsigned j = i;
    while (j > 0 && d->fields[order[j - 1]].offset > d->fields[i].offset) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
}

static json_t *render_message(const ProtobufCMessage *m) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  unsigned *order = pts_malloc(sizeof(unsigned) * (d->n_fields ? d->n_fields : 1));
  json_t *obj = order ? json_object() : NULL;
  if (order) declaration_order(d, order);
  for (unsigned k = 0; obj && k < d->n_fields; k++) {
    const ProtobufCFieldDescriptor *f = &d->fields[order[k]];
    json_t *v;
    if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
        *(const uint32_t *)member(m, f->quantifier_offset) != f->id)
      continue;
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
      v = render_repeated(d, f, m);
    else if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
             !*(ProtobufCMessage *const *)member(m, f->offset))
      continue;
    else
      v = render_value(d, f, member(m, f->offset));
    if (!v || json_object_set_new(obj, f->name, v) != 0) {
      json_decref(obj);
      obj = NULL;
    }
  }
  pts_free(order);
  return obj;
}

json_t *pts_pbjson_render(const ProtobufCMessage *msg) { return msg ? render_message(msg) : NULL; }
