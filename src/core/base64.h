/* core/base64.h — base64 (RFC 4648), for the bytes that travel as JSON
 * strings: `file:<version>/<name>` overrides of a repository load
 * (protocol-facts §1.12), `bytes` fields of a JSON ModelConfig, which
 * protobuf's JSON mapping writes as base64, and the cudaIpcMemHandle_t of a
 * CUDA shared-memory registration (§1.15, sent by tools/ptperf).
 *
 * Both alphabets are accepted (standard "+/" and URL-safe "-_"), as
 * protobuf's JSON parser does, with or without '=' padding, and line breaks
 * anywhere (NVIDIA's C++ clients encode with libb64, which breaks lines).
 * Anything else — other whitespace, a stray character, a wrong length,
 * padding in the middle or non-zero bits after the last character — is an
 * error naming the offset, so a truncated upload is refused instead of
 * becoming a shorter file.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_CORE_BASE64_H
#define PTS_CORE_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Decodes `len` characters of `text` into a new buffer (caller frees with
 * pts_free; it is NUL-terminated for convenience, and *out_len excludes the
 * NUL). `what` names the value in error messages ("parameter 'file:1/x'").
 * INVALID_ARG for malformed input, NOMEM when allocation fails. */
enum pts_status pts_base64_decode(const char *text, size_t len, const char *what, uint8_t **out,
                                  size_t *out_len, struct pts_error *err);

/* Encodes `len` bytes of `data` with the standard alphabet and '='
 * padding. Returns a new NUL-terminated string (caller frees with
 * pts_free; *out_len, when not NULL, is its length), or NULL when out of
 * memory. */
char *pts_base64_encode(const void *data, size_t len, size_t *out_len);

#endif
