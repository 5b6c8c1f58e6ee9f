/* core/header_forward.h — tritonserver's --http-header-forward-pattern and
 * --grpc-header-forward-pattern: the request headers (gRPC: metadata) of
 * an inference whose name the pattern matches become string request
 * parameters (core/request_param.h), named and valued as sent, after the
 * request's own parameters.
 *
 * As tritonserver (src/command_line_parser.cc, http_server.cc,
 * grpc/infer_handler.h): the match ignores case (Triton prefixes "(?i)")
 * and may match any part of the name (RE2::PartialMatch), so "x-.*" also
 * forwards "my-x-tag"; anchor it ("^x-") to mean a prefix. ptserve's
 * patterns are POSIX extended regular expressions, not RE2: the syntax
 * both share (., [], *, +, ?, {m,n}, |, (), ^, $) means the same; RE2's
 * \d, \w-style classes, lazy quantifiers and (?...) groups are refused at
 * start-up with a message.
 *
 * Threading: pts_header_forward_set runs at start-up, before the
 * frontends start; pts_header_forward_match may then run on any thread.
 */
#ifndef PTS_CORE_HEADER_FORWARD_H
#define PTS_CORE_HEADER_FORWARD_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

enum pts_forward_proto { PTS_FORWARD_HTTP, PTS_FORWARD_GRPC };

/* Compiles `pattern` for `proto`'s frontend; INVALID_ARG naming the flag
 * and saying what is wrong with the pattern (nothing changes then). An
 * empty pattern forwards every header, as tritonserver's (it becomes
 * "(?i)", which matches any name). */
enum pts_status pts_header_forward_set(enum pts_forward_proto proto, const char *pattern,
                                       struct pts_error *err);

/* Whether header `name` (`len` bytes, need not be NUL-terminated) is
 * forwarded on `proto`; always false without a pattern. */
bool pts_header_forward_match(enum pts_forward_proto proto, const char *name, size_t len);

/* Forgets both patterns (tests, and the end of main). */
void pts_header_forward_reset(void);

#endif
