/* tests/unit/config/config_test_util.h — helpers shared by the config
 * tests: reading files relative to the source tree, parsing a snippet. */
#ifndef PTS_TESTS_CONFIG_TEST_UTIL_H
#define PTS_TESTS_CONFIG_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/model_config.h"

/* Reads <PTS_SOURCE_DIR>/<rel> (ctest sets PTS_SOURCE_DIR; "." otherwise).
 * Returns a malloc'd NUL-terminated buffer, or NULL. */
static inline char *test_read_file(const char *rel, size_t *len) {
  const char *root = getenv("PTS_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  if (len) *len = (size_t)n;
  return buf;
}

/* Parses a config snippet; NULL on error (the message is in *err). */
static inline Inference__ModelConfig *test_parse(const char *text, struct pts_error *err) {
  Inference__ModelConfig *cfg = NULL;
  pts_error_clear(err);
  pts_model_config_parse(text, strlen(text), "config.pbtxt", &cfg, err);
  return cfg;
}

#endif
