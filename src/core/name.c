/* core/name.c — see name.h. */
#include "core/name.h"

#include <string.h>

bool pts_name_is_safe(const char *name) {
  if (!name || !name[0] || strstr(name, "..")) return false;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    if (*p == '/' || *p == '\\' || *p < 0x20 || *p == 0x7f) return false;
  return true;
}

enum pts_status pts_name_check(const char *what, const char *name, struct pts_error *err) {
  if (pts_name_is_safe(name)) return PTS_OK;
  /* Quote at most 100 bytes: the name came from a client. */
  return pts_error_set(err, PTS_INVALID_ARG,
                       "invalid %s '%.100s': a name must be non-empty and can not contain '/', "
                       "'\\', '..' or control characters",
                       what, name ? name : "");
}
