/* config/pbtxt.c — protobuf text format → protobuf-c message; see pbtxt.h.
 *
 * A hand-rolled tokenizer (one token of lookahead) feeds a recursive-descent
 * parser that writes straight into the message struct through the field
 * descriptors' offsets. The message is kept consistent at every step
 * (sub-messages are attached before they are filled, array counts only grow
 * after the element is complete), so on any error the whole tree can be freed
 * with protobuf_c_message_free_unpacked and nothing leaks.
 */
#include "config/pbtxt.h"

#include <float.h>
#include <stdarg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"

/* protobuf C++ refuses deeper nesting too; it also bounds our recursion. */
#define MAX_DEPTH 100
/* Longest identifier or number we copy out for lookups and strtod. */
#define MAX_WORD 256

enum tok_kind { TOK_END, TOK_IDENT, TOK_INT, TOK_FLOAT, TOK_STRING, TOK_SYMBOL };

struct token {
  enum tok_kind kind;
  const char *start;
  size_t len;
  int line, col;
};

struct parser {
  const char *p, *end;
  int line;
  const char *line_start;
  const char *source;
  struct token tok; /* the lookahead */
  struct pts_error *err;
  int depth;
};

/* A growable byte string for decoded string literals. */
struct sbuf {
  char *data;
  size_t len, cap;
};

/* ---- errors ---- */

