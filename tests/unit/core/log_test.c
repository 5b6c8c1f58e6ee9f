/* tests/unit/core/log_test.c — which lines print under which settings.
 *
 * core/log.c answers "would this line print" from an atomic copy of the
 * settings, not under its mutex; these tests change the settings many
 * times and check, line by line in the log file itself, that exactly the
 * lines Triton's rules allow came out: error, warning and info each by
 * their own switch, a verbose line of level v when the verbose level is
 * at least v and not 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

/* Writes one line of each kind to a fresh file and returns, per kind, whether
 * it is in the file: [0] error, [1] warning, [2] info, [3 + v] verbose v for
 * v = 0..4. */
static void lines_written(const struct pts_log_settings *s, bool out[8]) {
  char path[] = "/tmp/pts_log_test_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  pts_log_set(s);
  assert_int_equal(pts_log_set_file(path), 0);
  PTS_LOG_ERROR("line-error");
  PTS_LOG_WARN("line-warning");
  PTS_LOG_INFO("line-info");
  for (int v = 0; v <= 4; v++) PTS_LOG_VERBOSE(v, "line-verbose-%d", v);
  assert_int_equal(pts_log_set_file(NULL), 0);

  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char text[4096];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  unlink(path);
  out[0] = strstr(text, "line-error") != NULL;
  out[1] = strstr(text, "line-warning") != NULL;
  out[2] = strstr(text, "line-info") != NULL;
  for (int v = 0; v <= 4; v++) {
    char want[32];
    snprintf(want, sizeof want, "line-verbose-%d\n", v);
    out[3 + v] = strstr(text, want) != NULL;
  }
}

static void each_switch_and_level(void **state) {
  (void)state;
  struct pts_log_settings saved = pts_log_get();
  for (int mask = 0; mask < 8; mask++) {
    for (int level = 0; level <= 3; level++) {
      struct pts_log_settings s = {.error = mask & 1,
                                   .warning = (mask & 2) != 0,
                                   .info = (mask & 4) != 0,
                                   .verbose_level = level,
                                   .format = PTS_LOG_FORMAT_DEFAULT};
      bool got[8];
      lines_written(&s, got);
      assert_int_equal(got[0], s.error);
      assert_int_equal(got[1], s.warning);
      assert_int_equal(got[2], s.info);
      for (int v = 0; v <= 4; v++) {
        bool want = level > 0 && level >= v;
        if (got[3 + v] != want)
          fail_msg("verbose level %d, a line of level %d: %s", level, v,
                   got[3 + v] ? "printed" : "not printed");
      }
      /* pts_log_enabled says the same as the file. */
      assert_int_equal(pts_log_enabled(PTS_LOG_ERROR, 0), s.error);
      assert_int_equal(pts_log_enabled(PTS_LOG_INFO, 0), s.info);
      assert_int_equal(pts_log_enabled(PTS_LOG_VERBOSE, 2), level >= 2);
    }
  }
  pts_log_set(&saved);
}

/* The logging extension takes any uint32 for the verbose level. */
static void huge_verbose_level(void **state) {
  (void)state;
  struct pts_log_settings saved = pts_log_get();
  struct pts_log_settings s = saved;
  s.verbose_level = 2147483647;
  pts_log_set(&s);
  assert_true(pts_log_enabled(PTS_LOG_VERBOSE, 1));
  assert_true(pts_log_enabled(PTS_LOG_VERBOSE, 2147483647));
  assert_int_equal(pts_log_get().verbose_level, 2147483647);
  s.verbose_level = 0;
  pts_log_set(&s);
  assert_false(pts_log_enabled(PTS_LOG_VERBOSE, 1));
  pts_log_set(&saved);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_switch_and_level),
      cmocka_unit_test(huge_verbose_level),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
