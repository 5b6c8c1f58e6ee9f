/* ptperf/lib/absl_sync.c — see absl_sync.h. */
#include "ptperf/lib/absl_sync.h"

#include <dlfcn.h>
#include <string.h>

#include "core/log.h"

bool pts_absl_detector_off(void) {
#ifdef PTS_ABSL_SYM
  /* The enum parameter is passed as an int; kIgnore, its first
   * enumerator, is 0. */
  void (*set_mode)(int) = NULL;
  void *p = dlsym(RTLD_DEFAULT, PTS_ABSL_SYM);
  memcpy(&set_mode, &p, sizeof p); /* ISO C has no object-to-function cast */
  if (set_mode) {
    set_mode(0);
    PTS_LOG_VERBOSE(1, "abseil's mutex deadlock detector is off");
    return true;
  }
#endif
  return false;
}
