/* config/pbtxt.h — protobuf text format (the syntax of config.pbtxt) into any
 * protobuf-c message, driven only by the message's descriptor.
 *
 * Nothing here knows ModelConfig: the descriptor says which fields exist,
 * their types, which are repeated, which form a oneof and which are map
 * entries, so one parser serves every message of every .proto we generate.
 * The grammar is the one protocol-facts §3.4 lists (what protobuf C++'s
 * TextFormat accepts and real Triton configs rely on).
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_CONFIG_PBTXT_H
#define PTS_CONFIG_PBTXT_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Parses `len` bytes of `text` as the body of a `desc` message (no
 * surrounding braces). `source` names the text in error messages, which read
 * "<source>:<line>:<col>: <what>" with 1-based line and column, and name the
 * field and message involved.
 *
 * On success *out is a new message; the caller frees it with
 * protobuf_c_message_free_unpacked(*out, NULL) (every part was allocated with
 * pts_malloc, i.e. malloc). On error *out is NULL and nothing is left
 * allocated. */
enum pts_status pts_pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text,
                                size_t len, const char *source, ProtobufCMessage **out,
                                struct pts_error *err);

/* Whether `field` is a protobuf map (a repeated message of a generated
 * "<Name>Entry" type with exactly `key` = 1 and `value` = 2): protobuf-c keeps
 * no map flag, and both the parser (duplicate keys) and the JSON printer
 * (maps are objects) need to know. */
bool pts_pbtxt_field_is_map(const ProtobufCFieldDescriptor *field);

/* Bytes one value of `type` takes in a generated message struct: the stride
 * of a repeated field's array, shared by the parser and the JSON printer. */
size_t pts_pbtxt_value_size(ProtobufCType type);

/* One value of a scalar field, as the text and JSON parsers hold it between
 * reading it and storing it in a message. */
union pts_pbtxt_scalar {
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  float f;
  double d;
  protobuf_c_boolean b;
  int e;
  char *s; /* owned until stored */
  ProtobufCBinaryData bin; /* .data owned until stored */
};

/* Appends the pts_pbtxt_value_size(field->type) bytes at `value` to the
 * repeated `field` of `msg`, which then owns what they point to. Returns
 * false when memory ran out; the caller then still owns it. */
bool pts_pbtxt_append(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *field,
                      const void *value);

/* Frees what a string or bytes value owns; other types own nothing. */
void pts_pbtxt_free_scalar(const ProtobufCFieldDescriptor *field, union pts_pbtxt_scalar *v);

#endif
