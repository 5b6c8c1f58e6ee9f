/* config/pbjson_parse.c — JSON → protobuf-c message, protobuf's JSON mapping;
 * see pbjson.h.
 *
 * Like the text-format parser (pbtxt.c), it writes straight into the
 * message through the field descriptors and keeps the tree consistent at
 * every step (a sub-message is attached before it is filled, an array only
 * grows by a finished element), so on any error the whole tree is freed
 * with protobuf_c_message_free_unpacked and nothing leaks.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/json_kind.h"
#include "config/pbjson.h"
#include "config/pbtxt.h"
#include "core/alloc.h"
#include "core/base64.h"

/* Bounds the recursion; deeper than any ModelConfig. */
#define MAX_DEPTH 64

struct jp {
  struct pts_error *err;
  char path[256]; /* "input[0].dims" — where the parser is, for messages */
  size_t path_len;
  int depth;
};

static enum pts_status fail(struct jp *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static enum pts_status fail(struct jp *p, const char *fmt, ...) {
  char what[PTS_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (p->path_len)
    return pts_error_set(p->err, PTS_INVALID_ARG, "field '%s': %s", p->path, what);
  return pts_error_set(p->err, PTS_INVALID_ARG, "%s", what);
}

static enum pts_status nomem(struct jp *p) {
  return pts_error_set(p->err, PTS_NOMEM, "out of memory parsing a JSON message");
}

/* Appends ".name" or "[i]" to the path; returns the length to restore. */
static size_t push_name(struct jp *p, const char *name) {
  size_t old = p->path_len;
  int n = snprintf(p->path + old, sizeof p->path - old, "%s%s", old ? "." : "", name);
  if (n > 0) p->path_len = old + (size_t)n < sizeof p->path ? old + (size_t)n : sizeof p->path - 1;
  return old;
}

static size_t push_index(struct jp *p, size_t i) {
  size_t old = p->path_len;
  int n = snprintf(p->path + old, sizeof p->path - old, "[%zu]", i);
  if (n > 0) p->path_len = old + (size_t)n < sizeof p->path ? old + (size_t)n : sizeof p->path - 1;
  return old;
}

static void pop(struct jp *p, size_t old) {
  p->path_len = old;
  p->path[old] = '\0';
}

/* ---- descriptor helpers ---- */

static void *member(ProtobufCMessage *m, unsigned offset) { return (char *)m + offset; }

static ProtobufCMessage *new_message(const ProtobufCMessageDescriptor *d) {
  ProtobufCMessage *m = pts_malloc(d->sizeof_message);
  if (m) protobuf_c_message_init(d, m);
  return m;
}

/* protobuf's json_name: the field name in lowerCamelCase. */
static bool is_camel_of(const char *key, const char *name) {
  bool upper = false;
  for (; *name; name++) {
    if (*name == '_') {
      upper = true;
      continue;
    }
    char want = upper && *name >= 'a' && *name <= 'z' ? (char)(*name - 'a' + 'A') : *name;
    upper = false;
    if (*key++ != want) return false;
  }
  return *key == '\0';
}

/* The field a JSON key names: its proto name or its lowerCamelCase json_name,
 * both of which protobuf's parser accepts. */
static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d,
                                                  const char *key) {
  for (unsigned i = 0; i < d->n_fields; i++)
    if (strcmp(d->fields[i].name, key) == 0 || is_camel_of(key, d->fields[i].name))
      return &d->fields[i];
  return NULL;
}

static enum pts_status append_value(struct jp *p, ProtobufCMessage *msg,
                                    const ProtobufCFieldDescriptor *f, const void *value) {
  return pts_pbtxt_append(msg, f, value) ? PTS_OK : nomem(p);
}

/* Sets a non-repeated field (each is set at most once: the caller checks). */
static void store_singular(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                           const void *value) {
  memcpy(member(msg, f->offset), value, pts_pbtxt_value_size(f->type));
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
    *(uint32_t *)member(msg, f->quantifier_offset) = f->id;
  else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_MESSAGE &&
           f->type != PROTOBUF_C_TYPE_STRING)
    *(protobuf_c_boolean *)member(msg, f->quantifier_offset) = 1;
}

/* ---- scalars ---- */

static bool is_unsigned(ProtobufCType t) {
  return t == PROTOBUF_C_TYPE_UINT32 || t == PROTOBUF_C_TYPE_FIXED32 ||
         t == PROTOBUF_C_TYPE_UINT64 || t == PROTOBUF_C_TYPE_FIXED64;
}

