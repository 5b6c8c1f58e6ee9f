/* frontend/http/settings_http.h — the bodies of the trace and logging
 * extensions (protocol-facts §1.13, §1.14).
 *
 * GET returns the settings object; POST applies the keys given (all or
 * none) and returns the settings after the change. Values follow Triton:
 * trace settings are strings except trace_level (an array of strings; a
 * single string is accepted too), JSON null clears a per-model trace field
 * back to the global value; log settings are booleans, an unsigned
 * log_verbose_level and log_format "default" | "ISO8601", with null values
 * ignored. trace_file and log_file can not be changed over the network
 * (UNSUPPORTED, HTTP 501, with Triton's text).
 *
 * Threading: thread-safe; nothing here blocks (the settings live in memory).
 */
#ifndef PTS_FRONTEND_HTTP_SETTINGS_HTTP_H
#define PTS_FRONTEND_HTTP_SETTINGS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "server/server.h"

/* /v2/trace/setting (model NULL) and /v2/models/{model}/trace/setting. A
 * model must be known to the server (INVALID_ARG "Request for unknown model
 * : <name>", as Triton). A POST with an empty object to a model clears all
 * of its settings (Triton's "remove the specification"). On OK *json is the
 * response body (caller pts_free's it). */
enum pts_status pts_http_trace_setting(struct pts_server *s, const char *model, bool post,
                                       const char *body, size_t len, char **json, size_t *json_len,
                                       struct pts_error *err);

/* /v2/logging. On OK *json is the response body (caller pts_free's it). */
enum pts_status pts_http_logging(bool post, const char *body, size_t len, char **json,
                                 size_t *json_len, struct pts_error *err);

#endif
