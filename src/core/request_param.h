/* core/request_param.h — a request parameter that the server hands on to
 * the model instead of acting on it (Triton's TRITONBACKEND_RequestParameter):
 * a custom key of the request's own `parameters` (not priority, timeout,
 * sequence_*, binary_data_output), or a request header that
 * --http-header-forward-pattern / --grpc-header-forward-pattern forwards
 * (always a string). Triton keeps them in one list, the request's own
 * first, then the forwarded headers, and keeps both when a name repeats;
 * so does ptserve.
 *
 * Threading: plain data; its owner says who may touch it.
 */
#ifndef PTS_CORE_REQUEST_PARAM_H
#define PTS_CORE_REQUEST_PARAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pts_param_type { PTS_PARAM_STRING, PTS_PARAM_INT, PTS_PARAM_UINT, PTS_PARAM_BOOL,
                      PTS_PARAM_DOUBLE };

struct pts_request_param {
  char *key; /* owned by whoever owns the list (a request: pts_infer_request_free) */
  enum pts_param_type type;
  union {
    char *s; /* PTS_PARAM_STRING; owned like key */
    int64_t i;
    uint64_t u;
    bool b;
    double d;
  } v;
};

/* "<key>=<value>" (a bool as true/false, a double as %.17g) into buf,
 * truncated to size - 1 bytes; the length it would have, as snprintf. */
int pts_request_param_format(const struct pts_request_param *p, char *buf, size_t size);

#endif
