/* config/json_kind.c — see json_kind.h. */
#include "config/json_kind.h"

const char *pts_json_kind_name(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT:
      return "an object";
    case JSON_ARRAY:
      return "an array";
    case JSON_STRING:
      return "a string";
    case JSON_INTEGER:
      return "an integer";
    case JSON_REAL:
      return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
      return "a boolean";
    case JSON_NULL:
      return "null";
  }
  return "a value";
}
