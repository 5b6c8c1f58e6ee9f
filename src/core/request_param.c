/* core/request_param.c — see request_param.h. */
#include "core/request_param.h"

#include <inttypes.h>
#include <stdio.h>

int pts_request_param_format(const struct pts_request_param *p, char *buf, size_t size) {
  switch (p->type) {
    case PTS_PARAM_STRING:
      return snprintf(buf, size, "%s=%s", p->key, p->v.s);
    case PTS_PARAM_INT:
      return snprintf(buf, size, "%s=%" PRId64, p->key, p->v.i);
    case PTS_PARAM_UINT:
      return snprintf(buf, size, "%s=%" PRIu64, p->key, p->v.u);
    case PTS_PARAM_BOOL:
      return snprintf(buf, size, "%s=%s", p->key, p->v.b ? "true" : "false");
    case PTS_PARAM_DOUBLE:
      return snprintf(buf, size, "%s=%.17g", p->key, p->v.d);
  }
  return snprintf(buf, size, "%s=", p->key);
}