/* Integers: a JSON number (an integral real too), or a string holding a
 * decimal integer (protobuf writes 64-bit integers as strings). */
static enum pts_status parse_integer(struct jp *p, const json_t *j,
                                     const ProtobufCFieldDescriptor *f, union pts_pbtxt_scalar *v) {
  bool neg = false;
  uint64_t mag = 0;
  if (json_is_integer(j)) {
    json_int_t x = json_integer_value(j);
    neg = x < 0;
    mag = neg ? (uint64_t)(-(x + 1)) + 1 : (uint64_t)x;
  } else if (json_is_real(j)) {
    double d = json_real_value(j);
    if (!isfinite(d) || d != floor(d) || fabs(d) >= 18446744073709551616.0)
      return fail(p, "%g is not an integer", d);
    neg = d < 0;
    mag = (uint64_t)fabs(d);
  } else if (json_is_string(j)) {
    const char *s = json_string_value(j);
    const char *q = s;
    if (*q == '-') neg = true, q++;
    if (!*q) return fail(p, "'%.40s' is not an integer", s);
    for (; *q; q++) {
      if (*q < '0' || *q > '9') return fail(p, "'%.40s' is not an integer", s);
      unsigned d = (unsigned)(*q - '0');
      if (mag > (UINT64_MAX - d) / 10) return fail(p, "'%.40s' is out of range", s);
      mag = mag * 10 + d;
    }
  } else {
    return fail(p, "expected an integer, got %s", pts_json_kind_name(j));
  }
  bool is64 = pts_pbtxt_value_size(f->type) == 8;
  bool un = is_unsigned(f->type);
  uint64_t limit = un ? (is64 ? UINT64_MAX : UINT32_MAX)
                      : (is64 ? (uint64_t)INT64_MAX : (uint64_t)INT32_MAX) + (neg ? 1 : 0);
  if ((un && neg && mag != 0) || mag > limit)
    return fail(p, "value %s%llu is out of range for a %s%d field", neg ? "-" : "",
                (unsigned long long)mag, un ? "uint" : "int", is64 ? 64 : 32);
  int64_t sv = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
  if (is64 && un)
    v->u64 = mag;
  else if (is64)
    v->i64 = sv;
  else if (un)
    v->u32 = (uint32_t)mag;
  else
    v->i32 = (int32_t)sv;
  return PTS_OK;
}

static enum pts_status parse_real(struct jp *p, const json_t *j, const ProtobufCFieldDescriptor *f,
                                  union pts_pbtxt_scalar *v) {
  double d;
  if (json_is_number(j)) {
    d = json_number_value(j);
  } else if (json_is_string(j)) {
    const char *s = json_string_value(j);
    char *end = NULL;
    if (strcmp(s, "NaN") == 0)
      d = NAN;
    else if (strcmp(s, "Infinity") == 0)
      d = INFINITY;
    else if (strcmp(s, "-Infinity") == 0)
      d = -INFINITY;
    else if (!*s || (d = strtod(s, &end), *end) || !isfinite(d))
      return fail(p, "'%.40s' is not a number", s);
  } else {
    return fail(p, "expected a number, got %s", pts_json_kind_name(j));
  }
  if (f->type == PROTOBUF_C_TYPE_DOUBLE) {
    v->d = d;
  } else {
    if (isfinite(d) && fabs(d) > FLT_MAX) return fail(p, "%g is out of range for a float", d);
    v->f = (float)d;
  }
  return PTS_OK;
}

/* Enum values by name, case-insensitively (Triton parses load configs with
 * protobuf's case_insensitive_enum_parsing), or by number. */
static enum pts_status parse_enum(struct jp *p, const json_t *j, const ProtobufCFieldDescriptor *f,
                                  union pts_pbtxt_scalar *v) {
  const ProtobufCEnumDescriptor *ed = f->descriptor;
  if (json_is_string(j)) {
    const char *s = json_string_value(j);
    for (unsigned i = 0; i < ed->n_values; i++) {
      if (strcasecmp(ed->values[i].name, s) == 0) {
        v->e = ed->values[i].value;
        return PTS_OK;
      }
    }
    return fail(p, "unknown value '%.64s' for enum %s", s, ed->name);
  }
  if (json_is_integer(j)) {
    json_int_t x = json_integer_value(j);
    if (x >= INT32_MIN && x <= INT32_MAX && protobuf_c_enum_descriptor_get_value(ed, (int)x)) {
      v->e = (int)x;
      return PTS_OK;
    }
    return fail(p, "unknown number %lld for enum %s", (long long)x, ed->name);
  }
  return fail(p, "expected an enum name or number, got %s", pts_json_kind_name(j));
}