static enum pts_status fail_at(struct parser *ps, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum pts_status fail_at(struct parser *ps, int line, int col, const char *fmt, ...) {
  char what[PTS_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return pts_error_set(ps->err, PTS_INVALID_ARG, "%s:%d:%d: %s", ps->source, line, col, what);
}

static enum pts_status nomem(struct parser *ps) {
  return pts_error_set(ps->err, PTS_NOMEM, "%s: out of memory while parsing", ps->source);
}

/* "'text'" or "end of input", for "got ..." in messages. */
static const char *describe(const struct token *t, char *buf, size_t size) {
  if (t->kind == TOK_END) return "end of input";
  int n = t->len > 40 ? 40 : (int)t->len;
  snprintf(buf, size, "'%.*s%s'", n, t->start, t->len > 40 ? "..." : "");
  return buf;
}

/* ---- tokenizer ---- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }
static bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  return (c | 0x20) - 'a' + 10;
}

static void skip_space_and_comments(struct parser *ps) {
  while (ps->p < ps->end) {
    char c = *ps->p;
    if (c == '\n') {
      ps->line++;
      ps->p++;
      ps->line_start = ps->p;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      ps->p++;
    } else if (c == '#') {
      while (ps->p < ps->end && *ps->p != '\n') ps->p++;
    } else {
      break;
    }
  }
}

static int col_of(const struct parser *ps, const char *at) {
  return (int)(at - ps->line_start) + 1;
}

/* Scans a number the way protobuf's tokenizer does: hex, octal or decimal
 * integers; decimals with a fraction or exponent, or an `f` suffix, are
 * floats. A letter right after a number is an error ("1x"). */
static enum pts_status lex_number(struct parser *ps) {
  const char *q = ps->p, *end = ps->end;
  bool is_float = false;
  if (q[0] == '0' && q + 1 < end && (q[1] == 'x' || q[1] == 'X')) {
    q += 2;
    if (q >= end || !is_hex(*q))
      return fail_at(ps, ps->line, col_of(ps, ps->p), "'0x' must be followed by hex digits");
    while (q < end && is_hex(*q)) q++;
  } else if (q[0] == '0' && q + 1 < end && is_digit(q[1])) {
    for (q++; q < end && is_digit(*q); q++)
      if (*q > '7')
        return fail_at(ps, ps->line, col_of(ps, q), "invalid digit '%c' in octal number", *q);
  } else {
    while (q < end && is_digit(*q)) q++;
    if (q < end && *q == '.') {
      is_float = true;
      for (q++; q < end && is_digit(*q); q++) {
      }
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
      is_float = true;
      q++;
      if (q < end && (*q == '+' || *q == '-')) q++;
      if (q >= end || !is_digit(*q))
        return fail_at(ps, ps->line, col_of(ps, ps->p), "number has an exponent without digits");
      while (q < end && is_digit(*q)) q++;
    }
    if (q < end && (*q == 'f' || *q == 'F')) {
      is_float = true;
      q++;
    }
  }
  if (q < end && (is_alnum(*q) || *q == '.'))
    return fail_at(ps, ps->line, col_of(ps, q), "need space between number and '%c'", *q);
  ps->tok.kind = is_float ? TOK_FLOAT : TOK_INT;
  ps->tok.len = (size_t)(q - ps->p);
  ps->p = q;
  return PTS_OK;
}

/* Finds the end of a quoted string; escapes are decoded later, when the
 * field's type is known. A string may not span lines. */
static enum pts_status lex_string(struct parser *ps) {
  char quote = *ps->p;
  const char *q = ps->p + 1;
  while (q < ps->end && *q != quote) {
    if (*q == '\n') break;
    if (*q == '\\' && q + 1 < ps->end && q[1] != '\n') q++;
    q++;
  }
  if (q >= ps->end || *q != quote)
    return fail_at(ps, ps->tok.line, ps->tok.col,
                   "unterminated string: missing closing %c on this line", quote);
  q++;
  ps->tok.kind = TOK_STRING;
  ps->tok.len = (size_t)(q - ps->p);
  ps->p = q;
  return PTS_OK;
}

/* Advances to the next token. */
static enum pts_status next(struct parser *ps) {
  skip_space_and_comments(ps);
  ps->tok.start = ps->p;
  ps->tok.line = ps->line;
  ps->tok.col = col_of(ps, ps->p);
  ps->tok.len = 0;
  if (ps->p >= ps->end) {
    ps->tok.kind = TOK_END;
    return PTS_OK;
  }
  char c = *ps->p;
  if (is_alpha(c)) {
    const char *q = ps->p;
    while (q < ps->end && is_alnum(*q)) q++;
    ps->tok.kind = TOK_IDENT;
    ps->tok.len = (size_t)(q - ps->p);
    ps->p = q;
    return PTS_OK;
  }
  if (is_digit(c) || (c == '.' && ps->p + 1 < ps->end && is_digit(ps->p[1]))) return lex_number(ps);
  if (c == '"' || c == '\'') return lex_string(ps);
  if (c != '\0' && strchr(":{}<>[],;-", c)) {
    ps->tok.kind = TOK_SYMBOL;
    ps->tok.len = 1;
    ps->p++;
    return PTS_OK;
  }
  if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
    return fail_at(ps, ps->tok.line, ps->tok.col, "unexpected byte 0x%02x", (unsigned char)c);
  return fail_at(ps, ps->tok.line, ps->tok.col, "unexpected character '%c'", c);
}

static bool is_sym(const struct parser *ps, char c) {
  return ps->tok.kind == TOK_SYMBOL && ps->tok.start[0] == c;
}

static bool tok_is(const struct token *t, const char *word) {
  return t->kind == TOK_IDENT && strlen(word) == t->len && memcmp(t->start, word, t->len) == 0;
}

/* Copies an identifier or number into `buf` (false when too long). */
static bool tok_copy(const struct token *t, char *buf, size_t size) {
  if (t->len >= size) return false;
  memcpy(buf, t->start, t->len);
  buf[t->len] = '\0';
  return true;
}

/* ---- string literals ---- */

static bool sbuf_put(struct sbuf *b, const char *bytes, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 32;
    while (cap < b->len + n + 1) cap *= 2;
    char *grown = pts_realloc(b->data, cap);
    if (!grown) return false;
    b->data = grown;
    b->cap = cap;
  }
  memcpy(b->data + b->len, bytes, n);
  b->len += n;
  b->data[b->len] = '\0';
  return true;
}

static size_t utf8_encode(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* Reads exactly `n` hex digits at *q; false if there are fewer. */
static bool read_hex(const char **q, const char *end, int n, uint32_t *out) {
  uint32_t v = 0;
  for (int i = 0; i < n; i++) {
    if (*q >= end || !is_hex(**q)) return false;
    v = v * 16 + (uint32_t)hex_value(**q);
    (*q)++;
  }
  *out = v;
  return true;
}

/* \uXXXX or \UXXXXXXXX at `q` (just past the 'u'/'U'), with UTF-16
 * surrogate pairs written as two \u escapes, as protobuf accepts. */
static enum pts_status decode_unicode(struct parser *ps, const struct token *t, const char **q,
                                      const char *end, char kind, uint32_t *cp) {
  const char *at = *q - 2;
  int col = t->col + (int)(at - t->start);
  if (!read_hex(q, end, kind == 'u' ? 4 : 8, cp))
    return fail_at(ps, t->line, col, "\\%c escape needs %d hex digits", kind, kind == 'u' ? 4 : 8);
  if (*cp >= 0xd800 && *cp <= 0xdbff) {
    uint32_t low;
    const char *r = *q;
    if (r + 1 < end && r[0] == '\\' && r[1] == 'u') {
      r += 2;
      if (read_hex(&r, end, 4, &low) && low >= 0xdc00 && low <= 0xdfff) {
        *cp = 0x10000 + ((*cp - 0xd800) << 10) + (low - 0xdc00);
        *q = r;
        return PTS_OK;
      }
    }
    return fail_at(ps, t->line, col, "unpaired UTF-16 surrogate in \\u escape");
  }
  if ((*cp >= 0xdc00 && *cp <= 0xdfff) || *cp > 0x10ffff)
    return fail_at(ps, t->line, col, "invalid Unicode code point in \\%c escape", kind);
  return PTS_OK;
}

/* The one-character escapes: \n → newline and so on; 0 if `c` is none. */
static char simple_escape(char c) {
  static const char from[] = "ntrabfv\\'\"?", to[] = "\n\t\r\a\b\f\v\\'\"?";
  const char *at = c ? strchr(from, c) : NULL;
  return at ? to[at - from] : 0;
}

/* Appends the decoded contents of string token `t` to `out`. */
static enum pts_status decode_string(struct parser *ps, const struct token *t, struct sbuf *out) {
  const char *q = t->start + 1, *end = t->start + t->len - 1;
  while (q < end) {
    const char *run = q;
    while (q < end && *q != '\\') q++;
    if (q > run && !sbuf_put(out, run, (size_t)(q - run))) return nomem(ps);
    if (q >= end) break;
    const char *esc = q++;
    char c = *q++, byte = simple_escape(c);
    char enc[4];
    size_t n = 1;
    if (byte) {
      enc[0] = byte;
    } else if (c >= '0' && c <= '7') {
      unsigned v = (unsigned)(c - '0');
      for (int i = 0; i < 2 && q < end && *q >= '0' && *q <= '7'; i++)
        v = v * 8 + (unsigned)(*q++ - '0');
      enc[0] = (char)(v & 0xff); /* protobuf keeps the low byte of \777 too */
    } else if (c == 'x' || c == 'X') {
      if (q >= end || !is_hex(*q))
        return fail_at(ps, t->line, t->col + (int)(esc - t->start),
                       "\\x escape without hex digits");
      unsigned v = (unsigned)hex_value(*q++);
      if (q < end && is_hex(*q)) v = v * 16 + (unsigned)hex_value(*q++);
      enc[0] = (char)v;
    } else if (c == 'u' || c == 'U') {
      uint32_t cp = 0; /* set on success; initialised for -O2 flow analysis */
      enum pts_status s = decode_unicode(ps, t, &q, end, c, &cp);
      if (s) return s;
      n = utf8_encode(cp, enc);
    } else {
      return fail_at(ps, t->line, t->col + (int)(esc - t->start),
                     "invalid escape sequence '\\%c' in string", c);
    }
    if (!sbuf_put(out, enc, n)) return nomem(ps);
  }
  return PTS_OK;
}

static bool valid_utf8(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

/* ---- descriptor helpers ---- */

static void *member(ProtobufCMessage *m, unsigned offset) { return (char *)m + offset; }

size_t pts_pbtxt_value_size(ProtobufCType type) {
  switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
      return 4;
    case PROTOBUF_C_TYPE_ENUM:
      return sizeof(int);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
      return 8;
    case PROTOBUF_C_TYPE_BOOL:
      return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
      return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
      return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
      return sizeof(ProtobufCMessage *);
  }
  return 0;
}

static ProtobufCMessage *new_message(const ProtobufCMessageDescriptor *d) {
  ProtobufCMessage *m = pts_malloc(d->sizeof_message);
  if (m) protobuf_c_message_init(d, m);
  return m;
}

bool pts_pbtxt_field_is_map(const ProtobufCFieldDescriptor *f) {
  if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE) return false;
  const ProtobufCMessageDescriptor *d = f->descriptor;
  size_t n = strlen(d->short_name);
  return d->n_fields == 2 && n > 5 && strcmp(d->short_name + n - 5, "Entry") == 0 &&
         d->fields[0].id == 1 && strcmp(d->fields[0].name, "key") == 0 && d->fields[1].id == 2 &&
         strcmp(d->fields[1].name, "value") == 0;
}

/* Whether a proto3 field without presence holds its default (what protobuf
 * C++'s HasField reports as "not set"). */
static bool holds_default(const ProtobufCFieldDescriptor *f, const void *at) {
  static const char zero[8];
  switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
      const char *s = *(char *const *)at;
      return !s || !s[0];
    }
    case PROTOBUF_C_TYPE_BYTES:
      return ((const ProtobufCBinaryData *)at)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
      return *(void *const *)at == NULL;
    default:
      return memcmp(at, zero, pts_pbtxt_value_size(f->type)) == 0;
  }
}

