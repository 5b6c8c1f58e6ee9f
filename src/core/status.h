/* core/status.h — the one status table of ptserve.
 *
 * Every fallible function returns an `enum pts_status` and fills a
 * caller-owned `struct pts_error` with a message that says what was wrong and
 * where (model, input, field). The HTTP and gRPC frontends map codes through
 * this table only, so the two protocols can never disagree.
 *
 * Threading: everything here is thread-safe (pure functions over the table;
 * a `struct pts_error` belongs to the caller's thread).
 */
#ifndef PTS_CORE_STATUS_H
#define PTS_CORE_STATUS_H

#include <stdarg.h>
#include <stddef.h>

/* XX(name, text, http status, gRPC status code number).
 * HTTP and gRPC mappings follow Triton (protocol-facts §1.2). TOO_LARGE is
 * ours: an oversized body is the client's fault and deserves 413, not 400.
 * EXHAUSTED is ours too: the server's request memory budget is spent
 * (core/overload.h); HTTP 503 as any overload, gRPC RESOURCE_EXHAUSTED.
 * Append only: never renumber or reuse a code. */
#define PTS_STATUS_MAP(XX)                                  \
  XX(OK, "success", 200, 0)                                 \
  XX(INVALID_ARG, "invalid argument", 400, 3)               \
  XX(NOT_FOUND, "not found", 404, 5)                        \
  XX(UNAVAILABLE, "unavailable", 503, 14)                   \
  XX(UNSUPPORTED, "unsupported", 501, 12)                   \
  XX(INTERNAL, "internal error", 500, 13)                   \
  XX(ALREADY_EXISTS, "already exists", 400, 6)              \
  XX(CANCELLED, "cancelled", 400, 1)                        \
  XX(UNKNOWN, "unknown error", 400, 2)                      \
  XX(TOO_LARGE, "payload too large", 413, 8)                \
  XX(NOMEM, "out of memory", 500, 8)                        \
  XX(DEADLINE, "deadline exceeded", 504, 4)                 \
  XX(EXHAUSTED, "resource exhausted", 503, 8)

enum pts_status {
#define XX(name, text, http, grpc) PTS_##name,
  PTS_STATUS_MAP(XX)
#undef XX
      PTS_STATUS_COUNT
};

/* Size of the message buffer carried by every error. Long enough for a
 * message that quotes a model, a tensor name and two shapes. */
#define PTS_ERROR_MSG_MAX 512

/* A status plus its message. Caller-owned, usually on the stack; never
 * heap-allocated, so reporting an error can not itself fail. */
struct pts_error {
  enum pts_status code;
  char msg[PTS_ERROR_MSG_MAX];
};

/* Symbolic name ("INVALID_ARG"), short text, and protocol mappings. */
const char *pts_status_name(enum pts_status s);
const char *pts_status_text(enum pts_status s);
int pts_status_http(enum pts_status s);
int pts_status_grpc(enum pts_status s);

/* Sets `err` (may be NULL: then only the code is returned) to `code` with a
 * printf-style message. Returns `code` so callers can write
 * `return pts_error_set(err, PTS_INVALID_ARG, "...", ...);`. */
enum pts_status pts_error_set(struct pts_error *err, enum pts_status code,
                              const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum pts_status pts_error_setv(struct pts_error *err, enum pts_status code,
                               const char *fmt, va_list ap);

/* Prefixes the existing message with "<prefix>: " (e.g. the model name), so
 * an inner function need not know the context it is called in. */
void pts_error_prefix(struct pts_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Resets `err` to OK with an empty message. */
void pts_error_clear(struct pts_error *err);

#endif