static enum pts_status parse_scalar(struct jp *p, const json_t *j,
                                    const ProtobufCFieldDescriptor *f, union pts_pbtxt_scalar *v) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
      return parse_real(p, j, f, v);
    case PROTOBUF_C_TYPE_BOOL:
      if (!json_is_boolean(j))
        return fail(p, "expected true or false, got %s", pts_json_kind_name(j));
      v->b = json_is_true(j);
      return PTS_OK;
    case PROTOBUF_C_TYPE_ENUM:
      return parse_enum(p, j, f, v);
    case PROTOBUF_C_TYPE_STRING: {
      if (!json_is_string(j)) return fail(p, "expected a string, got %s", pts_json_kind_name(j));
      size_t n = json_string_length(j);
      const char *s = json_string_value(j);
      if (memchr(s, '\0', n)) return fail(p, "the string contains a NUL character");
      v->s = pts_strndup(s, n);
      return v->s ? PTS_OK : nomem(p);
    }
    case PROTOBUF_C_TYPE_BYTES: {
      if (!json_is_string(j))
        return fail(p, "expected a base64 string, got %s", pts_json_kind_name(j));
      char what[300];
      snprintf(what, sizeof what, "field '%s'", p->path);
      uint8_t *data;
      size_t n;
      enum pts_status st =
          pts_base64_decode(json_string_value(j), json_string_length(j), what, &data, &n, p->err);
      if (st != PTS_OK) return st;
      v->bin.data = data;
      v->bin.len = n;
      return PTS_OK;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
      return pts_error_set(p->err, PTS_INTERNAL, "message field parsed as a scalar");
    default:
      return parse_integer(p, j, f, v);
  }
}

/* ---- messages ---- */

static enum pts_status parse_object(struct jp *p, const ProtobufCMessageDescriptor *d,
                                    const json_t *obj, ProtobufCMessage *msg);

/* A new sub-message filled from `j`, attached to `msg` before it is filled. */
static enum pts_status parse_message_value(struct jp *p, const json_t *j,
                                           const ProtobufCFieldDescriptor *f,
                                           ProtobufCMessage *msg) {
  if (!json_is_object(j)) return fail(p, "expected an object, got %s", pts_json_kind_name(j));
  if (p->depth >= MAX_DEPTH) return fail(p, "messages are nested more than %d deep", MAX_DEPTH);
  ProtobufCMessage *sub = new_message(f->descriptor);
  if (!sub) return nomem(p);
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    enum pts_status st = append_value(p, msg, f, &sub);
    if (st != PTS_OK) {
      protobuf_c_message_free_unpacked(sub, NULL);
      return st;
    }
  } else {
    store_singular(msg, f, &sub);
  }
  p->depth++;
  enum pts_status st = parse_object(p, f->descriptor, j, sub);
  p->depth--;
  return st;
}

/* One value of `f` (an element when repeated). */
static enum pts_status parse_one(struct jp *p, const json_t *j, const ProtobufCFieldDescriptor *f,
                                 ProtobufCMessage *msg) {
  if (f->type == PROTOBUF_C_TYPE_MESSAGE) return parse_message_value(p, j, f, msg);
  union pts_pbtxt_scalar v;
  memset(&v, 0, sizeof v);
  enum pts_status st = parse_scalar(p, j, f, &v);
  if (st != PTS_OK) return st;
  if (f->label != PROTOBUF_C_LABEL_REPEATED) {
    store_singular(msg, f, &v);
    return PTS_OK;
  }
  st = append_value(p, msg, f, &v);
  if (st != PTS_OK) pts_pbtxt_free_scalar(f, &v);
  return st;
}

