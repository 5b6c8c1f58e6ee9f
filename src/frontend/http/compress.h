/* frontend/http/compress.h — Content-Encoding / Accept-Encoding (gzip, deflate).
 *
 * Protocol-facts §1.8: request bodies may be gzip or deflate (zlib-wrapped)
 * compressed; the decompressed size counts against --http-max-input-size.
 * Responses are compressed whole (JSON header and binary tail) when the
 * client's Accept-Encoding prefers gzip or deflate.
 *
 * Threading: pure functions over caller memory; thread-safe.
 */
#ifndef PTS_FRONTEND_HTTP_COMPRESS_H
#define PTS_FRONTEND_HTTP_COMPRESS_H

#include <stddef.h>

#include "core/buf.h"
#include "core/status.h"

enum pts_http_encoding {
  PTS_HTTP_ENC_IDENTITY,
  PTS_HTTP_ENC_GZIP,
  PTS_HTTP_ENC_DEFLATE,
  PTS_HTTP_ENC_UNKNOWN, /* a request Content-Encoding we can not decode */
};

/* "gzip", "deflate", "identity". */
const char *pts_http_encoding_name(enum pts_http_encoding e);

/* A request's Content-Encoding value: NULL, "" and "identity" are identity;
 * gzip and deflate are recognised case-insensitively; anything else
 * (including a list of several codings) is UNKNOWN. */
enum pts_http_encoding pts_http_content_encoding(const char *value);

/* Picks the response encoding from an Accept-Encoding value: comma-separated
 * codings with optional ";q=<weight>"; the highest weight among identity,
 * gzip and deflate wins, ties keep the earlier one, weight 0 means "not
 * acceptable", unknown codings and "*" are ignored. NULL or nothing
 * acceptable gives identity. */
enum pts_http_encoding pts_http_accept_encoding(const char *value);

/* Decompresses a gzip or zlib stream (detected from its header, as zlib's
 * inflateInit2(15|32) does) into a new buffer (caller releases with
 * pts_buf_release). More than `max_out` bytes of output is TOO_LARGE; a
 * corrupt or truncated stream is INVALID_ARG naming `enc`. The gRPC
 * frontend inflates its messages with it too (frontend/grpc/h2_call.c). */
enum pts_status pts_http_inflate(const void *in, size_t in_len, size_t max_out,
                                 enum pts_http_encoding enc, struct pts_buf **out,
                                 struct pts_error *err);

/* One piece of a body to compress; pieces are compressed as one stream. */
struct pts_http_piece {
  const void *data; /* borrowed */
  size_t len;
};

/* Compresses the concatenation of the pieces as gzip or deflate (zlib
 * format) at zlib's `level` (0-9, or PTS_HTTP_DEFLATE_DEFAULT) into a new
 * buffer (caller frees with pts_free). The gRPC frontend uses it too
 * (frontend/grpc/h2_call.c), with the levels of
 * --grpc-infer-response-compression-level. */
#define PTS_HTTP_DEFLATE_DEFAULT (-1) /* zlib's Z_DEFAULT_COMPRESSION */
enum pts_status pts_http_deflate(enum pts_http_encoding enc, int level,
                                 const struct pts_http_piece *pieces, size_t n_pieces, void **out,
                                 size_t *out_len, struct pts_error *err);

#endif