/* ---- storing values ---- */

void pts_pbtxt_free_scalar(const ProtobufCFieldDescriptor *f, union pts_pbtxt_scalar *v) {
  if (f->type == PROTOBUF_C_TYPE_STRING) pts_free(v->s);
  if (f->type == PROTOBUF_C_TYPE_BYTES) pts_free(v->bin.data);
}

bool pts_pbtxt_append(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                      const void *value) {
  size_t *n = member(msg, f->quantifier_offset);
  void **arr = member(msg, f->offset);
  size_t size = pts_pbtxt_value_size(f->type);
  char *grown = pts_realloc(*arr, (*n + 1) * size);
  if (!grown) return false;
  memcpy(grown + *n * size, value, size);
  *arr = grown;
  (*n)++;
  return true;
}

/* One element onto a repeated field; on failure the caller still owns what
 * `value` points to. */
static enum pts_status append_value(struct parser *ps, ProtobufCMessage *msg,
                                    const ProtobufCFieldDescriptor *f, const void *value) {
  return pts_pbtxt_append(msg, f, value) ? PTS_OK : nomem(ps);
}

/* Sets a non-repeated field, releasing the old string if it was ours. */
static void store_singular(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                           const void *value) {
  void *dst = member(msg, f->offset);
  if (f->type == PROTOBUF_C_TYPE_STRING) {
    char *old = *(char **)dst;
    if (old && old != (const char *)f->default_value) pts_free(old);
  } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
    const ProtobufCBinaryData *dflt = f->default_value;
    uint8_t *old = ((ProtobufCBinaryData *)dst)->data;
    if (old && (!dflt || old != dflt->data)) pts_free(old);
  }
  memcpy(dst, value, pts_pbtxt_value_size(f->type));
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
    *(uint32_t *)member(msg, f->quantifier_offset) = f->id;
  else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_MESSAGE &&
           f->type != PROTOBUF_C_TYPE_STRING)
    *(protobuf_c_boolean *)member(msg, f->quantifier_offset) = 1;
}

