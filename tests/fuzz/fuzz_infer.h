/* tests/fuzz/fuzz_infer.h — what the two infer-request drivers
 * (fuzz_v2_infer, fuzz_grpc_infer) share: loading the fixed model config
 * that decoded requests are validated against, and the identity model's
 * response that valid requests are encoded with.
 *
 * Threading: libFuzzer calls the drivers from one thread.
 */
#ifndef PTS_FUZZ_INFER_H
#define PTS_FUZZ_INFER_H

#include <stdio.h>
#include <stdlib.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "scheduler/request.h"
#include "tensor/tensor.h"

/* The driver's built-in config text, parsed and completed as model "m".
 * A bad built-in config is the driver's bug: it aborts, naming `driver`.
 * The config lives for the whole run (never freed). */
static inline Inference__ModelConfig *fuzz_load_config(const char *text, size_t len,
                                                       const char *driver) {
  Inference__ModelConfig *config = NULL;
  struct pts_error err;
  if (pts_model_config_parse(text, len, "fuzz", &config, &err) != PTS_OK ||
      pts_model_config_complete(config, "/nonexistent/fuzz", "m", &err) != PTS_OK) {
    fprintf(stderr, "%s: bad built-in config: %s\n", driver, err.msg);
    abort();
  }
  return config;
}

/* The identity model's answer: output i is a view of input i. NULL when out
 * of memory; caller frees with pts_infer_response_free. */
static inline struct pts_infer_response *fuzz_identity_response(
    const struct pts_infer_request *req) {
  struct pts_infer_response *resp = pts_infer_response_new();
  if (!resp) return NULL;
  resp->model_version = 1;
  resp->outputs = pts_calloc(req->n_inputs ? req->n_inputs : 1, sizeof *resp->outputs);
  if (!resp->outputs) {
    pts_infer_response_free(resp);
    return NULL;
  }
  struct pts_error err;
  for (size_t i = 0; i < req->n_inputs; i++) {
    if (pts_tensor_copy_view(&resp->outputs[i], &req->inputs[i], &err) != PTS_OK) break;
    resp->n_outputs++;
  }
  return resp;
}

#endif
