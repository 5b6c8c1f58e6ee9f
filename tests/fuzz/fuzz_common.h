/* tests/fuzz/fuzz_common.h — small helpers shared by the libFuzzer drivers.
 *
 * Each driver is one .c file with LLVMFuzzerTestOneInput; the harness
 * (libFuzzer, ASan, UBSan) reports crashes, leaks and undefined behaviour.
 * A driver adds its own checks with fuzz_check(): a property that must hold for
 * every input (a round trip, an error that names something), whose failure
 * aborts so libFuzzer saves the input.
 *
 * Threading: libFuzzer calls the drivers from one thread.
 */
#ifndef PTS_FUZZ_COMMON_H
#define PTS_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"

static inline void fuzz_check(int ok, const char *what) {
  if (ok) return;
  fprintf(stderr, "fuzz property failed: %s\n", what);
  abort();
}

/* Silences the server's log: millions of error lines would only slow the
 * fuzzer down. */
static inline void fuzz_quiet_log(void) {
  struct pts_log_settings s = pts_log_get();
  s.info = false;
  s.warning = false;
  s.error = false;
  s.verbose_level = 0;
  pts_log_set(&s);
}

#endif