/* A non-repeated field may appear once; a oneof only one of its members. */
static enum pts_status check_singular(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                      ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                                      const struct token *name) {
  bool set;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    uint32_t which = *(uint32_t *)member(msg, f->quantifier_offset);
    if (which != 0 && which != f->id) {
      const ProtobufCFieldDescriptor *other = protobuf_c_message_descriptor_get_field(desc, which);
      return fail_at(
          ps, name->line, name->col,
          "field '%s' conflicts with field '%s' in %s: they are members of the same oneof, "
          "only one may be set",
          f->name, other ? other->name : "?", desc->name);
    }
    set = which == f->id;
  } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_MESSAGE &&
             f->type != PROTOBUF_C_TYPE_STRING) {
    set = *(protobuf_c_boolean *)member(msg, f->quantifier_offset);
  } else {
    set = !holds_default(f, member(msg, f->offset));
  }
  if (set)
    return fail_at(ps, name->line, name->col,
                   "non-repeated field '%s' in %s is specified multiple times", f->name,
                   desc->name);
  return PTS_OK;
}

static bool keys_equal(const ProtobufCFieldDescriptor *key, ProtobufCMessage *a,
                       ProtobufCMessage *b) {
  void *ka = member(a, key->offset), *kb = member(b, key->offset);
  if (key->type == PROTOBUF_C_TYPE_STRING) return strcmp(*(char **)ka, *(char **)kb) == 0;
  return memcmp(ka, kb, pts_pbtxt_value_size(key->type)) == 0;
}

