/* config/pbjson.h — any protobuf-c message as JSON, the way Triton's
 * /config endpoint prints a ModelConfig (protocol-facts §1.10), and JSON
 * back into a message, the way Triton reads the `config` parameter of a
 * repository load (protocol-facts §1.12).
 *
 * That is protobuf's JSON printer with original snake_case names and "always
 * print primitive fields" (proto3 defaults, empty lists and maps included),
 * then 64-bit integers turned from strings into numbers — except where
 * Triton leaves them strings: `optimization.cuda.graph_spec.*.dim` and
 * `instance_group.secondary_devices.device_id`. Enums print as names, maps
 * as objects (keys are strings), unset sub-messages and unset oneof members
 * are left out, bytes are base64. Fields come in .proto declaration order.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_CONFIG_PBJSON_H
#define PTS_CONFIG_PBJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#include "core/status.h"

/* Renders `msg` (borrowed) as a JSON object. Returns a new reference
 * (release with json_decref), or NULL when an allocation fails. */
json_t *pts_pbjson_render(const ProtobufCMessage *msg);

/* Parses `json` (borrowed; an object) into a new `desc` message with
 * protobuf's JSON mapping: keys are the proto field names or their
 * lowerCamelCase json names; null means "not set"; 64-bit integers may be
 * numbers or strings, floats also "NaN"/"Infinity"/"-Infinity"; bytes are
 * base64; enums are names (case-insensitive, as Triton's load parses them)
 * or numbers; maps are objects. Unknown fields, a field given twice, two
 * members of one oneof, wrong types and out-of-range numbers are
 * INVALID_ARG with a message naming the field path ("field 'input[0].dims':
 * ..."). Caller frees *out with protobuf_c_message_free_unpacked(*out,
 * NULL); on error *out is NULL and nothing is left allocated. */
enum pts_status pts_pbjson_parse(const ProtobufCMessageDescriptor *desc, const json_t *json,
                                 ProtobufCMessage **out, struct pts_error *err);

#endif