/* A map field: a JSON object whose keys are the map keys as strings. */
static enum pts_status parse_map(struct jp *p, const json_t *j, const ProtobufCFieldDescriptor *f,
                                 ProtobufCMessage *msg) {
  if (!json_is_object(j))
    return fail(p, "expected an object (a map), got %s", pts_json_kind_name(j));
  const ProtobufCMessageDescriptor *ed = f->descriptor;
  const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)j, key, val) {
    size_t old = push_name(p, key);
    ProtobufCMessage *entry = new_message(ed);
    enum pts_status st = entry ? append_value(p, msg, f, &entry) : nomem(p);
    if (st != PTS_OK) {
      if (entry) protobuf_c_message_free_unpacked(entry, NULL);
      return st;
    }
    union pts_pbtxt_scalar k;
    memset(&k, 0, sizeof k);
    json_t *kj = kf->type == PROTOBUF_C_TYPE_STRING ? json_string(key) : NULL;
    if (kf->type == PROTOBUF_C_TYPE_BOOL) {
      if (strcmp(key, "true") == 0 || strcmp(key, "false") == 0)
        kj = json_boolean(strcmp(key, "true") == 0);
    } else if (kf->type != PROTOBUF_C_TYPE_STRING) {
      kj = json_string(key); /* integer keys are written as strings */
    }
    if (!kj) return fail(p, "invalid map key '%.40s'", key);
    st = parse_scalar(p, kj, kf, &k);
    json_decref(kj);
    if (st != PTS_OK) return st;
    store_singular(entry, kf, &k);
    if (json_is_null(val)) {
      /* protobuf refuses a null map value */
      return fail(p, "a map value may not be null");
    }
    st = parse_one(p, val, vf, entry);
    if (st != PTS_OK) return st;
    pop(p, old);
  }
  return PTS_OK;
}

static enum pts_status parse_field(struct jp *p, const ProtobufCMessageDescriptor *d,
                                   const ProtobufCFieldDescriptor *f, const json_t *j,
                                   ProtobufCMessage *msg) {
  if (f->label == PROTOBUF_C_LABEL_REPEATED && pts_pbtxt_field_is_map(f))
    return parse_map(p, j, f, msg);
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    if (!json_is_array(j)) return fail(p, "expected an array, got %s", pts_json_kind_name(j));
    for (size_t i = 0; i < json_array_size(j); i++) {
      size_t old = push_index(p, i);
      const json_t *e = json_array_get(j, i);
      if (json_is_null(e)) return fail(p, "an array element may not be null");
      enum pts_status st = parse_one(p, e, f, msg);
      if (st != PTS_OK) return st;
      pop(p, old);
    }
    return PTS_OK;
  }
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    uint32_t which = *(uint32_t *)member(msg, f->quantifier_offset);
    if (which != 0) {
      const ProtobufCFieldDescriptor *other = protobuf_c_message_descriptor_get_field(d, which);
      return fail(p, "conflicts with '%s': both are members of one oneof of %s, only one may "
                  "be set", other ? other->name : "?", d->name);
    }
  }
  return parse_one(p, j, f, msg);
}

static enum pts_status parse_object(struct jp *p, const ProtobufCMessageDescriptor *d,
                                    const json_t *obj, ProtobufCMessage *msg) {
  /* Which fields this object set: a field named twice (as "max_batch_size"
   * and "maxBatchSize") is refused, as protobuf's parser does. */
  bool seen_stack[64], *seen = seen_stack;
  if (d->n_fields > 64 && !(seen = pts_calloc(d->n_fields, sizeof *seen))) return nomem(p);
  if (seen == seen_stack) memset(seen_stack, 0, sizeof seen_stack);
  enum pts_status st = PTS_OK;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)obj, key, val) {
    const ProtobufCFieldDescriptor *f = find_field(d, key);
    if (!f) {
      st = fail(p, "%s has no field named '%.64s'", d->name, key);
      break;
    }
    size_t old = push_name(p, f->name);
    unsigned idx = (unsigned)(f - d->fields);
    if (seen[idx]) {
      st = fail(p, "is given twice");
      break;
    }
    seen[idx] = true;
    /* null means "not set" in protobuf's JSON mapping. */
    if (!json_is_null(val)) st = parse_field(p, d, f, val, msg);
    if (st != PTS_OK) break;
    pop(p, old);
  }
  if (seen != seen_stack) pts_free(seen);
  return st;
}

enum pts_status pts_pbjson_parse(const ProtobufCMessageDescriptor *desc, const json_t *json,
                                 ProtobufCMessage **out, struct pts_error *err) {
  *out = NULL;
  struct jp p = {.err = err};
  p.path[0] = '\0';
  if (!json_is_object(json))
    return pts_error_set(err, PTS_INVALID_ARG, "expected a JSON object for %s, got %s",
                         desc->name, json ? pts_json_kind_name(json) : "nothing");
  ProtobufCMessage *root = new_message(desc);
  if (!root) return nomem(&p);
  enum pts_status st = parse_object(&p, desc, json, root);
  if (st != PTS_OK) {
    protobuf_c_message_free_unpacked(root, NULL);
    return st;
  }
  *out = root;
  return PTS_OK;
}