/* After a map entry is parsed: a missing message value becomes an empty
 * message (as a C++ map would hold), and an earlier entry with the same key
 * is replaced, so the last one wins. */
static enum pts_status finish_map_entry(struct parser *ps, ProtobufCMessage *msg,
                                        const ProtobufCFieldDescriptor *f) {
  size_t *n = member(msg, f->quantifier_offset);
  ProtobufCMessage **entries = *(ProtobufCMessage ***)member(msg, f->offset);
  ProtobufCMessage *last = entries[*n - 1];
  const ProtobufCMessageDescriptor *ed = f->descriptor;
  const ProtobufCFieldDescriptor *val = &ed->fields[1];
  if (val->type == PROTOBUF_C_TYPE_MESSAGE && !*(void **)member(last, val->offset)) {
    ProtobufCMessage *empty = new_message(val->descriptor);
    if (!empty) return nomem(ps);
    *(ProtobufCMessage **)member(last, val->offset) = empty;
  }
  for (size_t i = 0; i + 1 < *n; i++) {
    if (keys_equal(&ed->fields[0], entries[i], last)) {
      protobuf_c_message_free_unpacked(entries[i], NULL);
      entries[i] = last;
      (*n)--;
      break;
    }
  }
  return PTS_OK;
}

/* ---- scalar values ---- */

/* Parses an INT token (decimal, 0x hex or 0 octal); false on overflow. */
static bool parse_magnitude(const struct token *t, uint64_t *out) {
  const char *q = t->start, *end = t->start + t->len;
  unsigned base = 10;
  if (t->len > 1 && q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) {
    base = 16;
    q += 2;
  } else if (t->len > 1 && q[0] == '0') {
    base = 8;
    q++;
  }
  uint64_t v = 0;
  for (; q < end; q++) {
    unsigned d = (unsigned)hex_value(*q);
    if (v > (UINT64_MAX - d) / base) return false;
    v = v * base + d;
  }
  *out = v;
  return true;
}

static const char *type_name(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      return "int32";
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      return "uint32";
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      return "int64";
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      return "uint64";
    case PROTOBUF_C_TYPE_FLOAT:
      return "float";
    case PROTOBUF_C_TYPE_DOUBLE:
      return "double";
    case PROTOBUF_C_TYPE_BOOL:
      return "bool";
    case PROTOBUF_C_TYPE_ENUM:
      return "enum";
    case PROTOBUF_C_TYPE_STRING:
      return "string";
    case PROTOBUF_C_TYPE_BYTES:
      return "bytes";
    case PROTOBUF_C_TYPE_MESSAGE:
      return "message";
  }
  return "?";
}

/* Consumes an optional '-'; reports where the value started. */
static enum pts_status take_sign(struct parser *ps, bool *neg, struct token *first) {
  *first = ps->tok;
  *neg = is_sym(ps, '-');
  return *neg ? next(ps) : PTS_OK;
}

static enum pts_status expected(struct parser *ps, const struct token *at, const char *what,
                                const ProtobufCFieldDescriptor *f,
                                const ProtobufCMessageDescriptor *desc) {
  char buf[64];
  return fail_at(ps, at->line, at->col, "expected %s for field '%s' in %s, got %s", what, f->name,
                 desc->name, describe(&ps->tok, buf, sizeof buf));
}

static enum pts_status parse_integer(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                     const ProtobufCFieldDescriptor *f, union pts_pbtxt_scalar *v) {
  bool neg;
  struct token first;
  enum pts_status s = take_sign(ps, &neg, &first);
  if (s) return s;
  if (ps->tok.kind != TOK_INT) return expected(ps, &ps->tok, "an integer", f, desc);
  uint64_t mag;
  bool ok = parse_magnitude(&ps->tok, &mag);
  bool is64 = pts_pbtxt_value_size(f->type) == 8;
  bool is_unsigned = f->type == PROTOBUF_C_TYPE_UINT32 || f->type == PROTOBUF_C_TYPE_FIXED32 ||
                     f->type == PROTOBUF_C_TYPE_UINT64 || f->type == PROTOBUF_C_TYPE_FIXED64;
  uint64_t limit = is_unsigned ? (is64 ? UINT64_MAX : UINT32_MAX)
                               : (is64 ? (uint64_t)INT64_MAX : (uint64_t)INT32_MAX) + (neg ? 1 : 0);
  if (is_unsigned && neg && mag != 0) ok = false;
  if (!ok || mag > limit)
    return fail_at(ps, first.line, first.col,
                   "value %s%.*s is out of range for %s field '%s' in %s", neg ? "-" : "",
                   (int)ps->tok.len, ps->tok.start, type_name(f->type), f->name, desc->name);
  int64_t sv = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
  if (is64 && is_unsigned)
    v->u64 = mag;
  else if (is64)
    v->i64 = sv;
  else if (is_unsigned)
    v->u32 = (uint32_t)mag;
  else
    v->i32 = (int32_t)sv;
  return next(ps);
}

