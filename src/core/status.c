/* core/status.c — the status table rendered into lookups. */
#include "core/status.h"

#include <stdio.h>
#include <string.h>

static const struct {
  const char *name;
  const char *text;
  int http;
  int grpc;
} table[] = {
#define XX(name, text, http, grpc) {#name, text, http, grpc},
    PTS_STATUS_MAP(XX)
#undef XX
};

static int valid(enum pts_status s) { return (unsigned)s < PTS_STATUS_COUNT; }

const char *pts_status_name(enum pts_status s) {
  return valid(s) ? table[s].name : "UNKNOWN";
}
const char *pts_status_text(enum pts_status s) {
  return valid(s) ? table[s].text : "unknown error";
}
int pts_status_http(enum pts_status s) { return valid(s) ? table[s].http : 500; }
int pts_status_grpc(enum pts_status s) { return valid(s) ? table[s].grpc : 2; }

enum pts_status pts_error_setv(struct pts_error *err, enum pts_status code,
                               const char *fmt, va_list ap) {
  if (err) {
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  }
  return code;
}

enum pts_status pts_error_set(struct pts_error *err, enum pts_status code,
                              const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pts_error_setv(err, code, fmt, ap);
  va_end(ap);
  return code;
}

void pts_error_prefix(struct pts_error *err, const char *fmt, ...) {
  if (!err) return;
  char prefix[PTS_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  /* Truncation is acceptable here: the message stays NUL-terminated and the
   * most specific part (the prefix's subject) comes first. */
  char old[PTS_ERROR_MSG_MAX];
  memcpy(old, err->msg, sizeof old);
  size_t p = strlen(prefix);
  if (p > sizeof err->msg - 3) p = sizeof err->msg - 3;
  memcpy(err->msg, prefix, p);
  memcpy(err->msg + p, ": ", 2);
  size_t rest = sizeof err->msg - p - 3;
  size_t o = strnlen(old, rest);
  memcpy(err->msg + p + 2, old, o);
  err->msg[p + 2 + o] = '\0';
}

void pts_error_clear(struct pts_error *err) {
  if (!err) return;
  err->code = PTS_OK;
  err->msg[0] = '\0';
}
