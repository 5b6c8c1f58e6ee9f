/* config/pbjson.h — any protobuf-c message as JSON, the way Triton's
 * /config endpoint prints a ModelConfig (protocol-facts §1.10).
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

/* Renders `msg` (borrowed) as a JSON object. Returns a new reference
 * (release with json_decref), or NULL when an allocation fails. */
json_t *pts_pbjson_render(const ProtobufCMessage *msg);

#endif