static bool ident_is_ci(const struct token *t, const char *word) {
  return t->kind == TOK_IDENT && strlen(word) == t->len && strncasecmp(t->start, word, t->len) == 0;
}

static enum pts_status parse_real(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                  const ProtobufCFieldDescriptor *f, union pts_pbtxt_scalar *v) {
  bool neg;
  struct token first;
  enum pts_status s = take_sign(ps, &neg, &first);
  if (s) return s;
  double d;
  if (ps->tok.kind == TOK_INT) {
    uint64_t mag;
    if (!parse_magnitude(&ps->tok, &mag))
      return fail_at(ps, first.line, first.col, "number is too large for field '%s' in %s", f->name,
                     desc->name);
    d = (double)mag;
  } else if (ps->tok.kind == TOK_FLOAT) {
    char buf[MAX_WORD];
    if (!tok_copy(&ps->tok, buf, sizeof buf))
      return fail_at(ps, first.line, first.col, "number is too long for field '%s' in %s", f->name,
                     desc->name);
    size_t n = strlen(buf);
    if (buf[n - 1] == 'f' || buf[n - 1] == 'F') buf[n - 1] = '\0';
    d = strtod(buf, NULL);
  } else if (ident_is_ci(&ps->tok, "inf") || ident_is_ci(&ps->tok, "infinity")) {
    d = INFINITY;
  } else if (ident_is_ci(&ps->tok, "nan")) {
    d = NAN;
  } else {
    return expected(ps, &ps->tok, "a number", f, desc);
  }
  if (neg) d = -d;
  if (f->type == PROTOBUF_C_TYPE_DOUBLE) {
    v->d = d;
  } else if (isfinite(d) && fabs(d) > FLT_MAX) {
    v->f = d > 0 ? INFINITY : -INFINITY; /* what protobuf's SafeDoubleToFloat gives */
  } else {
    v->f = (float)d;
  }
  return next(ps);
}

static enum pts_status parse_bool(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                  const ProtobufCFieldDescriptor *f, union pts_pbtxt_scalar *v) {
  const struct token *t = &ps->tok;
  uint64_t mag;
  if (tok_is(t, "true") || tok_is(t, "True") || tok_is(t, "t")) {
    v->b = 1;
  } else if (tok_is(t, "false") || tok_is(t, "False") || tok_is(t, "f")) {
    v->b = 0;
  } else if (t->kind == TOK_INT && parse_magnitude(t, &mag) && mag <= 1) {
    v->b = (protobuf_c_boolean)mag;
  } else {
    return expected(ps, t, "true or false", f, desc);
  }
  return next(ps);
}

static enum pts_status parse_enum(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                  const ProtobufCFieldDescriptor *f, union pts_pbtxt_scalar *v) {
  const ProtobufCEnumDescriptor *ed = f->descriptor;
  struct token first = ps->tok;
  if (ps->tok.kind == TOK_IDENT) {
    char name[MAX_WORD];
    const ProtobufCEnumValue *ev = tok_copy(&ps->tok, name, sizeof name)
                                       ? protobuf_c_enum_descriptor_get_value_by_name(ed, name)
                                       : NULL;
    if (!ev)
      return fail_at(
          ps, first.line, first.col, "unknown value '%.*s' for enum field '%s' (%s) in %s",
          (int)(ps->tok.len > 64 ? 64 : ps->tok.len), ps->tok.start, f->name, ed->name, desc->name);
    v->e = ev->value;
    return next(ps);
  }
  if (!is_sym(ps, '-') && ps->tok.kind != TOK_INT)
    return expected(ps, &ps->tok, "an enum name or number", f, desc);
  /* Enum numbers are int32 on the wire; read one like an int32 field. */
  ProtobufCFieldDescriptor as_int = *f;
  as_int.type = PROTOBUF_C_TYPE_INT32;
  union pts_pbtxt_scalar num;
  enum pts_status s = parse_integer(ps, desc, &as_int, &num);
  if (s) return s;
  if (!protobuf_c_enum_descriptor_get_value(ed, num.i32))
    return fail_at(ps, first.line, first.col, "unknown number %d for enum field '%s' (%s) in %s",
                   (int)num.i32, f->name, ed->name, desc->name);
  v->e = num.i32;
  return PTS_OK;
}

