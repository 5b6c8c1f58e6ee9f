/* tensor/dtype.c — lookups over PTS_DTYPE_MAP. */
#include "tensor/dtype.h"

#include <string.h>

static const struct {
  const char *config_name;
  const char *name;
  size_t size;
} table[] = {
#define XX(e, cfg, proto, size) {cfg, proto, size},
    PTS_DTYPE_MAP(XX)
#undef XX
};

static bool valid(enum pts_dtype t) { return (unsigned)t < PTS_DTYPE_COUNT; }

const char *pts_dtype_name(enum pts_dtype t) { return valid(t) ? table[t].name : "INVALID"; }
const char *pts_dtype_config_name(enum pts_dtype t) {
  return valid(t) ? table[t].config_name : "TYPE_INVALID";
}
size_t pts_dtype_size(enum pts_dtype t) { return valid(t) ? table[t].size : 0; }

/* Every request names the type of each tensor, so this runs per input:
 * the first byte is compared before the call to strcmp, which then runs for
 * at most three names (FP16, FP32, FP64) instead of up to fourteen. */
enum pts_dtype pts_dtype_from_name(const char *name) {
  if (!name) return PTS_DTYPE_INVALID;
  for (int i = 1; i < PTS_DTYPE_COUNT; i++)
    if (table[i].name[0] == name[0] && strcmp(table[i].name, name) == 0) return (enum pts_dtype)i;
  return PTS_DTYPE_INVALID;
}

enum pts_dtype pts_dtype_from_config_name(const char *name) {
  if (!name) return PTS_DTYPE_INVALID;
  for (int i = 1; i < PTS_DTYPE_COUNT; i++)
    if (strcmp(table[i].config_name, name) == 0) return (enum pts_dtype)i;
  return PTS_DTYPE_INVALID;
}
