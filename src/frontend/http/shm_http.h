/* frontend/http/shm_http.h — the bodies of the system and CUDA
 * shared-memory endpoints (protocol-facts §1.15):
 *
 *   GET  /v2/{system,cuda}sharedmemory[/region/{r}]/status
 *   POST /v2/{system,cuda}sharedmemory/region/{r}/register
 *   POST /v2/{system,cuda}sharedmemory[/region/{r}]/unregister
 *
 * Register bodies: system {"key": "/name", "offset": N (optional, 0),
 * "byte_size": N}; CUDA {"raw_handle": {"b64": "<64 bytes, base64>"},
 * "device_id": N, "byte_size": N} — what tritonclient sends. Status is a
 * JSON array of {"name", "key", "offset", "byte_size"} (system) or
 * {"name", "device_id", "byte_size"} (CUDA). The regions themselves are
 * shm/shm.h's; this file only turns JSON into its calls and back.
 *
 * Threading: thread-safe (the registry locks itself); nothing blocks.
 */
#ifndef PTS_FRONTEND_HTTP_SHM_HTTP_H
#define PTS_FRONTEND_HTTP_SHM_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "shm/shm.h"

/* Registers `region` from the JSON `body` (borrowed). INVALID_ARG names
 * the field that is missing or of the wrong type; the registry's errors
 * pass through. */
enum pts_status pts_http_shm_register(struct pts_shm_registry *r, bool cuda, const char *region,
                                      const char *body, size_t len, struct pts_error *err);

/* The status array of `region` (NULL: every region of the kind). On OK
 * *json is the response body (caller pts_free's it). */
enum pts_status pts_http_shm_status(struct pts_shm_registry *r, bool cuda, const char *region,
                                    char **json, size_t *json_len, struct pts_error *err);

#endif
