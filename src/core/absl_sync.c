/* core/absl_sync.c — see absl_sync.h. */
#include "core/absl_sync.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"

bool pts_absl_detector_off(void) {
#ifdef PTS_ABSL_NS
  /* absl::[NS::]SetMutexDeadlockDetectionMode(absl::[NS::]OnDeadlockCycle),
   * Itanium-mangled; the enum parameter is passed as an int, and kIgnore,
   * its first enumerator, is 0. */
  char name[160];
  const char *ns = PTS_ABSL_NS;
  if (ns[0])
    snprintf(name, sizeof name,
             "_ZN4absl%zu%s29SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE", strlen(ns),
             ns);
  else
    snprintf(name, sizeof name, "_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE");
  void (*set_mode)(int) = NULL;
  void *p = dlsym(RTLD_DEFAULT, name);
  memcpy(&set_mode, &p, sizeof p); /* ISO C has no object-to-function cast */
  if (set_mode) {
    set_mode(0);
    PTS_LOG_VERBOSE(1, "abseil's mutex deadlock detector is off");
    return true;
  }
#endif
  return false;
}
