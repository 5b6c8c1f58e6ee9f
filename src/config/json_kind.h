/* config/json_kind.h — names a JSON value's kind for error messages
 * ("expected an object, got a string").
 *
 * Shared by the parsers that turn request or config JSON into native values
 * (config/pbjson_parse.c; the HTTP inference, repository, settings and
 * shared-memory bodies), so their messages name kinds the same way.
 *
 * Threading: pure; any thread.
 */
#ifndef PTS_CONFIG_JSON_KIND_H
#define PTS_CONFIG_JSON_KIND_H

#include <jansson.h>

/* "an object", "an array", "a string", "an integer", "a number",
 * "a boolean" or "null". Static string. */
const char *pts_json_kind_name(const json_t *v);

#endif
