/* frontend/http/repo_json.h — the JSON bodies of the model repository
 * extension's load and unload requests (protocol-facts §1.12).
 *
 *   load:   {"parameters": {"config": "<ModelConfig as a JSON string>",
 *                           "file:<version>/<name>": "<base64 bytes>", ...}}
 *   unload: {"parameters": {"unload_dependents": <bool>}}
 *
 * Both bodies are optional (an empty body means no parameters). Anything
 * else — another key, a value of the wrong type, bad base64 — is an
 * INVALID_ARG naming the key, so a typo is not silently ignored.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_FRONTEND_HTTP_REPO_JSON_H
#define PTS_FRONTEND_HTTP_REPO_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "server/server.h"

/* Fills *out (zeroed first; the caller clears it with pts_load_params_clear
 * whatever the result). `model` names the model in messages. */
enum pts_status pts_repo_parse_load(const char *body, size_t len, const char *model,
                                    struct pts_load_params *out, struct pts_error *err);

enum pts_status pts_repo_parse_unload(const char *body, size_t len, const char *model,
                                      bool *unload_dependents, struct pts_error *err);

#endif