/* One or more adjacent string literals, concatenated. */
static enum pts_status parse_text(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                  const ProtobufCFieldDescriptor *f, union pts_pbtxt_scalar *v) {
  struct token first = ps->tok;
  if (first.kind != TOK_STRING) return expected(ps, &first, "a string", f, desc);
  struct sbuf b = {0};
  enum pts_status s = PTS_OK;
  if (!sbuf_put(&b, "", 0)) return nomem(ps);
  while (!s && ps->tok.kind == TOK_STRING) {
    s = decode_string(ps, &ps->tok, &b);
    if (!s) s = next(ps);
  }
  if (!s && f->type == PROTOBUF_C_TYPE_STRING) {
    if (memchr(b.data, '\0', b.len))
      s = fail_at(ps, first.line, first.col, "string for field '%s' in %s contains a NUL character",
                  f->name, desc->name);
    else if (!valid_utf8((const unsigned char *)b.data, b.len))
      s = fail_at(ps, first.line, first.col, "string for field '%s' in %s is not valid UTF-8",
                  f->name, desc->name);
  }
  if (s) {
    pts_free(b.data);
    return s;
  }
  if (f->type == PROTOBUF_C_TYPE_STRING) {
    v->s = b.data;
  } else {
    v->bin.data = (uint8_t *)b.data;
    v->bin.len = b.len;
  }
  return PTS_OK;
}

static enum pts_status parse_scalar(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                    const ProtobufCFieldDescriptor *f, union pts_pbtxt_scalar *v) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
      return parse_real(ps, desc, f, v);
    case PROTOBUF_C_TYPE_BOOL:
      return parse_bool(ps, desc, f, v);
    case PROTOBUF_C_TYPE_ENUM:
      return parse_enum(ps, desc, f, v);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
      return parse_text(ps, desc, f, v);
    case PROTOBUF_C_TYPE_MESSAGE:
      break;
    default:
      return parse_integer(ps, desc, f, v);
  }
  return PTS_INTERNAL;
}

/* ---- messages ---- */

static enum pts_status parse_fields(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                    ProtobufCMessage *msg, const struct token *open,
                                    const char *field);

static enum pts_status parse_submessage(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                        ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f) {
  if (!is_sym(ps, '{') && !is_sym(ps, '<')) return expected(ps, &ps->tok, "'{' or '<'", f, desc);
  struct token open = ps->tok;
  if (ps->depth >= MAX_DEPTH)
    return fail_at(ps, open.line, open.col, "messages are nested more than %d levels deep",
                   MAX_DEPTH);
  enum pts_status s = next(ps);
  if (s) return s;
  ProtobufCMessage *sub = new_message(f->descriptor);
  if (!sub) return nomem(ps);
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    s = append_value(ps, msg, f, &sub);
    if (s) {
      protobuf_c_message_free_unpacked(sub, NULL);
      return s;
    }
  } else {
    store_singular(msg, f, &sub);
  }
  ps->depth++;
  s = parse_fields(ps, f->descriptor, sub, &open, f->name);
  ps->depth--;
  if (!s && pts_pbtxt_field_is_map(f)) s = finish_map_entry(ps, msg, f);
  return s;
}

/* One value of field `f` (an element, for a repeated field). */
static enum pts_status parse_value(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                   ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                                   const struct token *name) {
  enum pts_status s;
  if (f->label != PROTOBUF_C_LABEL_REPEATED && (s = check_singular(ps, desc, msg, f, name)))
    return s;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE) return parse_submessage(ps, desc, msg, f);
  union pts_pbtxt_scalar v;
  memset(&v, 0, sizeof v);
  if ((s = parse_scalar(ps, desc, f, &v))) return s;
  if (f->label != PROTOBUF_C_LABEL_REPEATED) {
    store_singular(msg, f, &v);
    return PTS_OK;
  }
  if ((s = append_value(ps, msg, f, &v))) pts_pbtxt_free_scalar(f, &v);
  return s;
}

