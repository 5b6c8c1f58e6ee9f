/* tests/fuzz/fuzz_pbtxt.c — config.pbtxt text through the descriptor-driven
 * parser, then (when it parses) Triton's completion and validation and the
 * /config JSON rendering: everything a model directory on disk can feed the
 * server. Property: an error always carries a message, a success a config. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_quiet_log();
  struct pts_error err;
  pts_error_clear(&err);
  Inference__ModelConfig *cfg = NULL;
  enum pts_status st = pts_model_config_parse((const char *)data, size, "fuzz.pbtxt", &cfg, &err);
  if (st != PTS_OK) {
    fuzz_check(cfg == NULL && err.msg[0] != '\0', "parse error without a message, or with output");
    return 0;
  }
  fuzz_check(cfg != NULL, "parse succeeded without a config");
  /* A directory that does not exist: the completion only probes it for
   * model files, and must cope with there being none. */
  st = pts_model_config_complete(cfg, "/nonexistent/fuzz", "fuzz", &err);
  fuzz_check(st == PTS_OK || err.msg[0] != '\0', "completion error without a message");
  char *json = pts_model_config_to_json(cfg);
  pts_free(json);
  pts_model_config_free(cfg);
  return 0;
}