/* `[ v, v, ... ]`, possibly empty. */
static enum pts_status parse_list(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                  ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                                  const struct token *name) {
  char buf[64];
  if (f->label != PROTOBUF_C_LABEL_REPEATED)
    return fail_at(ps, ps->tok.line, ps->tok.col,
                   "field '%s' in %s is not repeated; a '[' list is not allowed", f->name,
                   desc->name);
  enum pts_status s = next(ps);
  if (s) return s;
  if (is_sym(ps, ']')) return next(ps);
  for (;;) {
    if ((s = parse_value(ps, desc, msg, f, name))) return s;
    if (is_sym(ps, ']')) return next(ps);
    if (!is_sym(ps, ','))
      return fail_at(ps, ps->tok.line, ps->tok.col,
                     "expected ',' or ']' in the list of field '%s' in %s, got %s", f->name,
                     desc->name, describe(&ps->tok, buf, sizeof buf));
    if ((s = next(ps))) return s;
  }
}

static enum pts_status parse_field(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                   ProtobufCMessage *msg) {
  char buf[64], name[MAX_WORD];
  struct token at = ps->tok;
  if (at.kind != TOK_IDENT) {
    if (is_sym(ps, '['))
      return fail_at(ps, at.line, at.col,
                     "extension and Any syntax '[...]' is not supported (in %s)", desc->name);
    return fail_at(ps, at.line, at.col, "expected a field name of %s, got %s", desc->name,
                   describe(&at, buf, sizeof buf));
  }
  const ProtobufCFieldDescriptor *f =
      tok_copy(&at, name, sizeof name) ? protobuf_c_message_descriptor_get_field_by_name(desc, name)
                                       : NULL;
  if (!f)
    return fail_at(ps, at.line, at.col, "unknown field '%.*s' in %s",
                   (int)(at.len > 64 ? 64 : at.len), at.start, desc->name);
  enum pts_status s = next(ps);
  if (s) return s;
  bool colon = is_sym(ps, ':');
  if (colon && (s = next(ps))) return s;
  if (!colon && f->type != PROTOBUF_C_TYPE_MESSAGE)
    return fail_at(ps, ps->tok.line, ps->tok.col, "expected ':' after field '%s' in %s, got %s",
                   f->name, desc->name, describe(&ps->tok, buf, sizeof buf));
  if (is_sym(ps, '[')) return parse_list(ps, desc, msg, f, &at);
  return parse_value(ps, desc, msg, f, &at);
}

/* Fields until the closing bracket of `open` (or end of input at the top
 * level, where `open` is NULL). */
static enum pts_status parse_fields(struct parser *ps, const ProtobufCMessageDescriptor *desc,
                                    ProtobufCMessage *msg, const struct token *open,
                                    const char *field) {
  char close = open ? (open->start[0] == '{' ? '}' : '>') : 0;
  enum pts_status s;
  for (;;) {
    if (ps->tok.kind == TOK_END) {
      if (!open) return PTS_OK;
      return fail_at(
          ps, ps->tok.line, ps->tok.col,
          "unexpected end of input: '%c' opened at %d:%d for field '%s' is not closed with '%c'",
          open->start[0], open->line, open->col, field, close);
    }
    if (close && is_sym(ps, close)) return next(ps);
    if ((s = parse_field(ps, desc, msg))) return s;
    if ((is_sym(ps, ',') || is_sym(ps, ';')) && (s = next(ps))) return s;
  }
}

enum pts_status pts_pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text,
                                size_t len, const char *source, ProtobufCMessage **out,
                                struct pts_error *err) {
  *out = NULL;
  if (!text) text = "", len = 0;
  struct parser ps = {
      .p = text,
      .end = text + len,
      .line = 1,
      .line_start = text,
      .source = source ? source : "<text>",
      .err = err,
  };
  ProtobufCMessage *root = new_message(desc);
  if (!root) return nomem(&ps);
  enum pts_status s = next(&ps);
  if (!s) s = parse_fields(&ps, desc, root, NULL, NULL);
  if (s) {
    protobuf_c_message_free_unpacked(root, NULL);
    return s;
  }
  *out = root;
  return PTS_OK;
}
